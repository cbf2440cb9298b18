//! Learning Record Stores for the xAPI tests: [`Ralph`], a real LRS (PyPI `ralph-malph`,
//! installed by `scripts/ensure-ralph.sh`) on a free port, and [`Gate`], a proxy in front of
//! it that can answer 500 or refuse connections for a while.

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::{Router, body::Bytes, extract::State, http::HeaderMap, response::IntoResponse};
use serde_json::Value;
use tokio::process::{Child, Command};

use super::{PATIENCE, free_port};

pub(crate) const USER: &str = "hookrelay";
pub(crate) const PASSWORD: &str = "lrs-pass-7Yq";

/// The virtual environment `scripts/ensure-ralph.sh` installs Ralph in.
fn venv() -> PathBuf {
    super::tool_dir("HOOKRELAY_RALPH_VENV", "ralph-venv")
}

pub(crate) struct Ralph {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Ralph {
    /// Starts Ralph with one user ([`USER`], [`PASSWORD`]); `None` when it is not installed
    /// and `TEST_REQUIRE_RALPH` is not set (`scripts/test.sh` installs it and sets it).
    pub(crate) async fn start() -> Option<Self> {
        let python = venv().join("bin/python");
        if !python.exists() {
            assert!(
                std::env::var_os("TEST_REQUIRE_RALPH").is_none(),
                "Ralph is needed here: run scripts/ensure-ralph.sh"
            );
            eprintln!("skipped: Ralph is not installed (scripts/ensure-ralph.sh)");
            return None;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let status = Command::new(venv().join("bin/ralph"))
            .args([
                "auth",
                "-u",
                USER,
                "-p",
                PASSWORD,
                "-s",
                "all",
                "-M",
                "mailto:relay@example.com",
                "-w",
            ])
            .env("RALPH_APP_DIR", dir.path())
            .env("RALPH_RUNSERVER_BACKEND", "fs")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .await
            .expect("ralph auth");
        assert!(status.success(), "ralph auth failed");
        let mut r = Self {
            port: free_port(),
            dir,
            child: None,
        };
        r.start_again().await;
        Some(r)
    }

    /// Starts it (again, on the same port and data).
    pub(crate) async fn start_again(&mut self) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/support/ralph_lrs.py");
        let child = Command::new(venv().join("bin/python"))
            .arg(script)
            .arg(self.port.to_string())
            .env("RALPH_APP_DIR", self.dir.path())
            .env("RALPH_RUNSERVER_BACKEND", "fs")
            .env(
                "RALPH_BACKENDS__LRS__FS__DEFAULT_DIRECTORY_PATH",
                self.dir.path().join("data"),
            )
            .env("RALPH_RUNSERVER_MAX_SEARCH_HITS_COUNT", "100000")
            .kill_on_drop(true)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start Ralph");
        self.child = Some(child);
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let client = super::relay::http_client();
        while tokio::time::Instant::now() < deadline {
            if let Ok(r) = client
                .get(format!("{}/__heartbeat__", self.url()))
                .send()
                .await
                && r.status().is_success()
            {
                return;
            }
            // The loop's pace: it polls the heartbeat until Ralph answers.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("Ralph did not start");
    }

    /// Stops it: connections are refused until [`start_again`](Self::start_again).
    pub(crate) async fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every statement it holds, as its `GET /xAPI/statements` gives them (in stored order).
    pub(crate) async fn statements(&self) -> Vec<Value> {
        let resp = super::relay::http_client()
            .get(format!("{}/xAPI/statements?limit=100000", self.url()))
            .basic_auth(USER, Some(PASSWORD))
            .header("X-Experience-API-Version", "1.0.0")
            .send()
            .await
            .expect("GET statements");
        assert!(resp.status().is_success(), "{}", resp.status());
        let body: Value = serde_json::from_slice(&resp.bytes().await.expect("body")).expect("JSON");
        body["statements"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until it holds `n` statements (or [`PATIENCE`] passed), and returns them.
    pub(crate) async fn wait_for(&self, n: usize) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + PATIENCE * 2;
        loop {
            let all = self.statements().await;
            if all.len() >= n || tokio::time::Instant::now() >= deadline {
                return all;
            }
            // The loop's pace: it polls the LRS until it holds `n` statements.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A proxy in front of an LRS: forwards, answers 500, or refuses connections.
pub(crate) struct Gate {
    pub addr: SocketAddr,
    failing: Arc<AtomicBool>,
    target: String,
    server: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Clone)]
struct Proxy {
    failing: Arc<AtomicBool>,
    target: String,
    client: reqwest::Client,
}

async fn forward(
    State(p): State<Proxy>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    if p.failing.load(Ordering::SeqCst) {
        return (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "down for the test",
        )
            .into_response();
    }
    let mut req = p
        .client
        .post(format!("{}{}", p.target, uri.path()))
        .body(body);
    for (k, v) in &headers {
        if k != "host" && k != "content-length" {
            req = req.header(k.as_str(), v.as_bytes());
        }
    }
    match req.send().await {
        Ok(r) => {
            let status = axum::http::StatusCode::from_u16(r.status().as_u16())
                .unwrap_or(axum::http::StatusCode::BAD_GATEWAY);
            (status, r.bytes().await.unwrap_or_default()).into_response()
        }
        Err(_) => axum::http::StatusCode::BAD_GATEWAY.into_response(),
    }
}

impl Gate {
    /// A gate in front of `target` (`http://host:port`), open.
    pub(crate) async fn start(target: &str) -> Self {
        let mut g = Self {
            addr: format!("127.0.0.1:{}", free_port()).parse().expect("addr"),
            failing: Arc::new(AtomicBool::new(false)),
            target: target.into(),
            server: None,
        };
        g.open().await;
        g
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request gets 500 (`true`) or is forwarded (`false`).
    pub(crate) fn fail(&self, on: bool) {
        self.failing.store(on, Ordering::SeqCst);
    }

    /// Stops listening: connections are refused.
    pub(crate) async fn close(&mut self) {
        if let Some(s) = self.server.take() {
            s.abort();
            let _ = s.await;
        }
    }

    /// Listens again, on the same address.
    pub(crate) async fn open(&mut self) {
        let listener = tokio::net::TcpListener::bind(self.addr)
            .await
            .expect("bind the gate");
        let app = Router::new().fallback(forward).with_state(Proxy {
            failing: self.failing.clone(),
            target: self.target.clone(),
            client: super::relay::http_client(),
        });
        self.server = Some(tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        }));
    }
}
