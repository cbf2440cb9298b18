//! Test plugin: spins forever on the events whose id equals config `on` (every event when
//! `on` is unset), so that the relay's epoch deadline has to stop it. Other events: `keep`.

wit_bindgen::generate!({ world: "plugin", path: "../../../wit" });

use bbb::relay::host::get_config;
// Event, Hook, Action and Level. (A glob: the world re-exports the first three at the crate
// root too, and an explicit import of those names would clash with that.)
#[allow(unused_imports)]
use bbb::relay::types::*;
use std::sync::OnceLock;

static ON: OnceLock<Option<String>> = OnceLock::new();

fn triggers(id: &str) -> bool {
    match ON.get() {
        Some(Some(on)) => on == id,
        _ => true,
    }
}

struct Loop;

impl Guest for Loop {
    fn init() -> Result<Vec<String>, String> {
        let _ = ON.set(get_config("on"));
        Ok(Vec::new())
    }

    fn on_event(event: Event, _hook: Hook) -> Action {
        if triggers(&event.id) {
            let mut spins: u64 = 0;
            loop {
                // black_box keeps the optimizer from reasoning the loop away.
                spins = core::hint::black_box(spins.wrapping_add(1));
            }
        }
        Action::Keep
    }
}

export!(Loop);
