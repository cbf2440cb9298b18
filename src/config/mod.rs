//! The configuration as plain data: one [`Config`] of sections, each documented here and in
//! `hookrelay.example.toml`, with its defaults. [`load`] builds it (defaults, then the TOML
//! file, then `HOOKRELAY_*` environment variables) and [`validate`] checks what types alone
//! cannot. It depends on nothing but [`crate::base`]; the stages read it, never the reverse.
//! `Debug` and serialized output show neither the shared secret nor a Redis password.

pub mod admin;
pub mod bbb_web;
pub mod compat;
mod delivery;
pub mod destinations;
mod duration;
pub mod edge;
mod endpoints;
mod load;
mod metrics;
mod origins;
mod plugins;
pub mod reference;
pub mod reference_files;
mod sources;
mod strength;
pub mod tenancy;
pub mod tenants;
pub mod traces;
mod validate;
pub mod xapi;

use std::{net::SocketAddr, path::PathBuf};

use serde::{Deserialize, Serialize};

use crate::base::digest::Algorithm;
pub use crate::base::secret::{Secret, SecretUrl};
pub use delivery::{
    CallbackAuth, CallbackBody, Compat, DeliveryConfig, MAX_ATTEMPT_LOG, OnGiveUp, PermanentHook,
    ReceiverConfig, SsrfConfig, StandardWebhooksConfig,
};
pub use endpoints::RedisEndpoint;
pub use load::ConfigError;
pub use metrics::{MergeConfig, MergeSource, MetricsAuth, MetricsConfig};
pub use plugins::{CpuPriority, OnError, PluginDefaults, PluginsConfig};
pub use sources::{DEFAULT_SOURCE, FleetConfig, MAX_SOURCES, SourceConfig, StoreConfig};
pub use strength::weak_secret;
pub use validate::callback_guard;

/// The whole configuration of one relay.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub bbb: BbbConfig,
    pub api: ApiConfig,
    pub redis: RedisConfig,
    pub delivery: DeliveryConfig,
    pub mapping: MappingConfig,
    /// `[events]`: which events go to hooks that did not name them.
    pub events: EventsConfig,
    pub metrics: MetricsConfig,
    pub plugins: PluginsConfig,
    /// `[[sources]]`: the conference servers listened to; none: `[redis]` and `[bbb]`.
    pub sources: Vec<SourceConfig>,
    pub store: StoreConfig,
    pub fleet: FleetConfig,
    pub xapi: xapi::XapiConfig,
    /// `[tracing]`: OpenTelemetry traces of each bus message (`docs/tracing.md`).
    pub tracing: traces::TracingConfig,
    /// `[[destinations]]`: message brokers and files that get events (`docs/destinations.md`).
    pub destinations: Vec<destinations::DestinationConfig>,
    pub admin: admin::AdminConfig,
    pub reference: ReferenceConfig,
    /// `[scalelite]`: read the tenants of a Scalelite cluster from its Redis.
    pub scalelite: Option<tenants::ScaleliteConfig>,
    /// `[[tenants]]`: tenants listed here (without Scalelite, or beside its own).
    pub tenants: Vec<tenants::TenantConfig>,
    /// `[tenancy]`: limits per tenant, and how long a removed tenant's hooks wait for it.
    pub tenancy: tenancy::TenancyConfig,
    /// `[audit]`: how long the record of every change is kept.
    pub audit: tenancy::AuditConfig,
    /// `[edge]`: this relay is an edge of a pool, forwarding its server's bus to the pool's
    /// store (and nothing else).
    pub edge: Option<edge::EdgeConfig>,
    /// `[pool]`: the edges this relay takes, and whether it has a bus of its own.
    pub pool: edge::PoolConfig,
    /// The reference's configuration files read under this one, in the order they apply: the
    /// ones given with `--reference-config`, else those installed on this server.
    #[serde(skip)]
    pub reference_files: Vec<PathBuf>,
    /// Whether `reference_files` were given (`--reference-config`) rather than found.
    #[serde(skip)]
    pub reference_given: bool,
    /// Where each value that is not a default came from: dotted key -> its source.
    #[serde(skip)]
    pub origins: Vec<(String, String)>,
}

/// `[reference]`: bbb-webhooks, the service hookrelay replaces, as installed on this server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReferenceConfig {
    /// Read bbb-webhooks' installed configuration (its `default.yml` and overrides) under this
    /// file when `--reference-config` is not given.
    pub read_installed: bool,
    /// Where its files are looked for: `/` on a server (tests point it at a tree of their own).
    pub root: PathBuf,
}

impl Default for ReferenceConfig {
    fn default() -> Self {
        Self {
            read_installed: true,
            root: PathBuf::from("/"),
        }
    }
}

impl Config {
    /// Where the value of `key` (dotted) came from, when not from the defaults.
    pub fn origin(&self, key: &str) -> Option<&str> {
        self.origins
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, o)| o.as_str())
    }
}

/// The relay's own API secret, and (without `[[sources]]`) the conference server it serves.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BbbConfig {
    /// The server's shared secret: checks API checksums and signs callbacks. Required.
    pub secret: Secret,
    /// Sent as the `domain` field of callbacks when `delivery.compat = "reference"`.
    pub server_domain: String,
    /// BBB's API base (`https://host/bigbluebutton/api`): when set, `getMeetings` seeds the
    /// conference metrics each time the bus is subscribed, and reconciles them every
    /// `reconcile_interval_s`. Empty: found in `web_properties`, else off.
    pub api_url: String,
    /// With `api_url` (of `[bbb]` or a source): every this many seconds the conference state
    /// is taken again from `getMeetings` (meetings BBB no longer has go, missed joins and
    /// leaves are corrected). 0: only when the bus is (re)subscribed.
    pub reconcile_interval_s: u64,
    /// With `api_url`: each reconciliation also counts the recordings by state with
    /// `getRecordings` (as bbb-exporter does), instead of only from the recording pipeline's
    /// events. Its answer lists every recording of the server.
    pub reconcile_recordings: bool,
    /// bbb-web's properties, read when `api_url` is empty (later files win): their
    /// `bigbluebutton.web.serverURL` gives the API's address.
    pub web_properties: Vec<PathBuf>,
    /// Where bbb-web answers on this host; tried before the serverURL's address when that
    /// came from `web_properties`. Empty: the serverURL's only.
    pub local_api_url: String,
    /// Where `api_url` came from when it was found in `web_properties`.
    #[serde(skip)]
    pub api_found: Option<bbb_web::FoundApi>,
}

impl Default for BbbConfig {
    fn default() -> Self {
        Self {
            secret: Secret::default(),
            server_domain: "localhost".into(),
            api_url: String::new(),
            reconcile_interval_s: 60,
            reconcile_recordings: true,
            web_properties: bbb_web::WEB_PROPERTIES.iter().map(PathBuf::from).collect(),
            local_api_url: bbb_web::LOCAL_API_URL.into(),
            api_found: None,
        }
    }
}

/// The hooks API listener.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    pub bind: SocketAddr,
    /// Calls live at `{path}/hooks/create` and so on; also the prefix removed to get the call name
    /// that the API checksum covers.
    pub path: String,
    /// Digests accepted for the API checksum (chosen by the checksum's length).
    pub checksum_algorithms: Vec<Algorithm>,
    /// Proxies (addresses or networks, e.g. `["127.0.0.1/32"]`) whose `X-Forwarded-For` names
    /// the caller the audit records; from any other peer, the peer itself.
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 3005)),
            path: "/bigbluebutton/api".into(),
            checksum_algorithms: Algorithm::ALL.to_vec(),
            trusted_proxies: Vec::new(),
        }
    }
}

/// The Redis server that carries BBB's bus (without `[[sources]]`) and, unless `[store]` says
/// otherwise, stores hooks, mappings and queues.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedisConfig {
    /// `redis://[:password@]host:port[/db]`, `rediss://` or `unix://`; its password is never
    /// shown.
    pub url: SecretUrl,
    /// Pub/sub channels listened to (exact names, as BBB publishes them).
    pub channels: Vec<String>,
    /// Bus messages larger than this are skipped and counted, never parsed.
    pub max_message_bytes: usize,
    /// PEM file of the CAs that a `rediss://` `url`'s server certificate must chain to;
    /// unset: the system's roots. Also the store's, when `[store] url` is unset.
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            url: SecretUrl::new("redis://127.0.0.1:6379"),
            channels: [
                "from-akka-apps-redis-channel",
                "from-bbb-web-redis-channel",
                "from-akka-apps-chat-redis-channel",
                "from-akka-apps-pres-redis-channel",
                "bigbluebutton:from-bbb-apps:meeting",
                "bigbluebutton:from-bbb-apps:users",
                "bigbluebutton:from-rap",
            ]
            .map(String::from)
            .to_vec(),
            max_message_bytes: 1024 * 1024,
            ca_file: None,
        }
    }
}

/// Internal -> external id mappings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MappingConfig {
    /// A meeting mapping with no event for this long is dropped.
    pub inactivity_timeout_s: u64,
}

impl Default for MappingConfig {
    fn default() -> Self {
        Self {
            inactivity_timeout_s: 86_400,
        }
    }
}

/// `[events]`: the events beyond the reference's catalogue (`docs/events.md`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EventsConfig {
    /// `false`: the events the reference never sends (breakout rooms, why a meeting ended, role
    /// and away changes, timers) go only to hooks whose eventID names them; `true`: to every
    /// matching hook, like the others.
    pub beyond_reference: bool,
}

#[cfg(test)]
mod tests;
