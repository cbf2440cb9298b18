//! The sockets the relay serves on: bound before the relay starts (tests bind port 0), each
//! failure naming its configuration key and address in one line.

use std::{
    io,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use tokio::net::{TcpListener, UnixListener};

use crate::config::Config;

/// The sockets the relay serves on, bound by the caller (tests bind port 0).
pub struct Listeners {
    pub api: TcpListener,
    pub metrics: Option<TcpListener>,
    /// The admin API's TCP listener (`admin.bind`), when configured.
    pub admin: Option<TcpListener>,
    /// The admin API's Unix socket (`admin.socket`).
    pub admin_socket: Option<AdminSocket>,
}

/// The admin API's Unix socket; its file is removed when the relay stops.
pub struct AdminSocket {
    pub(super) listener: UnixListener,
    pub(super) path: PathBuf,
}

/// A listener that cannot be bound: its key, its address and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} ({key}): {source}")]
pub struct BindError {
    /// The configuration key of the address, e.g. `api.bind`.
    key: &'static str,
    addr: String,
    #[source]
    source: io::Error,
}

impl Listeners {
    /// Binds `metrics.bind` when the metrics are on (an edge's only listener).
    ///
    /// # Errors
    /// When it cannot be bound: the key and the address, in one line.
    pub async fn bind_metrics(config: &Config) -> Result<Option<TcpListener>, BindError> {
        match config.metrics.enabled {
            true => Ok(Some(tcp("metrics.bind", config.metrics.bind).await?)),
            false => Ok(None),
        }
    }

    /// Binds the addresses of the configuration.
    ///
    /// # Errors
    /// When an address cannot be bound: the key and the address, in one line.
    pub async fn bind(config: &Config) -> Result<Self, BindError> {
        let api = tcp("api.bind", config.api.bind).await?;
        let metrics = Self::bind_metrics(config).await?;
        let admin = match config.admin.bind.filter(|_| config.admin.enabled) {
            Some(addr) => Some(tcp("admin.bind", addr).await?),
            None => None,
        };
        let admin_socket = match config.admin.socket_to_bind(config.api.bind.port()) {
            Some(path) => Some(AdminSocket::bind(path)?),
            None => None,
        };
        Ok(Self {
            api,
            metrics,
            admin,
            admin_socket,
        })
    }
}

async fn tcp(key: &'static str, addr: std::net::SocketAddr) -> Result<TcpListener, BindError> {
    TcpListener::bind(addr).await.map_err(|source| BindError {
        key,
        addr: addr.to_string(),
        source,
    })
}

impl AdminSocket {
    /// Makes the socket at `path`, mode 0660 (the relay's user and group). A file left there by
    /// a relay that was killed is replaced; a socket another relay answers on is not.
    ///
    /// # Errors
    /// When the folder cannot be made, another relay listens there, or the socket cannot be
    /// made.
    pub fn bind(path: PathBuf) -> Result<Self, BindError> {
        let fail = |source: io::Error| BindError {
            key: "admin.socket",
            addr: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.is_dir()
        {
            std::fs::create_dir_all(dir).map_err(fail)?;
            // Made here (not by systemd or the package): the relay's user alone.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
        }
        if path.exists() {
            if std::os::unix::net::UnixStream::connect(&path).is_ok() {
                return Err(fail(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    "another relay listens on this socket",
                )));
            }
            std::fs::remove_file(&path).map_err(fail)?;
        }
        let listener = UnixListener::bind(&path).map_err(fail)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o660)).map_err(fail)?;
        Ok(Self { listener, path })
    }
}

/// Removes the socket file at `path` once its server stopped (when it is still ours).
pub(super) fn remove_socket(path: &Path) {
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), error = %e, "cannot remove the admin API's socket");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_socket_left_by_a_killed_relay_is_replaced_and_a_live_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("admin.sock");
        let first = AdminSocket::bind(path.clone()).expect("first");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);
        let Err(err) = AdminSocket::bind(path.clone()) else {
            panic!("in use")
        };
        assert_eq!(err.key, "admin.socket");
        assert_eq!(err.source.kind(), io::ErrorKind::AddrInUse);
        drop(first);
        // The file stays (as after kill -9); nothing answers on it.
        assert!(path.exists());
        AdminSocket::bind(path.clone()).expect("replaced");
    }

    #[tokio::test]
    async fn a_taken_port_names_its_key_and_address() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let err = tcp("metrics.bind", addr).await.expect_err("taken");
        assert_eq!(
            err.to_string(),
            format!("cannot listen on {addr} (metrics.bind): {}", err.source)
        );
        assert_eq!(err.source.kind(), io::ErrorKind::AddrInUse);
    }
}
