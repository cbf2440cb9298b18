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
            "[bbb]\nsecret = \"x\"\n[redis]\nurl = \"http://nope\"\n",
            "redis.url",
        ),
        ("[bbb]\nsecret = \"x\"\ncolour = \"blue\"\n", "colour"),
    ] {
        let config = dir.path().join("bad.toml");
        std::fs::write(&config, text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookrelay"))
            .args(["serve", "--config"])
            .arg(&config)
            .env_remove("HOOKRELAY_BBB_SECRET")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(key), "{stderr}");
    }
}
