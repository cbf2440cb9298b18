//! The real `hookrelay` binary: start-up with a config file, graceful stop on SIGTERM, and a bad
//! configuration refused with one line naming the key.

use std::{process::Stdio, time::Duration};

use crate::support::{SECRET, TestRedis, relay::http_client};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn serves_and_stops_on_sigterm() {
    let redis = TestRedis::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (api, metrics) = (free_port(), free_port());
    let config = dir.path().join("hookrelay.toml");
    std::fs::write(
        &config,
        format!(
            "[bbb]\nsecret = \"{SECRET}\"\n[api]\nbind = \"127.0.0.1:{api}\"\n[redis]\nurl = \"{}\"\n[metrics]\nbind = \"127.0.0.1:{metrics}\"\n",
            redis.url()
        ),
    )
    .unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookrelay"))
        .args(["serve", "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let http = http_client();
    let mut up = false;
    for _ in 0..250 {
        if let Ok(r) = http
            .get(format!(
                "http://127.0.0.1:{api}/bigbluebutton/api/hooks/ping"
            ))
            .send()
            .await
        {
            up = r.text().await.unwrap() == "bbb-webhooks API up!";
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(up, "the binary serves the API");
    redis.wait_for_subscriber().await;
    let pid = child.id().unwrap().to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("stops")
        .unwrap();
    assert!(exit.success(), "{exit:?}");
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
