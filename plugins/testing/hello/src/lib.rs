//! Test plugin: logs "hello" at info level in `init`, asks only for `meeting-created`, and
//! adds `"hello": <config greeting, default "world">` at the top level of the payload.

wit_bindgen::generate!({ world: "plugin", path: "../../../wit" });

use bbb::relay::host::{get_config, log};
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

struct Hello;

impl Guest for Hello {
    fn init() -> Result<Vec<String>, String> {
        log(Level::Info, "hello");
        Ok(vec!["meeting-created".to_string()])
    }

    fn on_event(event: Event, hook: Hook) -> Action {
        let mut value: Value = match serde_json::from_str(payload(&event, &hook)) {
            Ok(value) => value,
            Err(e) => {
                log(Level::Warn, &format!("hello: payload is not JSON ({e})"));
                return Action::Keep;
            }
        };
        let Some(object) = value.as_object_mut() else {
            return Action::Keep;
        };
        let greeting = get_config("greeting").unwrap_or_else(|| "world".to_string());
        object.insert("hello".to_string(), Value::String(greeting));
        Action::Replace(value.to_string())
    }
}

export!(Hello);
