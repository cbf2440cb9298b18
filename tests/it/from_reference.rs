//! Upgrading from bbb-webhooks keeps every receiver working, with nothing to know: on each
//! upgrade path (its YAML given with `--reference-config`, its hooks found in Redis and
//! imported) the relay sends bbb-webhooks' callback form, unless `delivery.compat` says
//! otherwise. The receivers here do what receivers written for bbb-webhooks do (what its own
//! test suite does): `JSON.parse(body.event)[0]`, and they check `domain`, the checksum and
//! the Content-Type.

use std::time::Duration;

use serde_json::Value;

use crate::support::{
    RelayProcess, SECRET, TestReceiver, TestRedis, meeting_created, process::binary,
    receiver::Received, wait::until,
};

const DOMAIN: &str = "bbb.example.com";

/// bbb-webhooks 3.x's YAML as an administrator has it: the secret, the domain, its Redis, two
/// permanent hooks (one raw).
fn reference_yaml(redis: &TestRedis, rx: &TestReceiver) -> String {
    format!(
        "bbb:\n  serverDomain: {DOMAIN}\n  sharedSecret: {SECRET}\n\
         modules:\n  ../in/redis/index.js:\n    config:\n      redis:\n        host: 127.0.0.1\n        port: {}\n\
         \x20 ../out/webhooks/index.js:\n    config:\n      permanentURLs:\n\
         \x20       - url: {}\n          getRaw: true\n\
         \x20       - url: {}\n          getRaw: false\n",
        redis.port,
        rx.url("/raw-permanent"),
        rx.url("/permanent"),
    )
}

/// What a receiver written for bbb-webhooks reads of a callback: `JSON.parse(event)[0]`, after
/// checking the domain, the checksum and the Content-Type. Panics where that receiver would
/// drop the callback.
fn as_reference_receiver(r: &Received, registered: &str) -> Value {
    assert_eq!(
        r.headers["content-type"], "application/x-www-form-urlencoded;charset=UTF-8",
        "{}",
        r.uri
    );
    assert_eq!(r.field("domain").as_deref(), Some(DOMAIN), "{}", r.body);
    r.assert_signed(registered);
    assert!(
        r.field("timestamp")
            .and_then(|t| t.parse::<u64>().ok())
            .is_some()
    );
    let events: Value = serde_json::from_str(&r.event()).expect("event is JSON");
    let first = events
        .as_array()
        .and_then(|a| (a.len() == 1).then(|| a[0].clone()))
        .unwrap_or_else(|| panic!("event is not a one-element array: {}", r.event()));
    assert!(first.is_object());
    first
}

/// The presenter assigned in meeting `mid`, as akka-apps publishes it.
fn presenter_assigned(mid: &str, uid: &str) -> String {
    serde_json::json!({
        "envelope": {"name": "PresenterAssignedEvtMsg",
            "routing": {"msgType": "BROADCAST_TO_MEETING", "meetingId": mid, "userId": uid},
            "timestamp": 1_698_771_164_647u64},
        "core": {"header": {"name": "PresenterAssignedEvtMsg", "meetingId": mid, "userId": uid},
            "body": {"presenterId": uid, "presenterName": "John Doe", "assignedBy": uid}}
    })
    .to_string()
}

async fn delivered_to(rx: &TestReceiver, path: &str, n: usize) -> Vec<Received> {
    until(&format!("{n} callbacks to {path}"), async || {
        let got: Vec<Received> = rx
            .delivered()
            .into_iter()
            .filter(|r| r.uri.split('?').next() == Some(path))
            .collect();
        match got.len() >= n {
            true => Ok(got),
            false => Err(format!("{path}: {} of {n}", got.len())),
        }
    })
    .await
}

#[tokio::test]
async fn with_only_the_reference_yaml_every_receiver_gets_the_reference_form() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("default.yml");
    std::fs::write(&yaml, reference_yaml(&redis, &rx)).unwrap();
    let yaml = yaml.to_str().unwrap();

    // check-config says which form and why.
    let relay = RelayProcess::start_args(&redis, "", &["--reference-config", yaml]).await;
    let out = std::process::Command::new(binary())
        .args(["check-config", "--config"])
        .arg(&relay.config)
        .args(["--reference-config", yaml])
        .output()
        .expect("check-config");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("bbb-webhooks' form") && said.contains("since its configuration was given"),
        "{said}"
    );
    let log = std::fs::read_to_string(&relay.log).unwrap_or_default();
    assert!(log.contains("bbb-webhooks' form"), "{log}");

    // Meeting-scoped hooks, as the suite registers them.
    let mine = rx.url("/ext-1");
    let other = rx.url("/ext-2");
    for (url, meeting) in [(&mine, "ext-1"), (&other, "ext-2")] {
        let q = format!(
            "callbackURL={}&meetingID={meeting}",
            form_urlencoded::byte_serialize(url.as_bytes()).collect::<String>()
        );
        let created = relay.call("create", &q).await;
        assert!(
            created.contains("<returncode>SUCCESS</returncode>"),
            "{created}"
        );
    }
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    redis
        .publish(&presenter_assigned("int-1", "w_presenter"))
        .await;

    // "should post mapped message": the processed event.
    let processed = delivered_to(&rx, "/permanent", 2).await;
    let first = as_reference_receiver(&processed[1], &rx.url("/permanent"));
    assert_eq!(first["data"]["id"], "user-presenter-assigned", "{first}");
    assert_eq!(
        first["data"]["attributes"]["meeting"]["external-meeting-id"],
        "ext-1"
    );
    // "should post raw message": the bus message as it came.
    let raw = delivered_to(&rx, "/raw-permanent", 2).await;
    let first = as_reference_receiver(&raw[1], &rx.url("/raw-permanent"));
    assert_eq!(
        first["envelope"]["name"], "PresenterAssignedEvtMsg",
        "{first}"
    );
    // "should only receive events for its meeting".
    let meeting = delivered_to(&rx, "/ext-1", 2).await;
    let first = as_reference_receiver(&meeting[1], &mine);
    assert_eq!(first["data"]["id"], "user-presenter-assigned");
    // Proves that nothing happens: the hook of another meeting gets none of ext-1's events.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !rx.delivered().iter().any(|r| r.uri.starts_with("/ext-2")),
        "a hook of another meeting got ext-1's events"
    );
    relay.terminate().await;

    // An explicit choice always wins: delivery.compat = "spec" with the same YAML.
    let rx2 = TestReceiver::start().await;
    let relay =
        RelayProcess::start_args(&redis, "compat = \"spec\"\n", &["--reference-config", yaml])
            .await;
    let q = format!(
        "callbackURL={}",
        form_urlencoded::byte_serialize(rx2.url("/plain").as_bytes()).collect::<String>()
    );
    relay.call("create", &q).await;
    redis
        .publish(&presenter_assigned("int-1", "w_presenter"))
        .await;
    let plain = delivered_to(&rx2, "/plain", 1).await;
    assert_eq!(
        plain[0].headers["content-type"],
        "application/x-www-form-urlencoded"
    );
    assert!(plain[0].field("domain").is_none());
    let event: Value = serde_json::from_str(&plain[0].event()).unwrap();
    assert!(event.is_object(), "the plain form: one object");
    let log = std::fs::read_to_string(&relay.log).unwrap_or_default();
    assert!(log.contains("as delivery.compat says"), "{log}");
    relay.terminate().await;
}

#[tokio::test]
async fn hooks_imported_from_bbb_webhooks_keep_getting_its_form_after_restarts() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let uuid = "8a4d53a1-1f7b-4a39-9d0c-3b5f3f2c1a11";
    let mut c = redis.conn().await.expect("redis");
    let () = redis::pipe()
        .hset_multiple(
            format!("bigbluebutton:webhooks:out:hook:{uuid}"),
            &[
                ("id", uuid),
                ("callbackURL", rx.url("/imported").as_str()),
                ("permanent", "false"),
                ("getRaw", "false"),
            ],
        )
        .sadd("bigbluebutton:webhooks:out:hooks", uuid)
        .query_async(&mut c)
        .await
        .expect("a hook of bbb-webhooks");
    // No --reference-config, no compat: only the imported hook says where this came from.
    let env = [("HOOKRELAY_BBB__SERVER_DOMAIN", DOMAIN)];
    let relay = RelayProcess::start_env(&redis, "", "info", &env).await;
    let log = std::fs::read_to_string(&relay.log).unwrap_or_default();
    assert!(log.contains("since its hooks were imported"), "{log}");
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    let got = delivered_to(&rx, "/imported", 1).await;
    let first = as_reference_receiver(&got[0], &rx.url("/imported"));
    assert_eq!(first["data"]["id"], "meeting-created");
    relay.terminate().await;
    // The import is done; its hooks' receivers still expect that form after a restart.
    let relay = RelayProcess::start_env(&redis, "", "info", &env).await;
    redis.publish(&presenter_assigned("int-1", "w_p")).await;
    let got = delivered_to(&rx, "/imported", 2).await;
    let first = as_reference_receiver(&got[1], &rx.url("/imported"));
    assert_eq!(first["data"]["id"], "user-presenter-assigned");
    relay.terminate().await;
}
