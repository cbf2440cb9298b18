//! Test plugin: on the events whose id equals config `on` (every event when `on` is unset)
//! it allocates 4 MiB blocks and keeps them, until the relay's memory limit
//! makes an allocation fail (the instance then traps). Other events: `keep`.

wit_bindgen::generate!({ world: "plugin", path: "../../../wit" });

use bbb::relay::host::get_config;
// Event, Hook, Action and Level. (A glob: the world re-exports the first three at the crate
// root too, and an explicit import of those names would clash with that.)
#[allow(unused_imports)]
use bbb::relay::types::*;
use std::sync::{Mutex, OnceLock};

const BLOCK: usize = 4 << 20;

static ON: OnceLock<Option<String>> = OnceLock::new();

/// Everything allocated stays reachable here, so nothing can be freed or elided.
static HOARD: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

fn triggers(id: &str) -> bool {
    match ON.get() {
        Some(Some(on)) => on == id,
        _ => true,
    }
}

struct MemoryBomb;

impl Guest for MemoryBomb {
    fn init() -> Result<Vec<String>, String> {
        let _ = ON.set(get_config("on"));
        Ok(Vec::new())
    }

    fn on_event(event: Event, _hook: Hook) -> Action {
        if triggers(&event.id) {
            let mut hoard = HOARD
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            loop {
                // Touch one byte per 64 KiB WebAssembly page: the memory grows as fast as the
                // allocator asks for it, so the limit is hit long before any deadline.
                let mut block = vec![0u8; BLOCK];
                for page in block.chunks_mut(1 << 16) {
                    page[0] = 1;
                }
                hoard.push(core::hint::black_box(block));
            }
        }
        Action::Keep
    }
}

export!(MemoryBomb);
