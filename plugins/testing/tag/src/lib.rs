//! Test plugin for chain order: appends config `tag` to the array at the payload's
//! top-level key "chain" (created when missing) and returns `replace`. Like the other test
//! plugins it acts only on events whose id equals config `on` (every event when unset).
//! With `invalid = true` it replaces with text that is not JSON instead.
//!
//! Built against the interface's first version, `wit/0.1.0`, so that the tests that use it
//! (hot reload, isolation, chains beside 0.2.0 plugins) show 0.1.0 plugins loading unchanged.

wit_bindgen::generate!({ world: "plugin", path: "../../../wit/0.1.0" });

use bbb::relay::host::{get_config, log};
// Event, Hook, Action and Level. (A glob: the world re-exports the first three at the crate
// root too, and an explicit import of those names would clash with that.)
use bbb::relay::types::*;
use serde_json::Value;
use std::sync::OnceLock;

struct Settings {
    tag: String,
    on: Option<String>,
    /// Config `invalid = true`: answer `replace` with text that is not JSON (the relay must
    /// treat it as a failure).
    invalid: bool,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

fn payload<'a>(event: &'a Event, hook: &Hook) -> &'a str {
    if hook.get_raw {
        &event.raw
    } else {
        &event.processed
    }
}

struct Tag;

impl Guest for Tag {
    fn init() -> Result<Vec<String>, String> {
        let tag = get_config("tag")
            .ok_or_else(|| "tag plugin: set `tag` in the [config] table".to_string())?;
        let _ = SETTINGS.set(Settings {
            tag,
            on: get_config("on"),
            invalid: get_config("invalid").as_deref() == Some("true"),
        });
        Ok(Vec::new())
    }

    fn on_event(event: Event, hook: Hook) -> Action {
        let Some(settings) = SETTINGS.get() else {
            return Action::Keep;
        };
        if settings.on.as_deref().is_some_and(|on| on != event.id) {
            return Action::Keep;
        }
        if settings.invalid {
            return Action::Replace("{this is not json".to_string());
        }
        let mut value: Value = match serde_json::from_str(payload(&event, &hook)) {
            Ok(value) => value,
            Err(e) => {
                log(
                    Level::Warn,
                    &format!("tag plugin: payload is not JSON ({e})"),
                );
                return Action::Keep;
            }
        };
        let Some(object) = value.as_object_mut() else {
            log(Level::Warn, "tag plugin: payload is not a JSON object");
            return Action::Keep;
        };
        let chain = object
            .entry("chain")
            .or_insert_with(|| Value::Array(Vec::new()));
        let Some(chain) = chain.as_array_mut() else {
            log(Level::Warn, "tag plugin: \"chain\" is not an array");
            return Action::Keep;
        };
        chain.push(Value::String(settings.tag.clone()));
        Action::Replace(value.to_string())
    }
}

export!(Tag);
