//! `[tenancy]` and `[audit]`: what a hosting provider bounds and records per tenant
//! (`docs/tenants.md`): the hooks and API calls a tenant may make, how long a removed
//! tenant's hooks wait for it, and how long the record of every change is kept.

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// `[tenancy]`: limits per tenant (the operator has none), and a removed tenant's hooks.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TenancyConfig {
    /// The most hooks a tenant may have; beyond it `hooks/create` answers FAILED,
    /// `quotaExceeded`, and creates nothing. 0: no limit.
    pub max_hooks: usize,
    /// API calls per second a tenant may make, all its calls together (a token bucket);
    /// beyond it HTTP 429, `tooManyRequests`, with `Retry-After`. 0: no limit.
    pub api_rate_per_s: u32,
    /// Calls a tenant may make at once after a quiet spell.
    pub api_burst: u32,
    /// A tenant removed from Scalelite or the configuration (or refused for its secrets): its
    /// hooks are disabled, enabled again when it is back under the same id, and removed after
    /// this many seconds.
    pub removed_grace_s: u64,
}

impl Default for TenancyConfig {
    fn default() -> Self {
        Self {
            max_hooks: 100,
            api_rate_per_s: 10,
            api_burst: 50,
            removed_grace_s: 7 * 24 * 3600,
        }
    }
}

/// `[audit]`: the record of every change asked of the relay (`hookrelay audit`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Days each record is kept in the store.
    pub keep_days: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self { keep_days: 30 }
    }
}

impl AuditConfig {
    /// How long a record is kept, in milliseconds.
    pub fn keep_ms(&self) -> u64 {
        self.keep_days.saturating_mul(86_400_000)
    }
}

/// Checks `[tenancy]` and `[audit]`.
pub fn validate(tenancy: &TenancyConfig, audit: &AuditConfig) -> Result<(), ConfigError> {
    let fail = |key: &str, why: &str| Err(ConfigError(format!("{key}: {why}")));
    if tenancy.api_rate_per_s > 0 && tenancy.api_burst == 0 {
        return fail(
            "tenancy.api_burst",
            "must be at least 1 while tenancy.api_rate_per_s is set",
        );
    }
    if !(1..=3650).contains(&audit.keep_days) {
        return fail("audit.keep_days", "must be between 1 and 3650");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_their_bounds() {
        let (t, a) = (TenancyConfig::default(), AuditConfig::default());
        assert_eq!(
            (
                t.max_hooks,
                t.api_rate_per_s,
                t.api_burst,
                t.removed_grace_s
            ),
            (100, 10, 50, 604_800)
        );
        assert_eq!(a.keep_ms(), 30 * 86_400_000);
        assert!(validate(&t, &a).is_ok());
        let no_burst = TenancyConfig {
            api_burst: 0,
            ..t.clone()
        };
        assert!(
            validate(&no_burst, &a)
                .expect_err("refused")
                .0
                .starts_with("tenancy.api_burst")
        );
        let unlimited = TenancyConfig {
            api_rate_per_s: 0,
            api_burst: 0,
            ..t.clone()
        };
        assert!(validate(&unlimited, &a).is_ok());
        assert!(
            validate(&t, &AuditConfig { keep_days: 0 })
                .expect_err("refused")
                .0
                .starts_with("audit.keep_days")
        );
    }
}
