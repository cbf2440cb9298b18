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
pub struct Setup {
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
}

pub struct Relay {
    pub api: SocketAddr,
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
    pub async fn start(setup: &Setup, redis: &TestRedis, delivery: &str) -> (Self, Duration) {
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
        std::fs::write(
            &config,
            format!(
                "[bbb]\nsecret = \"{SECRET}\"\n[api]\nbind = \"{api}\"\n[redis]\nurl = \"{}\"\n[metrics]\nenabled = false\n[admin]\nbind = \"127.0.0.1:{admin}\"\n[delivery]\nmax_unacked = {}\n{insight}{delivery}\n[delivery.ssrf]\nallow_cidrs = [\"127.0.0.1/32\"]\n{plugin_dir}{fleet}",
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
            child,
            _dir: dir,
            _plugins: plugins,
        };
        (relay, subscribed)
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    pub async fn create_hook(&self, url: &str) -> u64 {
        support::relay::create_hook(&support::relay::http_client(), self.api, url, "").await
    }

    pub async fn kill9(mut self) {
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
