//! The one wasmtime [`Engine`] the relay compiles plugins with, its epoch ticker (the clock of
//! every call's CPU deadline), and compilation through the on-disk cache.

use std::{
    hash::{Hash, Hasher},
    path::{Path, PathBuf},
    sync::{Arc, Weak},
    time::Duration,
};

use sha2::{Digest, Sha256};
use wasmtime::{Config, Engine, component::Component};

use super::PluginError;

/// How often the epoch advances: call deadlines are counted in these ticks.
pub const TICK: Duration = Duration::from_millis(1);

/// The engine and where it caches compiled components.
#[derive(Clone)]
pub struct Host {
    pub engine: Engine,
    /// `None`: compile every time.
    cache_dir: Option<PathBuf>,
    /// Hex digest of the engine's compatibility hash: part of every cache key.
    engine_key: String,
    /// Keeps the ticker thread alive; it ends when the last `Host` is dropped.
    _alive: Arc<()>,
}

impl Host {
    /// Builds the engine and starts its epoch ticker.
    ///
    /// # Errors
    /// When wasmtime refuses the configuration (an unsupported host).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Self, PluginError> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        // Plugins are small: keep compile time low for hot reloads.
        config.cranelift_opt_level(wasmtime::OptLevel::Speed);
        let engine =
            Engine::new(&config).map_err(|e| PluginError::Engine(super::plugin::describe(&e)))?;
        let alive = Arc::new(());
        spawn_ticker(engine.clone(), Arc::downgrade(&alive));
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = hex::encode(hasher.0.finalize());
        Ok(Self {
            engine,
            cache_dir,
            engine_key,
            _alive: alive,
        })
    }

    /// Compiles `wasm`, or loads it from the cache when this engine compiled the same bytes
    /// before. Returns the component and whether it came from the cache.
    ///
    /// # Errors
    /// When the bytes are not a valid component.
    pub fn compile(&self, wasm: &[u8]) -> Result<(Component, bool), PluginError> {
        let cached = self
            .cache_dir
            .as_ref()
            .map(|dir| self.cache_path(dir, wasm));
        if let Some(path) = &cached
            && let Ok(bytes) = std::fs::read(path)
        {
            // SAFETY: the file is in the relay's own cache folder, named after the hash of the
            // source bytes and of this engine's settings, and was written (atomically) by
            // `Component::serialize` of this same engine build.
            match unsafe { Component::deserialize(&self.engine, &bytes) } {
                Ok(c) => return Ok((c, true)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "ignoring an unusable cached plugin")
                }
            }
        }
        let component = Component::new(&self.engine, wasm)
            .map_err(|e| PluginError::Compile(super::plugin::describe(&e)))?;
        if let Some(path) = cached
            && let Err(e) = store_cached(&path, &component)
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot cache a compiled plugin");
        }
        Ok((component, false))
    }

    fn cache_path(&self, dir: &Path, wasm: &[u8]) -> PathBuf {
        let digest = hex::encode(Sha256::digest(wasm));
        dir.join(format!("{digest}-{}.cwasm", &self.engine_key[..16]))
    }
}

/// Writes the compiled component next to its final name, then renames it into place, so that a
/// reader never sees half a file.
fn store_cached(path: &Path, component: &Component) -> Result<(), String> {
    let bytes = component
        .serialize()
        .map_err(|e| super::plugin::describe(&e))?;
    let io = |e: std::io::Error| e.to_string();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

fn spawn_ticker(engine: Engine, alive: Weak<()>) {
    let spawned = std::thread::Builder::new()
        .name("plugin-epoch".into())
        .spawn(move || {
            while alive.strong_count() > 0 {
                std::thread::sleep(TICK);
                engine.increment_epoch();
            }
        });
    if let Err(e) = spawned {
        // Without a ticker deadlines never fire; plugins would still run, unbounded.
        tracing::error!(error = %e, "cannot start the plugin deadline thread");
    }
}

/// Feeds `Hash` output into SHA-256, for a cache key that is stable across runs.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}
