//! `[metrics]`: the Prometheus endpoint, its access and the local exporters it merges.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::base::secret::Secret;

/// The Prometheus endpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// `false` serves no metrics endpoint.
    pub enabled: bool,
    /// Loopback by default: expose it only behind `auth` or a firewall.
    pub bind: SocketAddr,
    /// Credentials a scrape must present; none set: open.
    pub auth: MetricsAuth,
    /// The server's other exporters, served merged with the relay's own metrics.
    pub merge: MergeConfig,
    /// Without `auth`, scrapes are answered only for these host names besides the bind address
    /// and `localhost` (a request with another `Host` gets 421: DNS rebinding).
    pub allowed_hosts: Vec<String>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            bind: SocketAddr::from(([127, 0, 0, 1], 3004)),
            auth: MetricsAuth::default(),
            merge: MergeConfig::default(),
            allowed_hosts: Vec::new(),
        }
    }
}

/// `[metrics.merge]`: local exporters fetched in parallel at each scrape of `path` and served
/// as one exposition with the relay's own series, each sample labelled with its `source`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MergeConfig {
    pub path: String,
    pub sources: Vec<MergeSource>,
}

impl Default for MergeConfig {
    fn default() -> Self {
        Self {
            path: "/metrics/all".into(),
            sources: Vec::new(),
        }
    }
}

/// One exporter to merge.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeSource {
    /// The `source` label of its samples.
    pub name: String,
    pub url: String,
    /// How long a fetch may take; a slower source is left out of that scrape.
    #[serde(default = "default_merge_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_merge_timeout_ms() -> u64 {
    2000
}

/// `[metrics.auth]`: a bearer token, a basic-auth pair, or both (either is accepted).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsAuth {
    /// Scrapes must send `Authorization: Bearer <token>`.
    pub bearer_token: Secret,
    /// Scrapes must send HTTP basic auth with this user and `basic_password`.
    pub basic_user: String,
    pub basic_password: Secret,
}
