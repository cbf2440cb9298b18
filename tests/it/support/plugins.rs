//! Plugins for the tests: the crates in `plugins/` built once per run (by the same script CI
//! and the README use; `scripts/test.sh` builds them before the tests and says so in
//! `TEST_PLUGINS_BUILT`), and a plugin folder that tests change while the relay runs.

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
};

/// Where `scripts/build-plugins.sh` puts the components.
fn built_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/target/wasm32-wasip2/release")
}

/// The component built from the crate `crate_name` (e.g. `event_filter`, `testing_loop`).
pub(crate) fn plugin_wasm(crate_name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        // scripts/test.sh built them once for the whole run (each test is a process of its own).
        if std::env::var_os("TEST_PLUGINS_BUILT").is_some() {
            return;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-plugins.sh");
        let status = std::process::Command::new(script)
            .status()
            .expect("run scripts/build-plugins.sh");
        assert!(status.success(), "building the plugins failed");
    });
    let path = built_dir().join(format!("{crate_name}.wasm"));
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// A plugin folder of the test's own.
pub(crate) struct PluginDir {
    dir: tempfile::TempDir,
}

impl PluginDir {
    pub(crate) fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Installs `NAME.wasm` from the crate `crate_name`, and `NAME.toml` when `settings` is
    /// given, the way an operator should: written aside, then renamed into place.
    pub(crate) fn add(&self, name: &str, crate_name: &str, settings: Option<&str>) {
        if let Some(text) = settings {
            self.write(&format!("{name}.toml"), text.as_bytes());
        }
        let bytes = std::fs::read(plugin_wasm(crate_name)).expect("read plugin");
        self.write(&format!("{name}.wasm"), &bytes);
    }

    /// Writes `file` atomically.
    pub(crate) fn write(&self, file: &str, bytes: &[u8]) {
        let tmp = self.dir.path().join(format!(".{file}.tmp"));
        std::fs::write(&tmp, bytes).expect("write");
        std::fs::rename(&tmp, self.dir.path().join(file)).expect("rename");
    }

    pub(crate) fn remove(&self, file: &str) {
        std::fs::remove_file(self.dir.path().join(file)).expect("remove");
    }
}
