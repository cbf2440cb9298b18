//! WebAssembly event plugins (`wit/relay.wit`): [`engine`] compiles them (with a cache that
//! must be the relay's own),
//! [`plugin`] runs one (in the sandbox of `imports`, failures counted by `breaker`), [`chain`] applies them in order to an (event, hook) pair,
//! [`set`] loads a plugin folder into an immutable set, and [`reload`] watches the folder and
//! swaps in a new set without stopping the relay.

mod breaker;
mod cache;
mod calls;
mod chain;
mod check;
mod deferred;
mod engine;
mod imports;
mod limits;
mod plugin;
mod reload;
mod rules;
mod set;
mod settings;
mod threads;

pub(crate) use cache::folder as cache_folder;
pub(crate) use calls::noting;
pub(crate) use reload::Watcher;

pub use chain::Verdict;
pub use check::check_file;
pub(crate) use deferred::Deferred;
pub use engine::{Host, wasm_digest};
pub use plugin::Plugin;
pub(crate) use reload::Plugins;
pub use set::PluginSet;
pub use settings::{Defaults, Settings};

/// Why a plugin could not be loaded (the previous version, if any, keeps running).
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("cannot read {0}: {1}")]
    Io(String, String),
    #[error("invalid plugin settings: {0}")]
    Settings(String),
    #[error("cannot set up the WebAssembly engine: {0}")]
    Engine(String),
    #[error("not a valid WebAssembly component: {0}")]
    Compile(String),
    #[error("does not fit the bbb:relay/plugin interface: {0}")]
    Interface(String),
    #[error("init failed: {0}")]
    Init(String),
    #[error("init refused: {0}")]
    Refused(String),
}

impl PluginError {
    /// The message without its prefix (for errors shown under another heading).
    pub fn detail(&self) -> String {
        match self {
            Self::Settings(s)
            | Self::Engine(s)
            | Self::Compile(s)
            | Self::Interface(s)
            | Self::Init(s)
            | Self::Refused(s) => s.clone(),
            Self::Io(p, e) => format!("{p}: {e}"),
        }
    }
}

/// One line for the log: the error and its causes, without a backtrace.
pub(crate) fn describe(e: &wasmtime::Error) -> String {
    format!("{e:#}")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
