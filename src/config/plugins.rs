//! `[plugins]`: the WebAssembly plugins' folder, limits and defaults.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// WebAssembly event plugins.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PluginsConfig {
    /// Folder of `NAME.wasm` plugins (and optional `NAME.toml` settings); none: no plugins.
    pub dir: Option<PathBuf>,
    /// Where compiled plugins are cached (a folder of the relay's own user, writable by no one
    /// else); default `$CACHE_DIRECTORY`, `$XDG_CACHE_HOME/hookrelay` or `~/.cache/hookrelay`.
    pub cache_dir: Option<PathBuf>,
    /// Reload when the folder changes.
    pub watch: bool,
    /// Quiet time after the last change in the folder before reloading.
    pub reload_debounce_ms: u64,
    /// What happens to an event a plugin fails on, unless its `NAME.toml` says otherwise.
    pub on_error: OnError,
    /// Deadline (wall-clock time) of one plugin `on-event` call.
    pub timeout_ms: u64,
    /// Deadline (wall-clock time) of making an instance: instantiation and `init`.
    pub init_timeout_ms: u64,
    /// Memory limit of one plugin instance, in MiB.
    pub memory_mib: u64,
    /// Failures in a row after which a plugin is marked failed.
    pub max_failures: u32,
    /// How long a failed plugin is not called (its `on_error` applies) before it is tried again.
    pub failed_cooldown_ms: u64,
    /// Most instances of one plugin, each called by one thread at a time (never more than the
    /// machine's cores); 1 for a plugin that keeps state across calls.
    pub max_instances: u32,
    /// The CPU priority of the threads plugin calls run on.
    pub cpu_priority: CpuPriority,
}

/// How plugin calls share the CPU with everything else on the machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuPriority {
    /// Idle first, the relay's own priority when a call cannot start: a call that waited half
    /// a second for an idle thread moves to one at the relay's priority, and so do the calls
    /// of the next two seconds. A busy plugin barely delays the relay's own work; but a call
    /// that has started on an idle thread may wait long for CPU on a saturated machine, and
    /// the calls of its plugin behind it.
    Auto,
    /// Only CPU time nothing else wants (Linux `SCHED_IDLE`): a busy plugin never delays the
    /// relay's own work, but on a saturated machine the hooks in its scope stall.
    Idle,
    /// Ten nice steps below the relay.
    Low,
    /// The relay's own priority.
    #[default]
    Normal,
}

impl Default for PluginsConfig {
    fn default() -> Self {
        let d = PluginDefaults::default();
        Self {
            dir: None,
            cache_dir: None,
            watch: true,
            reload_debounce_ms: 300,
            on_error: d.on_error,
            timeout_ms: d.timeout_ms,
            init_timeout_ms: d.init_timeout_ms,
            memory_mib: d.memory_mib,
            max_failures: d.max_failures,
            failed_cooldown_ms: d.failed_cooldown_ms,
            max_instances: d.max_instances,
            cpu_priority: CpuPriority::default(),
        }
    }
}

impl PluginsConfig {
    /// The per-plugin defaults that `NAME.toml` files override.
    pub fn defaults(&self) -> PluginDefaults {
        PluginDefaults {
            on_error: self.on_error,
            timeout_ms: self.timeout_ms,
            init_timeout_ms: self.init_timeout_ms,
            memory_mib: self.memory_mib,
            max_failures: self.max_failures,
            failed_cooldown_ms: self.failed_cooldown_ms,
            max_instances: self.max_instances,
        }
    }
}

/// What happens to an event when a plugin fails on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// The event is not sent to that hook (fail closed).
    #[default]
    Drop,
    /// The event goes on as if the plugin had kept it.
    Pass,
}

/// A plugin's error policy and limits: the relay-wide defaults (`[plugins]`), which a plugin's
/// `NAME.toml` may override.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginDefaults {
    pub on_error: OnError,
    /// Deadline (wall-clock time) of one `on-event` call, in milliseconds.
    pub timeout_ms: u64,
    /// Deadline (wall-clock time) of making an instance (instantiation and `init`), in
    /// milliseconds: longer than a call's, as an instance is made once and then reused, and a
    /// busy machine must not fail a plugin's load by pausing it for a few milliseconds.
    pub init_timeout_ms: u64,
    /// Memory limit of one instance, in MiB.
    pub memory_mib: u64,
    /// Consecutive failures after which the plugin is marked failed.
    pub max_failures: u32,
    /// How long a failed plugin is not called (its `on_error` applies) before it is tried again.
    pub failed_cooldown_ms: u64,
    /// Most instances, called in parallel for different hooks (capped by the cores).
    pub max_instances: u32,
}

impl Default for PluginDefaults {
    fn default() -> Self {
        Self {
            on_error: OnError::Drop,
            timeout_ms: 10,
            init_timeout_ms: 1000,
            memory_mib: 32,
            max_failures: 5,
            failed_cooldown_ms: 30_000,
            max_instances: 1,
        }
    }
}

impl PluginDefaults {
    /// # Errors
    /// Names the limit that is zero or absurdly large.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=60_000).contains(&self.timeout_ms) {
            return Err("timeout_ms must be between 1 and 60000".into());
        }
        if !(1..=60_000).contains(&self.init_timeout_ms) {
            return Err("init_timeout_ms must be between 1 and 60000".into());
        }
        if !(1..=4096).contains(&self.memory_mib) {
            return Err("memory_mib must be between 1 and 4096".into());
        }
        if self.max_failures == 0 {
            return Err("max_failures must be at least 1".into());
        }
        if !(1..=64).contains(&self.max_instances) {
            return Err("max_instances must be between 1 and 64".into());
        }
        Ok(())
    }
}
