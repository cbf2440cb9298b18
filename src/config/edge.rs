//! `[edge]`: the relay as an edge on a BBB server of a pool. It subscribes to the server's own
//! bus and appends every message, in bus order, to the pool's store; it serves no hooks and
//! delivers nothing itself (docs/pool.md).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{ConfigError, SecretUrl};

/// `[edge]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EdgeConfig {
    /// The pool's store (`rediss://` across the network), where the messages go.
    pub store_url: SecretUrl,
    /// This server's name in the pool: its stream's, its metrics' and its callbacks' `domain`.
    /// Default: the host name.
    pub server: String,
    /// A PEM file of the CAs that the store's certificate must chain to; unset: the system's
    /// roots.
    pub ca_file: Option<PathBuf>,
    /// What the edge keeps on this server (in its own Redis) while the pool's store cannot be
    /// reached, at most; beyond it the oldest messages go, counted.
    pub buffer_mib: u64,
    /// The longest the server's stream in the pool's store grows to, in messages, should the
    /// pool not take them (the oldest then go).
    pub stream_max_len: u64,
}

impl Default for EdgeConfig {
    fn default() -> Self {
        Self {
            store_url: SecretUrl::new(""),
            server: host_name(),
            ca_file: None,
            buffer_mib: 256,
            stream_max_len: 1_000_000,
        }
    }
}

/// This machine's name, as a server name may be written (`localhost` when none is known).
pub fn host_name() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let name: String = raw
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(64)
        .collect();
    if name.is_empty() {
        "localhost".into()
    } else {
        name
    }
}

impl EdgeConfig {
    /// Checks the section.
    ///
    /// # Errors
    /// The first key that is wrong, with why.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let fail = |key: &str, why: &str| Err(ConfigError(format!("edge.{key}: {why}")));
        if !super::sources::is_redis_url(&self.store_url) {
            return fail("store_url", "must be a redis:// or rediss:// URL");
        }
        let valid = !self.server.is_empty()
            && self.server.len() <= 64
            && (self.server.bytes()).all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !valid {
            return fail("server", "1 to 64 letters, digits, '-', '_' or '.'");
        }
        if self.buffer_mib == 0 {
            return fail("buffer_mib", "must be at least 1");
        }
        if self.stream_max_len < 1000 {
            return fail("stream_max_len", "must be at least 1000");
        }
        Ok(())
    }
}

/// `[pool]`: the relay's side of a pool's edges (docs/pool.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PoolConfig {
    /// Take the bus messages of every edge that writes to the store, each server its own
    /// source, with no list of servers here.
    pub edges: bool,
    /// Without `[[sources]]`, also subscribe to the bus of `[redis]` (the source `default`).
    /// `false` on a pool's relays, which run beside no BBB server.
    pub local_bus: bool,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            edges: true,
            local_bus: true,
        }
    }
}
