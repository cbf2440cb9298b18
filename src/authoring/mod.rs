//! The plugin authors' workflow around the engine: [`project`] finds a plugin project and its
//! language, [`new`] writes one from a template, [`toolchain`] builds it with pinned tools it
//! installs when missing, [`cases`] runs golden test cases through the relay's own mapper,
//! matcher and chain, [`deploy`] puts a checked plugin into a running relay's folder, and
//! [`record`] writes what a bus carries to a file that `replay` and the cases read.

pub mod cases;
pub mod deploy;
pub mod new;
pub mod project;
pub mod record;
pub mod toolchain;

pub use project::{Lang, Project};

/// What went wrong in an author's command, said so the author can act on it.
#[derive(Debug, thiserror::Error)]
pub enum AuthoringError {
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {error}")]
    Io { path: String, error: String },
    #[error("{0}")]
    Build(String),
    #[error("{path}: line {line}: {error}")]
    Case {
        path: String,
        line: usize,
        error: String,
    },
    #[error("{0}")]
    Plugin(String),
    #[error("{0}")]
    Record(String),
}

impl AuthoringError {
    pub fn io(path: &std::path::Path, error: impl std::fmt::Display) -> Self {
        Self::Io {
            path: path.display().to_string(),
            error: error.to_string(),
        }
    }
}

/// Loads the plugins of `dir` in order, as the relay would, compiling through the user's
/// compile cache (so a large Python or JavaScript component is compiled once, not at every
/// test run).
///
/// # Errors
/// Every plugin that fails to load, one line each.
pub fn load_chain(
    dir: &std::path::Path,
    defaults: &crate::plugin_host::Defaults,
) -> Result<crate::plugin_host::PluginSet, AuthoringError> {
    use crate::plugin_host::{Host, PluginSet, cache_folder};
    let host = Host::new(cache_folder(None)).map_err(|e| AuthoringError::Plugin(e.to_string()))?;
    let (set, report) = PluginSet::load_dir(
        &host,
        dir,
        defaults,
        &PluginSet::default(),
        &crate::metrics::Metrics::new(),
    );
    if report.failures.is_empty() {
        return Ok(set);
    }
    let lines: Vec<String> = report
        .failures
        .iter()
        .map(|f| format!("plugin {}: {}", f.name, f.error))
        .collect();
    Err(AuthoringError::Plugin(lines.join("\n")))
}
