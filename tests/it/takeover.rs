//! An upgrade by `apt install` alone: on a server where bbb-webhooks was installed, the relay
//! started with no `--reference-config` reads its installed configuration (the application's
//! `default.yml` under the override in `/etc/bigbluebutton/bbb-webhooks/`), takes over its
//! hooks, permanent ones included, and sends them bbb-webhooks' form with the server's domain;
//! bbb-webhooks' own records stay for a way back; a second start imports nothing twice; the
//! form and domain stay when bbb-webhooks' files are gone.

use std::path::Path;

use crate::support::{
    RelayProcess, SECRET, TestReceiver, TestRedis, meeting_created, process::binary,
    receiver::Received, user_joined, wait::until,
};

/// A 3.x hook record as bbb-webhooks writes it.
const UUID: &str = "6f9619ff-8b86-4d11-b42d-00c04fc964ff";
/// The permanent raw hook's record bbb-webhooks made from its permanentURLs.
const PERMANENT_UUID: &str = "c5a0ee4e-5ad8-5a4a-9a4c-f84d3b0a5f2e";

/// bbb-webhooks as its package installs it under `root`: the application's `default.yml`
/// (the after-install writes secret and domain there) and an override in `production.yml`
/// that replaces the permanent URLs and the domain.
fn server_tree(root: &Path, redis: &TestRedis, rx: &TestReceiver) {
    let app = root.join("usr/local/bigbluebutton/bbb-webhooks/config");
    let etc = root.join("etc/bigbluebutton/bbb-webhooks");
    std::fs::create_dir_all(&app).expect("app dir");
    std::fs::create_dir_all(&etc).expect("etc dir");
    let port = redis.url().rsplit(':').next().expect("port").to_string();
    std::fs::write(
        app.join("default.yml"),
        format!(
            "bbb:\n  serverDomain: localhost\n  sharedSecret: {SECRET}\n  auth2_0: false\n\
             redis:\n  host: 127.0.0.1\n  port: {port}\n\
             modules:\n  ../out/webhooks/index.js:\n    config:\n      permanentURLs: []\n"
        ),
    )
    .expect("default.yml");
    std::fs::write(
        etc.join("production.yml"),
        format!(
            "bbb:\n  serverDomain: bbb.school.example\n\
             modules:\n  ../out/webhooks/index.js:\n    config:\n      permanentURLs:\n\
             \x20       - url: {}\n          getRaw: true\n        - url: {}\n          getRaw: false\n",
            rx.url("/perm-raw"),
            rx.url("/perm")
        ),
    )
    .expect("production.yml");
}

/// The records bbb-webhooks left: an ordinary hook and its permanent raw hook.
async fn reference_hooks(redis: &TestRedis, rx: &TestReceiver) {
    let mut c = redis.conn().await.expect("redis");
    let prefix = "bigbluebutton:webhooks:out:hook:";
    let () = redis::pipe()
        .hset_multiple(
            format!("{prefix}{UUID}"),
            &[
                ("id", UUID),
                ("callbackURL", rx.url("/ordinary").as_str()),
                ("permanent", "false"),
                ("getRaw", "false"),
            ],
        )
        .hset_multiple(
            format!("{prefix}{PERMANENT_UUID}"),
            &[
                ("id", PERMANENT_UUID),
                ("callbackURL", rx.url("/perm-raw").as_str()),
                ("permanent", "true"),
                ("getRaw", "true"),
            ],
        )
        .sadd("bigbluebutton:webhooks:out:hooks", UUID)
        .sadd("bigbluebutton:webhooks:out:hooks", PERMANENT_UUID)
        .query_async(&mut c)
        .await
        .expect("records");
}

/// Callbacks of `rx` to `path`.
fn at(rx: &TestReceiver, path: &str) -> Vec<Received> {
    rx.delivered()
        .into_iter()
        .filter(|r| r.uri.starts_with(path))
        .collect()
}

/// Waits until `path` got `n` callbacks, and returns them.
async fn got(rx: &TestReceiver, path: &str, n: usize) -> Vec<Received> {
    until(&format!("{n} callbacks to {path}"), async || {
        let got = at(rx, path);
        match got.len() >= n {
            true => Ok(got),
            false => Err(got.iter().map(|r| r.body.clone()).collect::<Vec<_>>()),
        }
    })
    .await
}

/// A processed callback in bbb-webhooks' form for `domain`: its event id.
fn reference_form(r: &Received, domain: &str) -> String {
    assert_eq!(r.field("domain").as_deref(), Some(domain), "{}", r.body);
    let event: serde_json::Value =
        serde_json::from_str(&r.field("event").expect("event")).expect("JSON");
    event[0]["data"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("an array of one event: {event}"))
        .to_string()
}

#[tokio::test]
async fn an_upgrade_by_the_package_alone_keeps_every_hook_its_form_and_its_domain() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let tree = tempfile::tempdir().expect("tree");
    server_tree(tree.path(), &redis, &rx);
    reference_hooks(&redis, &rx).await;
    let root = tree.path().to_str().expect("path").to_string();
    let env = [("HOOKRELAY_REFERENCE__ROOT", root.as_str())];

    let relay = RelayProcess::start_env(&redis, "", "info", &env).await;
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    redis.publish(&user_joined("int-1", "u1", "Ann")).await;
    for path in ["/ordinary", "/perm?"] {
        let events: Vec<String> = got(&rx, path, 2)
            .await
            .iter()
            .map(|r| reference_form(r, "bbb.school.example"))
            .collect();
        assert_eq!(events, ["meeting-created", "user-joined"], "{path}");
    }
    let raw = got(&rx, "/perm-raw", 2).await;
    assert!(
        raw[0]
            .field("event")
            .is_some_and(|e| e.contains("MeetingCreatedEvtMsg"))
    );
    // bbb-webhooks' records are as it left them: going back finds every hook.
    let members = redis.smembers("bigbluebutton:webhooks:out:hooks").await;
    assert!(members.contains(&UUID.to_string()), "{members:?}");
    assert!(members.contains(&PERMANENT_UUID.to_string()), "{members:?}");
    let kept = redis
        .hgetall(&format!("bigbluebutton:webhooks:out:hook:{UUID}"))
        .await;
    assert_eq!(kept["callbackURL"], rx.url("/ordinary"));
    let listed = relay.call("list", "").await;
    assert_eq!(listed.matches("<hook>").count(), 3, "{listed}");
    // check-config names where each value came from.
    let config = relay.config.clone();
    let out = std::process::Command::new(binary())
        .args(["check-config", "-c"])
        .arg(&config)
        .envs(env)
        .output()
        .expect("check-config");
    let said = String::from_utf8_lossy(&out.stdout);
    let production = format!("bbb-webhooks' {root}/etc/bigbluebutton/bbb-webhooks/production.yml");
    let default =
        format!("bbb-webhooks' {root}/usr/local/bigbluebutton/bbb-webhooks/config/default.yml");
    let line = |key: &str| {
        said.lines()
            .find(|l| l.trim_start().starts_with(&format!("{key} ")))
            .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
    };
    assert_eq!(
        line("bbb.server_domain"),
        Some(production.clone()),
        "{said}"
    );
    assert_eq!(line("delivery.permanent_hooks"), Some(production), "{said}");
    assert_eq!(line("delivery.auth"), Some(default), "{said}");
    assert_eq!(
        line("bbb.secret"),
        Some(config.display().to_string()),
        "{said}"
    );
    assert!(
        said.contains("since its configuration is on this server"),
        "{said}"
    );
    drop(relay);

    // A second start imports nothing twice.
    let relay = RelayProcess::start_env(&redis, "", "info", &env).await;
    let listed = relay.call("list", "").await;
    assert_eq!(listed.matches("<hook>").count(), 3, "{listed}");
    drop(relay);

    // bbb-webhooks purged: its files gone, the relay restarted. The form and the domain stay.
    std::fs::remove_dir_all(tree.path().join("usr")).expect("rm");
    std::fs::remove_dir_all(tree.path().join("etc")).expect("rm");
    let relay = RelayProcess::start_env(&redis, "", "info", &env).await;
    redis.publish(&user_joined("int-1", "u2", "Bob")).await;
    let after = got(&rx, "/ordinary", 3).await;
    assert_eq!(
        reference_form(&after[2], "bbb.school.example"),
        "user-joined"
    );
    // Its permanent hooks stay too, as recorded at the takeover.
    let listed = relay.call("list", "").await;
    assert_eq!(listed.matches("<hook>").count(), 3, "{listed}");
    assert_eq!(listed.matches("<permanentHook>true").count(), 2, "{listed}");
    let raw = got(&rx, "/perm-raw", 3).await;
    assert!(
        raw[2]
            .field("event")
            .is_some_and(|e| e.contains("UserJoinedMeetingEvtMsg"))
    );
}
