//! [`Plugins`]: the plugin set in force, swapped atomically (arc-swap) when the plugin folder
//! changes. A batch of events loads the set once, so every event goes through exactly one set.
//! Compiling and starting a new version happens on the reload thread, never on the event path;
//! a file that fails keeps its previous version running.

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, mpsc},
    time::{Duration, Instant},
};

use arc_swap::ArcSwap;
use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};

use super::{
    PluginError,
    engine::Host,
    set::{LoadReport, PluginSet},
    settings::Defaults,
};
use crate::{
    config::PluginsConfig,
    metrics::{Metrics, PluginLabel, ResultLabel, SourceLabel},
};

/// Keeps the folder watched; dropping it stops watching (and ends the reload thread).
pub(crate) struct Watcher {
    _watcher: RecommendedWatcher,
}

/// The plugins of one relay.
pub(crate) struct Plugins {
    current: ArcSwap<PluginSet>,
    loader: Option<Loader>,
    /// The threads this relay's plugin calls run on.
    threads: super::threads::PluginThreads,
}

struct Loader {
    host: Host,
    dir: PathBuf,
    /// Changes in here are the relay's own writes, not deployments.
    cache_dir: Option<PathBuf>,
    defaults: Defaults,
    metrics: Arc<Metrics>,
    /// One reload at a time.
    reloading: Mutex<()>,
}

impl Plugins {
    /// The threads this relay's plugin calls run on.
    pub(crate) fn threads(&self) -> &super::threads::PluginThreads {
        &self.threads
    }

    /// No plugins: every event passes untouched.
    pub(crate) fn disabled() -> Arc<Self> {
        Arc::new(Self {
            current: ArcSwap::from_pointee(PluginSet::default()),
            loader: None,
            threads: super::threads::PluginThreads::new(
                crate::config::CpuPriority::Normal,
                Default::default(),
            ),
        })
    }

    /// The plugins of `config`'s folder, none loaded yet (see [`Plugins::reload`]); no folder:
    /// [`Plugins::disabled`].
    ///
    /// # Errors
    /// When the WebAssembly engine cannot be set up.
    pub(crate) fn new(
        config: &PluginsConfig,
        metrics: &Arc<Metrics>,
    ) -> Result<Arc<Self>, PluginError> {
        let Some(dir) = config.dir.clone() else {
            return Ok(Self::disabled());
        };
        let threads =
            super::threads::PluginThreads::new(config.cpu_priority, metrics.plugin_starved.clone());
        let cache_dir = super::cache::folder(config.cache_dir.as_deref());
        Ok(Arc::new(Self {
            current: ArcSwap::from_pointee(PluginSet::default()),
            threads,
            loader: Some(Loader {
                host: Host::new(cache_dir.clone())?,
                dir,
                cache_dir,
                defaults: config.defaults(),
                metrics: metrics.clone(),
                reloading: Mutex::new(()),
            }),
        }))
    }

    /// The set in force now.
    pub(crate) fn current(&self) -> Arc<PluginSet> {
        self.current.load_full()
    }

    /// Reads the folder again and swaps in the new set. Returns what changed.
    pub(crate) fn reload(&self) -> LoadReport {
        let Some(l) = &self.loader else {
            return LoadReport::default();
        };
        let _one = l.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let started = Instant::now();
        let previous = self.current.load_full();
        let (set, report) =
            PluginSet::load_dir(&l.host, &l.dir, &l.defaults, &previous, &l.metrics);
        let names: Vec<&str> = set.plugins.iter().map(|p| p.name()).collect();
        for f in &report.failures {
            tracing::error!(plugin = %f.name, error = %f.error, "plugin not loaded; its previous version (or its on_error policy) stays in force");
        }
        if !report.loaded.is_empty() || !report.removed.is_empty() {
            tracing::info!(
                plugins = ?names,
                loaded = ?report.loaded,
                from_cache = report.from_cache,
                removed = ?report.removed,
                ms = started.elapsed().as_millis() as u64,
                "plugin set loaded"
            );
        }
        let digests = |s: &PluginSet| -> HashSet<String> {
            s.plugins
                .iter()
                .filter_map(|p| p.wasm_digest.clone())
                .collect()
        };
        let (before, after) = (digests(&previous), digests(&set));
        let set = Arc::new(set);
        self.current.store(set.clone());
        // Counted once the set is in force: a reader of the metrics that sees the reload
        // also gets the new set.
        self.count(l, &set, &report);
        // The compiled code of versions this relay no longer runs.
        for gone in before.difference(&after) {
            l.host.uncache(gone);
        }
        if report.loaded.len() > report.from_cache {
            // WebAssembly's compiler ran: its code, megabytes of the binary, need not stay
            // resident until the next compile.
            let kib = crate::base::binary_pages::give_back();
            tracing::debug!(kib, "gave back the binary's pages the compile used");
        }
        report
    }

    fn count(&self, l: &Loader, set: &PluginSet, report: &LoadReport) {
        let m = &l.metrics;
        // Per plugin in the new set: 1 if its file was just refused, else 0 (a failure of the
        // folder itself is in the log and in plugin_reloads_total only).
        for p in &set.plugins {
            let failed = report.failures.iter().any(|f| f.name == p.name());
            let label = PluginLabel {
                plugin: p.name().to_string(),
            };
            m.plugin_load_failed
                .get_or_create(&label)
                .set(i64::from(failed));
        }
        for name in &report.removed {
            let label = PluginLabel {
                plugin: name.clone(),
            };
            m.plugin_load_failed.remove(&label);
        }
        for (source, n) in [
            ("cache", report.from_cache),
            ("compiled", report.loaded.len() - report.from_cache),
        ] {
            m.plugin_compiles
                .get_or_create(&SourceLabel {
                    source: source.into(),
                })
                .inc_by(n as u64);
        }
        m.plugins_loaded
            .set(set.plugins.iter().filter(|p| p.is_loaded()).count() as i64);
        let result = if report.failures.is_empty() {
            "ok"
        } else {
            "error"
        };
        m.plugin_reloads
            .get_or_create(&ResultLabel {
                result: result.into(),
            })
            .inc();
    }

    /// Watches the folder and reloads once it has been quiet for `quiet` after a change (so
    /// that files copied in together are loaded together). Start it before the first
    /// [`Plugins::reload`], so that no change is missed in between.
    ///
    /// # Errors
    /// When the folder cannot be watched.
    pub(crate) fn watch(self: &Arc<Self>, quiet: Duration) -> Result<Option<Watcher>, PluginError> {
        let Some(l) = &self.loader else {
            return Ok(None);
        };
        let (tx, rx) = mpsc::channel();
        let watch_err =
            |e: notify::Error| PluginError::Io(l.dir.display().to_string(), e.to_string());
        let mut watcher = notify::recommended_watcher(move |event| {
            let _ = tx.send(event);
        })
        .map_err(watch_err)?;
        watcher
            .watch(&l.dir, RecursiveMode::NonRecursive)
            .map_err(watch_err)?;
        let me = Arc::downgrade(self);
        // The relay's own cache writes are events in the folder only when the cache is inside it.
        let cache_dir = l
            .cache_dir
            .clone()
            .filter(|c| c != &l.dir && c.starts_with(&l.dir));
        std::thread::Builder::new()
            .name("plugin-reload".into())
            .spawn(move || {
                // Ends when the watcher is dropped (the sender goes with it).
                while let Ok(first) = rx.recv() {
                    if !deployment(&first, cache_dir.as_deref()) {
                        continue;
                    }
                    // Wait until the folder has been quiet for `quiet` (reads do not count), but
                    // not forever under a stream of changes.
                    let latest = Instant::now() + quiet * 10;
                    loop {
                        match rx.recv_timeout(quiet) {
                            Ok(e) if deployment(&e, cache_dir.as_deref()) => {
                                if Instant::now() >= latest {
                                    break;
                                }
                            }
                            Ok(_) => {}
                            Err(mpsc::RecvTimeoutError::Timeout) => break,
                            Err(mpsc::RecvTimeoutError::Disconnected) => return,
                        }
                    }
                    let Some(plugins) = me.upgrade() else { return };
                    plugins.reload();
                }
            })
            .map_err(|e| PluginError::Io("the plugin reload thread".into(), e.to_string()))?;
        Ok(Some(Watcher { _watcher: watcher }))
    }
}

/// Whether a watch event may change the plugin set: any change in the folder but the relay's
/// own cache writes (reads, including the reload's own, are not changes). Errors and overflows
/// (a rescan is needed) count as changes.
fn deployment(event: &notify::Result<notify::Event>, cache_dir: Option<&Path>) -> bool {
    match event {
        Ok(e) if e.need_rescan() => true,
        Ok(e) if matches!(e.kind, notify::EventKind::Access(_)) => false,
        Ok(e) if e.paths.is_empty() => true,
        Ok(e) => e
            .paths
            .iter()
            .any(|p| cache_dir.is_none_or(|c| !p.starts_with(c))),
        Err(e) => {
            tracing::warn!(error = %e, "watching the plugin folder; reloading to be sure");
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use notify::{
        Event, EventKind,
        event::{AccessKind, CreateKind, Flag},
    };

    use super::*;

    fn event(kind: EventKind, path: &str) -> notify::Result<Event> {
        Ok(Event::new(kind).add_path(PathBuf::from(path)))
    }

    #[test]
    fn reloads_for_changes_but_not_for_reads_or_cache_writes() {
        let cache = Some(Path::new("/p/.cache"));
        let create = EventKind::Create(CreateKind::File);
        assert!(deployment(&event(create, "/p/10-a.wasm"), cache));
        assert!(deployment(&event(create, "/p/..data"), cache));
        assert!(!deployment(&event(create, "/p/.cache/x.cwasm"), cache));
        assert!(!deployment(
            &event(EventKind::Access(AccessKind::Any), "/p/10-a.wasm"),
            cache
        ));
        let rescan = Ok(Event::new(EventKind::Other).set_flag(Flag::Rescan));
        assert!(deployment(&rescan, cache));
        assert!(deployment(
            &Err(notify::Error::generic("queue overflow")),
            cache
        ));
    }
}
