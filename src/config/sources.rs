//! `[[sources]]` and `[store]`: the conference servers whose buses the relay listens to, and
//! the relay's own Redis (hooks, id mappings, queues). With no `[[sources]]`, `[redis]` and
//! `[bbb]` describe the one source, named `default`, and the store is `redis.url`: every
//! configuration written before sources existed means what it meant.

use serde::{Deserialize, Serialize};

use super::{Config, ConfigError};
use crate::base::secret::{Secret, SecretUrl};

/// The name of the source that `[redis]` and `[bbb]` describe. Its stored mappings keep the
/// reference service's key names.
pub const DEFAULT_SOURCE: &str = "default";
/// Most sources: each is a label value of several metrics, so they are bounded.
pub const MAX_SOURCES: usize = 64;

/// One conference server's bus.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// Names it in metrics (`source` label), logs and stored keys: letters, digits, `-`, `_`
    /// and `.`, at most 64 of them.
    pub name: String,
    /// That server's Redis, whose pub/sub bus carries its events.
    pub url: SecretUrl,
    /// Channels listened to; default: `redis.channels`.
    #[serde(default)]
    pub channels: Vec<String>,
    /// That server's shared secret, for its `getMeetings` (`api_url`); default: `bbb.secret`.
    /// Hooks are registered with, and callbacks signed with, the relay's own `bbb.secret`.
    #[serde(default)]
    pub secret: Secret,
    /// Sent with each of its callbacks: the `domain` field in reference compat mode, the
    /// `X-Hookrelay-Domain` header always.
    #[serde(default = "default_domain")]
    pub server_domain: String,
    /// Its BBB API base, to seed the conference metrics with `getMeetings`; empty: off.
    #[serde(default)]
    pub api_url: String,
    /// PEM file of the CAs that a `rediss://` `url`'s server certificate must chain to;
    /// unset: the system's roots.
    #[serde(default)]
    pub ca_file: Option<std::path::PathBuf>,
}

fn default_domain() -> String {
    "localhost".into()
}

/// `[store]`: where hooks, id mappings and queues live.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `redis://…`; default: `redis.url`. With `sentinels`, only its password, user and
    /// database are used (for the master).
    pub url: Option<SecretUrl>,
    /// Redis Sentinel nodes (`redis://host:26379`): the store is the master they name for
    /// `sentinel_master`, followed through failovers. Empty: no Sentinel.
    pub sentinels: Vec<SecretUrl>,
    /// The master's name in the sentinels' configuration.
    pub sentinel_master: String,
    /// Nodes of a Redis Cluster (`redis://host:7000`), any of them: the store is that cluster
    /// (its primaries found from them, followed through resharding and failovers). Empty: no
    /// cluster. `url`, if set, only gives the password and user.
    pub cluster_nodes: Vec<SecretUrl>,
    /// After each batch of queued callbacks and each round of delivery marks, wait until this
    /// many replicas have them (`WAIT`), so that a failover to one of them takes nothing back.
    /// Unset: 1 with `sentinels`, else 0 (do not wait).
    pub wait_replicas: Option<u32>,
    /// How long one such wait may take; when fewer replicas answered in time, the write
    /// counts in `hookrelay_store_unreplicated_writes_total` and the relay goes on without
    /// waiting for 10 s.
    pub wait_timeout_ms: u64,
    /// PEM file of the CAs that the store's `rediss://` servers (`url`, `sentinels`,
    /// `cluster_nodes` and the masters and nodes they name) must chain to; unset:
    /// `redis.ca_file`, else the system's roots.
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            url: None,
            sentinels: Vec::new(),
            sentinel_master: String::new(),
            cluster_nodes: Vec::new(),
            wait_replicas: None,
            wait_timeout_ms: 100,
            ca_file: None,
        }
    }
}

impl StoreConfig {
    /// How many replicas each batch waits for (0: none).
    pub fn replicas_to_wait_for(&self) -> u32 {
        self.wait_replicas
            .unwrap_or(u32::from(!self.sentinels.is_empty()))
    }
}

/// `[fleet]`: several relay instances sharing one store. One instance at a time (the holder
/// of the fleet lease) queues and delivers; the others serve the API, listen to the sources
/// and keep the last messages, so that whoever takes the lease over goes on from where the
/// holder stopped.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FleetConfig {
    pub enabled: bool,
    /// This instance's name in the lease and the logs; default `<host name>-<process id>`.
    pub instance: String,
    /// How long the lease lasts without renewal: a dead holder is replaced within about this
    /// long. The holder renews it every quarter of it and stops when half of it has passed
    /// without a renewal.
    pub lease_ms: u64,
    /// How long the other instances keep each source's messages.
    pub buffer_s: u64,
    /// At most this much kept per source.
    pub buffer_mib: u64,
    /// Spread delivery over the instances: each hook's callbacks are sent by the instance
    /// holding that hook's delivery lease, and every instance holds about as many. `false`:
    /// the holder of the fleet lease sends everything.
    pub spread: bool,
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            instance: String::new(),
            lease_ms: 5000,
            buffer_s: 60,
            buffer_mib: 64,
            spread: true,
        }
    }
}

impl Config {
    /// The sources in force: `[[sources]]`, with their defaults filled in, or the one that
    /// `[redis]` and `[bbb]` describe (none when `pool.local_bus` is off: a pool's relay
    /// whose servers are all edges).
    pub fn effective_sources(&self) -> Vec<SourceConfig> {
        if self.sources.is_empty() && !self.pool.local_bus {
            return Vec::new();
        }
        if self.sources.is_empty() {
            return vec![SourceConfig {
                name: DEFAULT_SOURCE.into(),
                url: self.redis.url.clone(),
                channels: self.redis.channels.clone(),
                secret: self.bbb.secret.clone(),
                server_domain: self.bbb.server_domain.clone(),
                api_url: self.bbb.api_url.clone(),
                ca_file: self.redis.ca_file.clone(),
            }];
        }
        self.sources
            .iter()
            .map(|s| SourceConfig {
                channels: if s.channels.is_empty() {
                    self.redis.channels.clone()
                } else {
                    s.channels.clone()
                },
                secret: if s.secret.is_empty() {
                    self.bbb.secret.clone()
                } else {
                    s.secret.clone()
                },
                ..s.clone()
            })
            .collect()
    }

    /// The Redis that holds hooks, mappings and queues.
    pub fn store_url(&self) -> &SecretUrl {
        self.store.url.as_ref().unwrap_or(&self.redis.url)
    }

    /// The CA file that the store's servers are verified against, and its key: `store.ca_file`,
    /// else `redis.ca_file` when the store is `redis.url`'s.
    pub fn store_ca_file(&self) -> Option<(&'static str, &std::path::Path)> {
        match (&self.store.ca_file, &self.redis.ca_file) {
            (Some(p), _) => Some(("store.ca_file", p)),
            (None, Some(p)) if self.store.url.is_none() => Some(("redis.ca_file", p)),
            _ => None,
        }
    }

    /// Checks `[[sources]]`, `[store]` and `[fleet]`.
    pub(super) fn validate_sources(&self) -> Result<(), ConfigError> {
        let fail = |key: &str, why: String| Err(ConfigError(format!("{key}: {why}")));
        if !(400..=600_000).contains(&self.fleet.lease_ms) {
            return fail("fleet.lease_ms", "must be between 400 and 600000".into());
        }
        if self.fleet.buffer_s.saturating_mul(1000) < self.fleet.lease_ms.saturating_mul(2) {
            return fail(
                "fleet.buffer_s",
                "must cover at least two leases (fleet.lease_ms)".into(),
            );
        }
        if self.fleet.buffer_mib == 0 {
            return fail("fleet.buffer_mib", "must be greater than 0".into());
        }
        self.validate_store()?;
        if self.sources.len() > MAX_SOURCES {
            return fail("sources", format!("at most {MAX_SOURCES} sources"));
        }
        for (i, s) in self.sources.iter().enumerate() {
            let valid_name = !s.name.is_empty()
                && s.name.len() <= 64
                && s.name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
            if !valid_name {
                return fail(
                    "sources.name",
                    format!("{:?}: 1 to 64 letters, digits, '-', '_' or '.'", s.name),
                );
            }
            if self.sources[..i].iter().any(|o| o.name == s.name) {
                return fail("sources.name", format!("{:?} is given twice", s.name));
            }
            if !is_redis_url(&s.url) {
                return fail(
                    "sources.url",
                    format!("source {:?}: must be a redis:// URL", s.name),
                );
            }
            let host_like = !s.server_domain.is_empty()
                && s.server_domain.bytes().all(|b| b.is_ascii_graphic());
            if !host_like {
                return fail(
                    "sources.server_domain",
                    format!("source {:?}: must be a host name", s.name),
                );
            }
            if !s.api_url.is_empty() && !is_http_url(&s.api_url) {
                return fail(
                    "sources.api_url",
                    format!("source {:?}: must be an http(s) URL", s.name),
                );
            }
        }
        Ok(())
    }
}

impl Config {
    /// Checks `[store]`: Redis URLs, and a cluster or a Sentinel-watched server, not both.
    fn validate_store(&self) -> Result<(), ConfigError> {
        let fail = |key: &str, why: &str| Err(ConfigError(format!("{key}: {why}")));
        if let Some(url) = &self.store.url
            && !is_redis_url(url)
        {
            return fail("store.url", "must be a redis:// URL");
        }
        if !self.store.sentinels.iter().all(is_redis_url) {
            return fail("store.sentinels", "each must be a redis:// URL");
        }
        if !self.store.cluster_nodes.iter().all(is_redis_url) {
            return fail("store.cluster_nodes", "each must be a redis:// URL");
        }
        if !self.store.cluster_nodes.is_empty() && !self.store.sentinels.is_empty() {
            return fail(
                "store.cluster_nodes",
                "a store is a cluster or a Sentinel-watched server, not both",
            );
        }
        if self.store.sentinels.is_empty() != self.store.sentinel_master.is_empty() {
            return fail(
                "store.sentinel_master",
                "sentinels and sentinel_master go together",
            );
        }
        Ok(())
    }
}

/// `redis://`, `rediss://` or `unix://`.
pub(super) fn is_redis_url(url: &SecretUrl) -> bool {
    matches!(url::Url::parse(url.expose()), Ok(u) if matches!(u.scheme(), "redis" | "rediss" | "unix"))
}

pub(super) fn is_http_url(url: &str) -> bool {
    matches!(url::Url::parse(url), Ok(u) if matches!(u.scheme(), "http" | "https"))
}
