//! What types alone cannot check: required values, ranges, and the permanent hooks against the
//! callback URL policy that the configuration itself describes.

use super::{CallbackAuth, Config, ConfigError, DeliveryConfig, Secret, strength::weak_secret};
use crate::base::callback_url::Guard;

/// The callback URL policy of `[delivery]`: `[delivery.ssrf]`, `allow_url_credentials`, and
/// `https` only in bearer mode unless `allow_insecure_bearer`. Every hook, however it came to
/// exist, and every delivery is checked against it.
pub fn callback_guard(delivery: &DeliveryConfig) -> Guard {
    Guard::new(delivery.ssrf.enabled, delivery.ssrf.allow_cidrs.clone())
        .allow_credentials(delivery.allow_url_credentials)
        .https_only(delivery.auth == CallbackAuth::Bearer && !delivery.allow_insecure_bearer)
}

/// The error naming `key` and why its value is unusable.
fn fail(key: &str, why: &str) -> Result<(), ConfigError> {
    Err(ConfigError(format!("{key}: {why}")))
}

impl Config {
    /// Checks what types alone cannot.
    ///
    /// # Errors
    /// Names the first key whose value is unusable.
    pub fn validate(&self) -> Result<(), ConfigError> {
        // An edge signs nothing and answers no API call: it needs no secret.
        if self.edge.is_none() {
            self.validate_secrets()?;
        }
        self.validate_api()?;
        if !super::sources::is_redis_url(&self.redis.url) {
            return fail("redis.url", "must be a redis:// URL");
        }
        self.validate_sources()?;
        self.validate_ca_files()?;
        if let Some(edge) = &self.edge {
            edge.validate()?;
        }
        if let Err(e) = crate::base::standard_webhooks::StandardSigner::new(
            &self.delivery.standard_webhooks.secrets,
        ) {
            return fail("delivery.standard_webhooks.secrets", &e.to_string());
        }
        self.validate_bus()?;
        if self.delivery.retry_intervals_ms.is_empty() {
            return fail(
                "delivery.retry_intervals_ms",
                "must hold at least one interval",
            );
        }
        self.validate_exposed_listeners()?;
        self.validate_delivery_limits()?;
        self.validate_metrics_auth()?;
        if !self.bbb.api_url.is_empty() && !super::sources::is_http_url(&self.bbb.api_url) {
            return fail("bbb.api_url", "must be an http(s) URL");
        }
        self.validate_merge()?;
        self.validate_plugins()?;
        self.validate_permanent_hooks()?;
        super::tenants::validate(
            self.scalelite.as_ref(),
            &self.tenants,
            &self.operator_secrets(),
        )?;
        super::tenancy::validate(&self.tenancy, &self.audit)?;
        if self.mapping.inactivity_timeout_s == 0 {
            return fail("mapping.inactivity_timeout_s", "must be greater than 0");
        }
        self.xapi.validate().map_err(ConfigError)?;
        self.tracing.validate().map_err(ConfigError)?;
        super::destinations::validate(&self.destinations).map_err(ConfigError)?;
        self.validate_destination_files()
    }

    /// Checks that each destination's `password_file` and `ca_file` can be read.
    fn validate_destination_files(&self) -> Result<(), ConfigError> {
        for (i, d) in self.destinations.iter().enumerate() {
            for (k, path) in [("password_file", &d.password_file), ("ca_file", &d.ca_file)] {
                if let Some(path) = path
                    && let Err(e) = std::fs::read(path)
                {
                    return fail(
                        &format!("destinations[{i}].{k}"),
                        &format!("cannot read {}: {e}", path.display()),
                    );
                }
            }
        }
        Ok(())
    }

    /// The secrets only the operator may hold, which no tenant may be given: `bbb.secret` and
    /// each source's server secret.
    pub fn operator_secrets(&self) -> Vec<Secret> {
        std::iter::once(&self.bbb.secret)
            .chain(self.sources.iter().map(|s| &s.secret))
            .filter(|s| !s.is_empty())
            .cloned()
            .collect()
    }

    /// The shared secrets: `bbb.secret` set and strong, and every source's own strong.
    fn validate_secrets(&self) -> Result<(), ConfigError> {
        if self.bbb.secret.is_empty() {
            return fail("bbb.secret", "must be set to the server's shared secret");
        }
        if let Some(why) = weak_secret(self.bbb.secret.expose()) {
            return fail("bbb.secret", why);
        }
        if let Some(why) = self
            .sources
            .iter()
            .filter(|s| !s.secret.is_empty())
            .find_map(|s| weak_secret(s.secret.expose()))
        {
            return fail("sources.secret", why);
        }
        Ok(())
    }

    /// `[api]`: its path and its checksum algorithms.
    fn validate_api(&self) -> Result<(), ConfigError> {
        if !self.api.path.starts_with('/') {
            return fail("api.path", "must start with '/'");
        }
        if self.api.checksum_algorithms.is_empty() {
            return fail(
                "api.checksum_algorithms",
                "must name at least one algorithm",
            );
        }
        Ok(())
    }

    /// `[redis]`'s channels and message size.
    fn validate_bus(&self) -> Result<(), ConfigError> {
        if self.redis.channels.is_empty() {
            return fail("redis.channels", "must name at least one channel");
        }
        if self.redis.max_message_bytes == 0 {
            return fail("redis.max_message_bytes", "must be greater than 0");
        }
        Ok(())
    }

    /// The admin API and the metrics endpoint: credentials required when they listen beyond
    /// the loopback address.
    fn validate_exposed_listeners(&self) -> Result<(), ConfigError> {
        if self.admin.enabled
            && self.admin.bind.is_some_and(|b| !b.ip().is_loopback())
            && self.admin.bearer_token.is_empty()
        {
            return fail(
                "admin.bearer_token",
                "must be set when admin.bind is not a loopback address",
            );
        }
        let auth = &self.metrics.auth;
        if self.metrics.enabled
            && !self.metrics.bind.ip().is_loopback()
            && auth.bearer_token.is_empty()
            && auth.basic_user.is_empty()
        {
            return fail(
                "metrics.auth",
                "a bearer_token or basic_user and basic_password must be set when metrics.bind is not a loopback address",
            );
        }
        Ok(())
    }

    /// `[delivery]`'s bounds: the attempt log, the queues, connections, unacknowledged
    /// callbacks and the request timeout.
    fn validate_delivery_limits(&self) -> Result<(), ConfigError> {
        if self.delivery.attempt_log > super::MAX_ATTEMPT_LOG {
            return fail(
                "delivery.attempt_log",
                &format!("must be at most {}", super::MAX_ATTEMPT_LOG),
            );
        }
        if self.delivery.max_queue == 0 {
            return fail("delivery.max_queue", "must be greater than 0");
        }
        for (i, r) in self.delivery.receivers.iter().enumerate() {
            let key = |k: &str| format!("delivery.receivers[{i}].{k}");
            if !super::sources::is_http_url(&r.url_prefix) {
                return fail(&key("url_prefix"), "must be an http(s) URL prefix");
            }
        }
        if self.delivery.max_connections_per_receiver == 0 {
            return fail(
                "delivery.max_connections_per_receiver",
                "must be greater than 0",
            );
        }
        if self.delivery.queue_budget_mb == Some(0) {
            return fail("delivery.queue_budget_mb", "must be greater than 0");
        }
        if self.delivery.max_unacked == 0 {
            return fail("delivery.max_unacked", "must be at least 1");
        }
        if self.delivery.request_timeout_ms == 0 {
            return fail("delivery.request_timeout_ms", "must be greater than 0");
        }
        Ok(())
    }

    /// `[metrics.auth]`'s basic credentials: both or neither, and a user without ':'.
    fn validate_metrics_auth(&self) -> Result<(), ConfigError> {
        let auth = &self.metrics.auth;
        if auth.basic_user.is_empty() != auth.basic_password.is_empty() {
            return fail("metrics.auth", "basic_user and basic_password go together");
        }
        if auth.basic_user.contains(':') {
            return fail("metrics.auth.basic_user", "may not contain ':'");
        }
        Ok(())
    }

    /// `[metrics.merge]`: its path, and each source's name, URL and timeout.
    fn validate_merge(&self) -> Result<(), ConfigError> {
        let merge = &self.metrics.merge;
        if !merge.path.starts_with('/') || merge.path == "/metrics" {
            return fail(
                "metrics.merge.path",
                "must start with '/' and differ from /metrics",
            );
        }
        for (i, s) in merge.sources.iter().enumerate() {
            if s.name.is_empty() || merge.sources[..i].iter().any(|o| o.name == s.name) {
                return fail(
                    "metrics.merge.sources",
                    "every source needs a name of its own",
                );
            }
            if !matches!(url::Url::parse(&s.url), Ok(u) if matches!(u.scheme(), "http" | "https")) {
                return fail("metrics.merge.sources", "a source's url must be http(s)");
            }
            if s.timeout_ms == 0 {
                return fail(
                    "metrics.merge.sources",
                    "a source's timeout_ms must be greater than 0",
                );
            }
        }
        Ok(())
    }

    /// `[plugins]`: its folder, the reload debounce, and the plugins' defaults.
    fn validate_plugins(&self) -> Result<(), ConfigError> {
        if let Some(dir) = &self.plugins.dir
            && !dir.is_dir()
        {
            return fail("plugins.dir", "is not a folder");
        }
        if !(10..=60_000).contains(&self.plugins.reload_debounce_ms) {
            return fail("plugins.reload_debounce_ms", "must be between 10 and 60000");
        }
        if let Err(why) = self.plugins.defaults().validate() {
            return Err(ConfigError(format!("plugins.{why}")));
        }
        Ok(())
    }

    /// `delivery.permanent_hooks` against the callback URL policy.
    fn validate_permanent_hooks(&self) -> Result<(), ConfigError> {
        let guard = callback_guard(&self.delivery);
        for hook in &self.delivery.permanent_hooks {
            if let Err(why) = guard.check_url(&hook.url) {
                return fail("delivery.permanent_hooks", &format!("{}: {why}", hook.url));
            }
        }
        Ok(())
    }
}
