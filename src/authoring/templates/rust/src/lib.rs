//! {{name}}: a hookrelay plugin. It drops chat messages (unless `keep_chat = true` in its
//! settings) and adds the configured `site` to `user-joined` events. Edit `on_event` to make
//! it yours; `hookrelay plugin test` runs the cases in tests/.

// The bindings of the interface in wit/ (`path` is relative to Cargo.toml).
wit_bindgen::generate!({ world: "plugin", path: "wit" });

use bbb::relay::host::{get_config, log};
// Event, Hook, Action, Level (a glob: the generated code also defines some of these names at
// the crate root).
use bbb::relay::types::*;
use serde_json::Value;

struct Plugin;

impl Guest for Plugin {
    /// Runs once per instance. The ids returned are the only events `on_event` sees; the
    /// others pass this plugin untouched (the cheapest filter there is).
    fn init() -> Result<Vec<String>, String> {
        log(Level::Info, "{{name}} ready");
        Ok(vec!["user-joined".into(), "chat-group-message-sent".into()])
    }

    /// Decides, for one event and one hook, what is sent: keep, replace(json) or drop.
    fn on_event(event: Event, hook: Hook) -> Action {
        if event.id == "chat-group-message-sent" {
            // Config values come as text: strings as they are, booleans as `true`/`false`.
            let keep = get_config("keep_chat").is_some_and(|v| v == "true");
            return if keep { Action::Keep } else { Action::Drop };
        }
        // A raw hook gets the bus message as BBB sent it: leave it alone.
        if hook.get_raw {
            return Action::Keep;
        }
        let Some(site) = get_config("site") else {
            return Action::Keep;
        };
        let Ok(mut json) = serde_json::from_str::<Value>(&event.processed) else {
            return Action::Keep;
        };
        match json.pointer_mut("/data/attributes") {
            Some(Value::Object(attributes)) => {
                attributes.insert("site".into(), Value::String(site));
                Action::Replace(json.to_string())
            }
            _ => Action::Keep,
        }
    }
}

export!(Plugin);
