//! `[xapi]`: the xAPI output, statements about meetings sent to a Learning Record Store, as the
//! reference's `out/xapi` module does (`docs/xapi.md`).

use serde::{Deserialize, Serialize};

use crate::base::secret::Secret;

/// The xAPI output: off unless `enabled`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct XapiConfig {
    pub enabled: bool,
    /// The default LRS (meetings without `meta_secret-lrs-payload`); empty: such meetings send
    /// nothing. A trailing `/xapi` or `/xapi/statements` is removed and `/xAPI/statements`
    /// appended, keeping any path before it.
    pub lrs_endpoint: String,
    /// Basic authentication for the default LRS.
    pub lrs_username: String,
    pub lrs_password: Secret,
    /// Bearer authentication for the default LRS (instead of Basic).
    pub lrs_token: Secret,
    /// The namespace (a UUID) of every id in the statements; keep it secret and never change
    /// it, or the LRS sees new activities and registrations. Required when enabled.
    pub uuid_namespace: String,
    /// The host in activity ids and in actors' `homePage`; default: `bbb.server_domain`.
    pub server_domain: String,
    /// How long one POST to an LRS may take.
    pub request_timeout_ms: u64,
    /// Waits between tries of a statement the LRS did not take (connection refused, timeout,
    /// 5xx, 429); after the last, the last again, without end: statements are not given up on
    /// an outage.
    pub retry_intervals_ms: Vec<u64>,
    /// Most statements queued for one LRS; more are refused (counted, logged).
    pub max_queue: usize,
    /// How long a meeting's xAPI state (its users, polls) stays in the store after its last
    /// event when no `meeting-ended` comes.
    pub state_ttl_s: u64,
}

impl Default for XapiConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            lrs_endpoint: String::new(),
            lrs_username: String::new(),
            lrs_password: Secret::default(),
            lrs_token: Secret::default(),
            uuid_namespace: String::new(),
            server_domain: String::new(),
            request_timeout_ms: 10_000,
            retry_intervals_ms: vec![1_000, 2_000, 5_000, 10_000, 30_000, 60_000],
            max_queue: 100_000,
            state_ttl_s: 86_400,
        }
    }
}

impl XapiConfig {
    /// Checks an enabled output: a namespace that is a UUID, sane limits, an http(s) default LRS.
    ///
    /// # Errors
    /// Names the first `xapi.` key whose value is unusable.
    pub fn validate(&self) -> Result<(), String> {
        if !self.enabled {
            return Ok(());
        }
        if uuid::Uuid::parse_str(&self.uuid_namespace).is_err() {
            return Err(
                "xapi.uuid_namespace: must be a UUID (the reference's uuid_namespace)".into(),
            );
        }
        if !self.lrs_endpoint.is_empty()
            && !matches!(url::Url::parse(&self.lrs_endpoint), Ok(u) if matches!(u.scheme(), "http" | "https"))
        {
            return Err("xapi.lrs_endpoint: must be an http(s) URL".into());
        }
        if self.retry_intervals_ms.is_empty() {
            return Err("xapi.retry_intervals_ms: must hold at least one interval".into());
        }
        if self.request_timeout_ms == 0 || self.max_queue == 0 || self.state_ttl_s == 0 {
            return Err(
                "xapi: request_timeout_ms, max_queue and state_ttl_s must be greater than 0".into(),
            );
        }
        Ok(())
    }
}
