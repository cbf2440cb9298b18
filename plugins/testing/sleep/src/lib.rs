//! Test plugin: on the events whose id equals config `on` (every event when `on` is unset) it
//! sleeps for an hour. A sleep waits inside the host, where no epoch deadline reaches, so the
//! relay must refuse it (the call traps). Other events: `keep`.

wit_bindgen::generate!({ world: "plugin", path: "../../../wit" });

use bbb::relay::host::get_config;
// Event, Hook, Action and Level. (A glob: the world re-exports the first three at the crate
// root too, and an explicit import of those names would clash with that.)
#[allow(unused_imports)]
use bbb::relay::types::*;
use std::{sync::OnceLock, time::Duration};

static ON: OnceLock<Option<String>> = OnceLock::new();

struct Sleep;

impl Guest for Sleep {
    fn init() -> Result<Vec<String>, String> {
        let _ = ON.set(get_config("on"));
        Ok(Vec::new())
    }

    fn on_event(event: Event, _hook: Hook) -> Action {
        let triggers = match ON.get() {
            Some(Some(on)) => *on == event.id,
            _ => true,
        };
        if triggers {
            std::thread::sleep(Duration::from_secs(3600));
        }
        Action::Keep
    }
}

export!(Sleep);
