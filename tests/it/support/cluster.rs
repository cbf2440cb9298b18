//! `TestCluster`: a Redis Cluster of three primaries (`redis-server --cluster-enabled yes`, no
//! replicas), each on a free loopback port, joined with `redis-cli --cluster create`.

use std::time::{Duration, Instant};

use super::redis::TestRedis;

pub(crate) struct TestCluster {
    pub nodes: Vec<TestRedis>,
}

impl TestCluster {
    pub(crate) async fn start() -> Self {
        let mut nodes = Vec::new();
        for _ in 0..3 {
            nodes.push(TestRedis::start_cluster_node().await);
        }
        Self::join(nodes).await
    }

    /// A cluster whose nodes also speak TLS (clients and the cluster bus, `tls-cluster yes`)
    /// with `ca`'s server certificate; [`tls_store_config`](Self::tls_store_config) reaches
    /// them by TLS alone.
    #[allow(dead_code)]
    pub(crate) async fn start_tls(ca: &super::tls::TestCa) -> Self {
        let mut nodes = Vec::new();
        for _ in 0..3 {
            nodes.push(TestRedis::start_tls_cluster_node(ca).await);
        }
        Self::join(nodes).await
    }

    /// The `[store]` section that makes a relay use this cluster by TLS, trusting `ca`.
    #[allow(dead_code)]
    pub(crate) fn tls_store_config(&self, ca: &super::tls::TestCa) -> String {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("\"{}\"", n.tls_url()))
            .collect();
        format!(
            "[store]\ncluster_nodes = [{}]\nca_file = \"{}\"\n",
            urls.join(", "),
            ca.ca_file()
        )
    }

    /// Joins `nodes` into a cluster and waits until it is up.
    async fn join(nodes: Vec<TestRedis>) -> Self {
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = tokio::process::Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .await
            .expect("redis-cli (scripts/test.sh installs redis-tools)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = Self { nodes };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cluster.is_ok().await {
            assert!(Instant::now() < deadline, "the cluster never came up");
            // The loop's pace: it polls until every node says cluster_state:ok.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        cluster
    }

    /// Whether every node says `cluster_state:ok`.
    async fn is_ok(&self) -> bool {
        for node in &self.nodes {
            let Some(mut c) = node.conn().await else {
                return false;
            };
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query_async(&mut c)
                .await
                .unwrap_or_default();
            if !info.contains("cluster_state:ok") {
                return false;
            }
        }
        true
    }

    /// The `[store]` section that makes a relay use this cluster.
    pub(crate) fn store_config(&self) -> String {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("\"{}\"", n.url()))
            .collect();
        format!("[store]\ncluster_nodes = [{}]\n", urls.join(", "))
    }

    /// A connection that follows the cluster's redirections, for checking what was stored.
    pub(crate) async fn conn(&self) -> redis::cluster_async::ClusterConnection {
        let urls: Vec<String> = self.nodes.iter().map(TestRedis::url).collect();
        redis::cluster::ClusterClient::new(urls)
            .expect("cluster client")
            .get_async_connection()
            .await
            .expect("cluster connection")
    }

    /// The number of keys each node holds.
    pub(crate) async fn keys_per_node(&self) -> Vec<usize> {
        let mut counts = Vec::new();
        for node in &self.nodes {
            let mut c = node.conn().await.expect("node up");
            let n: usize = redis::cmd("DBSIZE")
                .query_async(&mut c)
                .await
                .expect("DBSIZE");
            counts.push(n);
        }
        counts
    }

    /// The node holding `key` (asked of each node directly: the others answer `MOVED`).
    pub(crate) async fn node_of(&self, key: &str) -> Option<usize> {
        for (i, node) in self.nodes.iter().enumerate() {
            let mut c = node.conn().await?;
            let exists: redis::RedisResult<bool> =
                redis::cmd("EXISTS").arg(key).query_async(&mut c).await;
            if exists == Ok(true) {
                return Some(i);
            }
        }
        None
    }

    /// The callbacks waiting in hook `hook`'s queue on node `node`
    /// ([`super::redis::queued_in`]).
    pub(crate) async fn queued_on(&self, node: usize, hook: u64) -> usize {
        let mut c = self.nodes[node].conn().await.expect("node up");
        super::redis::queued_in(&mut c, hook).await
    }

    /// Makes node `node` hold every client's writes back (`CLIENT PAUSE ... WRITE`), or go on;
    /// a client that goes away meanwhile has its held writes dropped.
    pub(crate) async fn pause_writes(&self, node: usize, pause: bool) {
        let mut c = self.nodes[node].conn().await.expect("node up");
        let mut cmd = redis::cmd("CLIENT");
        if pause {
            cmd.arg("PAUSE").arg(60_000).arg("WRITE");
        } else {
            cmd.arg("UNPAUSE");
        }
        let () = cmd.query_async(&mut c).await.expect("CLIENT PAUSE");
    }
}
