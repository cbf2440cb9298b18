//! What orchestrators expect (docs/containers.md): `/healthz` and `/readyz` on the API
//! listener, before and after the store goes away; a secret read from a file named by
//! `<VARIABLE>_FILE`, and one that cannot be read stopping the start in one line.

use crate::support::{
    RelayProcess, SECRET, TestRedis,
    process::binary,
    relay::{http_client, signed_call},
    wait::until,
};

/// `GET path` of the API at `relay`: the status and the JSON.
async fn probe(relay: &RelayProcess, path: &str) -> (u16, serde_json::Value) {
    let r = http_client()
        .get(format!("http://{}{path}", relay.api))
        .send()
        .await
        .expect("answers");
    let status = r.status().as_u16();
    let text = r.text().await.expect("body");
    assert_eq!(text.lines().count(), 1, "one line: {text}");
    (status, serde_json::from_str(&text).expect("JSON"))
}

#[tokio::test]
async fn healthz_and_readyz_say_what_stands_before_and_after_the_store_goes_away() {
    let mut redis = TestRedis::start_appendonly().await;
    let relay = RelayProcess::start(&redis, "").await;
    let (status, live) = probe(&relay, "/healthz").await;
    assert_eq!((status, &live["alive"]), (200, &true.into()), "{live}");
    let (status, ready) = probe(&relay, "/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(
        ready,
        serde_json::json!({"ready": true, "bus": "subscribed", "store": "reachable", "hooks": "loaded"})
    );

    // The store (here also the bus) goes away: not ready, still alive.
    redis.stop().await;
    let ready = until("not ready", async || match probe(&relay, "/readyz").await {
        (503, v) => Ok(v),
        other => Err(other),
    })
    .await;
    assert_eq!(ready["ready"], false, "{ready}");
    assert_ne!(ready["store"], "reachable", "{ready}");
    assert_eq!(probe(&relay, "/healthz").await.0, 200);
    let text = ready.to_string();
    assert!(!text.contains(SECRET), "{text}");

    // Back: ready again.
    redis.start_again().await;
    until("ready again", async || {
        match probe(&relay, "/readyz").await {
            (200, v) => Ok(v),
            other => Err(other),
        }
    })
    .await;
    relay.terminate().await;
}

#[tokio::test]
async fn a_pool_relay_is_ready_with_the_store_alone() {
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start_pool(&redis, "").await;
    let (status, ready) = probe(&relay, "/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["bus"], "edges", "{ready}");
    relay.terminate().await;
}

#[tokio::test]
async fn the_secret_is_read_from_the_file_its_file_variable_names() {
    let redis = TestRedis::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("bbb_secret");
    let from_file = "a-secret-from-a-mounted-file-0123456789";
    std::fs::write(&file, format!("{from_file}\n")).expect("secret file");
    let path = file.display().to_string();
    let relay = RelayProcess::start_env(
        &redis,
        "",
        "info",
        &[("HOOKRELAY_BBB__SECRET_FILE", path.as_str())],
    )
    .await;
    let sha1 = hookrelay::base::digest::Algorithm::Sha1;
    let http = http_client();
    let with_file = signed_call(&http, relay.api, "list", "", sha1, from_file).await;
    assert!(
        with_file.contains("<returncode>SUCCESS</returncode>"),
        "{with_file}"
    );
    // The file's secret is in force, not the one the configuration file holds.
    let with_toml = signed_call(&http, relay.api, "list", "", sha1, SECRET).await;
    assert!(with_toml.contains("checksumError"), "{with_toml}");
    // check-config says where the value came from, never the value.
    let checked = std::process::Command::new(binary())
        .args(["check-config", "--config"])
        .arg(&relay.config)
        .env("HOOKRELAY_BBB__SECRET_FILE", &path)
        .output()
        .expect("check-config");
    let out = String::from_utf8_lossy(&checked.stdout);
    assert!(checked.status.success(), "{out}");
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("bbb.secret"));
    assert_eq!(
        line.map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" ")),
        Some(format!("the file {path} (HOOKRELAY_BBB__SECRET_FILE)")),
        "{out}"
    );
    assert!(!out.contains(from_file), "{out}");
    relay.terminate().await;
}

/// `hookrelay serve` with `env` set: its exit code and stderr, once it stopped by itself.
fn serve_with_env(env: &[(&str, &str)]) -> (i32, String) {
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("hookrelay.toml");
    std::fs::write(&config, "[metrics]\nenabled = false\n").expect("config");
    let mut command = std::process::Command::new(binary());
    command.arg("serve").arg("--config").arg(&config);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("the hookrelay binary");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_secret_file_that_cannot_be_read_or_a_secret_given_twice_stops_the_start_in_one_line() {
    let (code, err) = serve_with_env(&[("HOOKRELAY_BBB__SECRET_FILE", "/nonexistent/bbb_secret")]);
    assert_eq!(code, 2, "a configuration error: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("bbb.secret")
            && lines[0].contains("HOOKRELAY_BBB__SECRET_FILE")
            && lines[0].contains("/nonexistent/bbb_secret"),
        "{err}"
    );
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("s");
    std::fs::write(&file, "a-secret-from-a-mounted-file-0123456789").expect("file");
    let (code, err) = serve_with_env(&[
        ("HOOKRELAY_BBB__SECRET_FILE", &file.display().to_string()),
        ("HOOKRELAY_BBB__SECRET", "another-secret-0123456789abcdef"),
    ]);
    assert_eq!(code, 2, "a configuration error: {err}");
    assert!(
        err.contains("both HOOKRELAY_BBB__SECRET and HOOKRELAY_BBB__SECRET_FILE"),
        "{err}"
    );
    assert!(!err.contains("another-secret"), "{err}");
}

/// docs/security.md: the relay's store user needs no admin commands. At Redis' default stream
/// node size the start says nothing of the store's settings (since the hooks' cursors, issue
/// 63, the node size no longer changes what a delivered callback costs); a store whose user
/// may not read its settings (`-config` in its ACL) serves the relay as usual, and its
/// password is never logged.
#[tokio::test]
async fn a_store_user_without_admin_commands_serves_and_the_start_gives_no_settings_advice() {
    let default = TestRedis::start().await;
    let relay = RelayProcess::start(&default, "").await;
    assert_eq!(probe(&relay, "/readyz").await.0, 200);
    let log = relay.terminate().await;
    assert!(!log.contains("stream-node-max-entries"), "{log}");

    let mut conn = default.conn().await.expect("connection");
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "relay",
            "on",
            ">relay-pw",
            "~*",
            "&*",
            "+@all",
            "-config",
        ])
        .query_async(&mut conn)
        .await
        .expect("ACL SETUSER");
    let store = format!(
        "[store]\nurl = \"redis://relay:relay-pw@127.0.0.1:{}\"\n",
        default.port
    );
    let relay = RelayProcess::start(&default, &store).await;
    let (status, ready) = probe(&relay, "/readyz").await;
    assert_eq!(status, 200, "{ready}");
    // The store's connections are that user's, which may not run CONFIG.
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut conn)
        .await
        .expect("CLIENT LIST");
    assert!(clients.contains(" user=relay "), "{clients}");
    let log = relay.terminate().await;
    assert!(!log.contains("stream-node-max-entries"), "{log}");
    assert!(!log.contains("relay-pw"), "{log}");
}
