//! `[[destinations]]`: message brokers (NATS JetStream, AMQP, MQTT) and files that get events
//! as hooks do, set by the operator only (`docs/destinations.md`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::base::secret::SecretUrl;

/// The placeholders a `target` may hold.
pub const PLACEHOLDERS: [&str; 4] = ["{event}", "{meeting}", "{tenant}", "{server}"];

/// What kind of broker a destination's `url` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DestinationKind {
    /// `nats://` or `tls://`: NATS JetStream.
    Nats,
    /// `amqp://` or `amqps://`: RabbitMQ and other AMQP 0-9-1 brokers.
    Amqp,
    /// `mqtt://` or `mqtts://`: MQTT 5.
    Mqtt,
    /// `file:///path`: one JSON object a line.
    File,
}

impl DestinationKind {
    /// The kind of `scheme`; `None` for a scheme no destination speaks.
    pub fn of_scheme(scheme: &str) -> Option<Self> {
        Some(match scheme {
            "nats" | "tls" => Self::Nats,
            "amqp" | "amqps" => Self::Amqp,
            "mqtt" | "mqtts" => Self::Mqtt,
            "file" => Self::File,
            _ => return None,
        })
    }

    /// The name metrics and `hookrelay destinations` show.
    pub fn name(self) -> &'static str {
        match self {
            Self::Nats => "nats",
            Self::Amqp => "amqp",
            Self::Mqtt => "mqtt",
            Self::File => "file",
        }
    }
}

/// One destination.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DestinationConfig {
    /// Its name, in metrics, logs and `hookrelay destinations`: letters, digits, `-`, `_`, `.`.
    pub name: String,
    /// `nats://[user:password@]host:4222` (`tls://` for TLS), `amqp(s)://user:password@host/vhost`,
    /// `mqtt(s)://[user:password@]host:1883`, `file:///var/log/hookrelay/events.jsonl`. Its
    /// password is never shown.
    pub url: SecretUrl,
    /// A file holding the password (Docker's and Kubernetes' secrets); it replaces the URL's.
    pub password_file: Option<PathBuf>,
    /// Where each message goes, with `{event}`, `{meeting}` (external id), `{tenant}` and
    /// `{server}` filled in: the NATS subject, `exchange/routing key` for AMQP, the MQTT
    /// topic. Not used by files.
    pub target: String,
    /// Event ids sent (as a hook's eventID); absent: all.
    pub events: Option<Vec<String>>,
    /// External meeting ids whose events are sent; absent: every meeting's.
    pub meetings: Option<Vec<String>>,
    /// Bus messages as a raw hook (`getRaw`) gets them, instead of processed events.
    pub raw: bool,
    /// Plugins of the plugin folder (their file names without `.wasm`, e.g. `30-rules`) that
    /// keep, replace or drop each message, in the folder's order, whatever their `[scope]`.
    pub plugins: Vec<String>,
    /// PEM file of the CAs the broker's certificate must chain to; unset: the system's roots.
    pub ca_file: Option<PathBuf>,
    /// One publish's time limit, its confirmation included.
    pub publish_timeout_ms: u64,
    /// Waits between tries of a message the broker did not confirm; the last repeats without
    /// end: a destination is never given up.
    pub retry_intervals_ms: Vec<u64>,
    /// Most messages queued; more are refused (logged, counted).
    pub max_queue: usize,
}

impl Default for DestinationConfig {
    fn default() -> Self {
        Self {
            name: String::new(),
            url: SecretUrl::new(""),
            password_file: None,
            target: String::new(),
            events: None,
            meetings: None,
            raw: false,
            plugins: Vec::new(),
            ca_file: None,
            publish_timeout_ms: 10_000,
            retry_intervals_ms: vec![500, 1_000, 2_000, 5_000, 10_000, 30_000],
            max_queue: 1_000_000,
        }
    }
}

impl DestinationConfig {
    /// The kind its URL names (checked by [`validate`]).
    pub fn kind(&self) -> Option<DestinationKind> {
        let url = url::Url::parse(self.url.expose()).ok()?;
        DestinationKind::of_scheme(url.scheme())
    }
}

/// Checks the destinations: names, URLs, targets and limits.
///
/// # Errors
/// Names the first `destinations[i].` key whose value is unusable.
pub fn validate(destinations: &[DestinationConfig]) -> Result<(), String> {
    let mut names = std::collections::HashSet::new();
    for (i, d) in destinations.iter().enumerate() {
        let key = |k: &str| format!("destinations[{i}].{k}");
        if d.name.is_empty()
            || !d
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(format!(
                "{}: must be letters, digits, '-', '_' or '.'",
                key("name")
            ));
        }
        if !names.insert(d.name.as_str()) {
            return Err(format!("{}: \"{}\" is used twice", key("name"), d.name));
        }
        let url = url::Url::parse(d.url.expose())
            .map_err(|e| format!("{}: not a URL ({e})", key("url")))?;
        let Some(kind) = DestinationKind::of_scheme(url.scheme()) else {
            return Err(format!(
                "{}: the scheme must be nats, tls, amqp, amqps, mqtt, mqtts or file, not {}",
                key("url"),
                url.scheme()
            ));
        };
        if kind == DestinationKind::File {
            if url.host_str().is_some_and(|h| !h.is_empty()) || url.path().ends_with('/') {
                return Err(format!(
                    "{}: must be file:/// and a file's absolute path",
                    key("url")
                ));
            }
        } else {
            if url.host_str().is_none_or(str::is_empty) {
                return Err(format!("{}: names no host", key("url")));
            }
            validate_target(kind, &d.target).map_err(|why| format!("{}: {why}", key("target")))?;
        }
        if d.retry_intervals_ms.is_empty() {
            return Err(format!(
                "{}: must hold at least one interval",
                key("retry_intervals_ms")
            ));
        }
        if d.publish_timeout_ms == 0 || d.max_queue == 0 {
            return Err(format!(
                "destinations[{i}]: publish_timeout_ms and max_queue must be greater than 0"
            ));
        }
        for (k, list) in [("events", &d.events), ("meetings", &d.meetings)] {
            if list.as_ref().is_some_and(Vec::is_empty) {
                return Err(format!(
                    "{}: an empty list sends nothing; leave it out to send all",
                    key(k)
                ));
            }
        }
    }
    Ok(())
}

/// Checks a broker's `target`: present, only known placeholders, and (AMQP) an exchange.
fn validate_target(kind: DestinationKind, target: &str) -> Result<(), String> {
    if target.is_empty() {
        return Err("must be set (the subject, exchange/routing key or topic)".into());
    }
    let mut rest = target;
    while let Some(at) = rest.find('{') {
        let end = rest[at..]
            .find('}')
            .ok_or_else(|| format!("an unclosed '{{' in {target:?}"))?;
        let name = &rest[at..at + end + 1];
        if !PLACEHOLDERS.contains(&name) {
            return Err(format!(
                "unknown placeholder {name}; known: {}",
                PLACEHOLDERS.join(", ")
            ));
        }
        rest = &rest[at + end + 1..];
    }
    if kind == DestinationKind::Amqp && !target.contains('/') {
        return Err("must be \"exchange/routing key\"".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(url: &str, target: &str) -> Result<(), String> {
        validate(&[DestinationConfig {
            name: "d".into(),
            url: SecretUrl::new(url),
            target: target.into(),
            ..DestinationConfig::default()
        }])
    }

    #[test]
    fn urls_and_targets_are_checked_with_their_key() {
        assert_eq!(one("nats://127.0.0.1:4222", "bbb.{event}"), Ok(()));
        assert_eq!(one("amqps://u:p@host/vh", "bbb/{server}.{event}"), Ok(()));
        assert_eq!(one("mqtt://host", "bbb/{meeting}/{event}"), Ok(()));
        assert_eq!(one("file:///var/log/e.jsonl", ""), Ok(()));
        let err = |url, target| one(url, target).expect_err("refused");
        assert!(err("kafka://host", "t").starts_with("destinations[0].url: the scheme"));
        assert!(err("not a url", "t").starts_with("destinations[0].url: not a URL"));
        assert!(err("file://host/e.jsonl", "").starts_with("destinations[0].url"));
        assert!(err("file:///var/log/", "").starts_with("destinations[0].url"));
        assert!(err("nats://host", "").starts_with("destinations[0].target: must be set"));
        assert!(err("nats://host", "a.{user}").contains("unknown placeholder {user}"));
        assert!(err("nats://host", "a.{event").contains("unclosed"));
        assert!(err("amqp://host", "{event}").contains("exchange/routing key"));
    }

    #[test]
    fn names_are_plain_and_unique() {
        let d = |name: &str| DestinationConfig {
            name: name.into(),
            url: SecretUrl::new("file:///tmp/e.jsonl"),
            ..DestinationConfig::default()
        };
        assert!(validate(&[d("a b")]).is_err());
        assert!(validate(&[d("")]).is_err());
        let twice = validate(&[d("a"), d("a")]).expect_err("refused");
        assert!(twice.contains("destinations[1].name"), "{twice}");
        assert_eq!(validate(&[d("a"), d("b.c-d_e")]), Ok(()));
    }
}
