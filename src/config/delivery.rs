//! `[delivery]`: how callbacks are sent, signed, retried and given up; the receivers' own
//! rules; the permanent hooks.

use serde::{Deserialize, Serialize};

use super::duration;
use crate::base::{digest::Algorithm, secret::Secret};

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
    /// Each callback of a traced message (`[tracing]`) carries the W3C `traceparent` of its
    /// attempt's span, so that a receiver's own spans join the relay's trace.
    pub traceparent: bool,
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
            traceparent: false,
        }
    }
}
