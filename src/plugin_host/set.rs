//! A plugin set: every `NAME.wasm` of a folder, in file-name order, each with its `NAME.toml`.
//! A set never changes once built; reloading builds a new one, reusing the plugins whose files
//! did not change (their warm instances and state go on).

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use sha2::{Digest, Sha256};

use super::{
    PluginError,
    chain::{self, Verdict},
    engine::{Host, wasm_digest},
    plugin::Plugin,
    settings::{Defaults, Settings, read_beside},
};
use crate::{event::Event, hooks::Hook, metrics::Metrics};

/// The plugins in force, in the order they run.
#[derive(Default)]
pub struct PluginSet {
    pub plugins: Vec<Arc<Plugin>>,
}

/// A plugin run because it was named, not because of its scope (its `init`'s events still
/// choose what it sees).
struct Named(Arc<Plugin>);

impl AsRef<Named> for Named {
    fn as_ref(&self) -> &Named {
        self
    }
}

impl chain::Stage for Named {
    fn applies(&self, event: &Event, _hook: &Hook) -> bool {
        self.0.wants(&event.id)
    }

    fn on_error(&self) -> super::settings::OnError {
        self.0.on_error()
    }

    fn call(
        &self,
        event: &super::plugin::WitEvent,
        hook: &super::plugin::WitHook,
        meeting: Option<&Arc<str>>,
    ) -> Result<super::plugin::Action, super::plugin::Failure> {
        self.0.call(event, hook, meeting)
    }
}

/// A plugin file that could not be loaded, and why.
#[derive(Debug)]
pub struct LoadFailure {
    pub name: String,
    pub error: PluginError,
}

/// What building a set did.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Plugins compiled and started (new or changed).
    pub(super) loaded: Vec<String>,
    /// Of those, how many came from the compile cache.
    pub(super) from_cache: usize,
    /// Plugins kept as they were (files unchanged).
    unchanged: usize,
    /// Plugins gone from the folder.
    pub(super) removed: Vec<String>,
    pub failures: Vec<LoadFailure>,
}

impl PluginSet {
    pub fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }

    /// Whether any plugin would see this (event, hook) pair: its scope and `init`'s event
    /// list take it.
    pub fn takes(&self, event: &Event, hook: &Hook) -> bool {
        use chain::Stage;
        self.plugins.iter().any(|p| p.applies(event, hook))
    }

    /// Applies the chain to one (event, hook) pair.
    pub fn apply(&self, event: &Event, hook: &Hook, ts: u64) -> Verdict {
        chain::run::<Plugin>(&self.plugins, event, hook, ts)
    }

    /// Applies the chain of the plugins named `names` (file names without `.wasm`), in the
    /// set's order and whatever their `[scope]`, to `event` going to `hook`: a destination's
    /// `plugins`. A name not in the set is passed over.
    pub fn apply_named(&self, names: &[String], event: &Event, hook: &Hook, ts: u64) -> Verdict {
        let named: Vec<Named> = self
            .plugins
            .iter()
            .filter(|p| names.iter().any(|n| n == p.name()))
            .map(|p| Named(p.clone()))
            .collect();
        chain::run::<Named>(&named, event, hook, ts)
    }

    /// Builds the set for the files now in `dir`, starting from `previous`: unchanged plugins
    /// are reused; a plugin whose new files fail to load keeps its previous version.
    pub fn load_dir(
        host: &Host,
        dir: &Path,
        defaults: &Defaults,
        previous: &PluginSet,
        metrics: &Arc<Metrics>,
    ) -> (PluginSet, LoadReport) {
        let mut report = LoadReport::default();
        let files = match wasm_files(dir) {
            Ok(f) => f,
            Err(error) => {
                report.failures.push(LoadFailure {
                    name: dir.display().to_string(),
                    error,
                });
                let keep = previous.plugins.clone();
                return (PluginSet { plugins: keep }, report);
            }
        };
        let mut plugins = Vec::with_capacity(files.len());
        for (name, path) in &files {
            let old = previous.plugins.iter().find(|p| p.name() == name);
            match load_one(host, name, path, defaults, old, metrics) {
                Ok(Loaded::Unchanged(p)) => {
                    report.unchanged += 1;
                    plugins.push(p);
                }
                Ok(Loaded::New(p, cached)) => {
                    report.loaded.push(name.clone());
                    report.from_cache += usize::from(cached);
                    plugins.push(p);
                }
                Err(error) => {
                    report.failures.push(LoadFailure {
                        name: name.clone(),
                        error,
                    });
                    // The previous version goes on; with none, a placeholder applies the
                    // plugin's on_error policy to its events.
                    let keep = old.cloned().unwrap_or_else(|| {
                        let settings =
                            Settings::load_beside(path, defaults).unwrap_or_else(|_| Settings {
                                limits: defaults.clone(),
                                ..Settings::default()
                            });
                        Arc::new(Plugin::broken(name, settings, [0; 32], metrics.clone()))
                    });
                    plugins.push(keep);
                }
            }
        }
        for p in &previous.plugins {
            if !files.iter().any(|(n, _)| n == p.name()) {
                p.forget_metrics();
                report.removed.push(p.name().to_string());
            }
        }
        (PluginSet { plugins }, report)
    }
}

enum Loaded {
    Unchanged(Arc<Plugin>),
    /// A new plugin; whether its compiled code came from the cache.
    New(Arc<Plugin>, bool),
}

fn load_one(
    host: &Host,
    name: &str,
    path: &Path,
    defaults: &Defaults,
    old: Option<&Arc<Plugin>>,
    metrics: &Arc<Metrics>,
) -> Result<Loaded, PluginError> {
    let io = |p: &Path, e: std::io::Error| PluginError::Io(p.display().to_string(), e.to_string());
    let wasm = std::fs::read(path).map_err(|e| io(path, e))?;
    let toml = read_beside(path)?;
    let digest = wasm_digest(&wasm);
    let mut hasher = Sha256::new();
    hasher.update(&digest);
    hasher.update([u8::from(toml.is_some())]);
    hasher.update(toml.as_deref().unwrap_or_default());
    let source: [u8; 32] = hasher.finalize().into();
    if let Some(old) = old
        && old.source == source
    {
        return Ok(Loaded::Unchanged(old.clone()));
    }
    let settings = Settings::parse(toml.as_deref(), defaults)?;
    let (component, cached) = host.compile(&wasm, &digest)?;
    let plugin = Plugin::load(
        host,
        name,
        &component,
        settings,
        source,
        digest,
        metrics.clone(),
    )?;
    Ok(Loaded::New(Arc::new(plugin), cached))
}

/// `(name, path)` of every `NAME.wasm` in `dir`, sorted by file name (names that are not UTF-8
/// are skipped, with a warning).
fn wasm_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, PluginError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| PluginError::Io(dir.display().to_string(), e.to_string()))?;
    let mut files: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
        .filter_map(|p| {
            let Some(name) = p.file_stem().and_then(|s| s.to_str()).map(str::to_string) else {
                tracing::warn!(path = %p.display(), "ignoring a plugin file whose name is not UTF-8");
                return None;
            };
            (!name.starts_with('.')).then_some((name, p))
        })
        .collect();
    files.sort_by(|a, b| a.1.file_name().cmp(&b.1.file_name()));
    Ok(files)
}
