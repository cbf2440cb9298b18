//! Test plugin: traps on the events whose id equals config `on` (every event when `on` is
//! unset). Other events: `keep`.

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

fn trap() -> ! {
    #[cfg(target_arch = "wasm32")]
    core::arch::wasm32::unreachable();
    #[cfg(not(target_arch = "wasm32"))]
    panic!("trap plugin: trapping on purpose");
}

struct Trap;

impl Guest for Trap {
    fn init() -> Result<Vec<String>, String> {
        let _ = ON.set(get_config("on"));
        Ok(Vec::new())
    }

    fn on_event(event: Event, _hook: Hook) -> Action {
        if triggers(&event.id) {
            trap();
        }
        Action::Keep
    }
}

export!(Trap);
