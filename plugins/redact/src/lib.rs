//! Removes or masks, anywhere in the payload, every object member whose key is in `fields`.
//!
//! Config (`[config]` of NAME.toml):
//! * `fields`: array of keys (or a comma-separated string); default `["name", "ip-address", "ipAddress"]`.
//! * `mode`: `"mask"` (default) or `"remove"`.
//! * `mask`: the string put in place of a masked value; default `"***"`.

wit_bindgen::generate!({ world: "plugin", path: "../../wit" });

use bbb::relay::host::{get_config, log};
// Event, Hook, Action and Level. (A glob: the world re-exports the first three at the crate
// root too, and an explicit import of those names would clash with that.)
use bbb::relay::types::*;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::OnceLock;

const DEFAULT_FIELDS: &[&str] = &["name", "ip-address", "ipAddress"];
const DEFAULT_MASK: &str = "***";

enum Mode {
    Mask(Value),
    Remove,
}

struct Settings {
    fields: HashSet<String>,
    mode: Mode,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

fn load_settings() -> Result<Settings, String> {
    let fields: HashSet<String> = match get_config("fields") {
        None => DEFAULT_FIELDS.iter().map(|s| s.to_string()).collect(),
        Some(raw) => {
            let raw = raw.trim();
            let list: Vec<String> = if raw.starts_with('[') {
                serde_json::from_str(raw).map_err(|e| {
                    format!("redact: `fields` must be an array of key strings ({e})")
                })?
            } else {
                raw.split(',').map(str::to_string).collect()
            };
            list.into_iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        }
    };
    if fields.is_empty() {
        return Err("redact: `fields` is empty, so there is nothing to redact".to_string());
    }
    let mode = match get_config("mode").as_deref().map(str::trim) {
        None | Some("mask") => Mode::Mask(Value::String(
            get_config("mask").unwrap_or_else(|| DEFAULT_MASK.to_string()),
        )),
        Some("remove") => Mode::Remove,
        Some(other) => {
            return Err(format!(
                "redact: `mode` must be \"mask\" or \"remove\", not {other:?}"
            ));
        }
    };
    Ok(Settings { fields, mode })
}

/// The payload this hook is about to receive.
fn payload<'a>(event: &'a Event, hook: &Hook) -> &'a str {
    if hook.get_raw {
        &event.raw
    } else {
        &event.processed
    }
}

/// Walks `value` and redacts matching members; returns true if anything changed.
fn redact(value: &mut Value, settings: &Settings) -> bool {
    let mut changed = false;
    match value {
        Value::Object(map) => {
            match &settings.mode {
                Mode::Remove => {
                    let before = map.len();
                    // `retain` keeps the order of the remaining keys.
                    map.retain(|key, _| !settings.fields.contains(key));
                    changed |= map.len() != before;
                }
                Mode::Mask(mask) => {
                    for (key, member) in map.iter_mut() {
                        if settings.fields.contains(key) && *member != *mask {
                            *member = mask.clone();
                            changed = true;
                        }
                    }
                }
            }
            for (key, member) in map.iter_mut() {
                // A masked member holds the mask now; nothing to look into.
                if !settings.fields.contains(key) {
                    changed |= redact(member, settings);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                changed |= redact(item, settings);
            }
        }
        _ => {}
    }
    changed
}

struct Redact;

impl Guest for Redact {
    fn init() -> Result<Vec<String>, String> {
        let settings = load_settings()?;
        let _ = SETTINGS.set(settings);
        Ok(Vec::new())
    }

    fn on_event(event: Event, hook: Hook) -> Action {
        let Some(settings) = SETTINGS.get() else {
            return Action::Keep;
        };
        let mut value: Value = match serde_json::from_str(payload(&event, &hook)) {
            Ok(value) => value,
            Err(e) => {
                log(
                    Level::Warn,
                    &format!(
                        "redact: payload of {} is not valid JSON ({e}); left as is",
                        event.id
                    ),
                );
                return Action::Keep;
            }
        };
        if redact(&mut value, settings) {
            match serde_json::to_string(&value) {
                Ok(text) => Action::Replace(text),
                Err(e) => {
                    // Never send the unredacted payload.
                    log(
                        Level::Error,
                        &format!("redact: cannot serialize the result ({e}); dropped"),
                    );
                    Action::Drop
                }
            }
        } else {
            Action::Keep
        }
    }
}

export!(Redact);
