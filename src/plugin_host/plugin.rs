//! One loaded plugin's lifecycle: its pre-linked component, its settings, and a pool of warm
//! instances reused across calls (each rebuilt after a trap), so that calls for different hooks
//! run in parallel, one thread per instance at a time. Every call runs under an epoch deadline
//! and a memory limit ([`super::imports`] is the sandbox); failures go to the
//! [`super::breaker`], one per plugin.

use std::{
    collections::HashSet,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use wasmtime::{
    Store,
    component::{Component, Linker},
};

pub(crate) use super::breaker::Failure;
use super::{
    PluginError,
    breaker::{Breaker, Gate, PluginMetrics},
    describe,
    engine::{Host, TICK},
    imports::{State, bindings, link},
    rules::RuleCounts,
    settings::{OnError, Settings},
};
use crate::metrics::Metrics;

pub(crate) use bindings::bbb::relay::types::{Action, Event as WitEvent, Hook as WitHook};

/// A live instance and its store.
struct Warm {
    store: Store<State>,
    bindings: bindings::Plugin,
}

/// One place of the pool: its instance, made when first needed.
#[derive(Default)]
struct Slot {
    warm: Option<Warm>,
}

/// A plugin ready to be called.
pub struct Plugin {
    name: Arc<str>,
    pub(super) settings: Settings,
    /// Digest of the `.wasm` bytes and the `.toml` text it was loaded from.
    pub(super) source: [u8; 32],
    /// SHA-256 (hex) of the `.wasm` bytes: its compile cache key.
    pub(super) wasm_digest: Option<String>,
    /// Keeps the engine's deadline clock running for as long as the plugin can be called.
    _host: Option<Host>,
    /// `None`: the file could not be loaded; every call fails (and `on_error` applies).
    pre: Option<bindings::PluginPre<State>>,
    /// Event ids from `init`; `None` for all.
    wants: Option<HashSet<String>>,
    /// At most `max_instances` (and the cores); the first holds the instance `init` ran in.
    pool: Vec<Mutex<Slot>>,
    /// Where the next call starts looking for a free instance.
    next: AtomicUsize,
    breaker: Mutex<Breaker>,
    metrics: PluginMetrics,
    /// `count-rule-match`'s counters, shared by the pool's instances.
    rules: Arc<RuleCounts>,
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
        let fail = |e: wasmtime::Error| PluginError::Interface(describe(&e));
        link(&mut linker).map_err(fail)?;
        let pre = linker.instantiate_pre(component).map_err(fail)?;
        let pre = bindings::PluginPre::new(pre).map_err(fail)?;
        let mut plugin = Self::new(name, settings, source, Some(pre), metrics);
        plugin.wasm_digest = Some(wasm_digest);
        plugin._host = Some(host.clone());
        let (warm, wants) = plugin.instantiate()?;
        // Only once it runs: a version that fails here leaves the previous one (and its alarm).
        plugin.metrics.set_failed(false);
        plugin.wants = (!wants.is_empty()).then(|| wants.into_iter().collect());
        if let Some(first) = plugin.pool.first_mut() {
            *first = Mutex::new(Slot { warm: Some(warm) });
        }
        Ok(plugin)
    }

    /// A plugin whose file is in the folder but cannot run: every event in its scope gets its
    /// `on_error` policy (by default dropped: a broken redaction plugin must not leak), and
    /// `hookrelay_plugin_failed` shows it.
    pub fn broken(name: &str, settings: Settings, source: [u8; 32], metrics: Arc<Metrics>) -> Self {
        let plugin = Self::new(name, settings, source, None, metrics);
        plugin.metrics.set_failed(true);
        plugin
    }

    fn new(
        name: &str,
        settings: Settings,
        source: [u8; 32],
        pre: Option<bindings::PluginPre<State>>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let pool = (0..pool_size(&settings))
            .map(|_| Mutex::default())
            .collect();
        Self {
            name: name.into(),
            settings,
            source,
            wasm_digest: None,
            _host: None,
            pre,
            wants: None,
            pool,
            next: AtomicUsize::new(0),
            breaker: Mutex::default(),
            rules: Arc::new(RuleCounts::new(name, metrics.clone())),
            metrics: PluginMetrics::new(name, metrics),
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
        ticks(self.settings.limits.timeout_ms)
    }

    /// A new instance's deadline: instantiation and `init` (`init_timeout_ms`).
    fn init_deadline_ticks(&self) -> u64 {
        ticks(self.settings.limits.init_timeout_ms)
    }

    /// A new store and instance, with `init` run. Returns the ids `init` asked for.
    fn instantiate(&self) -> Result<(Warm, Vec<String>), PluginError> {
        let Some(pre) = &self.pre else {
            return Err(PluginError::Init("the plugin is not loaded".into()));
        };
        let state = State::new(
            self.name.clone(),
            self.settings.config.clone(),
            (self.settings.limits.memory_mib as usize) << 20,
            self.rules.clone(),
        );
        let mut store = Store::new(pre.engine(), state);
        store.limiter(|s| &mut s.limits);
        let init_timeout_ms = self.settings.limits.init_timeout_ms;
        let fail = |e: wasmtime::Error| match e.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt) => PluginError::Init(format!(
                "it ran past its deadline (init_timeout_ms = {init_timeout_ms}): {}",
                describe(&e)
            )),
            _ => PluginError::Init(describe(&e)),
        };
        store.set_epoch_deadline(self.init_deadline_ticks());
        let bindings = pre.instantiate(&mut store).map_err(fail)?;
        store.set_epoch_deadline(self.init_deadline_ticks());
        let wants = bindings
            .call_init(&mut store)
            .map_err(fail)?
            .map_err(PluginError::Refused)?;
        Ok((Warm { store, bindings }, wants))
    }

    /// Calls `on-event`, with `meeting` as what the `meeting` import answers. A `replace` is
    /// checked to be JSON. Counts the action or the failure.
    pub fn call(
        &self,
        event: &WitEvent,
        hook: &WitHook,
        meeting: Option<&Arc<str>>,
    ) -> Result<Action, Failure> {
        if self.pre.is_none() {
            return Err(self.metrics.failure(Failure::NotLoaded));
        }
        let gate = self.breaker().before_call(Instant::now());
        match gate {
            Gate::Closed => return Err(self.metrics.failure(Failure::MarkedFailed)),
            Gate::Reopened => {
                self.metrics.set_failed(false);
                tracing::info!(plugin = %self.name, "cool-down over: calling the failed plugin again");
            }
            Gate::Call => {}
        }
        let result = {
            let mut slot = self.slot();
            let started = Instant::now();
            let noted = super::calls::started();
            let result = self.call_warm(&mut slot, event, hook, meeting);
            self.metrics.timed(started.elapsed());
            if let Some(at) = noted {
                let outcome = match &result {
                    Ok(Action::Keep) => "keep",
                    Ok(Action::Drop) => "drop",
                    Ok(Action::Replace(_)) => "replace",
                    Err(f) => f.as_str(),
                };
                super::calls::note(&self.name, outcome, at);
            }
            result
        };
        let limits = &self.settings.limits;
        let mut breaker = self.breaker();
        match &result {
            Ok(_) => {
                if breaker.succeeded() {
                    self.metrics.set_failed(false);
                }
            }
            Err(f) => {
                let cooldown = Duration::from_millis(limits.failed_cooldown_ms);
                if breaker.failed(limits.max_failures, cooldown, Instant::now()) {
                    self.metrics.set_failed(true);
                    tracing::error!(plugin = %self.name, failures = limits.max_failures, cooldown_ms = limits.failed_cooldown_ms, on_error = ?self.on_error(), last = f.as_str(), "plugin keeps failing: marked failed");
                }
            }
        }
        result
    }

    /// The breaker (a panic while it was held left it as it was: counts only).
    fn breaker(&self) -> MutexGuard<'_, Breaker> {
        self.breaker.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A free instance of the pool, or, when all are busy, the next one's turn.
    fn slot(&self) -> MutexGuard<'_, Slot> {
        let n = self.pool.len().max(1);
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            if let Some(slot) = self.pool.get((start + i) % n)
                && let Ok(guard) = slot.try_lock()
            {
                return guard;
            }
        }
        let slot = &self.pool[start % n];
        match slot.lock() {
            Ok(guard) => guard,
            Err(poisoned) => {
                // A panic in the host during a call: the instance's state is unknown.
                slot.clear_poison();
                let mut guard = poisoned.into_inner();
                guard.warm = None;
                guard
            }
        }
    }

    /// Linear memory of one warm instance, in bytes (what each instance of the pool adds);
    /// `None` when none is warm.
    pub fn instance_memory(&self) -> Option<usize> {
        let slot = self.pool.first()?.lock().ok()?;
        Some(slot.warm.as_ref()?.store.data().limits.used())
    }

    fn call_warm(
        &self,
        slot: &mut Slot,
        event: &WitEvent,
        hook: &WitHook,
        meeting: Option<&Arc<str>>,
    ) -> Result<Action, Failure> {
        if slot.warm.is_none() {
            match self.instantiate() {
                Ok((w, _)) => slot.warm = Some(w),
                Err(e) => {
                    tracing::warn!(plugin = %self.name, error = %e, "cannot make a new instance");
                    return Err(self.metrics.failure(Failure::Trap));
                }
            }
        }
        let Some(warm) = slot.warm.as_mut() else {
            return Err(self.metrics.failure(Failure::Trap));
        };
        warm.store.set_epoch_deadline(self.deadline_ticks());
        warm.store.data_mut().new_call(meeting.cloned());
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
                return Err(self.metrics.failure(failure));
            }
        };
        match &action {
            Action::Keep => self.metrics.keep(),
            Action::Drop => self.metrics.drop(),
            Action::Replace(json) => {
                if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(json) {
                    tracing::warn!(plugin = %self.name, event = %event.id, hook_id = hook.id, error = %e, "plugin replaced an event with invalid JSON");
                    return Err(self.metrics.failure(Failure::InvalidJson));
                }
                self.metrics.replace();
            }
        }
        Ok(action)
    }

    /// Drops the plugin's `hookrelay_plugin_failed` series (the plugin was removed).
    pub fn forget_metrics(&self) {
        self.metrics.forget();
    }
}

/// The pool's size: `max_instances`, never more than the cores the relay may use.
fn pool_size(settings: &Settings) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    (settings.limits.max_instances as usize).clamp(1, cores.max(1))
}

/// `ms` of wall-clock time in epoch ticks, rounded up.
fn ticks(ms: u64) -> u64 {
    ms.div_ceil(TICK.as_millis().max(1) as u64)
}
