//! `[scalelite]` and `[[tenants]]`: the tenants of a hosted cluster, each with its own hooks,
//! meetings and secrets (`docs/tenants.md`). Read from Scalelite's Redis, or listed here.

use serde::{Deserialize, Serialize};

use super::{ConfigError, strength::weak_secret};
use crate::base::secret::{Secret, SecretUrl};

/// `[scalelite]`: where Scalelite keeps its tenants (its own Redis, not the relay's store).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScaleliteConfig {
    /// Scalelite's Redis (`REDIS_URL` of its deployment), read only.
    pub redis_url: SecretUrl,
    /// Scalelite's `REDIS_NAMESPACE`: its keys are `<namespace>:tenants` and so on.
    pub namespace: String,
    /// How often its tenants are read again: a tenant added or removed, or a secret rotated,
    /// is in force within this time.
    pub refresh_ms: u64,
    /// PEM file of the CAs that a `rediss://` `redis_url`'s server certificate must chain
    /// to; unset: the system's roots.
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for ScaleliteConfig {
    fn default() -> Self {
        Self {
            redis_url: SecretUrl::new("redis://127.0.0.1:6379"),
            namespace: "scalelite".into(),
            refresh_ms: 2_000,
            ca_file: None,
        }
    }
}

/// One `[[tenants]]` entry: a tenant without Scalelite.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TenantConfig {
    /// The first label of the host names its API calls come to (`acme` for
    /// `acme.bbb.example.com`).
    pub name: String,
    /// Its secrets: any of them signs its API calls, the first signs its callbacks.
    pub secrets: Vec<Secret>,
    /// What its meetings' `meta_tenant-id` says; default: the name.
    pub id: Option<String>,
}

impl TenantConfig {
    /// The id its meetings carry.
    pub fn id(&self) -> &str {
        self.id.as_deref().unwrap_or(&self.name)
    }
}

/// Whether `name` can be the first label of a host name (as Scalelite finds tenants).
pub fn is_host_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Checks `[scalelite]` and `[[tenants]]`: names that are host labels, unique names and ids,
/// strong secrets that are not the operator's.
pub fn validate(
    scalelite: Option<&ScaleliteConfig>,
    tenants: &[TenantConfig],
    operator: &[Secret],
) -> Result<(), ConfigError> {
    let fail = |key: String, why: &str| Err(ConfigError(format!("{key}: {why}")));
    if let Some(s) = scalelite {
        if !super::sources::is_redis_url(&s.redis_url) {
            return fail("scalelite.redis_url".into(), "must be a redis:// URL");
        }
        if s.namespace.is_empty() {
            return fail("scalelite.namespace".into(), "must not be empty");
        }
        if !(100..=5_000).contains(&s.refresh_ms) {
            return fail(
                "scalelite.refresh_ms".into(),
                "must be between 100 and 5000 (changes are in force within 5 seconds)",
            );
        }
    }
    let mut names = std::collections::HashSet::new();
    let mut ids = std::collections::HashSet::new();
    for (i, t) in tenants.iter().enumerate() {
        let key = |field: &str| format!("tenants[{i}].{field}");
        let name = t.name.to_ascii_lowercase();
        if !is_host_label(&name) {
            return fail(
                key("name"),
                "must be a host name's first label (letters, digits, - and _)",
            );
        }
        if !names.insert(name) {
            return fail(key("name"), "is given to another tenant too");
        }
        if t.id().is_empty() || !ids.insert(t.id().to_string()) {
            return fail(
                key("id"),
                "must be set and differ from every other tenant's",
            );
        }
        if t.secrets.is_empty() {
            return fail(key("secrets"), "must hold at least one secret");
        }
        for (j, s) in t.secrets.iter().enumerate() {
            if let Some(why) = weak_secret(s.expose()) {
                return fail(format!("tenants[{i}].secrets[{j}]"), why);
            }
            if operator.contains(s) {
                return fail(
                    format!("tenants[{i}].secrets[{j}]"),
                    "is bbb.secret or a source's secret: a tenant must never hold the operator's secret",
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str, secrets: &[&str]) -> TenantConfig {
        TenantConfig {
            name: name.into(),
            secrets: secrets.iter().map(|s| Secret::new(*s)).collect(),
            id: None,
        }
    }

    #[test]
    fn names_ids_and_secrets_are_checked() {
        let op = [Secret::new("operator-secret-0123")];
        let op = &op[..];
        let ok = [
            tenant("acme", &["acme-secret-0123"]),
            tenant("beta", &["beta-secret-0123"]),
        ];
        assert!(validate(None, &ok, op).is_ok());
        let err = |t: &[TenantConfig]| validate(None, t, op).expect_err("refused").0;
        assert!(err(&[tenant("a.b", &["acme-secret-0123"])]).starts_with("tenants[0].name"));
        assert!(
            err(&[ok[0].clone(), tenant("ACME", &["x-secret-0123456"])])
                .starts_with("tenants[1].name")
        );
        assert!(err(&[tenant("acme", &[])]).starts_with("tenants[0].secrets"));
        assert!(err(&[tenant("acme", &["short"])]).starts_with("tenants[0].secrets[0]"));
        let leaked = err(&[tenant(
            "acme",
            &["acme-secret-0123", "operator-secret-0123"],
        )]);
        assert!(leaked.starts_with("tenants[0].secrets[1]"), "{leaked}");
        assert!(!leaked.contains("operator-secret-0123"), "{leaked}");
        let same_id = TenantConfig {
            id: Some("acme".into()),
            ..ok[1].clone()
        };
        assert!(err(&[ok[0].clone(), same_id]).starts_with("tenants[1].id"));
        let slow = ScaleliteConfig {
            refresh_ms: 10_000,
            ..ScaleliteConfig::default()
        };
        assert!(
            validate(Some(&slow), &[], op)
                .expect_err("refused")
                .0
                .starts_with("scalelite.refresh_ms")
        );
    }
}
