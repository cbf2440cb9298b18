//! `hookrelay plugin check`: loads one plugin file the way the relay would (interface, WASI
//! sandbox, limits, `init`) and says what it found.

use std::{path::Path, time::Instant};

use sha2::{Digest, Sha256};

use super::{
    PluginError,
    engine::Host,
    plugin::Plugin,
    settings::{Defaults, Settings},
};
use crate::metrics::Metrics;

/// What a successful check found.
#[derive(Debug)]
pub struct CheckReport {
    pub name: String,
    /// Event ids `init` asked for; empty for all.
    pub wants: Vec<String>,
    pub compile_ms: u128,
    pub init_ms: u128,
    /// Whether a `NAME.toml` was read beside the file.
    pub has_settings: bool,
}

/// Compiles `wasm`, links it against `bbb:relay/plugin`, and runs `init` under the default
/// limits (or those of the `NAME.toml` beside it).
///
/// # Errors
/// Says what is wrong: unreadable file, invalid settings, not a component, wrong interface, or
/// `init` failing.
pub fn check_file(wasm: &Path, defaults: &Defaults) -> Result<CheckReport, PluginError> {
    let bytes = std::fs::read(wasm)
        .map_err(|e| PluginError::Io(wasm.display().to_string(), e.to_string()))?;
    let settings = Settings::load_beside(wasm, defaults)?;
    let has_settings = wasm.with_extension("toml").is_file();
    let name = wasm
        .file_stem()
        .map_or_else(|| "plugin".into(), |s| s.to_string_lossy().into_owned());
    let host = Host::new(None)?;
    let started = Instant::now();
    let (component, _) = host.compile(&bytes)?;
    let compile_ms = started.elapsed().as_millis();
    let started = Instant::now();
    let source: [u8; 32] = Sha256::digest(&bytes).into();
    let plugin = Plugin::load(
        &host,
        &name,
        &component,
        settings,
        source,
        hex::encode(source),
        Metrics::new(),
    )?;
    Ok(CheckReport {
        name,
        wants: plugin.wanted(),
        compile_ms,
        init_ms: started.elapsed().as_millis(),
        has_settings,
    })
}
