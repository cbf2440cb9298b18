//! [`Plugins`]: the plugin set in force, swapped atomically (arc-swap) when the plugin folder
//! changes. A batch of events loads the set once, so every event goes through exactly one set.
//! Compiling and starting a new version happens on the watcher's thread, never on the event
//! path; a file that fails keeps its previous version running.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use arc_swap::ArcSwap;
use notify_debouncer_full::{
    DebounceEventResult, Debouncer, RecommendedCache, new_debouncer,
    notify::{RecommendedWatcher, RecursiveMode},
};

use super::{
    PluginError,
    engine::Host,
    set::{LoadReport, PluginSet},
    settings::Defaults,
};
use crate::{
    config::PluginsConfig,
    metrics::{Metrics, ResultLabel, SourceLabel},
};

/// Keeps the folder watched; dropping it stops watching.
pub type Watcher = Debouncer<RecommendedWatcher, RecommendedCache>;

/// The plugins of one relay.
pub struct Plugins {
    current: ArcSwap<PluginSet>,
    loader: Option<Loader>,
}

struct Loader {
    host: Host,
    dir: PathBuf,
    defaults: Defaults,
    metrics: Arc<Metrics>,
    /// One reload at a time.
    reloading: Mutex<()>,
}

impl Plugins {
    /// No plugins: every event passes untouched.
    pub fn disabled() -> Arc<Self> {
        Arc::new(Self {
            current: ArcSwap::from_pointee(PluginSet::default()),
            loader: None,
        })
    }

    /// Loads the folder of `config` (no folder: [`Plugins::disabled`]). Plugins that fail to
    /// load are logged and counted; the relay starts all the same.
    ///
    /// # Errors
    /// When the WebAssembly engine cannot be set up.
    pub fn start(config: &PluginsConfig, metrics: &Arc<Metrics>) -> Result<Arc<Self>, PluginError> {
        let Some(dir) = config.dir.clone() else {
            return Ok(Self::disabled());
        };
        let plugins = Arc::new(Self {
            current: ArcSwap::from_pointee(PluginSet::default()),
            loader: Some(Loader {
                host: Host::new(config.cache_dir())?,
                dir,
                defaults: config.defaults(),
                metrics: metrics.clone(),
                reloading: Mutex::new(()),
            }),
        });
        plugins.reload();
        Ok(plugins)
    }

    /// The set in force now.
    pub fn current(&self) -> Arc<PluginSet> {
        self.current.load_full()
    }

    /// Reads the folder again and swaps in the new set. Returns what changed.
    pub fn reload(&self) -> LoadReport {
        let Some(l) = &self.loader else {
            return LoadReport::default();
        };
        let _one = l.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let started = Instant::now();
        let previous = self.current.load_full();
        let (set, report) =
            PluginSet::load_dir(&l.host, &l.dir, &l.defaults, &previous, &l.metrics);
        let names: Vec<&str> = set.plugins.iter().map(|p| p.name()).collect();
        let changed = !report.loaded.is_empty() || !report.removed.is_empty();
        for f in &report.failures {
            tracing::error!(plugin = %f.name, error = %f.error, "plugin not loaded; its previous version (or its on_error policy) stays in force");
        }
        if changed {
            tracing::info!(
                plugins = ?names,
                loaded = ?report.loaded,
                from_cache = report.from_cache,
                removed = ?report.removed,
                ms = started.elapsed().as_millis() as u64,
                "plugin set loaded"
            );
        }
        for (source, n) in [
            ("cache", report.from_cache),
            ("compiled", report.loaded.len() - report.from_cache),
        ] {
            l.metrics
                .plugin_compiles
                .get_or_create(&SourceLabel {
                    source: source.into(),
                })
                .inc_by(n as u64);
        }
        l.metrics
            .plugins_loaded
            .set(set.plugins.iter().filter(|p| p.is_loaded()).count() as i64);
        let result = if report.failures.is_empty() {
            "ok"
        } else {
            "error"
        };
        l.metrics
            .plugin_reloads
            .get_or_create(&ResultLabel {
                result: result.into(),
            })
            .inc();
        self.current.store(Arc::new(set));
        report
    }

    /// Watches the folder and reloads `debounce` after the last change to a `.wasm` or
    /// `.toml` file in it.
    ///
    /// # Errors
    /// When the folder cannot be watched.
    pub fn watch(self: &Arc<Self>, debounce: Duration) -> Result<Option<Watcher>, PluginError> {
        let Some(l) = &self.loader else {
            return Ok(None);
        };
        let dir = l.dir.clone();
        let me = Arc::downgrade(self);
        let handler = move |result: DebounceEventResult| {
            let Some(plugins) = me.upgrade() else { return };
            match result {
                Ok(events) => {
                    let relevant = events
                        .iter()
                        .flat_map(|e| e.paths.iter())
                        .any(|p| p.extension().is_some_and(|x| x == "wasm" || x == "toml"));
                    if relevant {
                        plugins.reload();
                    }
                }
                Err(errors) => {
                    for e in errors {
                        tracing::warn!(error = %e, "watching the plugin folder");
                    }
                }
            }
        };
        let watch_err = |e: notify_debouncer_full::notify::Error| {
            PluginError::Io(dir.display().to_string(), e.to_string())
        };
        let mut debouncer = new_debouncer(debounce, None, handler).map_err(watch_err)?;
        debouncer
            .watch(&l.dir, RecursiveMode::NonRecursive)
            .map_err(watch_err)?;
        Ok(Some(debouncer))
    }
}
