//! `[tenancy]`'s limits on a tenant's API calls: how many hooks it may have, and how fast it
//! may call (a token bucket per tenant, GCRA). The operator has none.

use std::{num::NonZeroU32, time::Duration};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter, clock::Clock};

use crate::config::tenancy::TenancyConfig;

/// The limits every tenant has.
pub(crate) struct TenantLimits {
    /// `tenancy.max_hooks`; `None`: no limit.
    pub(super) max_hooks: Option<usize>,
    /// `tenancy.api_rate_per_s` and `api_burst`, a bucket per tenant id.
    rate: Option<DefaultKeyedRateLimiter<String>>,
}

impl TenantLimits {
    pub(crate) fn new(config: &TenancyConfig) -> Self {
        let rate = NonZeroU32::new(config.api_rate_per_s).map(|rate| {
            let burst = NonZeroU32::new(config.api_burst).unwrap_or(rate);
            RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
        });
        Self {
            max_hooks: (config.max_hooks > 0).then_some(config.max_hooks),
            rate,
        }
    }

    /// Takes one call of tenant `id` from its bucket: `Err` with how long until it may call
    /// again when the bucket is empty.
    pub(crate) fn take_call(&self, id: &str) -> Result<(), Duration> {
        let Some(rate) = &self.rate else {
            return Ok(());
        };
        rate.check_key(&id.to_string())
            .map_err(|not_until| not_until.wait_time_from(rate.clock().now()))
    }
}

/// `Retry-After` for a wait: whole seconds, at least 1.
pub(crate) fn retry_after_s(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_has_its_burst_then_its_rate_and_others_their_own() {
        let limits = TenantLimits::new(&TenancyConfig {
            api_rate_per_s: 1,
            api_burst: 3,
            ..TenancyConfig::default()
        });
        for _ in 0..3 {
            assert!(limits.take_call("acme").is_ok());
        }
        let wait = limits.take_call("acme").expect_err("over the burst");
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert_eq!(retry_after_s(wait), 1);
        assert!(limits.take_call("beta").is_ok(), "a bucket per tenant");
        let off = TenantLimits::new(&TenancyConfig {
            api_rate_per_s: 0,
            max_hooks: 0,
            ..TenancyConfig::default()
        });
        assert!((0..1000).all(|_| off.take_call("acme").is_ok()));
        assert_eq!(off.max_hooks, None);
        assert_eq!(retry_after_s(Duration::from_millis(2001)), 3);
        assert_eq!(retry_after_s(Duration::from_secs(2)), 2);
    }
}
