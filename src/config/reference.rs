//! The reference service's YAML configuration (`--reference-config`, bbb-webhooks 3.x
//! `config/default.yml` or `production.yml`): the keys hookrelay understands become its own,
//! under the TOML file and the environment; every other key is named as ignored.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::ConfigError;

/// The reference's settings as hookrelay keys, and the reference keys that were not used.
#[derive(Debug, Default, PartialEq)]
pub struct Reference {
    pub keys: Map<String, Value>,
    pub ignored: Vec<String>,
}

/// Where the reference keeps the settings of its modules.
const IN: &str = "modules.../in/redis/index.js.config";
const OUT: &str = "modules.../out/webhooks/index.js.config";
const DB: &str = "modules.../db/redis/index.js.config";
const XAPI: &str = "modules.../out/xapi/index.js";

/// Reads one reference configuration file.
///
/// # Errors
/// When the file cannot be read or is not YAML.
pub fn read(path: &Path) -> Result<Reference, ConfigError> {
    Ok(translate(&super::reference_files::read_yaml(path)?))
}

/// Every leaf of `v` with its dotted path (arrays are leaves).
fn leaves(v: &Value, prefix: &str, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(v, &path, out);
            }
        }
        other => out.push((prefix.to_string(), other.clone())),
    }
}

fn set(keys: &mut Map<String, Value>, dotted: &str, value: Value) {
    let mut parts = dotted.split('.').peekable();
    let mut map = keys;
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            map.insert(part.to_string(), value);
            return;
        }
        let entry = map
            .entry(part.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        let Value::Object(next) = entry else { return };
        map = next;
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Maps the reference's keys to hookrelay's.
pub fn translate(yaml: &Value) -> Reference {
    let mut all = Vec::new();
    leaves(yaml, "", &mut all);
    let get = |k: &str| all.iter().find(|(p, _)| p == k).map(|(_, v)| v.clone());
    let mut r = Reference::default();
    let mut used: Vec<String> = Vec::new();
    let mut take = |k: &str| {
        let v = get(k);
        if v.is_some() {
            used.push(k.to_string());
        }
        v
    };
    if let Some(v) = take("bbb.sharedSecret").as_ref().and_then(text) {
        set(&mut r.keys, "bbb.secret", json!(v));
    }
    if let Some(v) = take("bbb.serverDomain").as_ref().and_then(text) {
        set(&mut r.keys, "bbb.server_domain", json!(v));
    }
    // Values of the wrong shape are not used, and are named with the ignored keys.
    let mut rejected: Vec<String> = Vec::new();
    match take("bbb.auth2_0") {
        None => {}
        Some(v) => match v
            .as_bool()
            .or_else(|| v.as_str().and_then(|t| t.parse().ok()))
        {
            Some(bearer) => {
                set(
                    &mut r.keys,
                    "delivery.auth",
                    json!(if bearer { "bearer" } else { "checksum" }),
                );
                // bbb-webhooks sent its bearer token to http:// receivers too (its package
                // turns bearer mode on): they keep getting their callbacks.
                if bearer {
                    set(&mut r.keys, "delivery.allow_insecure_bearer", json!(true));
                }
            }
            None => rejected.push("bbb.auth2_0".into()),
        },
    }
    // The bus connection: the input module's, else the top-level redis section.
    let host = take(&format!("{IN}.redis.host"))
        .or_else(|| take("redis.host"))
        .or_else(|| take(&format!("{DB}.host")));
    let port = take(&format!("{IN}.redis.port"))
        .or_else(|| take("redis.port"))
        .or_else(|| take(&format!("{DB}.port")));
    let password = take(&format!("{IN}.redis.password")).or_else(|| take("redis.password"));
    if host.is_some() || port.is_some() {
        let host = host
            .as_ref()
            .and_then(text)
            .unwrap_or_else(|| "127.0.0.1".into());
        let port = port
            .as_ref()
            .and_then(text)
            .unwrap_or_else(|| "6379".into());
        let auth = password
            .as_ref()
            .and_then(text)
            .filter(|p| !p.is_empty())
            .map(|p| format!(":{}@", url_escape(&p)))
            .unwrap_or_default();
        set(
            &mut r.keys,
            "redis.url",
            json!(format!("redis://{auth}{host}:{port}")),
        );
    }
    // 2.x names, where 3.x has none: hooks.channels, server.bind/port, hooks.permanentURLs,
    // hooks.retryIntervals, hooks.requestTimeout.
    if let Some(v @ Value::Array(_)) =
        take(&format!("{IN}.redis.inboundChannels")).or_else(|| take("hooks.channels"))
    {
        set(&mut r.keys, "redis.channels", v);
    }
    let bind = take(&format!("{OUT}.api.bind"))
        .or_else(|| take("server.bind"))
        .as_ref()
        .and_then(text);
    let port = take(&format!("{OUT}.api.port"))
        .or_else(|| take("server.port"))
        .as_ref()
        .and_then(text);
    if bind.is_some() || port.is_some() {
        let bind = bind.unwrap_or_else(|| "127.0.0.1".into());
        let port = port.unwrap_or_else(|| "3005".into());
        set(&mut r.keys, "api.bind", json!(format!("{bind}:{port}")));
    }
    if let Some(v @ Value::Array(_)) = take(&format!("{OUT}.api.supportedChecksumAlgorithms")) {
        set(&mut r.keys, "api.checksum_algorithms", v);
    }
    if let Some(v) = take(&format!("{OUT}.hookChecksumAlgorithm")) {
        set(&mut r.keys, "delivery.checksum_algorithm", v);
    }
    if let Some(v @ Value::Array(_)) =
        take(&format!("{OUT}.retryIntervals")).or_else(|| take("hooks.retryIntervals"))
    {
        set(&mut r.keys, "delivery.retry_intervals_ms", v);
    }
    if let Some(v) = take(&format!("{OUT}.requestTimeout")).or_else(|| take("hooks.requestTimeout"))
    {
        set(&mut r.keys, "delivery.request_timeout_ms", v);
    }
    for (theirs, ours) in [
        ("includeEvents", "delivery.include_events"),
        ("excludeEvents", "delivery.exclude_events"),
    ] {
        if let Some(v @ Value::Array(_)) = take(&format!("{OUT}.{theirs}")) {
            set(&mut r.keys, ours, v);
        }
    }
    // The xAPI module: on when present, unless `enabled: false`.
    if all.iter().any(|(k, _)| k.starts_with(XAPI)) {
        let enabled = take(&format!("{XAPI}.enabled"));
        let on = !matches!(enabled, Some(Value::Bool(false)));
        set(&mut r.keys, "xapi.enabled", json!(on));
        let _ = take(&format!("{XAPI}.type"));
        for (theirs, ours) in [
            ("config.lrs.lrs_endpoint", "xapi.lrs_endpoint"),
            ("config.lrs.lrs_username", "xapi.lrs_username"),
            ("config.lrs.lrs_password", "xapi.lrs_password"),
            ("config.uuid_namespace", "xapi.uuid_namespace"),
            ("config.server.domain", "xapi.server_domain"),
        ] {
            if let Some(v) = take(&format!("{XAPI}.{theirs}")).as_ref().and_then(text) {
                set(&mut r.keys, ours, json!(v));
            }
        }
        // Its Redis keys name the reference's own state, which hookrelay does not use.
        for k in [
            "meetings",
            "meetingPrefix",
            "users",
            "userPrefix",
            "polls",
            "pollPrefix",
        ] {
            let _ = take(&format!("{XAPI}.config.redis.keys.{k}"));
        }
    }
    let mut permanent = format!("{OUT}.permanentURLs");
    let mut urls = take(&permanent);
    if urls.is_none() {
        permanent = "hooks.permanentURLs".into();
        urls = take(&permanent);
    }
    // 2.x's `hooks.getRaw`: the raw form of its plain permanent URLs, and a switch without
    // which no hook got raw messages (its package set it to false).
    let raw_switch = take("hooks.getRaw").and_then(|v| {
        v.as_bool()
            .or_else(|| v.as_str().and_then(|t| t.parse().ok()))
    });
    match urls {
        None => {}
        Some(Value::Array(urls)) => {
            // `{url, getRaw}` objects, or plain URLs.
            let hooks: Option<Vec<Value>> = urls
                .iter()
                .map(|u| match u {
                    Value::String(url) => {
                        Some(json!({"url": url, "get_raw": raw_switch.unwrap_or(false)}))
                    }
                    _ => Some(json!({
                        "url": u.get("url").and_then(Value::as_str)?,
                        "get_raw": u.get("getRaw").and_then(Value::as_bool).unwrap_or(false)
                            && raw_switch.unwrap_or(true),
                    })),
                })
                .collect();
            match hooks {
                Some(hooks) => set(&mut r.keys, "delivery.permanent_hooks", Value::Array(hooks)),
                // Taking some would remove the stored permanent hooks of the others.
                None => rejected.push(permanent.clone()),
            }
        }
        Some(_) => rejected.push(permanent.clone()),
    }
    r.ignored = all
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| !used.contains(p) || rejected.contains(p))
        .collect();
    r
}

/// A password as it must appear in a URL's user-info part.
fn url_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
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
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.yml");
        std::fs::write(&bad, "bbb: [unclosed\n").unwrap();
        let err = read(&bad).unwrap_err().to_string();
        assert!(err.starts_with("configuration: reference config "), "{err}");
        assert_eq!(err.lines().count(), 1);
        let missing = read(&dir.path().join("none.yml")).unwrap_err().to_string();
        assert!(missing.contains("none.yml"), "{missing}");
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
}
