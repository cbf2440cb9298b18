//! The host side of `wit/relay.wit` (0.2.0, and 0.1.0 for plugins built against it) and the
//! WASI sandbox a plugin instance runs in: what a store holds ([`State`]), the `log`,
//! `get-config`, `meeting` and `count-rule-match` imports, and WASI with no sockets, no name
//! lookups, bounded random bytes and no timers.

use std::{collections::HashMap, sync::Arc};

use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::limits::Limits;

/// Host bindings generated from `wit/relay.wit`.
pub(super) mod bindings {
    wasmtime::component::bindgen!({ world: "plugin", path: "wit" });
}

/// The host interface of 0.1.0 (`wit/0.1.0/relay.wit`), linked beside 0.2.0's so that plugins
/// built against it load unchanged. Its exports have the same types as 0.2.0's, so both are
/// called through [`bindings`].
pub(super) mod bindings_0_1 {
    wasmtime::component::bindgen!({ world: "plugin", path: "wit/0.1.0" });
}

use bindings::bbb::relay::types::Level;

use super::rules::RuleCounts;

/// What a store holds for the plugin's host functions.
pub(super) struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(super) limits: Limits,
    name: Arc<str>,
    config: Arc<HashMap<String, String>>,
    /// Log lines the plugin may still write during this call.
    log_budget: u32,
    /// What the `meeting` import answers during this call.
    meeting: Option<Arc<str>>,
    rules: Arc<RuleCounts>,
}

impl State {
    /// A fresh sandbox for plugin `name`: WASI without sockets or name lookups, `memory_bytes`
    /// of memory, the plugin's `[config]`.
    pub(super) fn new(
        name: Arc<str>,
        config: Arc<HashMap<String, String>>,
        memory_bytes: usize,
        rules: Arc<RuleCounts>,
    ) -> Self {
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        Self {
            wasi: WasiCtxBuilder::new()
                // Every address is refused by default, but a socket would still be made (a
                // file descriptor of the relay's): none at all.
                .allow_tcp(false)
                .allow_udp(false)
                .allow_ip_name_lookup(false)
                // Random bytes are made by the host, outside the memory limit and the deadline.
                .max_random_size(64 << 10)
                .build(),
            table,
            limits: Limits::new(memory_bytes),
            name,
            config,
            log_budget: LOG_LINES_PER_CALL,
            meeting: None,
            rules,
        }
    }

    /// Starts a call about an event of `meeting`: the log budget is full again.
    pub(super) fn new_call(&mut self, meeting: Option<Arc<str>>) {
        self.log_budget = LOG_LINES_PER_CALL;
        self.meeting = meeting;
    }
}

/// Log lines one call (or `init`) may write; the rest are dropped.
const LOG_LINES_PER_CALL: u32 = 20;
/// Host resources (streams, pollables) one instance may hold.
const MAX_RESOURCES: usize = 256;

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl bindings::bbb::relay::types::Host for State {}

impl bindings::bbb::relay::host::Host for State {
    fn log(&mut self, level: Level, message: String) {
        // Bounded, so that a plugin cannot flood the log, and on one line, so that it cannot
        // forge other log lines.
        if self.log_budget == 0 {
            return;
        }
        self.log_budget -= 1;
        let plugin = &*self.name;
        if self.log_budget == 0 {
            tracing::warn!(plugin, "more log lines in this call are dropped");
        }
        let message: String = message
            .chars()
            .take(2048)
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        match level {
            Level::Trace => tracing::trace!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Error => tracing::error!(plugin, "{message}"),
        }
    }

    fn get_config(&mut self, key: String) -> Option<String> {
        self.config.get(&key).cloned()
    }

    fn meeting(&mut self) -> Option<String> {
        self.meeting.as_deref().map(String::from)
    }

    fn count_rule_match(&mut self, name: String) {
        self.rules.count(&name);
    }
}

impl bindings_0_1::bbb::relay::types::Host for State {}

impl bindings_0_1::bbb::relay::host::Host for State {
    fn log(&mut self, level: bindings_0_1::bbb::relay::types::Level, message: String) {
        use bindings_0_1::bbb::relay::types::Level as Old;
        let level = match level {
            Old::Trace => Level::Trace,
            Old::Debug => Level::Debug,
            Old::Info => Level::Info,
            Old::Warn => Level::Warn,
            Old::Error => Level::Error,
        };
        bindings::bbb::relay::host::Host::log(self, level, message);
    }

    fn get_config(&mut self, key: String) -> Option<String> {
        bindings::bbb::relay::host::Host::get_config(self, key)
    }
}

/// Links the host interface and WASI (with timers that refuse) into `linker`.
///
/// # Errors
/// When wasmtime-wasi's interfaces are not the ones expected.
pub(super) fn link(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    deny_waiting(linker)?;
    bindings_0_1::Plugin::add_to_linker::<_, wasmtime::component::HasSelf<_>>(linker, |s| s)?;
    bindings::Plugin::add_to_linker::<_, wasmtime::component::HasSelf<_>>(linker, |s| s)
}

/// The version of WASI's clock interface that wasmtime-wasi defines (guests importing any 0.2.x
/// are linked to it). A test plugin that sleeps checks that the override below applies.
const WASI_CLOCKS: &str = "wasi:clocks/monotonic-clock@0.2.12";

/// Replaces WASI's timers with functions that trap: a blocking wait happens in the host, where
/// the epoch deadline cannot interrupt it, so a plugin that sleeps could stall the relay.
fn deny_waiting(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    use wasmtime::component::Resource;
    use wasmtime_wasi::p2::DynPollable;
    let deny = |_: wasmtime::StoreContextMut<'_, State>,
                _: (u64,)|
     -> wasmtime::Result<(Resource<DynPollable>,)> {
        wasmtime::bail!("plugins may not sleep or wait for time")
    };
    // The timers must be there to be replaced: were wasmtime-wasi to define another 0.2.x,
    // guests would be linked to that one and the override would miss. Then refuse to run.
    if linker
        .instance(WASI_CLOCKS)?
        .func_wrap("subscribe-duration", deny)
        .is_ok()
    {
        wasmtime::bail!("{WASI_CLOCKS} is not the clock interface wasmtime-wasi defines");
    }
    linker.allow_shadowing(true);
    let mut clock = linker.instance(WASI_CLOCKS)?;
    for name in ["subscribe-duration", "subscribe-instant"] {
        clock.func_wrap(name, deny)?;
    }
    linker.allow_shadowing(false);
    Ok(())
}
