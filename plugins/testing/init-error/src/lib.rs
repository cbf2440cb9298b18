//! Test plugin: `init` always fails, so the relay must reject it.

wit_bindgen::generate!({ world: "plugin", path: "../../../wit" });

// Event, Hook, Action and Level. (A glob: the world re-exports the first three at the crate
// root too, and an explicit import of those names would clash with that.)
#[allow(unused_imports)]
use bbb::relay::types::*;

struct InitError;

impl Guest for InitError {
    fn init() -> Result<Vec<String>, String> {
        Err("init-error plugin always refuses to start".to_string())
    }

    fn on_event(_event: Event, _hook: Hook) -> Action {
        Action::Keep
    }
}

export!(InitError);
