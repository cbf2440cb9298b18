//! The reference service's YAML configuration (`--reference-config`, bbb-webhooks 3.x
//! `config/default.yml` or `production.yml`): the keys hookrelay understands become its own,
//! under the TOML file and the environment; every other key is named as ignored.

use serde_json::{Map, Value, json};

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

/// The reference's leaves (dotted path, value), and the paths of those taken so far.
struct Leaves {
    all: Vec<(String, Value)>,
    used: Vec<String>,
}

impl Leaves {
    /// The value at dotted path `k`, marked used when there is one.
    fn take(&mut self, k: &str) -> Option<Value> {
        let v = self
            .all
            .iter()
            .find(|(p, _)| p == k)
            .map(|(_, v)| v.clone());
        if v.is_some() {
            self.used.push(k.to_string());
        }
        v
    }
}

/// Maps the reference's keys to hookrelay's.
pub fn translate(yaml: &Value) -> Reference {
    let mut all = Vec::new();
    leaves(yaml, "", &mut all);
    let mut from = Leaves {
        all,
        used: Vec::new(),
    };
    let mut r = Reference::default();
    // Values of the wrong shape are not used, and are named with the ignored keys.
    let mut rejected: Vec<String> = Vec::new();
    translate_bbb(&mut from, &mut r.keys, &mut rejected);
    translate_bus(&mut from, &mut r.keys);
    translate_api_and_delivery(&mut from, &mut r.keys);
    translate_xapi(&mut from, &mut r.keys);
    translate_permanent_urls(&mut from, &mut r.keys, &mut rejected);
    let Leaves { all, used } = from;
    r.ignored = all
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| !used.contains(p) || rejected.contains(p))
        .collect();
    r
}

/// The `bbb` section: the shared secret, the server's domain, and bearer mode (`auth2_0`).
fn translate_bbb(from: &mut Leaves, keys: &mut Map<String, Value>, rejected: &mut Vec<String>) {
    if let Some(v) = from.take("bbb.sharedSecret").as_ref().and_then(text) {
        set(keys, "bbb.secret", json!(v));
    }
    if let Some(v) = from.take("bbb.serverDomain").as_ref().and_then(text) {
        set(keys, "bbb.server_domain", json!(v));
    }
    match from.take("bbb.auth2_0") {
        None => {}
        Some(v) => match v
            .as_bool()
            .or_else(|| v.as_str().and_then(|t| t.parse().ok()))
        {
            Some(bearer) => {
                set(
                    keys,
                    "delivery.auth",
                    json!(if bearer { "bearer" } else { "checksum" }),
                );
                // bbb-webhooks sent its bearer token to http:// receivers too (its package
                // turns bearer mode on): they keep getting their callbacks.
                if bearer {
                    set(keys, "delivery.allow_insecure_bearer", json!(true));
                }
            }
            None => rejected.push("bbb.auth2_0".into()),
        },
    }
}

/// The bus connection: the input module's, else the top-level redis section; and the
/// channels it listens to.
fn translate_bus(from: &mut Leaves, keys: &mut Map<String, Value>) {
    let host = from
        .take(&format!("{IN}.redis.host"))
        .or_else(|| from.take("redis.host"))
        .or_else(|| from.take(&format!("{DB}.host")));
    let port = from
        .take(&format!("{IN}.redis.port"))
        .or_else(|| from.take("redis.port"))
        .or_else(|| from.take(&format!("{DB}.port")));
    let password = from
        .take(&format!("{IN}.redis.password"))
        .or_else(|| from.take("redis.password"));
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
            keys,
            "redis.url",
            json!(format!("redis://{auth}{host}:{port}")),
        );
    }
    // 2.x names, where 3.x has none: hooks.channels, server.bind/port, hooks.permanentURLs,
    // hooks.retryIntervals, hooks.requestTimeout.
    if let Some(v @ Value::Array(_)) = from
        .take(&format!("{IN}.redis.inboundChannels"))
        .or_else(|| from.take("hooks.channels"))
    {
        set(keys, "redis.channels", v);
    }
}

/// The output module's API (address, checksum algorithms) and delivery settings (checksum,
/// retries, timeout, event filters).
fn translate_api_and_delivery(from: &mut Leaves, keys: &mut Map<String, Value>) {
    let bind = from
        .take(&format!("{OUT}.api.bind"))
        .or_else(|| from.take("server.bind"))
        .as_ref()
        .and_then(text);
    let port = from
        .take(&format!("{OUT}.api.port"))
        .or_else(|| from.take("server.port"))
        .as_ref()
        .and_then(text);
    if bind.is_some() || port.is_some() {
        let bind = bind.unwrap_or_else(|| "127.0.0.1".into());
        let port = port.unwrap_or_else(|| "3005".into());
        set(keys, "api.bind", json!(format!("{bind}:{port}")));
    }
    if let Some(v @ Value::Array(_)) = from.take(&format!("{OUT}.api.supportedChecksumAlgorithms"))
    {
        set(keys, "api.checksum_algorithms", v);
    }
    if let Some(v) = from.take(&format!("{OUT}.hookChecksumAlgorithm")) {
        set(keys, "delivery.checksum_algorithm", v);
    }
    if let Some(v @ Value::Array(_)) = from
        .take(&format!("{OUT}.retryIntervals"))
        .or_else(|| from.take("hooks.retryIntervals"))
    {
        set(keys, "delivery.retry_intervals_ms", v);
    }
    if let Some(v) = from
        .take(&format!("{OUT}.requestTimeout"))
        .or_else(|| from.take("hooks.requestTimeout"))
    {
        set(keys, "delivery.request_timeout_ms", v);
    }
    for (theirs, ours) in [
        ("includeEvents", "delivery.include_events"),
        ("excludeEvents", "delivery.exclude_events"),
    ] {
        if let Some(v @ Value::Array(_)) = from.take(&format!("{OUT}.{theirs}")) {
            set(keys, ours, v);
        }
    }
}

/// The xAPI module: on when present, unless `enabled: false`.
fn translate_xapi(from: &mut Leaves, keys: &mut Map<String, Value>) {
    if !from.all.iter().any(|(k, _)| k.starts_with(XAPI)) {
        return;
    }
    let enabled = from.take(&format!("{XAPI}.enabled"));
    let on = !matches!(enabled, Some(Value::Bool(false)));
    set(keys, "xapi.enabled", json!(on));
    let _ = from.take(&format!("{XAPI}.type"));
    for (theirs, ours) in [
        ("config.lrs.lrs_endpoint", "xapi.lrs_endpoint"),
        ("config.lrs.lrs_username", "xapi.lrs_username"),
        ("config.lrs.lrs_password", "xapi.lrs_password"),
        ("config.uuid_namespace", "xapi.uuid_namespace"),
        ("config.server.domain", "xapi.server_domain"),
    ] {
        if let Some(v) = from
            .take(&format!("{XAPI}.{theirs}"))
            .as_ref()
            .and_then(text)
        {
            set(keys, ours, json!(v));
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
        let _ = from.take(&format!("{XAPI}.config.redis.keys.{k}"));
    }
}

/// The permanent hooks: the output module's `permanentURLs`, else 2.x's, with 2.x's
/// `hooks.getRaw` switch.
fn translate_permanent_urls(
    from: &mut Leaves,
    keys: &mut Map<String, Value>,
    rejected: &mut Vec<String>,
) {
    let mut permanent = format!("{OUT}.permanentURLs");
    let mut urls = from.take(&permanent);
    if urls.is_none() {
        permanent = "hooks.permanentURLs".into();
        urls = from.take(&permanent);
    }
    // 2.x's `hooks.getRaw`: the raw form of its plain permanent URLs, and a switch without
    // which no hook got raw messages (its package set it to false).
    let raw_switch = from.take("hooks.getRaw").and_then(|v| {
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
                Some(hooks) => set(keys, "delivery.permanent_hooks", Value::Array(hooks)),
                // Taking some would remove the stored permanent hooks of the others.
                None => rejected.push(permanent.clone()),
            }
        }
        Some(_) => rejected.push(permanent.clone()),
    }
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
mod tests;
