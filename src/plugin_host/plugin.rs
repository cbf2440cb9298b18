//! One loaded plugin: its pre-linked component, its settings, and one warm instance reused
//! across calls (rebuilt after a trap). Every call runs under an epoch deadline and a memory
//! limit; failures are classified, counted, and after `max_failures` in a row the plugin is
//! marked failed for a cool-down.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use prometheus_client::metrics::counter::Counter;
use wasmtime::{
    Store,
    component::{Component, HasSelf, Linker, ResourceTable},
};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::{
    PluginError,
    engine::{Host, TICK},
    limits::Limits,
    settings::{OnError, Settings},
};
use crate::metrics::{Metrics, PluginActionLabels, PluginErrorLabels, PluginLabel};

/// Host bindings generated from `wit/relay.wit`.
pub mod bindings {
    wasmtime::component::bindgen!({ world: "plugin", path: "wit" });
}

pub use bindings::bbb::relay::types::{Action, Event as WitEvent, Hook as WitHook, Level};

/// Why one call did not produce an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The CPU deadline passed.
    Timeout,
    /// The instance asked for more memory than its limit.
    Memory,
    /// Any other trap (a panic, `unreachable`, a bad access), or an instance that could not be
    /// made again.
    Trap,
    /// `replace` with text that is not JSON.
    InvalidJson,
    /// Marked failed: not called until the cool-down ends.
    MarkedFailed,
    /// The plugin's file could not be loaded (and no earlier version runs).
    NotLoaded,
}

impl Failure {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Memory => "memory",
            Self::Trap => "trap",
            Self::InvalidJson => "invalid_json",
            Self::MarkedFailed => "marked_failed",
            Self::NotLoaded => "not_loaded",
        }
    }
}

/// What a store holds for the plugin's host functions.
pub struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: Limits,
    name: Arc<str>,
    config: Arc<HashMap<String, String>>,
    /// Log lines the plugin may still write during this call.
    log_budget: u32,
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
}

/// A live instance and its store.
struct Warm {
    store: Store<State>,
    bindings: bindings::Plugin,
}

/// The mutable part: the warm instance and the failure count.
#[derive(Default)]
struct Slot {
    warm: Option<Warm>,
    consecutive: u32,
    failed_until: Option<Instant>,
}

/// Per-plugin counters, made once so a call does not look labels up.
struct Counters {
    keep: Counter,
    replace: Counter,
    drop: Counter,
}

/// A plugin ready to be called.
pub struct Plugin {
    name: Arc<str>,
    pub settings: Settings,
    /// Digest of the `.wasm` bytes and the `.toml` text it was loaded from.
    pub source: [u8; 32],
    /// SHA-256 (hex) of the `.wasm` bytes: its compile cache key.
    pub wasm_digest: Option<String>,
    /// Keeps the engine's deadline clock running for as long as the plugin can be called.
    _host: Option<Host>,
    /// `None`: the file could not be loaded; every call fails (and `on_error` applies).
    pre: Option<bindings::PluginPre<State>>,
    /// Event ids from `init`; `None` for all.
    wants: Option<HashSet<String>>,
    slot: Mutex<Slot>,
    counters: Counters,
    metrics: Arc<Metrics>,
}

impl Plugin {
    /// Links `component` against the host interface and WASI (an empty context), makes one
    /// instance and runs its `init`. Returns the plugin with that instance warm.
    ///
    /// # Errors
    /// When the component does not fit the interface, or `init` traps, times out or refuses.
    pub fn load(
        host: &Host,
        name: &str,
        component: &Component,
        settings: Settings,
        source: [u8; 32],
        wasm_digest: String,
        metrics: Arc<Metrics>,
    ) -> Result<Self, PluginError> {
        let mut linker: Linker<State> = Linker::new(&host.engine);
        let link = |e: wasmtime::Error| PluginError::Interface(describe(&e));
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(link)?;
        deny_waiting(&mut linker).map_err(link)?;
        bindings::Plugin::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(link)?;
        let pre = linker.instantiate_pre(component).map_err(link)?;
        let pre = bindings::PluginPre::new(pre).map_err(link)?;
        let mut plugin = Self::new(name, settings, source, Some(pre), metrics);
        plugin.wasm_digest = Some(wasm_digest);
        plugin._host = Some(host.clone());
        let (warm, wants) = plugin.instantiate()?;
        // Only once it runs: a version that fails here leaves the previous one (and its alarm).
        plugin.set_failed(false);
        plugin.wants = (!wants.is_empty()).then(|| wants.into_iter().collect());
        plugin.slot = Mutex::new(Slot {
            warm: Some(warm),
            ..Slot::default()
        });
        Ok(plugin)
    }

    /// A plugin whose file is in the folder but cannot run: every event in its scope gets its
    /// `on_error` policy (by default dropped: a broken redaction plugin must not leak), and
    /// `hookrelay_plugin_failed` shows it.
    pub fn broken(name: &str, settings: Settings, source: [u8; 32], metrics: Arc<Metrics>) -> Self {
        let plugin = Self::new(name, settings, source, None, metrics);
        plugin.set_failed(true);
        plugin
    }

    fn new(
        name: &str,
        settings: Settings,
        source: [u8; 32],
        pre: Option<bindings::PluginPre<State>>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let name: Arc<str> = name.into();
        let action = |a: &str| {
            metrics
                .plugin_calls
                .get_or_create(&PluginActionLabels {
                    plugin: name.to_string(),
                    action: a.to_string(),
                })
                .clone()
        };
        let counters = Counters {
            keep: action("keep"),
            replace: action("replace"),
            drop: action("drop"),
        };
        Self {
            name,
            settings,
            source,
            wasm_digest: None,
            _host: None,
            pre,
            wants: None,
            slot: Mutex::new(Slot::default()),
            counters,
            metrics,
        }
    }

    /// Whether the plugin's code runs (false for a [`Plugin::broken`] placeholder).
    pub fn is_loaded(&self) -> bool {
        self.pre.is_some()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn on_error(&self) -> OnError {
        self.settings.limits.on_error
    }

    /// Whether `init` asked for this event id.
    pub fn wants(&self, event_id: &str) -> bool {
        self.wants.as_ref().is_none_or(|w| w.contains(event_id))
    }

    /// Event ids from `init`, sorted; empty for all.
    pub fn wanted(&self) -> Vec<String> {
        let mut v: Vec<String> = self.wants.iter().flatten().cloned().collect();
        v.sort();
        v
    }

    fn deadline_ticks(&self) -> u64 {
        let tick = TICK.as_millis().max(1) as u64;
        self.settings.limits.timeout_ms.div_ceil(tick)
    }

    /// A new store and instance, with `init` run. Returns the ids `init` asked for.
    fn instantiate(&self) -> Result<(Warm, Vec<String>), PluginError> {
        let Some(pre) = &self.pre else {
            return Err(PluginError::Init("the plugin is not loaded".into()));
        };
        let limits = Limits::new((self.settings.limits.memory_mib as usize) << 20);
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        let state = State {
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
            limits,
            name: self.name.clone(),
            config: self.settings.config.clone(),
            log_budget: LOG_LINES_PER_CALL,
        };
        let mut store = Store::new(pre.engine(), state);
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(self.deadline_ticks());
        let fail = |e: wasmtime::Error| PluginError::Init(describe(&e));
        let bindings = pre.instantiate(&mut store).map_err(fail)?;
        store.set_epoch_deadline(self.deadline_ticks());
        let wants = bindings
            .call_init(&mut store)
            .map_err(fail)?
            .map_err(PluginError::Refused)?;
        Ok((Warm { store, bindings }, wants))
    }

    /// Calls `on-event`. A `replace` is checked to be JSON. Counts the action or the failure.
    pub fn call(&self, event: &WitEvent, hook: &WitHook) -> Result<Action, Failure> {
        if self.pre.is_none() {
            return Err(self.count_failure(Failure::NotLoaded));
        }
        let mut slot = match self.slot.lock() {
            Ok(slot) => slot,
            Err(poisoned) => {
                // A panic in the host during a call: the instance's state is unknown.
                self.slot.clear_poison();
                let mut slot = poisoned.into_inner();
                slot.warm = None;
                slot
            }
        };
        if let Some(until) = slot.failed_until {
            if Instant::now() < until {
                return Err(self.count_failure(Failure::MarkedFailed));
            }
            slot.failed_until = None;
            self.set_failed(false);
            tracing::info!(plugin = %self.name, "cool-down over: calling the failed plugin again");
        }
        let result = self.call_warm(&mut slot, event, hook);
        match &result {
            Ok(_) => {
                if slot.consecutive > 0 {
                    slot.consecutive = 0;
                    self.set_failed(false);
                }
            }
            Err(f) => {
                slot.consecutive += 1;
                if slot.consecutive >= self.settings.limits.max_failures {
                    slot.consecutive = 0;
                    let cooldown = Duration::from_millis(self.settings.limits.failed_cooldown_ms);
                    slot.failed_until = Some(Instant::now() + cooldown);
                    self.set_failed(true);
                    tracing::error!(plugin = %self.name, failures = self.settings.limits.max_failures, cooldown_ms = cooldown.as_millis() as u64, on_error = ?self.on_error(), last = f.as_str(), "plugin keeps failing: marked failed");
                }
            }
        }
        result
    }

    fn call_warm(
        &self,
        slot: &mut Slot,
        event: &WitEvent,
        hook: &WitHook,
    ) -> Result<Action, Failure> {
        if slot.warm.is_none() {
            match self.instantiate() {
                Ok((w, _)) => slot.warm = Some(w),
                Err(e) => {
                    tracing::warn!(plugin = %self.name, error = %e, "cannot make a new instance");
                    return Err(self.count_failure(Failure::Trap));
                }
            }
        }
        let Some(warm) = slot.warm.as_mut() else {
            return Err(self.count_failure(Failure::Trap));
        };
        warm.store.set_epoch_deadline(self.deadline_ticks());
        warm.store.data_mut().log_budget = LOG_LINES_PER_CALL;
        let action = match warm.bindings.call_on_event(&mut warm.store, event, hook) {
            Ok(a) => a,
            Err(e) => {
                let failure = match e.downcast_ref::<wasmtime::Trap>() {
                    Some(wasmtime::Trap::Interrupt) => Failure::Timeout,
                    _ if warm.store.data().limits.exceeded => Failure::Memory,
                    _ => Failure::Trap,
                };
                tracing::warn!(plugin = %self.name, event = %event.id, hook_id = hook.id, failure = failure.as_str(), error = %describe(&e), "plugin failed on an event");
                // A trapped instance cannot be entered again: the next call makes a new one.
                slot.warm = None;
                return Err(self.count_failure(failure));
            }
        };
        match &action {
            Action::Keep => {
                self.counters.keep.inc();
            }
            Action::Drop => {
                self.counters.drop.inc();
            }
            Action::Replace(json) => {
                if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(json) {
                    tracing::warn!(plugin = %self.name, event = %event.id, hook_id = hook.id, error = %e, "plugin replaced an event with invalid JSON");
                    return Err(self.count_failure(Failure::InvalidJson));
                }
                self.counters.replace.inc();
            }
        }
        Ok(action)
    }

    fn count_failure(&self, f: Failure) -> Failure {
        self.metrics
            .plugin_errors
            .get_or_create(&PluginErrorLabels {
                plugin: self.name.to_string(),
                kind: f.as_str().to_string(),
            })
            .inc();
        f
    }

    fn set_failed(&self, failed: bool) {
        self.metrics
            .plugin_failed
            .get_or_create(&PluginLabel {
                plugin: self.name.to_string(),
            })
            .set(i64::from(failed));
    }

    /// Drops the plugin's `hookrelay_plugin_failed` series (the plugin was removed).
    pub fn forget_metrics(&self) {
        self.metrics.plugin_failed.remove(&PluginLabel {
            plugin: self.name.to_string(),
        });
    }
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

/// One line for the log: the error and its causes, without a backtrace.
pub(super) fn describe(e: &wasmtime::Error) -> String {
    format!("{e:#}")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
