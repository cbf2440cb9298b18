//! The connection to the relay's own Redis (the store): one server, the master that Redis
//! Sentinel names, or a Redis Cluster ([`cluster`]). Every command, pipeline and script of the
//! relay goes through [`StoreConn`], which implements [`ConnectionLike`] over a
//! [`ConnectionManager`] or the cluster's connection. With Sentinel, an error that means the
//! master is gone or was demoted (a dropped or refused connection, a timeout, `READONLY`) makes
//! it ask the sentinels again and switch to the master they name; the command that failed fails
//! (the callers retry), the next ones go to the new master.

mod cluster;
mod sentinel;

use sentinel::{master, sentinel_trusting};

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use arc_swap::ArcSwap;
use redis::{
    Cmd, ErrorKind, IntoConnectionInfo, RedisError, RedisFuture, RedisResult, ServerErrorKind,
    Value,
    aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig},
    sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType},
};
use tokio_util::sync::CancellationToken;

use crate::{
    config::Config,
    redis_conn::{Ca, redis_client_trusting},
    shutdown::retry_until_ok,
};

/// The store's current connection and the client it was made from (for pub/sub).
struct Current {
    conn: ConnectionManager,
    client: redis::Client,
}

/// How a connection to the master is found again.
struct Sentinel {
    client: tokio::sync::Mutex<SentinelClient>,
    /// Switches made so far: a failed command switches only if none happened since it began.
    switches: AtomicU64,
}

/// A cheap, cloneable handle on the store.
#[derive(Clone)]
pub struct StoreConn(Kind, Option<Arc<Replication>>);

/// `store.wait_replicas`: how many replicas must have a batch before it is handed on.
struct Replication {
    replicas: u32,
    timeout_ms: u64,
    /// Writes that fewer replicas had in time.
    short: prometheus_client::metrics::counter::Counter,
    /// Until when (after a short wait) the relay does not wait, and when it last said so.
    pause: std::sync::Mutex<(Option<std::time::Instant>, Option<std::time::Instant>)>,
}

/// How long the relay stops waiting for replicas after they did not answer in time.
const WAIT_PAUSE: Duration = Duration::from_secs(10);

#[derive(Clone)]
enum Kind {
    /// One server, perhaps followed through Sentinel's failovers.
    Server {
        current: Arc<ArcSwap<Current>>,
        sentinel: Option<Arc<Sentinel>>,
    },
    Cluster(Arc<cluster::Cluster>),
}

fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(2)))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_secs(2))
}

impl StoreConn {
    /// One server, already connected.
    pub fn single(conn: ConnectionManager, client: redis::Client) -> Self {
        Self(
            Kind::Server {
                current: Arc::new(ArcSwap::from_pointee(Current { conn, client })),
                sentinel: None,
            },
            None,
        )
    }

    /// Waits for `replicas` replicas after each [`replicated`](Self::replicated) call (at
    /// most `timeout`), counting the writes that fewer had in time in `short`. Not on a
    /// cluster, whose shards replicate on their own.
    #[must_use]
    pub fn waiting_for(
        mut self,
        replicas: u32,
        timeout: Duration,
        short: prometheus_client::metrics::counter::Counter,
    ) -> Self {
        if replicas > 0 && !self.is_cluster() {
            self.1 = Some(Arc::new(Replication {
                replicas,
                timeout_ms: u64::try_from(timeout.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1),
                short,
                pause: std::sync::Mutex::new((None, None)),
            }));
        }
        self
    }

    /// Waits until what this connection wrote so far is on the configured number of replicas
    /// (`WAIT`), so that a failover cannot take it back. Fewer in time: counted, logged at most
    /// once a minute, and no waiting for the next 10 s (a replica that is down must not slow
    /// every batch).
    ///
    /// # Errors
    /// When Redis fails (the master went away: the caller writes again, to the new master).
    pub async fn replicated(&self) -> RedisResult<()> {
        let Some(r) = &self.1 else {
            return Ok(());
        };
        let now = std::time::Instant::now();
        if r.pause
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .is_some_and(|until| now < until)
        {
            r.short.inc();
            return Ok(());
        }
        let acked: u32 = redis::cmd("WAIT")
            .arg(r.replicas)
            .arg(r.timeout_ms)
            .query_async(&mut self.clone())
            .await?;
        if acked < r.replicas {
            r.short.inc();
            let mut pause = r.pause.lock().unwrap_or_else(|e| e.into_inner());
            pause.0 = Some(now + WAIT_PAUSE);
            if pause
                .1
                .is_none_or(|said| now.duration_since(said) >= Duration::from_secs(60))
            {
                pause.1 = Some(now);
                tracing::warn!(
                    wanted = r.replicas,
                    acked,
                    "fewer of the store's replicas than store.wait_replicas have the last writes: a failover now could take them back; not waiting for 10 s"
                );
            }
        }
        Ok(())
    }

    /// Whether the store is a Redis Cluster (where a script or a transaction touches one slot).
    pub fn is_cluster(&self) -> bool {
        matches!(self.0, Kind::Cluster(_))
    }

    /// Connects to the store `config` names, waiting (with backoff) until it answers or the
    /// relay stops.
    ///
    /// # Errors
    /// When a URL is unusable.
    pub async fn connect(
        config: &Config,
        token: &CancellationToken,
    ) -> anyhow::Result<Option<Self>> {
        let way = Way::from_config(config)?;
        Ok(retry_until_ok(token, way.what(), || way.attempt()).await)
    }

    /// Connects to the store `config` names, trying once (a command-line tool).
    ///
    /// # Errors
    /// When a URL is unusable or the store does not answer.
    pub async fn connect_once(config: &Config) -> anyhow::Result<Self> {
        Ok(Way::from_config(config)?.attempt().await?)
    }

    /// A client of the current server (on a cluster, of one node), for pub/sub.
    pub fn client(&self) -> redis::Client {
        match &self.0 {
            Kind::Server { current, .. } => current.load().client.clone(),
            Kind::Cluster(c) => c.client(),
        }
    }

    /// The keys matching `pattern` (`SCAN`; on a cluster, of every primary).
    ///
    /// # Errors
    /// When Redis fails.
    pub async fn keys_matching(&self, pattern: &str) -> RedisResult<Vec<String>> {
        if let Kind::Cluster(c) = &self.0 {
            return c.keys_matching(pattern).await;
        }
        let mut conn = self.clone();
        let mut iter: redis::AsyncIter<String> =
            redis::AsyncCommands::scan_match(&mut conn, pattern).await?;
        let mut keys = Vec::new();
        while let Some(k) = futures_util::StreamExt::next(&mut iter).await {
            keys.push(k?);
        }
        Ok(keys)
    }

    /// The text of the next message of a subscription: `Ok(None)` once `token` is cancelled, an
    /// error when the subscription ended (the caller subscribes again). A message that is not
    /// text reads as empty.
    ///
    /// # Errors
    /// When the connection was lost.
    pub async fn next_message(
        messages: &mut (impl futures_util::Stream<Item = redis::Msg> + Unpin),
        token: &CancellationToken,
    ) -> RedisResult<Option<String>> {
        let msg = tokio::select! {
            m = futures_util::StreamExt::next(messages) => m,
            () = token.cancelled() => return Ok(None),
        };
        match msg {
            Some(m) => Ok(Some(m.get_payload::<String>().unwrap_or_default())),
            None => Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset).into()),
        }
    }

    /// Runs `listen` (a subscription to a store channel, given the current server's client)
    /// again and again, backing off, until it ends without an error or `token` is cancelled.
    pub async fn keep_listening<F, Fut>(&self, what: &str, token: &CancellationToken, mut listen: F)
    where
        F: FnMut(redis::Client) -> Fut,
        Fut: std::future::Future<Output = RedisResult<()>>,
    {
        use backon::BackoffBuilder;
        let mut delays = backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_secs(2))
            .without_max_times()
            .build();
        loop {
            // The store's current server (it changes when Sentinel fails over).
            match listen(self.client()).await {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "{what}: connection lost; subscribing again");
                }
            }
            let wait = delays.next().unwrap_or(Duration::from_secs(2));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = token.cancelled() => return,
            }
        }
    }

    /// After `e` on a command begun at switch `seen`: asks the sentinels again when `e` says
    /// the master may have changed.
    async fn after_error(&self, e: &RedisError, seen: u64) {
        let Kind::Server {
            current,
            sentinel: Some(sentinel),
        } = &self.0
        else {
            return;
        };
        let moved = e.is_io_error()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_timeout()
            || e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly);
        if !moved {
            return;
        }
        let mut client = sentinel.client.lock().await;
        if sentinel.switches.load(Ordering::Acquire) != seen {
            return;
        }
        match master(&mut client).await {
            Ok(next) => {
                tracing::warn!(error = %e, "the store's master changed or went away: using the master Sentinel names now");
                current.store(Arc::new(next));
                sentinel.switches.fetch_add(1, Ordering::AcqRel);
            }
            Err(why) => {
                tracing::warn!(error = %why, "Sentinel names no reachable master yet");
            }
        }
    }

    fn seen(&self) -> u64 {
        match &self.0 {
            Kind::Server {
                sentinel: Some(s), ..
            } => s.switches.load(Ordering::Acquire),
            _ => 0,
        }
    }
}

/// How the store is reached, its URLs checked.
enum Way {
    Cluster {
        nodes: Vec<String>,
        auth: Option<String>,
        ca: Option<Ca>,
    },
    Single(redis::Client),
    Sentinel(Arc<Sentinel>),
}

impl Way {
    fn from_config(config: &Config) -> anyhow::Result<Self> {
        let store = &config.store;
        let ca = config
            .store_ca_file()
            .map(|(key, path)| Ca::read(path).map_err(|e| anyhow::anyhow!("{key}: {e}")))
            .transpose()?;
        if !store.cluster_nodes.is_empty() {
            return Ok(Self::Cluster {
                nodes: store
                    .cluster_nodes
                    .iter()
                    .map(|u| u.expose().to_string())
                    .collect(),
                auth: store.url.as_ref().map(|u| u.expose().to_string()),
                ca,
            });
        }
        if store.sentinels.is_empty() {
            let url = config.store_url().expose();
            return Ok(Self::Single(redis_client_trusting(url, ca.as_ref())?));
        }
        let client = match &ca {
            None => {
                let mut node = SentinelNodeConnectionInfo::default();
                if let Some(url) = &store.url {
                    let info = url.expose().into_connection_info()?;
                    node = node.set_redis_connection_info(info.redis_settings().clone());
                    if matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. }) {
                        crate::redis_conn::install_provider();
                        node = node.set_tls_mode(redis::TlsMode::Secure);
                    }
                }
                let sentinels: Vec<&str> = store.sentinels.iter().map(|u| u.expose()).collect();
                SentinelClient::build(
                    sentinels,
                    store.sentinel_master.clone(),
                    Some(node),
                    SentinelServerType::Master,
                )?
            }
            Some(ca) => sentinel_trusting(store, ca)?,
        };
        Ok(Self::Sentinel(Arc::new(Sentinel {
            client: tokio::sync::Mutex::new(client),
            switches: AtomicU64::new(0),
        })))
    }

    /// What a failed attempt is logged as ("cannot ...").
    fn what(&self) -> &'static str {
        match self {
            Self::Cluster { .. } => "connect to the Redis Cluster",
            Self::Single(_) => "connect to Redis",
            Self::Sentinel(_) => "connect to the master Sentinel names",
        }
    }

    async fn attempt(&self) -> RedisResult<StoreConn> {
        let kind = match self {
            Self::Cluster { nodes, auth, ca } => {
                let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
                let cluster =
                    cluster::Cluster::connect(&nodes, auth.as_deref(), ca.as_ref()).await?;
                Kind::Cluster(Arc::new(cluster))
            }
            Self::Single(client) => {
                let conn =
                    ConnectionManager::new_with_config(client.clone(), manager_config()).await?;
                return Ok(StoreConn::single(conn, client.clone()));
            }
            Self::Sentinel(sentinel) => {
                let current = master(&mut *sentinel.client.lock().await).await?;
                Kind::Server {
                    current: Arc::new(ArcSwap::from_pointee(current)),
                    sentinel: Some(sentinel.clone()),
                }
            }
        };
        Ok(StoreConn(kind, None))
    }
}

impl ConnectionLike for StoreConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let seen = self.seen();
            let mut conn = match &self.0 {
                Kind::Server { current, .. } => current.load().conn.clone(),
                Kind::Cluster(c) => return c.conn().req_packed_command(cmd).await,
            };
            let r = conn.req_packed_command(cmd).await;
            if let Err(e) = &r {
                self.after_error(e, seen).await;
            }
            r
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let seen = self.seen();
            let mut conn = match &self.0 {
                Kind::Server { current, .. } => current.load().conn.clone(),
                Kind::Cluster(c) => return c.pipeline(pipeline, offset, count).await,
            };
            let r = conn.req_packed_commands(pipeline, offset, count).await;
            if let Err(e) = &r {
                self.after_error(e, seen).await;
            }
            r
        })
    }

    fn get_db(&self) -> i64 {
        match &self.0 {
            Kind::Server { current, .. } => current.load().conn.get_db(),
            Kind::Cluster(_) => 0,
        }
    }
}
