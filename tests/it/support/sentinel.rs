//! `TestSentinel`: a Redis Sentinel (`redis-server --sentinel`) watching a master started by
//! the test (quorum 1, down after 500 ms), for failover tests.

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use tokio::process::{Child, Command};

use super::{TestRedis, free_port};

/// The master's name in the sentinel's configuration.
pub(crate) const MASTER: &str = "store";

/// A sentinel watching `master` (quorum 1, down after 500 ms).
pub(crate) struct TestSentinel {
    pub port: u16,
    _dir: tempfile::TempDir,
    _child: Child,
}

impl TestSentinel {
    pub(crate) async fn start(master: &TestRedis) -> Self {
        Self::start_with(master.port, String::new()).await
    }

    /// A sentinel that also speaks TLS, on `tls_port`, with `ca`'s server certificate, and
    /// watches `master` (started with [`TestRedis::start_tls`]) over TLS, naming its TLS port.
    #[allow(dead_code)]
    pub(crate) async fn start_tls(master: &TestRedis, ca: &super::tls::TestCa) -> (Self, u16) {
        let tls_port = free_port();
        let tls = format!(
            "tls-port {tls_port}\ntls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\n\
             tls-auth-clients no\ntls-replication yes\n",
            ca.server_cert(),
            ca.server_key(),
            ca.ca_file()
        );
        (Self::start_with(master.tls_port, tls).await, tls_port)
    }

    /// A sentinel watching the master on `master_port`, with `more` configuration.
    async fn start_with(master_port: u16, more: String) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let conf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n{more}sentinel monitor {MASTER} 127.0.0.1 {master_port} 1\n\
                 sentinel down-after-milliseconds {MASTER} 500\nsentinel failover-timeout {MASTER} 2000\n",
                dir.path().display(),
            ),
        )
        .expect("sentinel.conf");
        let child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server --sentinel");
        let s = Self {
            port,
            _dir: dir,
            _child: child,
        };
        s.wait_master(master_port).await;
        s
    }

    /// Waits until the sentinel names the master on `port`.
    pub(crate) async fn wait_master(&self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.master_port().await == Some(port) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the sentinel never named port {port}"
            );
            // The loop's pace: it polls until the sentinel names the master on `port`.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn master_port(&self) -> Option<u16> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}", self.port)).ok()?;
        let mut c = client.get_multiplexed_async_connection().await.ok()?;
        let addr: Option<(String, String)> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(MASTER)
            .query_async(&mut c)
            .await
            .ok()?;
        addr?.1.parse().ok()
    }
}

/// Waits until `replica` has its master's data.
pub(crate) async fn in_sync(replica: &TestRedis) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(mut c) = replica.conn().await {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut c)
                .await
                .unwrap_or_default();
            if info.contains("master_link_status:up") {
                return;
            }
        }
        assert!(Instant::now() < deadline, "the replica never synced");
        // The loop's pace: it polls until the replica's link to its master is up.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl TestSentinel {
    /// A `[store]` section on this sentinel's master.
    #[allow(dead_code)]
    pub(crate) fn store_config(&self) -> String {
        format!(
            "[store]\nsentinels = [\"redis://127.0.0.1:{}\"]\nsentinel_master = \"{MASTER}\"\n",
            self.port
        )
    }
}
