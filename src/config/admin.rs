//! `[admin]`: the admin API (JSON, and a status page for people), on listeners of its own,
//! never under the BBB API's path: what each hook got, its state, its recent attempts
//! (`docs/admin.md`).
//!
//! By default it is a Unix socket in the runtime directory, named after the API's port (two
//! relays on one host never share it), that only the service's user and group may open: the
//! commands of the same host reach it, and no port is taken from what a BBB server runs. A TCP
//! listener exists only when `bind` is set, and it always wants a token: the configured one, or
//! one derived from the shared secret ([`derived_token`]), so that a caller who could not call
//! `hooks/list` gets nothing from it either.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
};

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::base::secret::Secret;

/// The admin API's listeners and credentials.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// `false` serves no admin API (the `hooks show` and `deliveries` commands then cannot
    /// reach the relay).
    pub enabled: bool,
    /// The Unix socket; empty: `admin-<api port>.sock` in the runtime directory
    /// ([`runtime_dirs`]). Mode 0660: the relay's user and group.
    pub socket: PathBuf,
    /// A TCP listener as well (for a browser, or another host); none by default. A loopback
    /// address without `bearer_token` wants the token derived from the shared secret
    /// (`hookrelay admin-token` prints it); any other address needs `bearer_token`.
    pub bind: Option<SocketAddr>,
    /// Calls over TCP must send `Authorization: Bearer <token>` (compared in constant time), or
    /// in a browser the password of user `admin`; empty: the derived token.
    pub bearer_token: Secret,
    /// The socket answers only for `localhost` and these host names (a request with another
    /// `Host`, e.g. a page re-resolved to a tunnel's port, gets 421).
    pub allowed_hosts: Vec<String>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            socket: PathBuf::new(),
            bind: None,
            bearer_token: Secret::default(),
            allowed_hosts: Vec::new(),
        }
    }
}

/// What the derived token is an HMAC of, keyed with the shared secret.
const TOKEN_LABEL: &[u8] = b"hookrelay admin API token v1";

/// The admin API's token when none is configured: HMAC-SHA256 of a fixed label keyed with the
/// shared secret, hex. Whoever holds the secret (and could call `hooks/list`) can compute it;
/// the token does not give the secret away.
pub fn derived_token(secret: &Secret) -> Secret {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes()) else {
        return Secret::default();
    };
    mac.update(TOKEN_LABEL);
    Secret::new(hex::encode(mac.finalize().into_bytes()))
}

impl AdminConfig {
    /// The token TCP calls must send.
    pub fn token(&self, secret: &Secret) -> Secret {
        if self.bearer_token.is_empty() {
            derived_token(secret)
        } else {
            self.bearer_token.clone()
        }
    }

    /// The socket's file name when none is configured.
    pub fn socket_name(api_port: u16) -> String {
        format!("admin-{api_port}.sock")
    }

    /// Where the relay makes its socket: the configured path, or its name in the first runtime
    /// directory that exists or can be made. `None` when the admin API is off.
    pub fn socket_to_bind(&self, api_port: u16) -> Option<PathBuf> {
        if !self.enabled {
            return None;
        }
        if !self.socket.as_os_str().is_empty() {
            return Some(self.socket.clone());
        }
        let name = Self::socket_name(api_port);
        let dirs = runtime_dirs();
        let dir = dirs
            .iter()
            .find(|d| usable_dir(d))
            .or_else(|| dirs.last())?;
        Some(dir.join(name))
    }

    /// Where a command looks for the socket of the relay of this configuration: the configured
    /// path, or the first runtime directory that has it (else where the relay would make it).
    pub fn socket_to_reach(&self, api_port: u16) -> Option<PathBuf> {
        if !self.socket.as_os_str().is_empty() {
            return Some(self.socket.clone());
        }
        let name = Self::socket_name(api_port);
        runtime_dirs()
            .into_iter()
            .map(|d| d.join(&name))
            .find(|p| p.exists())
            .or_else(|| self.socket_to_bind(api_port))
    }
}

/// The runtime directories, in the order they are tried: systemd's `$RUNTIME_DIRECTORY` (the
/// unit's `RuntimeDirectory=`), `/run/hookrelay` (the package's), `$XDG_RUNTIME_DIR/hookrelay`,
/// then `hookrelay-<uid>` in the temporary directory.
pub fn runtime_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("RUNTIME_DIRECTORY").filter(|d| !d.is_empty()) {
        // systemd gives several, colon-separated, when the unit names several.
        if let Some(first) = d.to_string_lossy().split(':').next() {
            dirs.push(PathBuf::from(first));
        }
    }
    dirs.push(PathBuf::from("/run/hookrelay"));
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(d).join("hookrelay"));
    }
    // SAFETY: getuid cannot fail and touches no memory.
    let uid = unsafe { libc::getuid() };
    dirs.push(std::env::temp_dir().join(format!("hookrelay-{uid}")));
    dirs
}

/// Whether the relay can make its socket in `dir` (it exists and is writable to it).
fn usable_dir(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    dir.is_dir() && unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_derived_token_depends_on_the_secret_and_does_not_show_it() {
        let a = derived_token(&Secret::new("first-shared-secret"));
        let b = derived_token(&Secret::new("second-shared-secret"));
        assert_eq!(a.expose().len(), 64);
        assert_ne!(a.expose(), b.expose());
        assert!(!a.expose().contains("first"));
        assert_eq!(
            a.expose(),
            derived_token(&Secret::new("first-shared-secret")).expose()
        );
    }

    #[test]
    fn a_configured_token_wins_over_the_derived_one() {
        let secret = Secret::new("shared-secret-123");
        let mut admin = AdminConfig::default();
        assert_eq!(
            admin.token(&secret).expose(),
            derived_token(&secret).expose()
        );
        admin.bearer_token = Secret::new("mine");
        assert_eq!(admin.token(&secret).expose(), "mine");
    }

    #[test]
    fn the_default_socket_is_named_after_the_api_port() {
        let admin = AdminConfig::default();
        let a = admin.socket_to_bind(3005).unwrap();
        let b = admin.socket_to_bind(4005).unwrap();
        assert_eq!(a.file_name().unwrap(), "admin-3005.sock");
        assert_ne!(a, b);
        let configured = AdminConfig {
            socket: PathBuf::from("/x/y.sock"),
            ..AdminConfig::default()
        };
        assert_eq!(
            configured.socket_to_bind(1),
            Some(PathBuf::from("/x/y.sock"))
        );
        let off = AdminConfig {
            enabled: false,
            ..AdminConfig::default()
        };
        assert_eq!(off.socket_to_bind(1), None);
    }
}
