//! Benchmark plugin: parses the payload, adds `"relayed": true` at the top level and
//! returns the re-serialized JSON.

wit_bindgen::generate!({ world: "plugin", path: "../../../wit" });

use bbb::relay::host::log;
// Event, Hook, Action and Level. (A glob: the world re-exports the first three at the crate
// root too, and an explicit import of those names would clash with that.)
use bbb::relay::types::*;
use serde_json::Value;

fn payload<'a>(event: &'a Event, hook: &Hook) -> &'a str {
    if hook.get_raw {
        &event.raw
    } else {
        &event.processed
    }
}

struct ReplaceJson;

impl Guest for ReplaceJson {
    fn init() -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }

    fn on_event(event: Event, hook: Hook) -> Action {
        let mut value: Value = match serde_json::from_str(payload(&event, &hook)) {
            Ok(value) => value,
            Err(e) => {
                log(
                    Level::Warn,
                    &format!("replace-json: payload is not JSON ({e})"),
                );
                return Action::Keep;
            }
        };
        let Some(object) = value.as_object_mut() else {
            return Action::Keep;
        };
        object.insert("relayed".to_string(), Value::Bool(true));
        Action::Replace(value.to_string())
    }
}

export!(ReplaceJson);
