//! `RelayProcess`: the real `hookrelay` binary as a child process, for tests that SIGTERM it,
//! `kill -9` it, or read its logs.

use std::{net::SocketAddr, path::PathBuf, process::Stdio, time::Duration};

use tokio::process::{Child, Command};

use super::{SECRET, TestRedis, relay::http_client};

pub struct RelayProcess {
    pub api: SocketAddr,
    pub metrics: SocketAddr,
    child: Child,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The `hookrelay` binary of the same build as this test (`target/<profile>/hookrelay`; cargo
/// builds it for the integration tests).
pub fn binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("hookrelay"))
        .expect("target directory")
}

impl RelayProcess {
    /// Starts the binary against `redis` with `extra` TOML appended to a minimal configuration
    /// (fast retries, 127.0.0.1 allowed as a callback address), and waits until it is subscribed.
    pub async fn start(redis: &TestRedis, extra: &str) -> Self {
        Self::start_logging(redis, extra, "info").await
    }

    /// As [`start`](Self::start), logging at `level` (a `RUST_LOG` value).
    pub async fn start_logging(redis: &TestRedis, extra: &str, level: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let api: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let config = dir.path().join("hookrelay.toml");
        std::fs::write(
            &config,
            format!(
                "[bbb]\nsecret = \"{SECRET}\"\n[api]\nbind = \"{api}\"\n[redis]\nurl = \"{}\"\n[metrics]\nbind = \"{metrics}\"\n[delivery]\nretry_intervals_ms = [50, 100, 150]\nrequest_timeout_ms = 1000\n{extra}\n[delivery.ssrf]\nallow_cidrs = [\"127.0.0.1/32\"]\n",
                redis.url(),
            ),
        )
        .expect("config");
        let log = dir.path().join("relay.log");
        let child = Command::new(binary())
            .args(["serve", "--config"])
            .arg(&config)
            .env("RUST_LOG", level)
            .stdout(std::fs::File::create(&log).expect("log file"))
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("the hookrelay binary");
        let http = http_client();
        for _ in 0..500 {
            if http
                .get(format!("http://{api}/bigbluebutton/api/hooks/ping"))
                .send()
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        redis.wait_for_subscriber().await;
        Self {
            api,
            metrics,
            child,
            log,
            _dir: dir,
        }
    }

    /// The metrics text of the relay at `metrics`.
    pub async fn metrics(&self) -> String {
        let url = format!("http://{}/metrics", self.metrics);
        http_client()
            .get(url)
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("body")
    }

    /// SIGKILL: no chance to clean up.
    pub async fn kill9(mut self) {
        let _ = self.child.kill().await;
    }

    /// SIGTERM, then waits for a clean exit; returns its log.
    pub async fn terminate(mut self) -> String {
        let pid = self.child.id().expect("running").to_string();
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        let exit = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("stops within 20 s")
            .expect("exit status");
        assert!(exit.success(), "{exit:?}");
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
