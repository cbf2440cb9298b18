//! The compile cache: compiled components on disk, so that a restart does not recompile. Loading
//! compiled code is trusted code execution, so the folder must be the relay's own (owned by its
//! user, writable by nobody else) and every file carries a SHA-256 of its contents, checked
//! before use; anything else is ignored and the plugin is compiled instead.

use std::{
    io::Write,
    os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt},
    path::{Path, PathBuf},
    time::{SystemTime, UNIX_EPOCH},
};

use sha2::{Digest, Sha256};

/// The cache folder: `configured` (`plugins.cache_dir`); else systemd's `$CACHE_DIRECTORY`
/// (its first entry, as `plugins/`), `$XDG_CACHE_HOME/hookrelay` or `~/.cache/hookrelay`, in
/// that order.
pub(crate) fn folder(configured: Option<&Path>) -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    configured.map(Path::to_path_buf).or_else(|| {
        // systemd may list several folders, separated by ':'.
        env("CACHE_DIRECTORY")
            .and_then(|d| d.to_str()?.split(':').next().map(PathBuf::from))
            .map(|d| d.join("plugins"))
            .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("hookrelay")))
            .or_else(|| env("HOME").map(|d| d.join(".cache/hookrelay")))
    })
}

/// A cache folder that passed the ownership checks.
#[derive(Clone, Debug)]
pub(crate) struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// Creates `dir` (mode 0700) if needed and checks that it is a folder owned by this
    /// process's user and writable by no one else.
    ///
    /// # Errors
    /// Says why the folder cannot be trusted.
    pub(crate) fn open(dir: &Path) -> Result<Self, String> {
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let meta = std::fs::symlink_metadata(dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        if !meta.is_dir() {
            return Err(format!("{} is not a folder", dir.display()));
        }
        // SAFETY: geteuid cannot fail and touches no memory.
        let me = unsafe { libc::geteuid() };
        if me != meta.uid() {
            return Err(format!("{} is owned by another user", dir.display()));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{} is writable by other users (chmod go-w it)",
                dir.display()
            ));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The compiled bytes stored under `name`, if present and intact.
    pub(crate) fn read(&self, name: &str) -> Option<Vec<u8>> {
        let path = self.path(name);
        let mut bytes = std::fs::read(&path).ok()?;
        if bytes.len() < 32 || Sha256::digest(&bytes[32..])[..] != bytes[..32] {
            tracing::warn!(path = %path.display(), "ignoring a damaged cached plugin");
            return None;
        }
        bytes.drain(..32);
        Some(bytes)
    }

    /// Stores `compiled` under `name`: written aside, flushed, then renamed into place.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub(crate) fn write(&self, name: &str, compiled: &[u8]) -> std::io::Result<()> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let tmp = self.path(&format!(".{name}.{}.{nanos}.tmp", std::process::id()));
        let result = (|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(&Sha256::digest(compiled))?;
            file.write_all(compiled)?;
            file.sync_all()?;
            std::fs::rename(&tmp, self.path(name))
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    /// Removes the file stored under `name` (a version no longer in use).
    pub(crate) fn remove(&self, name: &str) {
        let path = self.path(name);
        if let Err(e) = std::fs::remove_file(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove a cached plugin");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn stores_checks_and_refuses_damaged_files_and_open_folders() {
        let root = tempfile::tempdir().expect("temp dir");
        let cache = Cache::open(&root.path().join("c")).expect("private folder");
        cache.write("a.cwasm", b"compiled code").expect("write");
        assert_eq!(
            cache.read("a.cwasm").as_deref(),
            Some(&b"compiled code"[..])
        );
        let mut bytes = std::fs::read(cache.path("a.cwasm")).expect("file");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(cache.path("a.cwasm"), bytes).expect("damage");
        assert!(cache.read("a.cwasm").is_none());
        cache.remove("a.cwasm");
        assert!(cache.read("a.cwasm").is_none());

        let open = root.path().join("open");
        std::fs::create_dir(&open).expect("dir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let err = Cache::open(&open).expect_err("world-writable");
        assert!(err.contains("writable by other users"), "{err}");
    }
}
