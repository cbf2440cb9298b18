//! The one wasmtime [`Engine`] the relay compiles plugins with, its epoch ticker (the clock of
//! every call's deadline, in wall-clock time), and compilation through the on-disk cache.

use std::{
    hash::{Hash, Hasher},
    path::PathBuf,
    sync::{Arc, Weak},
    time::Duration,
};

use sha2::{Digest, Sha256};
use wasmtime::{Config, Engine, component::Component};

use super::{PluginError, cache::Cache};

/// How often the epoch advances: call deadlines are counted in these ticks.
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// The engine and where it caches compiled components.
#[derive(Clone)]
pub struct Host {
    pub(super) engine: Engine,
    /// `None`: compile every time.
    cache: Option<Cache>,
    /// Hex digest of the engine's compatibility hash: part of every cache key.
    engine_key: String,
    /// Keeps the ticker thread alive; it ends when the last `Host` (or plugin, which holds
    /// one) is dropped.
    _alive: Arc<()>,
}

impl Host {
    /// Builds the engine and starts its epoch ticker. A cache folder that cannot be trusted is
    /// logged and not used.
    ///
    /// # Errors
    /// When wasmtime refuses the configuration (an unsupported host).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Self, PluginError> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).map_err(|e| PluginError::Engine(super::describe(&e)))?;
        let alive = Arc::new(());
        spawn_ticker(engine.clone(), Arc::downgrade(&alive));
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = hex::encode(hasher.0.finalize());
        let cache = cache_dir.and_then(|dir| match Cache::open(&dir) {
            Ok(c) => Some(c),
            Err(why) => {
                tracing::warn!(reason = %why, "plugin compile cache not used");
                None
            }
        });
        Ok(Self {
            engine,
            cache,
            engine_key,
            _alive: alive,
        })
    }

    /// The cache file name of a `.wasm` whose SHA-256 is `wasm_digest` (hex).
    pub fn cache_name(&self, wasm_digest: &str) -> String {
        format!("{wasm_digest}-{}.cwasm", &self.engine_key[..16])
    }

    /// Forgets the cached code of a `.wasm` no longer deployed.
    pub fn uncache(&self, wasm_digest: &str) {
        if let Some(cache) = &self.cache {
            cache.remove(&self.cache_name(wasm_digest));
        }
    }

    /// Compiles `wasm` (whose SHA-256 in hex is `wasm_digest`, see [`wasm_digest`]), or loads
    /// it from the cache when this engine compiled the same bytes before. Returns the component
    /// and whether it came from the cache.
    ///
    /// # Errors
    /// When the bytes are not a valid component.
    pub fn compile(
        &self,
        wasm: &[u8],
        wasm_digest: &str,
    ) -> Result<(Component, bool), PluginError> {
        let name = self.cache_name(wasm_digest);
        if let Some(cache) = &self.cache
            && let Some(bytes) = cache.read(&name)
        {
            // SAFETY: the bytes come from the relay's own cache folder (owned by this user,
            // writable by no one else, checked by `Cache::open`), match the SHA-256 written
            // with them, and are named after the source's hash and this engine's settings:
            // they are what `Component::serialize` of this same engine build produced.
            match unsafe { Component::deserialize(&self.engine, &bytes) } {
                Ok(c) => return Ok((c, true)),
                Err(e) => {
                    tracing::warn!(file = %name, error = %e, "ignoring an unusable cached plugin")
                }
            }
        }
        let component = Component::new(&self.engine, wasm)
            .map_err(|e| PluginError::Compile(super::describe(&e)))?;
        if let Some(cache) = &self.cache {
            let stored = component
                .serialize()
                .map_err(|e| super::describe(&e))
                .and_then(|bytes| cache.write(&name, &bytes).map_err(|e| e.to_string()));
            if let Err(e) = stored {
                tracing::warn!(file = %name, error = %e, "cannot cache a compiled plugin");
            }
        }
        Ok((component, false))
    }
}

/// The SHA-256 of a `.wasm`, in hex: its compile cache key, computed once per load.
pub fn wasm_digest(wasm: &[u8]) -> String {
    hex::encode(Sha256::digest(wasm))
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
