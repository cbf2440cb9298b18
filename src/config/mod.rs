//! The configuration as plain data: one [`Config`] of sections, each documented here and in
//! `hookrelay.example.toml`, with its defaults. [`load`] builds it (defaults, then the TOML
//! file, then `HOOKRELAY_*` environment variables) and [`validate`] checks what types alone
//! cannot. It depends on nothing but [`crate::base`]; the stages read it, never the reverse.
//! `Debug` and serialized output show neither the shared secret nor a Redis password.

pub mod admin;
pub mod bbb_web;
pub mod compat;
mod duration;
pub mod edge;
mod endpoints;
mod load;
mod origins;
pub mod reference;
pub mod reference_files;
mod sources;
pub mod tenancy;
pub mod tenants;
mod validate;
pub mod xapi;

use std::{net::SocketAddr, path::PathBuf};

use serde::{Deserialize, Serialize};

use crate::base::digest::Algorithm;
pub use crate::base::secret::{Secret, SecretUrl};
pub use endpoints::RedisEndpoint;
pub use load::ConfigError;
pub use sources::{DEFAULT_SOURCE, FleetConfig, MAX_SOURCES, SourceConfig, StoreConfig};
pub use validate::{callback_guard, weak_secret};

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

/// Which callback body to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compat {
    /// `event=<json object>&timestamp=<ms>` as the specification says.
    #[default]
    Spec,
    /// The reference service's `domain=…&event=[<json>]&timestamp=…`.
    Reference,
}

/// How receivers can tell a callback is genuine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallbackAuth {
    /// `checksum=` in the URL: digest of URL + body + secret.
    #[default]
    Checksum,
    /// `Authorization: Bearer <secret>` and no checksum (the reference's `auth2_0` mode). The
    /// secret opens the whole BBB API: callbacks need `https` unless
    /// `delivery.allow_insecure_bearer`.
    Bearer,
}

/// A hook that exists because the configuration names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermanentHook {
    pub url: String,
    #[serde(default)]
    pub get_raw: bool,
}

/// The most attempts `delivery.attempt_log` may keep per hook.
pub const MAX_ATTEMPT_LOG: usize = 10_000;

/// `delivery.on_give_up`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnGiveUp {
    /// The hook is removed with its queue (the specification's behaviour).
    #[default]
    Remove,
    /// The hook stays registered, disabled, its queue kept.
    Disable,
}

/// One `[[delivery.receivers]]` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReceiverConfig {
    /// Callback URLs starting with this are this receiver's (`https://lms.example.com/`).
    pub url_prefix: String,
    /// Its name in the metrics (`receiver` label); default: the prefix's host.
    pub name: String,
    /// Callbacks per second to it, all its hooks together; 0: no rate limit.
    pub rate_per_s: u32,
    /// Callbacks it may get at once after a quiet spell; 0: one second's worth (the rate).
    pub burst: u32,
    /// Most callbacks in flight to it at once; 0: `max_connections_per_receiver`, per host
    /// and port as without this entry.
    pub max_connections: usize,
}

impl ReceiverConfig {
    /// The `receiver` label: `name`, else the prefix's host.
    pub fn label(&self) -> String {
        if !self.name.is_empty() {
            return self.name.clone();
        }
        self.url_prefix
            .split_once("://")
            .map_or(self.url_prefix.as_str(), |(_, rest)| rest)
            .split(['/', '?', '#'])
            .next()
            .unwrap_or_default()
            .to_string()
    }
}

/// How callbacks are sent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeliveryConfig {
    /// Wait before retry k (after the k-th failure). When it runs out the hook is removed.
    pub retry_intervals_ms: Vec<u64>,
    pub request_timeout_ms: u64,
    /// A 429 or 503 answer with `Retry-After` delays the hook's next attempt as asked, up to
    /// this many seconds; asked within it, the answer does not count toward the hook's removal
    /// (`docs/receivers.md`).
    pub max_retry_after_s: u64,
    /// What happens to a hook whose retry schedule ran out: `remove` (as the specification
    /// says) or `disable` (it stays, keeps its callbacks, and resumes with `hooks enable` or a
    /// `hooks/create` of its URL).
    pub on_give_up: OnGiveUp,
    /// `[[delivery.receivers]]`: limits per receiver, each matching callback URLs by prefix
    /// (the first that matches applies): a rate shared by every hook of that receiver, and its
    /// own connection cap.
    pub receivers: Vec<ReceiverConfig>,
    /// After this many attempts in a row to one receiver (host and port) failed to connect,
    /// timed out or broke off, its hooks stop sending and one probe at a time tries again,
    /// 1 s later, then twice as long each time up to `circuit_max_open_s`; all resume when a
    /// probe gets an answer. 0 (the default, the specification's behaviour): off.
    pub circuit_after: u32,
    /// The longest wait between two probes of an unreachable receiver.
    pub circuit_max_open_s: u64,
    /// After this many failed attempts in a row a hook is `hook-failing` (an event for the
    /// hooks that ask for it, `docs/receivers.md`).
    pub failing_after: u32,
    /// Most callbacks in flight at once to one receiver (host and port), across its hooks;
    /// the others wait their turn. Bounds the sockets and memory of a fan-out to many hooks
    /// on one receiver.
    pub max_connections_per_receiver: usize,
    pub checksum_algorithm: Algorithm,
    /// The callback body's form. Unset: bbb-webhooks' form when the relay takes over from it
    /// (`--reference-config`, its configuration on this server, or its hooks imported), else
    /// the plain form ([`compat::CallbackFormat`]).
    pub compat: Option<Compat>,
    pub auth: CallbackAuth,
    pub permanent_hooks: Vec<PermanentHook>,
    /// Most callbacks queued per hook; beyond it the oldest are dropped (counted, and logged
    /// once a minute per hook). The default holds an hour of a receiver's outage at 55 events
    /// a second for its hook.
    pub max_queue: usize,
    /// The megabytes of Redis all queues may take together. While they take more, a hook
    /// holding more than its share (the budget divided among the hooks with callbacks queued)
    /// drops its oldest. Unset: half of the store's `maxmemory` when that is set, else 1024.
    pub queue_budget_mb: Option<u64>,
    /// Most delivered callbacks per hook not yet marked delivered in Redis (marking is batched
    /// off the hot path): a crash repeats at most this many callbacks per hook. 1: each mark is
    /// written before the next callback is sent.
    pub max_unacked: usize,
    /// Accept callback URLs carrying `user:password@` (refused by default: they end up in logs
    /// and lists of other tools).
    pub allow_url_credentials: bool,
    /// With `auth = "bearer"`, accept plain `http` callback URLs all the same (the shared
    /// secret then crosses the network in clear).
    pub allow_insecure_bearer: bool,
    /// When not empty, only these event ids are delivered (mappings are kept up to date anyway).
    pub include_events: Vec<String>,
    /// These event ids are never delivered.
    pub exclude_events: Vec<String>,
    pub ssrf: SsrfConfig,
    pub standard_webhooks: StandardWebhooksConfig,
    /// How long the callbacks sent to each callback URL are kept, to be sent again with
    /// `hookrelay redeliver` (`"1h"`, `"30m"`; `"0s"` keeps none). The callbacks still queued
    /// when a hook is removed after failures are kept too.
    #[serde(with = "duration")]
    pub retain: std::time::Duration,
    /// The most megabytes all kept callbacks take together; each callback URL keeps an equal
    /// share, and beyond it its oldest go first.
    pub retain_max_mib: u64,
    /// The last attempts kept per hook in the store (time, event, status or error, latency,
    /// attempt number), for `hookrelay deliveries` and the admin API; 0 keeps none. Each
    /// attempt takes at most 512 bytes.
    pub attempt_log: usize,
    /// Give each hook created its own Standard Webhooks signing secret, answered by
    /// `hooks/create` (`<signingSecret>`): its callbacks carry a `webhook-signature` made with
    /// it, so that a receiver verifies them without holding an API secret.
    pub hook_secrets: bool,
    /// After `hookrelay hooks rotate-secret`, the old secret signs too for this many seconds.
    pub hook_secret_overlap_s: u64,
}

/// Standard Webhooks signature headers, sent beside the BBB checksum when a secret is set.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StandardWebhooksConfig {
    /// `whsec_<base64 key>` secrets; every callback carries one signature per secret (give the
    /// new and the old one while receivers move to a new secret). Empty: no such headers.
    pub secrets: Vec<Secret>,
    /// The callbacks' body: `"form"` (BBB's `event=…&timestamp=…`, for every receiver written
    /// for BBB) or `"json"`: the event itself as `application/json`, which the Standard
    /// Webhooks libraries parse, with the callback's timestamp in `X-Hookrelay-Timestamp`.
    pub body: CallbackBody,
    /// Callback URLs that start with one of these get the JSON body whatever `body` says (one
    /// integrator's receivers moved to a Standard Webhooks library, the others not).
    pub json_url_prefixes: Vec<String>,
}

/// The form of a callback's body.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallbackBody {
    /// `event=<JSON>&timestamp=<ms>`, form-encoded (or bbb-webhooks' form, per `compat`).
    #[default]
    Form,
    /// The event's JSON itself.
    Json,
}

/// Which addresses callbacks may go to.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SsrfConfig {
    /// Refuse loopback, private, link-local, CGNAT, multicast and reserved addresses.
    pub enabled: bool,
    /// Networks allowed all the same, e.g. `["10.1.2.0/24"]`.
    pub allow_cidrs: Vec<ipnet::IpNet>,
}

impl Default for SsrfConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            allow_cidrs: Vec::new(),
        }
    }
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        Self {
            retry_intervals_ms: vec![
                100, 500, 1000, 2000, 4000, 8000, 10000, 30000, 60000, 60000, 60000, 60000,
            ],
            request_timeout_ms: 5000,
            max_retry_after_s: 600,
            on_give_up: OnGiveUp::Remove,
            receivers: Vec::new(),
            circuit_after: 0,
            circuit_max_open_s: 60,
            failing_after: 3,
            max_connections_per_receiver: 256,
            checksum_algorithm: Algorithm::Sha1,
            compat: None,
            auth: CallbackAuth::Checksum,
            permanent_hooks: Vec::new(),
            max_queue: 200_000,
            queue_budget_mb: None,
            max_unacked: 16,
            allow_url_credentials: false,
            allow_insecure_bearer: false,
            include_events: Vec::new(),
            exclude_events: Vec::new(),
            ssrf: SsrfConfig::default(),
            standard_webhooks: StandardWebhooksConfig::default(),
            attempt_log: 100,
            retain: std::time::Duration::from_secs(3600),
            retain_max_mib: 256,
            hook_secrets: false,
            hook_secret_overlap_s: 86_400,
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

/// WebAssembly event plugins.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PluginsConfig {
    /// Folder of `NAME.wasm` plugins (and optional `NAME.toml` settings); none: no plugins.
    pub dir: Option<PathBuf>,
    /// Where compiled plugins are cached (a folder of the relay's own user, writable by no one
    /// else); default `$CACHE_DIRECTORY`, `$XDG_CACHE_HOME/hookrelay` or `~/.cache/hookrelay`.
    pub cache_dir: Option<PathBuf>,
    /// Reload when the folder changes.
    pub watch: bool,
    /// Quiet time after the last change in the folder before reloading.
    pub reload_debounce_ms: u64,
    /// What happens to an event a plugin fails on, unless its `NAME.toml` says otherwise.
    pub on_error: OnError,
    /// Deadline (wall-clock time) of one plugin `on-event` call.
    pub timeout_ms: u64,
    /// Deadline (wall-clock time) of making an instance: instantiation and `init`.
    pub init_timeout_ms: u64,
    /// Memory limit of one plugin instance, in MiB.
    pub memory_mib: u64,
    /// Failures in a row after which a plugin is marked failed.
    pub max_failures: u32,
    /// How long a failed plugin is not called (its `on_error` applies) before it is tried again.
    pub failed_cooldown_ms: u64,
    /// Most instances of one plugin, each called by one thread at a time (never more than the
    /// machine's cores); 1 for a plugin that keeps state across calls.
    pub max_instances: u32,
    /// The CPU priority of the threads plugin calls run on.
    pub cpu_priority: CpuPriority,
}

/// How plugin calls share the CPU with everything else on the machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuPriority {
    /// Idle first, the relay's own priority when a call cannot start: a call that waited half
    /// a second for an idle thread moves to one at the relay's priority, and so do the calls
    /// of the next two seconds. A busy plugin barely delays the relay's own work; but a call
    /// that has started on an idle thread may wait long for CPU on a saturated machine, and
    /// the calls of its plugin behind it.
    Auto,
    /// Only CPU time nothing else wants (Linux `SCHED_IDLE`): a busy plugin never delays the
    /// relay's own work, but on a saturated machine the hooks in its scope stall.
    Idle,
    /// Ten nice steps below the relay.
    Low,
    /// The relay's own priority.
    #[default]
    Normal,
}

impl Default for PluginsConfig {
    fn default() -> Self {
        let d = PluginDefaults::default();
        Self {
            dir: None,
            cache_dir: None,
            watch: true,
            reload_debounce_ms: 300,
            on_error: d.on_error,
            timeout_ms: d.timeout_ms,
            init_timeout_ms: d.init_timeout_ms,
            memory_mib: d.memory_mib,
            max_failures: d.max_failures,
            failed_cooldown_ms: d.failed_cooldown_ms,
            max_instances: d.max_instances,
            cpu_priority: CpuPriority::default(),
        }
    }
}

impl PluginsConfig {
    /// The per-plugin defaults that `NAME.toml` files override.
    pub fn defaults(&self) -> PluginDefaults {
        PluginDefaults {
            on_error: self.on_error,
            timeout_ms: self.timeout_ms,
            init_timeout_ms: self.init_timeout_ms,
            memory_mib: self.memory_mib,
            max_failures: self.max_failures,
            failed_cooldown_ms: self.failed_cooldown_ms,
            max_instances: self.max_instances,
        }
    }
}

/// What happens to an event when a plugin fails on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// The event is not sent to that hook (fail closed).
    #[default]
    Drop,
    /// The event goes on as if the plugin had kept it.
    Pass,
}

/// A plugin's error policy and limits: the relay-wide defaults (`[plugins]`), which a plugin's
/// `NAME.toml` may override.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginDefaults {
    pub on_error: OnError,
    /// Deadline (wall-clock time) of one `on-event` call, in milliseconds.
    pub timeout_ms: u64,
    /// Deadline (wall-clock time) of making an instance (instantiation and `init`), in
    /// milliseconds: longer than a call's, as an instance is made once and then reused, and a
    /// busy machine must not fail a plugin's load by pausing it for a few milliseconds.
    pub init_timeout_ms: u64,
    /// Memory limit of one instance, in MiB.
    pub memory_mib: u64,
    /// Consecutive failures after which the plugin is marked failed.
    pub max_failures: u32,
    /// How long a failed plugin is not called (its `on_error` applies) before it is tried again.
    pub failed_cooldown_ms: u64,
    /// Most instances, called in parallel for different hooks (capped by the cores).
    pub max_instances: u32,
}

impl Default for PluginDefaults {
    fn default() -> Self {
        Self {
            on_error: OnError::Drop,
            timeout_ms: 10,
            init_timeout_ms: 1000,
            memory_mib: 32,
            max_failures: 5,
            failed_cooldown_ms: 30_000,
            max_instances: 1,
        }
    }
}

impl PluginDefaults {
    /// # Errors
    /// Names the limit that is zero or absurdly large.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=60_000).contains(&self.timeout_ms) {
            return Err("timeout_ms must be between 1 and 60000".into());
        }
        if !(1..=60_000).contains(&self.init_timeout_ms) {
            return Err("init_timeout_ms must be between 1 and 60000".into());
        }
        if !(1..=4096).contains(&self.memory_mib) {
            return Err("memory_mib must be between 1 and 4096".into());
        }
        if self.max_failures == 0 {
            return Err("max_failures must be at least 1".into());
        }
        if !(1..=64).contains(&self.max_instances) {
            return Err("max_instances must be between 1 and 64".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
