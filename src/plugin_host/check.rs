//! `hookrelay plugin check`: loads one plugin file the way the relay would (interface, WASI
//! sandbox, limits, `init`) and says what it found.

use std::{path::Path, time::Instant};

use super::{
    PluginError,
    engine::{Host, wasm_digest},
    plugin::Plugin,
    settings::{Defaults, Settings, read_beside},
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
    let toml = read_beside(wasm)?;
    let settings = Settings::parse(toml.as_deref(), defaults)?;
    let has_settings = toml.is_some();
    let name = wasm
        .file_stem()
        .map_or_else(|| "plugin".into(), |s| s.to_string_lossy().into_owned());
    let host = Host::new(None)?;
    let started = Instant::now();
    let digest = wasm_digest(&bytes);
    let (component, _) = host.compile(&bytes, &digest)?;
    let compile_ms = started.elapsed().as_millis();
    let started = Instant::now();
    // The source digest only tells reloads apart: none here.
    let plugin = Plugin::load(
        &host,
        &name,
        &component,
        settings,
        [0; 32],
        digest,
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
