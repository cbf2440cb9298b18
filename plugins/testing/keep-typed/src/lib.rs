//! Benchmark plugin: looks only at the typed `event.id` (no JSON work) and keeps every
//! event, except one with the id "never-seen-event", which it drops.

wit_bindgen::generate!({ world: "plugin", path: "../../../wit" });

// Event, Hook, Action and Level. (A glob: the world re-exports the first three at the crate
// root too, and an explicit import of those names would clash with that.)
#[allow(unused_imports)]
use bbb::relay::types::*;

struct KeepTyped;

impl Guest for KeepTyped {
    fn init() -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }

    fn on_event(event: Event, _hook: Hook) -> Action {
        if event.id == "never-seen-event" {
            Action::Drop
        } else {
            Action::Keep
        }
    }
}

export!(KeepTyped);
