//! `RelayProcess`: the real `hookrelay` binary as a child process, for tests that SIGTERM it,
//! `kill -9` it, or read its logs.

use std::{net::SocketAddr, path::PathBuf, process::Stdio, time::Duration};

use tokio::process::{Child, Command};

use super::{SECRET, TestRedis, free_port, relay::http_client};

/// The metrics token of a relay in a network namespace (beyond loopback, metrics need one).
const METRICS_TOKEN: &str = "netns-metrics-token";

pub(crate) struct RelayProcess {
    pub api: SocketAddr,
    pub metrics: SocketAddr,
    /// The admin API's address.
    pub admin: SocketAddr,
    child: Child,
    pub log: PathBuf,
    /// Its configuration file.
    pub config: PathBuf,
    _dir: tempfile::TempDir,
}

/// The `hookrelay` binary of the same build as this test (`target/<profile>/hookrelay`; cargo
/// builds it for the integration tests).
pub(crate) fn binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("hookrelay"))
        .expect("target directory")
}

/// The example program `name` (`examples/<name>/`), built by cargo once per test process into
/// the same target folder and profile as this test: `cargo test` builds examples only as
/// checks, without leaving their programs where they can be run.
pub(crate) fn example(name: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let dir = binary().parent().expect("target directory").to_path_buf();
    let program = dir.join("examples").join(name);
    // scripts/test.sh built the examples once for the whole run.
    if std::env::var_os("TEST_EXAMPLES_BUILT").is_some() && program.is_file() {
        return program;
    }
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|n| n == name) {
        let mut cargo = std::process::Command::new(env!("CARGO"));
        cargo
            .args(["build", "--quiet", "--example", name, "--manifest-path"])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
        if let Some(target) = dir.parent() {
            cargo.arg("--target-dir").arg(target);
        }
        if dir.file_name().is_some_and(|p| p == "release") {
            cargo.arg("--release");
        }
        let status = cargo.status().expect("run cargo build --example");
        assert!(status.success(), "building the example {name} failed");
        built.push(name.to_owned());
    }
    dir.join("examples").join(name)
}

impl RelayProcess {
    /// Waits until the relay's log contains `text` (`what` names the wait).
    #[allow(dead_code)]
    pub(crate) async fn wait_log(&self, what: &str, text: &str) {
        super::wait::until(what, async || {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            match log.contains(text) {
                true => Ok(()),
                false => Err(log.lines().count()),
            }
        })
        .await;
    }

    /// Starts the binary against `redis` with `extra` TOML appended to a minimal configuration
    /// (fast retries, 127.0.0.1 allowed as a callback address), and waits until it is subscribed.
    pub(crate) async fn start(redis: &TestRedis, extra: &str) -> Self {
        Self::start_logging(redis, extra, "info").await
    }

    /// As [`start`](Self::start), logging at `level` (a `RUST_LOG` value). Ports found free can
    /// be taken by another test before the relay binds them: then it exits, and it is started
    /// again on other ports.
    pub(crate) async fn start_logging(redis: &TestRedis, extra: &str, level: &str) -> Self {
        Self::start_env(redis, extra, level, &[]).await
    }

    /// As [`start_logging`](Self::start_logging), with environment variables `env` set. With
    /// `HOOKRELAY_CONFIG` among them, the configuration file is named by that variable (its
    /// value is replaced by the file's path) instead of `--config`; with `HOOKRELAY_BBB__SECRET`,
    /// the file holds no secret.
    pub(crate) async fn start_env(
        redis: &TestRedis,
        extra: &str,
        level: &str,
        env: &[(&str, &str)],
    ) -> Self {
        Self::start_in(redis, extra, level, env, None, &[]).await
    }

    /// As [`start`](Self::start) for a pool's relay, which subscribes to no bus of its own
    /// (`[pool] local_bus = false`): waits until its API answers.
    #[allow(dead_code)]
    pub(crate) async fn start_pool(redis: &TestRedis, extra: &str) -> Self {
        let extra = format!("{extra}\n[pool]\nlocal_bus = false\n");
        Self::start_in(redis, &extra, "info", &[], None, &[]).await
    }

    /// As [`start`](Self::start), with more arguments for `serve` (`--reference-config F`).
    #[allow(dead_code)]
    pub(crate) async fn start_args(redis: &TestRedis, extra: &str, args: &[&str]) -> Self {
        Self::start_in(redis, extra, "info", &[], None, args).await
    }

    /// As [`start`](Self::start), in network namespace `ns` (`ip netns exec`), its API and
    /// metrics on the namespace's address.
    #[allow(dead_code)]
    pub(crate) async fn start_in_netns(
        redis: &TestRedis,
        extra: &str,
        ns: &super::netns::NetCut,
    ) -> Self {
        Self::start_in(redis, extra, "info", &[], Some(ns), &[]).await
    }

    async fn start_in(
        redis: &TestRedis,
        extra: &str,
        level: &str,
        env: &[(&str, &str)],
        ns: Option<&super::netns::NetCut>,
        args: &[&str],
    ) -> Self {
        for _ in 0..10 {
            if let Some(relay) = Self::try_start(redis, extra, level, env, ns, args).await {
                return relay;
            }
        }
        panic!("the relay could not bind free ports in 10 tries");
    }

    async fn try_start(
        redis: &TestRedis,
        extra: &str,
        level: &str,
        env: &[(&str, &str)],
        ns: Option<&super::netns::NetCut>,
        args: &[&str],
    ) -> Option<Self> {
        let has = |name: &str| env.iter().any(|(k, _)| *k == name);
        let secret = if has("HOOKRELAY_BBB__SECRET") {
            String::new()
        } else {
            format!("secret = \"{SECRET}\"")
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let host = ns.map_or("127.0.0.1", |ns| ns.ns_ip.as_str());
        let api: SocketAddr = format!("{host}:{}", free_port()).parse().unwrap();
        let metrics: SocketAddr = format!("{host}:{}", free_port()).parse().unwrap();
        let admin: SocketAddr = format!("{host}:{}", free_port()).parse().unwrap();
        // Beyond loopback (a network namespace's address), the admin API needs a token.
        let admin_token = if ns.is_some() {
            "bearer_token = \"netns-admin-token\"\n"
        } else {
            ""
        };
        // So does a metrics listener: [metrics.auth], which `metrics()` always sends.
        let metrics_auth = if ns.is_some() {
            format!("[metrics.auth]\nbearer_token = \"{METRICS_TOKEN}\"\n")
        } else {
            String::new()
        };
        let config = dir.path().join("hookrelay.toml");
        let socket = dir.path().join("admin.sock");
        std::fs::write(
            &config,
            format!(
                "[bbb]\n{secret}\n[api]\nbind = \"{api}\"\n[redis]\nurl = \"{}\"\n[metrics]\nbind = \"{metrics}\"\n{metrics_auth}[admin]\nbind = \"{admin}\"\nsocket = \"{}\"\n{admin_token}[delivery]\nretry_intervals_ms = [50, 100, 150]\nrequest_timeout_ms = 1000\n{extra}\n[delivery.ssrf]\nallow_cidrs = [\"127.0.0.1/32\", \"{}\"]\n",
                redis.url(),
                socket.display(),
                super::netns::RANGE,
            ),
        )
        .expect("config");
        let log = dir.path().join("relay.log");
        let mut command = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &ns.name]).arg(binary());
                c
            }
            None => Command::new(binary()),
        };
        command.arg("serve").args(args);
        if !has("HOOKRELAY_CONFIG") {
            command.arg("--config").arg(&config);
        }
        for (k, v) in env {
            if *k == "HOOKRELAY_CONFIG" {
                command.env(k, &config);
            } else {
                command.env(k, v);
            }
        }
        let mut child = command
            .env("RUST_LOG", level)
            .stdout(std::fs::File::create(&log).expect("log file"))
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the hookrelay binary");
        let http = http_client();
        let mut pinged = false;
        for _ in 0..1000 {
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use tokio::io::AsyncReadExt;
                    let _ = e.read_to_string(&mut err).await;
                }
                assert!(
                    err.contains("cannot listen"),
                    "the relay exited at start ({status}): {err}"
                );
                return None;
            }
            // Ours: subscribed to this test's Redis and answering on its API port.
            pinged = http
                .get(format!("http://{api}/bigbluebutton/api/hooks/ping"))
                .send()
                .await
                .is_ok();
            let subscribes = !extra.contains("local_bus = false");
            if pinged && (!subscribes || redis.has_subscriber().await) {
                return Some(Self {
                    api,
                    metrics,
                    admin,
                    child,
                    log,
                    config,
                    _dir: dir,
                });
            }
            // The loop's pace: it polls until the relay answers and is subscribed (or has exited).
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = logged.lines().rev().take(20).collect();
        panic!(
            "the relay never subscribed (its API at {api} answered: {pinged}); its log ends:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }

    /// The metrics text of the relay at `metrics`.
    pub(crate) async fn metrics(&self) -> String {
        self.try_metrics().await.expect("metrics")
    }

    /// The metrics as Prometheus scrapes them (OpenMetrics), or why they could not be read (a
    /// relay that stopped or is restarting).
    pub(crate) async fn try_metrics(&self) -> Result<String, reqwest::Error> {
        let url = format!("http://{}/metrics", self.metrics);
        http_client()
            .get(url)
            .header("Accept", super::relay::PROMETHEUS_ACCEPT)
            .bearer_auth(METRICS_TOKEN)
            .send()
            .await?
            .text()
            .await
    }

    /// Calls `hooks/<call>` of its API with `query`, signed with SHA-1 and the test secret;
    /// returns the body.
    #[allow(dead_code)]
    pub(crate) async fn call(&self, call: &str, query: &str) -> String {
        let alg = hookrelay::base::digest::Algorithm::Sha1;
        super::relay::signed_call(&http_client(), self.api, call, query, alg, SECRET).await
    }

    /// Its process id.
    #[allow(dead_code)]
    pub(crate) fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Sends `signal` (`STOP`, `CONT`, ...) to the process.
    pub(crate) fn signal(&self, signal: &str) {
        let pid = self.child.id().expect("running").to_string();
        let sent = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .expect("kill");
        assert!(sent.success(), "kill -{signal}");
    }

    /// Waits up to `limit` for the process to exit by itself; its exit status.
    pub(crate) async fn exited_within(&mut self, limit: Duration) -> std::process::ExitStatus {
        tokio::time::timeout(limit, self.child.wait())
            .await
            .expect("exits in time")
            .expect("exit status")
    }

    /// Whether the process has exited by itself.
    #[allow(dead_code)]
    pub(crate) fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// SIGKILL: no chance to clean up.
    pub(crate) async fn kill9(mut self) {
        let _ = self.child.kill().await;
    }

    /// SIGTERM, then waits for a clean exit; returns its log.
    pub(crate) async fn terminate(mut self) -> String {
        let pid = self.child.id().expect("running").to_string();
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        let exit = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("stops within 20 s")
            .expect("exit status");
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        assert!(
            exit.success(),
            "{exit:?}; the end of its log:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
        log
    }
}

/// Runs the binary's command `args` (no `HOOKRELAY_CONFIG` from the environment): its exit
/// code, standard output and standard error.
#[allow(dead_code)]
pub(crate) fn cli(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(binary())
        .args(args)
        .env_remove("HOOKRELAY_CONFIG")
        .env_remove("HOOKRELAY_ADMIN__BEARER_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("hookrelay");
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(out.stdout),
        text(out.stderr),
    )
}

/// Polls `hookrelay hooks show ID --json` (configuration `cfg`) until `done` holds for it;
/// returns it.
#[allow(dead_code)]
pub(crate) async fn show_until(
    cfg: &str,
    id: u64,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    super::wait::until(&format!("hook {id} as awaited"), async || {
        let (code, out, err) = cli(&["hooks", "show", &id.to_string(), "-c", cfg, "--json"]);
        assert_eq!(code, 0, "hooks show {id}: {err}");
        let h: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("hooks show printed {out}: {e}"));
        match done(&h) {
            true => Ok(h),
            false => Err(h),
        }
    })
    .await
}
