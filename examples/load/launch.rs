//! Starts the relay binary as its own process with a configuration written for the run.

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use tokio::process::{Child, Command};

use crate::support::{self, SECRET, TestRedis};

/// What every run of a scenario shares.
#[derive(Clone)]
pub(crate) struct Setup {
    pub bin: PathBuf,
    pub max_unacked: usize,
    pub plugins: Vec<String>,
    /// Fleet instances (0: no fleet).
    pub instances: usize,
    /// `fleet.spread`.
    pub spread: bool,
    /// The store on a Redis Cluster (`burst` only).
    pub cluster_store: bool,
    /// `delivery.attempt_log`.
    pub attempt_log: usize,
    /// `delivery.retain` (`"0s"`: nothing kept).
    pub retain: String,
    /// `[[tenants]]` configured (`t0` ... with [`tenant_secret`]); 0: none.
    pub tenants: usize,
    /// A `[[delivery.receivers]]` rule for every receiver (loopback) with this rate; 0: none.
    pub receiver_rate: u32,
    /// Serve `/metrics` (on a free port, [`Relay::metrics`]).
    pub metrics: bool,
    /// More arguments for the store's redis-server (`burst`), e.g. its stream node size.
    pub redis_args: Vec<String>,
    /// Traces on (`[tracing]`, every message sampled), exported to this OTLP endpoint.
    pub otlp: Option<String>,
}

/// Tenant `i`'s name and its host name.
pub(crate) fn tenant(i: usize) -> (String, String) {
    (format!("t{i}"), format!("t{i}.sl.example.com"))
}

/// Tenant `i`'s secret.
pub(crate) fn tenant_secret(i: usize) -> String {
    format!("tenant-{i:05}-secret-of-the-load")
}

pub(crate) struct Relay {
    pub api: SocketAddr,
    /// Where `/metrics` is served, with [`Setup::metrics`].
    pub metrics: Option<SocketAddr>,
    /// With tenants, [`Relay::create_hook`] registers tenant 0's hooks.
    tenants: usize,
    child: Child,
    _dir: tempfile::TempDir,
    _plugins: Option<support::PluginDir>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Relay {
    /// Starts the relay against `redis` and waits until it answers and is subscribed; returns
    /// it with the time from spawn to subscribed. `delivery` is added to `[delivery]` (more of
    /// its keys, then perhaps other sections).
    pub(crate) async fn start(
        setup: &Setup,
        redis: &TestRedis,
        delivery: &str,
    ) -> (Self, Duration) {
        let dir = tempfile::tempdir().expect("temp dir");
        let api: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
        let plugins = (!setup.plugins.is_empty()).then(|| {
            let d = support::PluginDir::new();
            for (i, name) in setup.plugins.iter().enumerate() {
                d.add(&format!("{i:02}-{name}"), name, None);
            }
            d
        });
        let plugin_dir = plugins.as_ref().map_or(String::new(), |d| {
            format!("[plugins]\ndir = \"{}\"\n", d.path().display())
        });
        let fleet = if setup.instances > 0 {
            format!(
                "[fleet]\nenabled = true\nlease_ms = 1000\nspread = {}\n",
                setup.spread
            )
        } else {
            String::new()
        };
        let config = dir.path().join("hookrelay.toml");
        let admin = free_port();
        let insight = format!(
            "attempt_log = {}\nretain = \"{}\"\n",
            setup.attempt_log, setup.retain
        );
        let mut tenants: String = (0..setup.tenants)
            .map(|i| {
                format!(
                    "[[tenants]]\nname = \"{}\"\nsecrets = [\"{}\"]\n",
                    tenant(i).0,
                    tenant_secret(i)
                )
            })
            .collect();
        if setup.tenants > 0 {
            // The load is the tenants' own: no limit on their hooks or calls (builds before
            // `[tenancy]` refuse the section: with tenants, NEW only).
            tenants.push_str("[tenancy]\nmax_hooks = 0\napi_rate_per_s = 0\n");
        }
        let metrics = setup
            .metrics
            .then(|| SocketAddr::from(([127, 0, 0, 1], free_port())));
        let metrics_section = match metrics {
            Some(addr) => format!("[metrics]\nbind = \"{addr}\"\n"),
            None => "[metrics]\nenabled = false\n".to_string(),
        };
        let receivers = match setup.receiver_rate {
            0 => String::new(),
            rate => format!(
                "[[delivery.receivers]]\nurl_prefix = \"http://127.0.0.1\"\nrate_per_s = {rate}\n"
            ),
        };
        let tracing = setup.otlp.as_ref().map_or(String::new(), |e| {
            format!("[tracing]\notlp_endpoint = \"{e}\"\nsample_ratio = 1.0\n")
        });
        std::fs::write(
            &config,
            format!(
                "[bbb]\nsecret = \"{SECRET}\"\n[api]\nbind = \"{api}\"\n[redis]\nurl = \"{}\"\n{metrics_section}[admin]\nbind = \"127.0.0.1:{admin}\"\n[delivery]\nmax_unacked = {}\n{insight}{delivery}\n[delivery.ssrf]\nallow_cidrs = [\"127.0.0.1/32\"]\n{plugin_dir}{fleet}{tenants}{receivers}{tracing}",
                redis.url(),
                setup.max_unacked,
            ),
        )
        .expect("config");
        let started = Instant::now();
        let child = Command::new(&setup.bin)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("the hookrelay binary");
        let subscribed = wait_subscribed(redis, started).await;
        let http = support::relay::http_client();
        let deadline = Instant::now() + Duration::from_secs(30);
        while http
            .get(format!("http://{api}/bigbluebutton/api/hooks/ping"))
            .send()
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "the relay never answered");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let relay = Self {
            api,
            metrics,
            tenants: setup.tenants,
            child,
            _dir: dir,
            _plugins: plugins,
        };
        (relay, subscribed)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Registers a hook: the operator's, or with tenants tenant 0's (whose meeting the
    /// scenarios' events are then of, [`Relay::tenant_meeting`]).
    pub(crate) async fn create_hook(&self, url: &str) -> u64 {
        if self.tenants > 0 {
            return self.create_tenant_hook(0, url).await;
        }
        support::relay::create_hook(&support::relay::http_client(), self.api, url, "").await
    }

    /// With tenants, makes the scenarios' meeting (`int-load`) tenant 0's: its creation is
    /// published before any hook exists (no hook gets it).
    pub(crate) async fn tenant_meeting(&self, redis: &TestRedis) {
        if self.tenants == 0 {
            return;
        }
        let (name, _) = tenant(0);
        let created = support::meeting_created_with_metadata(
            "int-load",
            "ext-load",
            &serde_json::json!({"tenant-id": name}),
        );
        redis.publish(&created).await;
        // The meeting is made before the hooks and the burst (one message; it is processed
        // in well under this).
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    /// Registers a hook of tenant `i` (at its host, signed with its secret).
    pub(crate) async fn create_tenant_hook(&self, i: usize, url: &str) -> u64 {
        let (_, host) = tenant(i);
        let q = format!("callbackURL={}", hookrelay::base::form::form_encode(url));
        let xml = support::relay::signed_call_at(
            &support::relay::http_client(),
            self.api,
            Some(&host),
            "create",
            &q,
            (hookrelay::base::digest::Algorithm::Sha1, &tenant_secret(i)),
        )
        .await;
        support::relay::hook_id_of(&xml).unwrap_or_else(|| panic!("create failed: {xml}"))
    }

    pub(crate) async fn kill9(mut self) {
        let _ = self.child.kill().await;
    }
}

/// Polls Redis every millisecond until the relay subscribed to the bus; time since `started`.
async fn wait_subscribed(redis: &TestRedis, started: Instant) -> Duration {
    let deadline = started + Duration::from_secs(30);
    loop {
        if redis.has_subscriber().await {
            return started.elapsed();
        }
        assert!(Instant::now() < deadline, "the relay never subscribed");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
