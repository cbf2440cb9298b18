//! The real `hookrelay` binary: start-up with a config file, graceful stop on SIGTERM, and a bad
//! configuration refused with one line naming the key.

use crate::support::{RelayProcess, TestRedis};

#[tokio::test]
async fn serves_and_stops_on_sigterm() {
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, "").await;
    let pong = crate::support::relay::http_client()
        .get(format!("http://{}/bigbluebutton/api/hooks/ping", relay.api))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(pong, "bbb-webhooks API up!");
    let log = relay.terminate().await;
    assert!(log.contains("SIGTERM: shutting down"), "{log}");
}

#[tokio::test]
async fn bad_configuration_is_one_line_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (text, key) in [
        ("[api]\nbind = \"127.0.0.1:1\"\n", "bbb.secret"),
        (
            "[bbb]\nsecret = \"long-test-secret\"\n[redis]\nurl = \"http://nope\"\n",
            "redis.url",
        ),
        (
            "[bbb]\nsecret = \"long-test-secret\"\ncolour = \"blue\"\n",
            "colour",
        ),
        // An admin API beyond loopback without a token.
        (
            "[bbb]\nsecret = \"long-test-secret\"\n[admin]\nbind = \"0.0.0.0:1\"\n",
            "admin.bearer_token",
        ),
        (
            "[bbb]\nsecret = \"long-test-secret\"\n[delivery]\nretain = \"an hour\"\n",
            "delivery.retain",
        ),
        // Metrics beyond loopback without credentials, as the admin API.
        (
            "[bbb]\nsecret = \"long-test-secret\"\n[metrics]\nbind = \"0.0.0.0:1\"\n",
            "metrics.auth",
        ),
        // The example's placeholder, and a secret too short to resist a guess.
        (
            "[bbb]\nsecret = \"change-me\"\n",
            "bbb.secret: is still the example's placeholder",
        ),
        (
            "[bbb]\nsecret = \"hunter2\"\n",
            "bbb.secret: must be at least 12 characters",
        ),
    ] {
        let config = dir.path().join("bad.toml");
        std::fs::write(&config, text).unwrap();
        // The relay and check-config alike.
        for command in ["serve", "check-config"] {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookrelay"))
                .args([command, "--config"])
                .arg(&config)
                .env_remove("HOOKRELAY_BBB_SECRET")
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(2), "{command}");
            let stderr = String::from_utf8(out.stderr).unwrap();
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(stderr.contains(key), "{stderr}");
            assert!(
                !stderr.contains("hunter2"),
                "the secret is not shown: {stderr}"
            );
        }
    }
}

#[tokio::test]
async fn starts_with_config_from_the_environment_and_stray_variables() {
    use crate::support::SECRET;
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start_env(
        &redis,
        "",
        "info",
        &[
            // Named by the variable, not by --config.
            ("HOOKRELAY_CONFIG", ""),
            // What Kubernetes injects for a Service named hookrelay.
            ("HOOKRELAY_PORT", "tcp://10.0.0.1:3005"),
            ("HOOKRELAY_SERVICE_HOST", "10.0.0.1"),
            // The file has no secret: only this one can make the API answer.
            ("HOOKRELAY_BBB__SECRET", SECRET),
        ],
    )
    .await;
    let http = crate::support::relay::http_client();
    let id = crate::support::relay::create_hook(&http, relay.api, "http://127.0.0.1:9/x", "").await;
    assert_eq!(
        id, 1,
        "the API checks checksums with the secret of the environment"
    );
    let log = relay.terminate().await;
    for name in ["HOOKRELAY_PORT", "HOOKRELAY_SERVICE_HOST"] {
        assert!(
            log.lines()
                .any(|l| l.contains("ignoring an environment variable") && l.contains(name)),
            "{name} warned about: {log}"
        );
    }
    assert!(!log.contains("HOOKRELAY_CONFIG"), "{log}");
    assert!(!log.contains("tcp://10.0.0.1:3005"), "never a value: {log}");
    assert!(!log.contains(SECRET), "never the secret: {log}");
}

#[test]
fn a_misspelled_key_in_the_file_stops_it_even_with_strays_in_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        "[bbb]\nsecret = \"long-test-secret\"\n[delivery]\nretry_intervals = [1]\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookrelay"))
        .arg("serve")
        .env("HOOKRELAY_CONFIG", &config)
        .env("HOOKRELAY_PORT", "tcp://10.0.0.1:3005")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("delivery.retry_intervals"), "{stderr}");
}

#[test]
fn help_names_the_environment_variables() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookrelay"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("[env: HOOKRELAY_CONFIG="), "{help}");
    assert!(help.contains("[env: HOOKRELAY_LOG_FORMAT="), "{help}");
}

#[test]
fn log_format_can_come_from_the_environment() {
    // check-config logs nothing on success; a stray variable's warning is a log line.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    // A store that is not there: check-config does not read the machine's own Redis.
    std::fs::write(
        &config,
        "[bbb]\nsecret = \"long-test-secret\"\n[redis]\nurl = \"redis://127.0.0.1:1\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookrelay"))
        .args(["check-config", "--config"])
        .arg(&config)
        .env("HOOKRELAY_LOG_FORMAT", "json")
        .env("HOOKRELAY_STRAY", "value")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let line = stdout
        .lines()
        .find(|l| l.contains("HOOKRELAY_STRAY"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let v: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
    assert_eq!(v["fields"]["variable"], "HOOKRELAY_STRAY");
}

#[tokio::test]
async fn bearer_mode_warns_at_start() {
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, "auth = \"bearer\"").await;
    let log = relay.terminate().await;
    assert!(
        log.lines()
            .any(|l| l.contains("WARN") && l.contains("opens the whole BBB API")),
        "{log}"
    );
    assert!(!log.contains(crate::support::SECRET), "{log}");
}

#[tokio::test]
async fn tells_systemd_it_is_ready_once_subscribed_and_when_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify.sock");
    let socket = tokio::net::UnixDatagram::bind(&socket_path).unwrap();
    let redis = TestRedis::start().await;
    let path = socket_path.to_str().unwrap();
    // What the relay has done at the moment READY=1 arrives: it must be subscribed already.
    let url = redis.url();
    let watcher = tokio::spawn(async move {
        let ready = notification(&socket).await;
        let mut c = redis::Client::open(url)
            .expect("url")
            .get_multiplexed_async_connection()
            .await
            .expect("redis");
        let (_, subscribers): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg("from-akka-apps-redis-channel")
            .query_async(&mut c)
            .await
            .expect("numsub");
        (ready, subscribers, socket)
    });
    let relay = RelayProcess::start_env(&redis, "", "info", &[("NOTIFY_SOCKET", path)]).await;
    let (ready, subscribers, socket) = watcher.await.expect("watcher");
    assert_eq!(ready, "READY=1");
    assert_eq!(subscribers, 1, "READY=1 came before the bus was subscribed");
    let log = relay.terminate().await;
    assert_eq!(notification(&socket).await, "STOPPING=1");
    assert!(log.contains("told systemd: ready"), "{log}");
}

async fn notification(socket: &tokio::net::UnixDatagram) -> String {
    let mut buf = vec![0u8; 256];
    let n = tokio::time::timeout(crate::support::PATIENCE, socket.recv(&mut buf))
        .await
        .expect("a notification")
        .expect("recv");
    String::from_utf8_lossy(&buf[..n]).trim().to_string()
}

#[tokio::test]
async fn check_config_reads_the_reference_yaml_and_names_what_it_ignores() {
    let dir = tempfile::tempdir().unwrap();
    let yml = dir.path().join("default.yml");
    std::fs::write(
        &yml,
        "log:\n  level: info\nbbb:\n  sharedSecret: from-yaml-secret\n  serverDomain: bbb.example.com\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookrelay"))
        .arg("check-config")
        .arg("--reference-config")
        .arg(&yml)
        .env_remove("HOOKRELAY_CONFIG")
        .env_remove("HOOKRELAY_BBB__SECRET")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("configuration ok"), "{stdout}");
    assert!(
        stdout.contains("keys of the reference configuration that hookrelay does not use")
            && stdout.contains("log.level"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("from-yaml-secret"),
        "never the secret: {stdout}"
    );
}

/// Once ready, the relay drops the pages of its binary that the start made resident (docs/
/// architecture.md, "The start's pages given back"): its log says how much, what stays resident
/// of those mappings is less than that, and it goes on serving (what runs maps its pages back).
#[tokio::test]
async fn once_ready_the_start_s_pages_leave_the_rss_and_the_relay_goes_on() {
    use std::os::unix::fs::MetadataExt;
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, "").await;
    let line = "ready: gave back the binary's pages the start used";
    relay.wait_log("the pages given back", line).await;
    let log = std::fs::read_to_string(&relay.log).expect("log");
    // The message's own "(N MiB)" (the fields may be coloured).
    let given_mib: u64 = log
        .lines()
        .find(|l| l.contains(line))
        .and_then(|l| l.split(" used (").nth(1))
        .and_then(|v| v.split(" MiB)").next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no size in the line: {log}"));
    assert!(given_mib >= 1, "at least a MiB of the start's pages: {log}");
    let given = given_mib << 10;
    let resident_now = || {
        let pid = relay.pid();
        let inode = std::fs::metadata(crate::support::process::binary())
            .expect("binary")
            .ino();
        let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).expect("smaps");
        hookrelay::base::binary_pages::droppable(&smaps, inode)
            .iter()
            .map(|s| s.resident_kib)
            .sum::<u64>()
    };
    let now = resident_now();
    assert!(
        now < given,
        "resident in the code and read-only data: {now} KiB, after {given} KiB given back"
    );
    // It goes on: the API answers, and an event reaches a hook.
    let rx = crate::support::TestReceiver::start().await;
    let client = crate::support::relay::http_client();
    crate::support::relay::create_hook(&client, relay.api, &rx.url("/after"), "").await;
    redis.publish_users(0..3).await;
    crate::support::wait::until("three callbacks", async || match rx.delivered_count() {
        3 => Ok(()),
        n => Err(n),
    })
    .await;
}
