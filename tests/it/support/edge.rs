//! `TestEdge`: the real binary in the edge role (`[edge]`) on a "BBB server" (a `TestRedis`),
//! writing to a pool's store; it can be killed -9 and started again, and read by its metrics.

use std::time::Duration;

use super::{TestRedis, free_port, metric_value, process::binary, wait};

thread_local! {
    /// The `api.bind` port the edges of this test are given, which an edge must leave closed.
    pub static API_PORT: u16 = free_port();
}

/// An edge process and its log.
pub(crate) struct TestEdge {
    child: tokio::process::Child,
    pub metrics: u16,
    config: std::path::PathBuf,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl TestEdge {
    /// An edge of `bbb` named `server`, writing to `store_url`, with `more` in `[edge]`;
    /// waits until it is subscribed to `bbb`'s bus.
    pub(crate) async fn start(
        bbb: &TestRedis,
        server: &str,
        store_url: &str,
        more: &str,
    ) -> TestEdge {
        let dir = tempfile::tempdir().expect("dir");
        let metrics = free_port();
        let config = dir.path().join("edge.toml");
        std::fs::write(
            &config,
            format!(
                "[redis]\nurl = \"{}\"\n[api]\nbind = \"127.0.0.1:{}\"\n[metrics]\nbind = \"127.0.0.1:{metrics}\"\n[edge]\nstore_url = \"{store_url}\"\nserver = \"{server}\"\n{more}\n",
                bbb.url(),
                API_PORT.with(|p| *p),
            ),
        )
        .expect("config");
        let edge = Self::spawn(dir, config, metrics).await;
        edge.wait_subscribed(bbb).await;
        edge
    }

    /// Waits until the edge is subscribed to `bbb`'s bus.
    pub(crate) async fn wait_subscribed(&self, bbb: &TestRedis) {
        wait::until("the edge subscribed", async || {
            if bbb.has_subscriber().await {
                Ok(())
            } else {
                Err(self.log_text())
            }
        })
        .await;
    }

    async fn spawn(dir: tempfile::TempDir, config: std::path::PathBuf, metrics: u16) -> TestEdge {
        let log = dir.path().join(format!("edge-{}.log", free_port()));
        let child = tokio::process::Command::new(binary())
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "info")
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(std::fs::File::create(log.with_extension("err")).expect("err"))
            .kill_on_drop(true)
            .spawn()
            .expect("the hookrelay binary");
        TestEdge {
            child,
            metrics,
            config,
            log,
            _dir: dir,
        }
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) async fn metric(&self, series: &str) -> f64 {
        let text = crate::support::relay::http_client()
            .get(format!("http://127.0.0.1:{}/metrics", self.metrics))
            .header("Accept", crate::support::relay::PROMETHEUS_ACCEPT)
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("body");
        metric_value(&text, series)
    }

    pub(crate) async fn metric_reaches(&self, series: &str, value: f64) {
        wait::until(&format!("{series} reaches {value}"), async || {
            let v = self.metric(series).await;
            if v >= value { Ok(()) } else { Err(v) }
        })
        .await;
    }

    /// kill -9, then the same edge started again at once.
    pub(crate) async fn kill9_and_restart(mut self, bbb: &TestRedis) -> TestEdge {
        self.child.start_kill().expect("kill");
        let _ = self.child.wait().await;
        let TestEdge {
            config,
            metrics,
            _dir,
            ..
        } = self;
        let edge = Self::spawn(_dir, config, metrics).await;
        edge.wait_subscribed(bbb).await;
        edge
    }

    pub(crate) async fn terminate(mut self) -> String {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("stops")
            .expect("status");
        assert!(status.success(), "{status:?}: {}", self.log_text());
        self.log_text()
    }
}
