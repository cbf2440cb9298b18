//! The reference's files, 3.x and 2.x layouts, read into hookrelay's keys.

use super::*;
use crate::config::{CallbackAuth, Config};

/// Laid out as bbb-webhooks 3.x's `config/default.example.yml`.
const YAML: &str = r#"
log:
  level: info
  stdout: true
prometheus:
  enabled: false
  port: 3004
bbb:
  serverDomain: bbb.example.com
  sharedSecret: "s3cr3t-s3cr3t"
  auth2_0: false
  apiPath: /bigbluebutton/api
redis:
  host: 127.0.0.1
  port: 6379
modules:
  "../in/redis/index.js":
    enabled: true
    config:
      redis:
        host: 10.0.0.5
        port: 6380
        password: "p@ss"
        inboundChannels:
          - from-akka-apps-redis-channel
          - from-bbb-web-redis-channel
  "../out/webhooks/index.js":
    enabled: true
    config:
      api:
        bind: 127.0.0.1
        port: 3006
        supportedChecksumAlgorithms: [sha1, sha256]
      hookChecksumAlgorithm: sha256
      includeEvents: []
      excludeEvents: ["user-audio-voice-enabled"]
      permanentURLs:
        - url: https://app.example/bbb
          getRaw: true
      retryIntervals: [100, 500, 1000]
      requestTimeout: 4000
      queueSize: 10000
"#;

#[test]
fn the_understood_keys_become_hookrelays_and_the_rest_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let yml = dir.path().join("default.yml");
    std::fs::write(&yml, YAML).unwrap();
    let toml = dir.path().join("hookrelay.toml");
    // The TOML file wins over the reference's file.
    std::fs::write(&toml, "[bbb]\nserver_domain = \"override.example\"\n").unwrap();
    let (c, ignored) =
        Config::load_with_reference(Some(&toml), std::slice::from_ref(&yml)).unwrap();
    assert_eq!(c.bbb.secret.expose(), "s3cr3t-s3cr3t");
    assert_eq!(c.bbb.server_domain, "override.example");
    assert_eq!(c.delivery.auth, CallbackAuth::Checksum);
    assert_eq!(c.redis.url.expose(), "redis://:p%40ss@10.0.0.5:6380");
    assert_eq!(
        c.redis.channels,
        ["from-akka-apps-redis-channel", "from-bbb-web-redis-channel"]
    );
    assert_eq!(c.api.bind.to_string(), "127.0.0.1:3006");
    assert_eq!(c.api.checksum_algorithms.len(), 2);
    assert_eq!(
        c.delivery.checksum_algorithm,
        crate::base::digest::Algorithm::Sha256
    );
    assert_eq!(c.delivery.exclude_events, ["user-audio-voice-enabled"]);
    assert_eq!(c.delivery.retry_intervals_ms, [100, 500, 1000]);
    assert_eq!(c.delivery.request_timeout_ms, 4000);
    assert_eq!(c.delivery.permanent_hooks.len(), 1);
    assert_eq!(c.delivery.permanent_hooks[0].url, "https://app.example/bbb");
    assert!(c.delivery.permanent_hooks[0].get_raw);
    assert_eq!(
        ignored,
        [
            "log.level",
            "log.stdout",
            "prometheus.enabled",
            "prometheus.port",
            "bbb.apiPath",
            "redis.host",
            "redis.port",
            "modules.../in/redis/index.js.enabled",
            "modules.../out/webhooks/index.js.enabled",
            "modules.../out/webhooks/index.js.config.queueSize",
        ]
    );
}

#[test]
fn the_xapi_module_is_read() {
    // As bbb-webhooks 3.x's default.example.yml lays it out.
    let yaml = r#"
modules:
  ../out/xapi/index.js:
    enabled: true
    type: out
    config:
      lrs:
        lrs_endpoint: https://your_lrs.endpoint
        lrs_username: user
        lrs_password: pass
      uuid_namespace: 01234567-89ab-cdef-0123-456789abcdef
      redis:
        keys:
          meetings: bigbluebutton:webhooks:xapi:meetings
          meetingPrefix: bigbluebutton:webhooks:xapi:meeting
          users: bigbluebutton:webhooks:xapi:users
          userPrefix: bigbluebutton:webhooks:xapi:user
          polls: bigbluebutton:webhooks:xapi:polls
          pollPrefix: bigbluebutton:webhooks:xapi:poll
"#;
    let r = translate(&serde_saphyr::from_str(yaml).unwrap());
    assert_eq!(
        Value::Object(r.keys.clone()),
        json!({"xapi": {"enabled": true, "lrs_endpoint": "https://your_lrs.endpoint",
            "lrs_username": "user", "lrs_password": "pass",
            "uuid_namespace": "01234567-89ab-cdef-0123-456789abcdef"}})
    );
    assert!(r.ignored.is_empty(), "{:?}", r.ignored);
    let off = yaml.replace("enabled: true", "enabled: false");
    let r = translate(&serde_saphyr::from_str(&off).unwrap());
    assert_eq!(r.keys["xapi"]["enabled"], false);
}

#[test]
fn the_2x_layout_is_read_too() {
    let r = translate(
        &serde_saphyr::from_str(
            "bbb:\n  sharedSecret: old\nserver:\n  bind: 0.0.0.0\n  port: 3007\nhooks:\n  channels: [bigbluebutton:from-bbb-apps:meeting]\n  permanentURLs: [https://a.example/x]\n  retryIntervals: [100, 200]\n  requestTimeout: 3000\n  multiEvent: 1\nredis:\n  host: 127.0.0.1\n",
        )
        .unwrap(),
    );
    assert_eq!(r.keys["bbb"]["secret"], "old");
    assert_eq!(r.keys["api"]["bind"], "0.0.0.0:3007");
    assert_eq!(
        r.keys["redis"]["channels"],
        json!(["bigbluebutton:from-bbb-apps:meeting"])
    );
    assert_eq!(
        r.keys["delivery"]["permanent_hooks"],
        json!([{"url": "https://a.example/x", "get_raw": false}])
    );
    assert_eq!(r.keys["delivery"]["retry_intervals_ms"], json!([100, 200]));
    assert_eq!(r.keys["delivery"]["request_timeout_ms"], json!(3000));
    assert_eq!(r.ignored, ["hooks.multiEvent"]);
}

#[test]
fn bearer_mode_and_bad_files_are_reported() {
    let r = translate(&serde_saphyr::from_str("bbb:\n  auth2_0: true\n").unwrap());
    assert_eq!(r.keys["delivery"]["auth"], "bearer");
    assert_eq!(r.keys["delivery"]["allow_insecure_bearer"], true);
    let r = translate(&serde_saphyr::from_str("bbb:\n  auth2_0: \"true\"\n").unwrap());
    assert_eq!(r.keys["delivery"]["auth"], "bearer");
    let r = translate(&serde_saphyr::from_str("bbb:\n  auth2_0: maybe\n").unwrap());
    assert!(r.keys.is_empty());
    assert_eq!(r.ignored, ["bbb.auth2_0"]);
    // Plain URLs are taken; an entry that is neither leaves the whole list unused.
    let out = "modules:\n  \"../out/webhooks/index.js\":\n    config:\n      permanentURLs:\n";
    let r = translate(
        &serde_saphyr::from_str(&format!("{out}        - https://a.example/x\n")).unwrap(),
    );
    assert_eq!(
        r.keys["delivery"]["permanent_hooks"],
        json!([{"url": "https://a.example/x", "get_raw": false}])
    );
    let r = translate(
        &serde_saphyr::from_str(&format!(
            "{out}        - https://a.example/x\n        - 7\n"
        ))
        .unwrap(),
    );
    assert!(r.keys.is_empty());
    assert_eq!(
        r.ignored,
        ["modules.../out/webhooks/index.js.config.permanentURLs"]
    );
}

#[test]
fn a_2x_raw_switch_gives_plain_permanent_urls_their_form_and_turns_raw_off() {
    let plain = translate(
        &serde_saphyr::from_str(
            "hooks:\n  getRaw: true\n  permanentURLs:\n    - https://a.example/x\n",
        )
        .unwrap(),
    );
    assert_eq!(
        plain.keys["delivery"]["permanent_hooks"],
        json!([{"url": "https://a.example/x", "get_raw": true}])
    );
    assert!(plain.ignored.is_empty(), "{:?}", plain.ignored);
    let off = translate(
        &serde_saphyr::from_str(
            "hooks:\n  getRaw: false\n  permanentURLs:\n    - url: https://a.example/x\n      getRaw: true\n",
        )
        .unwrap(),
    );
    assert_eq!(
        off.keys["delivery"]["permanent_hooks"],
        json!([{"url": "https://a.example/x", "get_raw": false}])
    );
}
