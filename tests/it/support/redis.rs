//! `TestRedis`: a private `redis-server` on a free loopback port, in a temporary folder; it can
//! be killed and started again on the same port. A port found free can be taken by another test
//! before redis-server binds it: then the server exits, and it is started again on another port;
//! the server answering is checked to be this one (its `dir`), never another test's.

use std::{process::Stdio, time::Duration};

use redis::AsyncCommands;

use super::free_port;
use tempfile::TempDir;
use tokio::process::{Child, Command};

/// A stream entry's fields, as bytes.
type EntryFields = Vec<(String, Vec<u8>)>;

pub(crate) struct TestRedis {
    pub port: u16,
    /// Its TLS port, for [`start_tls`](Self::start_tls) (0: none).
    pub tls_port: u16,
    dir: TempDir,
    child: Option<Child>,
    /// More arguments for redis-server.
    args: Vec<String>,
}

/// redis-server's arguments for TLS on `port` with `ca`'s server certificate, clients showing
/// none.
fn tls_args(ca: &super::tls::TestCa, port: u16) -> Vec<String> {
    [
        "--tls-port".to_string(),
        port.to_string(),
        "--tls-cert-file".into(),
        ca.server_cert(),
        "--tls-key-file".into(),
        ca.server_key(),
        "--tls-ca-cert-file".into(),
        ca.ca_file(),
        "--tls-auth-clients".into(),
        "no".into(),
    ]
    .to_vec()
}

impl TestRedis {
    pub(crate) async fn start() -> Self {
        Self::start_with(Vec::new()).await
    }

    /// A replica of `master`.
    #[allow(dead_code)]
    pub(crate) async fn start_replica_of(master: &TestRedis) -> Self {
        Self::start_with(vec![
            "--replicaof".into(),
            "127.0.0.1".into(),
            master.port.to_string(),
        ])
        .await
    }

    /// A server that writes every change to its append-only file (fsync every second), so
    /// that a restart keeps its data.
    #[allow(dead_code)]
    pub(crate) async fn start_appendonly() -> Self {
        Self::start_with(vec!["--appendonly".into(), "yes".into()]).await
    }

    /// A node for a Redis Cluster (its cluster bus on another free port).
    #[allow(dead_code)]
    pub(crate) async fn start_cluster_node() -> Self {
        let args = [
            "--cluster-enabled".to_string(),
            "yes".into(),
            "--cluster-config-file".into(),
            "nodes.conf".into(),
            "--cluster-node-timeout".into(),
            "2000".into(),
            "--cluster-port".into(),
            free_port().to_string(),
        ];
        Self::start_with(args.to_vec()).await
    }

    /// A server that also listens on `ip` (which must exist).
    #[allow(dead_code)]
    pub(crate) async fn start_also_on(ip: &str) -> Self {
        let args = ["--bind", "127.0.0.1", ip, "--protected-mode", "no"];
        Self::start_with(args.map(String::from).to_vec()).await
    }

    /// A server that also speaks TLS, on [`tls_port`](Self::tls_port), with `ca`'s server
    /// certificate (for 127.0.0.1 and localhost); clients show none. Its plain port is the
    /// test's own (publishing, inspecting); what is tested connects to the TLS port alone.
    #[allow(dead_code)]
    pub(crate) async fn start_tls(ca: &super::tls::TestCa) -> Self {
        let tls_port = free_port();
        let mut r = Self::start_with(tls_args(ca, tls_port)).await;
        r.tls_port = tls_port;
        r
    }

    /// [`start_tls`](Self::start_tls) writing every change to its append-only file, so that
    /// a stop and a start keep its data.
    #[allow(dead_code)]
    pub(crate) async fn start_tls_appendonly(ca: &super::tls::TestCa) -> Self {
        let tls_port = free_port();
        let mut args = tls_args(ca, tls_port);
        args.extend(["--appendonly".to_string(), "yes".into()]);
        let mut r = Self::start_with(args).await;
        r.tls_port = tls_port;
        r
    }

    /// A node for a Redis Cluster that also speaks TLS ([`start_tls`](Self::start_tls)), its
    /// cluster bus too.
    #[allow(dead_code)]
    pub(crate) async fn start_tls_cluster_node(ca: &super::tls::TestCa) -> Self {
        let tls_port = free_port();
        let cluster = [
            "--tls-cluster".to_string(),
            "yes".into(),
            "--cluster-enabled".into(),
            "yes".into(),
            "--cluster-config-file".into(),
            "nodes.conf".into(),
            "--cluster-node-timeout".into(),
            "2000".into(),
            "--cluster-port".into(),
            free_port().to_string(),
        ];
        let mut args = tls_args(ca, tls_port);
        args.extend(cluster);
        let mut r = Self::start_with(args).await;
        r.tls_port = tls_port;
        r
    }

    /// `rediss://127.0.0.1:<tls_port>`.
    #[allow(dead_code)]
    pub(crate) fn tls_url(&self) -> String {
        assert!(self.tls_port != 0, "started with start_tls");
        format!("rediss://127.0.0.1:{}", self.tls_port)
    }

    pub(crate) async fn start_with(args: Vec<String>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut r = TestRedis {
            port: 0,
            tls_port: 0,
            dir,
            child: None,
            args,
        };
        for _ in 0..20 {
            r.port = free_port();
            if r.try_spawn().await {
                return r;
            }
        }
        panic!("redis-server could not bind a free port in 20 tries");
    }

    /// The server's process id, while it runs (the load tool reads its CPU time).
    #[allow(dead_code)]
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server on its port again (restart, start_again).
    async fn spawn(&mut self) {
        assert!(
            self.try_spawn().await,
            "redis-server could not start again on port {}",
            self.port
        );
    }

    /// Starts the server on `self.port`; false when it could not bind it.
    async fn try_spawn(&mut self) -> bool {
        let mut child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server must be installed (scripts/test.sh installs it)");
        // A process holding the port that is not ours would answer: only ours counts.
        for _ in 0..400 {
            if let Ok(Some(_)) = child.try_wait() {
                // It exited: the port was taken.
                return false;
            }
            if self.answers_as_ours().await {
                self.child = Some(child);
                return true;
            }
            // The loop's pace: it polls until our redis-server answers (or has exited).
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("redis-server did not start on port {}", self.port);
    }

    /// Whether the server on the port is the one started in this folder.
    async fn answers_as_ours(&self) -> bool {
        let Some(mut c) = self.conn().await else {
            return false;
        };
        let dir: redis::RedisResult<(String, String)> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("dir")
            .query_async(&mut c)
            .await;
        let ours = std::fs::canonicalize(self.dir.path()).ok();
        matches!(dir, Ok((_, ref d)) if ours.as_deref() == Some(std::path::Path::new(d)))
    }

    /// Kills the server (SIGKILL) and waits for it to be gone.
    pub(crate) async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
        }
    }

    /// Stops the server gracefully (SIGTERM: it writes its data out first).
    pub(crate) async fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Some(pid) = c.id() {
                let _ = std::process::Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status();
            }
            let _ = c.wait().await;
        }
    }

    /// Starts the server again on the same port, with the data it had written out.
    pub(crate) async fn restart(&mut self) {
        self.kill().await;
        self.spawn().await;
    }

    /// Starts the server after [`stop`](Self::stop) or [`kill`](Self::kill).
    pub(crate) async fn start_again(&mut self) {
        self.spawn().await;
    }

    pub(crate) async fn conn(&self) -> Option<redis::aio::MultiplexedConnection> {
        let client = redis::Client::open(self.url()).ok()?;
        let mut c = client.get_multiplexed_async_connection().await.ok()?;
        let pong: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut c).await;
        pong.ok().map(|_| c)
    }

    async fn must_conn(&self) -> redis::aio::MultiplexedConnection {
        self.conn().await.expect("test redis is up")
    }

    /// Publishes on BBB's main channel.
    pub(crate) async fn publish(&self, message: &str) {
        self.publish_on("from-akka-apps-redis-channel", message)
            .await;
    }

    pub(crate) async fn publish_on(&self, channel: &str, message: &str) {
        let mut c = self.must_conn().await;
        let _: i64 = c.publish(channel, message).await.expect("publish");
    }

    /// Publishes messages on BBB's main channel in pipelines of 1,000.
    pub(crate) async fn publish_all(&self, messages: &[String]) {
        let mut conn = self.must_conn().await;
        for chunk in messages.chunks(1000) {
            let mut pipe = redis::pipe();
            for m in chunk {
                pipe.publish("from-akka-apps-redis-channel", m).ignore();
            }
            let () = pipe.query_async(&mut conn).await.expect("publish");
        }
    }

    /// Publishes a `user-joined` of meeting `int-1` for user `u{i}` named `n{i}`, for each `i`.
    pub(crate) async fn publish_users(&self, range: std::ops::Range<usize>) {
        let messages: Vec<String> = range
            .map(|i| super::user_joined("int-1", &format!("u{i}"), &format!("n{i}")))
            .collect();
        self.publish_all(&messages).await;
    }

    /// Publishes, in a task of its own, a `user-joined` of meeting `mid` for user `u{i}` named
    /// `user-{i}` for each `i`, one every `pause`: events that stream in while a test changes
    /// something.
    pub(crate) async fn spawn_paced_joins(
        &self,
        mid: &str,
        range: std::ops::Range<usize>,
        pause: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let mut c = self.must_conn().await;
        let mid = mid.to_string();
        tokio::spawn(async move {
            for i in range {
                let msg = super::user_joined(&mid, &format!("u{i}"), &format!("user-{i}"));
                let _: i64 = c
                    .publish("from-akka-apps-redis-channel", msg)
                    .await
                    .expect("publish");
                // Part of the scenario: the events stream in, one every `pause`.
                tokio::time::sleep(pause).await;
            }
        })
    }

    /// Waits until someone (the relay) is subscribed to BBB's main channel.
    pub(crate) async fn wait_for_subscriber(&self) {
        for _ in 0..1000 {
            if self.has_subscriber().await {
                return;
            }
            // The loop's pace: it polls until the relay is subscribed.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the relay never subscribed");
    }

    /// Whether someone is subscribed to BBB's main channel now.
    pub(crate) async fn has_subscriber(&self) -> bool {
        let Some(mut c) = self.conn().await else {
            return false;
        };
        let r: redis::RedisResult<(String, i64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg("from-akka-apps-redis-channel")
            .query_async(&mut c)
            .await;
        matches!(r, Ok((_, n)) if n > 0)
    }

    pub(crate) async fn hgetall(&self, key: &str) -> std::collections::HashMap<String, String> {
        self.must_conn().await.hgetall(key).await.expect("hgetall")
    }

    pub(crate) async fn llen(&self, key: &str) -> usize {
        self.must_conn().await.llen(key).await.expect("llen")
    }

    /// The length of stream `key`.
    #[allow(dead_code)]
    pub(crate) async fn xlen(&self, key: &str) -> usize {
        redis::cmd("XLEN")
            .arg(key)
            .query_async(&mut self.must_conn().await)
            .await
            .expect("XLEN")
    }

    /// The callbacks waiting in hook `hook`'s queue ([`queued_in`]).
    #[allow(dead_code)]
    pub(crate) async fn queued(&self, hook: u64) -> usize {
        queued_in(&mut self.must_conn().await, hook).await
    }

    pub(crate) async fn smembers(&self, key: &str) -> Vec<String> {
        self.must_conn()
            .await
            .smembers(key)
            .await
            .expect("smembers")
    }

    /// The callbacks the relay keeps for redelivery, by kept stream (`hookrelay:retained:{..}`):
    /// each callback's fields (the callbacks of a group entry each on its own).
    pub(crate) async fn kept_by_stream(&self) -> Vec<(String, Vec<Vec<(String, String)>>)> {
        let mut conn = self.must_conn().await;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("hookrelay:retained:*")
            .query_async(&mut conn)
            .await
            .expect("keys");
        let mut kept = Vec::new();
        for key in keys.into_iter().filter(|k| !k.ends_with(":bytes")) {
            let entries: Vec<(String, EntryFields)> = redis::cmd("XRANGE")
                .arg(&key)
                .arg("-")
                .arg("+")
                .query_async(&mut conn)
                .await
                .expect("xrange");
            // A group entry holds many callbacks, each an object of its fields: LZ4-packed JSON
            // (`l`, its size first), or JSON (`g`).
            let callbacks = entries.into_iter().flat_map(|(_, fields)| {
                let group = fields.iter().find_map(|(k, v)| match k.as_str() {
                    "l" => Some(lz4_flex::decompress_size_prepended(v).expect("an LZ4 group")),
                    "g" => Some(v.clone()),
                    _ => None,
                });
                match group {
                    Some(json) => {
                        let group: Vec<serde_json::Map<String, serde_json::Value>> =
                            serde_json::from_slice(&json).expect("a group of kept callbacks");
                        group
                            .into_iter()
                            .map(|c| {
                                c.into_iter()
                                    .map(|(k, v)| (k, v.as_str().expect("a string").to_owned()))
                                    .collect()
                            })
                            .collect()
                    }
                    None => vec![
                        (fields.into_iter())
                            .map(|(k, v)| (k, String::from_utf8(v).expect("text")))
                            .collect(),
                    ],
                }
            });
            kept.push((key, callbacks.collect()));
        }
        kept
    }

    /// Every callback the relay keeps for redelivery ([`Self::kept_by_stream`]), each as its
    /// fields' values, form-decoded, one per line. Read-only: a test waits on it before
    /// asking for a redelivery once (asking again would queue the callbacks again).
    pub(crate) async fn kept_callbacks(&self) -> Vec<String> {
        (self.kept_by_stream().await.into_iter())
            .flat_map(|(_, callbacks)| callbacks)
            .map(|fields| {
                fields
                    .iter()
                    .flat_map(|(_, v)| form_urlencoded::parse(v.as_bytes()))
                    .map(|(k, v)| format!("{k}{v}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect()
    }
}

/// The callbacks waiting in hook `hook`'s queue, read from the store as it is laid out: the
/// entries of its stream after its cursor (the timestamp of its last delivered callback; the
/// delivered entries stay in the stream until their whole node is trimmed).
pub(crate) async fn queued_in(conn: &mut impl redis::aio::ConnectionLike, hook: u64) -> usize {
    let key = format!("{{bigbluebutton:webhooks:out:hook:{hook}}}:queue");
    let cursor = cursor_of(conn, hook).await;
    let len: usize = redis::cmd("XLEN")
        .arg(&key)
        .query_async(conn)
        .await
        .expect("XLEN");
    let Some(cursor) = cursor else { return len };
    let delivered: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(&key)
        .arg("-")
        .arg(format!("{cursor}-0"))
        .query_async(conn)
        .await
        .expect("XRANGE");
    len - delivered.ids.len()
}

/// Of the entries waiting after `hook`'s cursor that refer to a shared payload record: each
/// one's record key, and whether that record still holds the entry's slot (`k`; slot 0, field
/// `t`, for an entry without one).
#[allow(dead_code)]
pub(crate) async fn shared_payloads(redis: &TestRedis, hook: u64) -> Vec<(String, bool)> {
    let mut c = redis.conn().await.expect("redis");
    let waiting = waiting_in(&mut c, hook).await;
    let mut out = Vec::new();
    for e in &waiting.ids {
        let Some(record) = e.get::<String>("s") else {
            continue;
        };
        let field = match e.get::<u16>("k") {
            None | Some(0) => "t".to_string(),
            Some(k) => format!("t{k}"),
        };
        let key = format!("{}{record}", hookrelay::base::redis_keys::PAYLOAD_PREFIX);
        let held: bool = c.hexists(&key, field).await.expect("HEXISTS");
        out.push((key, held));
    }
    out
}

/// The entries waiting in hook `hook`'s queue: those of its stream after its cursor.
#[allow(dead_code)]
pub(crate) async fn waiting_in(
    conn: &mut impl redis::aio::ConnectionLike,
    hook: u64,
) -> redis::streams::StreamRangeReply {
    let from = match cursor_of(conn, hook).await {
        Some(c) => format!("({c}-0"),
        None => "-".to_string(),
    };
    redis::cmd("XRANGE")
        .arg(format!("{{bigbluebutton:webhooks:out:hook:{hook}}}:queue"))
        .arg(from)
        .arg("+")
        .query_async(conn)
        .await
        .expect("XRANGE")
}

/// Hook `hook`'s cursor: the timestamp of its last delivered callback (`d` of its cursor hash).
async fn cursor_of(conn: &mut impl redis::aio::ConnectionLike, hook: u64) -> Option<u64> {
    redis::cmd("HGET")
        .arg(format!("{{bigbluebutton:webhooks:out:hook:{hook}}}:cursor"))
        .arg("d")
        .query_async(conn)
        .await
        .expect("HGET")
}

/// A connection to the store as the relay makes one, for calling the library's store functions.
#[allow(dead_code)]
pub(crate) async fn store_conn(redis: &TestRedis) -> hookrelay::StoreConn {
    let client = redis::Client::open(redis.url()).expect("client");
    let manager = redis::aio::ConnectionManager::new(client.clone())
        .await
        .expect("connection");
    hookrelay::StoreConn::single(manager, client)
}
