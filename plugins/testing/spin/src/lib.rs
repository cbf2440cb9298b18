//! Test plugin: on every event, counts to config `spins` (default 7,000,000: about 10 ms on
//! the benchmark machine), then keeps the event. A plugin that costs CPU on every call without
//! ever reaching its deadline, unlike `loop`, whose every call ends in a trap. `init` counts to
//! config `init_spins` (default 0) first: a plugin slow to start.

wit_bindgen::generate!({ world: "plugin", path: "../../../wit" });

use bbb::relay::host::get_config;
#[allow(unused_imports)]
use bbb::relay::types::*;
use std::sync::OnceLock;

static SPINS: OnceLock<u64> = OnceLock::new();

struct Spin;

impl Guest for Spin {
    fn init() -> Result<Vec<String>, String> {
        let spins = get_config("spins")
            .and_then(|s| s.parse().ok())
            .unwrap_or(7_000_000);
        let _ = SPINS.set(spins);
        count_to(
            get_config("init_spins")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
        );
        Ok(Vec::new())
    }

    fn on_event(_event: Event, _hook: Hook) -> Action {
        count_to(SPINS.get().copied().unwrap_or(0));
        Action::Keep
    }
}

fn count_to(n: u64) {
    let mut spins: u64 = 0;
    while spins < n {
        // black_box keeps the optimizer from reasoning the loop away.
        spins = core::hint::black_box(spins.wrapping_add(1));
    }
}

export!(Spin);
