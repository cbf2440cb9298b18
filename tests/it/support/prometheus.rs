//! `TestPrometheus`: Debian's Prometheus started on a free port, scraping one target, with the
//! query calls the dashboard tests make.

use std::{
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use serde_json::Value;

use super::{free_port, on_path, relay::http_client};

/// Debian's Prometheus (`/usr/bin/prometheus`), if installed.
pub(crate) fn prometheus() -> Option<PathBuf> {
    let found = on_path("prometheus");
    if found.is_none() && std::env::var_os("TEST_REQUIRE_PROMETHEUS").is_some() {
        panic!("Debian's prometheus package is needed here (scripts/test.sh installs it)");
    }
    found
}

/// `name=value`, form-encoded.
fn encoded(name: &str, value: &str) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair(name, value)
        .finish()
}

/// A Prometheus on a free port scraping `target` every second as job `bbb`.
pub(crate) struct TestPrometheus {
    url: String,
    _dir: tempfile::TempDir,
    _child: tokio::process::Child,
}

impl TestPrometheus {
    pub(crate) async fn start(binary: &PathBuf, target: std::net::SocketAddr) -> Self {
        Self::start_via(binary, target, None).await
    }

    /// [`TestPrometheus::start`], scraping through the HTTP proxy at `proxy` when given.
    pub(crate) async fn start_via(
        binary: &PathBuf,
        target: std::net::SocketAddr,
        proxy: Option<std::net::SocketAddr>,
    ) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("prometheus.yml");
        let proxy = proxy
            .map(|p| format!("    proxy_url: 'http://{p}'\n"))
            .unwrap_or_default();
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: bbb\n{proxy}    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .expect("prometheus.yml");
        let port = free_port();
        let child = tokio::process::Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start prometheus");
        let url = format!("http://127.0.0.1:{port}");
        let http = http_client();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = http.get(format!("{url}/-/ready")).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            assert!(Instant::now() < deadline, "Prometheus never got ready");
            // The loop's pace: it polls until Prometheus is ready.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self {
            url,
            _dir: dir,
            _child: child,
        }
    }

    /// The result vector of `query` now.
    pub(crate) async fn query(&self, query: &str) -> Vec<Value> {
        let answer: Value = http_client()
            .get(format!(
                "{}/api/v1/query?{}",
                self.url,
                encoded("query", query)
            ))
            .send()
            .await
            .expect("query")
            .text()
            .await
            .map(|t| serde_json::from_str(&t).expect("JSON"))
            .expect("body");
        assert_eq!(answer["status"], "success", "{query}: {answer}");
        answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub(crate) async fn label_values(&self, series: &str, label: &str) -> Vec<String> {
        let answer: Value = http_client()
            .get(format!(
                "{}/api/v1/label/{label}/values?{}",
                self.url,
                encoded("match[]", series)
            ))
            .send()
            .await
            .expect("label values")
            .text()
            .await
            .map(|t| serde_json::from_str(&t).expect("JSON"))
            .expect("body");
        answer["data"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }
}
