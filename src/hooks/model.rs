//! The hook record and the rules for its fields.

use crate::base::{ids::HookId, secret::Secret};

/// One registered hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// Allocated by Redis `INCR`, never reused.
    pub id: HookId,
    /// Exactly as registered: the callback checksum covers this text.
    pub callback_url: String,
    /// External meeting id the hook is bound to; `None` for a global hook.
    pub meeting_id: Option<String>,
    /// Lowercase event ids the hook wants; `None` for all.
    pub event_ids: Option<Vec<String>>,
    /// Send the bus message unchanged instead of the processed event.
    pub get_raw: bool,
    /// Comes from the configuration: never removed by failures or `hooks/destroy`.
    pub permanent: bool,
    /// The id of the tenant that registered it (`docs/tenants.md`): it gets that tenant's
    /// meetings only, signed with that tenant's secret. `None`: the operator's hook.
    pub tenant: Option<String>,
    /// Disabled (given up on with `delivery.on_give_up = "disable"`, or its tenant is no
    /// longer known): it gets its events (queued, within the bounds) but sends none until it
    /// is enabled again. `None`: enabled.
    pub disabled: Option<Disabled>,
    /// Its own Standard Webhooks signing secrets (`delivery.hook_secrets`), if it has them.
    pub signing: Option<HookSecrets>,
}

/// Why a hook sends nothing until it is enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DisabledReason {
    /// Its callbacks kept failing (`delivery.on_give_up = "disable"`).
    Failures,
    /// Its tenant is no longer known (removed from Scalelite or the configuration, or
    /// refused): enabled again when it is back, removed after `tenancy.removed_grace_s`.
    TenantUnknown,
}

impl DisabledReason {
    /// As stored, and as the admin API and the metrics say it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Failures => "failures",
            Self::TenantUnknown => "tenant_unknown",
        }
    }

    /// As stored; anything else (a record of a version that kept no reason) is `Failures`.
    pub(crate) fn parse(text: &str) -> Self {
        match text {
            "tenant_unknown" => Self::TenantUnknown,
            _ => Self::Failures,
        }
    }
}

/// A disabled hook's why and since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disabled {
    pub(crate) reason: DisabledReason,
    /// When (ms since the epoch); 0 when not known (disabled by a version that kept no time).
    pub(crate) since: u64,
}

/// A hook's own signing secrets (`whsec_` and the key in base64): the one in force, and the
/// one it replaced, still signing until its overlap ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSecrets {
    pub(crate) current: Secret,
    /// The secret before the last rotation, and until when (ms since the epoch) it signs too.
    pub(crate) previous: Option<(Secret, u64)>,
}

impl HookSecrets {
    /// The secrets that sign an attempt made at `now` (ms): the current one, then the
    /// previous one while its overlap lasts.
    pub fn in_force(&self, now: u64) -> impl Iterator<Item = &Secret> {
        std::iter::once(&self.current).chain(
            self.previous
                .iter()
                .filter(move |(_, until)| now < *until)
                .map(|(s, _)| s),
        )
    }
}

impl Hook {
    /// Whether the hook's eventID filter lets `event_id` through (case-insensitive).
    pub fn wants(&self, event_id: &str) -> bool {
        self.event_ids.is_none() || self.names(event_id)
    }

    /// Whether the hook's eventID lists `event_id` (case-insensitive): what an event that goes
    /// only to hooks asking for it needs ([`crate::event::Event::named_only`]).
    pub fn names(&self, event_id: &str) -> bool {
        self.event_ids
            .as_ref()
            .is_some_and(|ids| ids.iter().any(|id| id.eq_ignore_ascii_case(event_id)))
    }

    /// What the one-hook-per-callback-URL rule is about: the URL within its owner.
    pub fn registration(&self) -> Registration<'_> {
        Registration {
            tenant: self.tenant.as_deref(),
            url: &self.callback_url,
        }
    }

    /// Whether the hook's owner may have an event of a meeting of tenant `meeting_tenant`
    /// (resolved to a tenant id): the operator's hooks have every event, a tenant's hook
    /// those of its own meetings only.
    pub fn owns(&self, meeting_tenant: Option<&str>) -> bool {
        match &self.tenant {
            None => true,
            Some(t) => meeting_tenant == Some(t.as_str()),
        }
    }
}

/// A callback URL within its owner (a tenant, or the operator): one hook per registration.
/// Two tenants registering one URL get two hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Registration<'a> {
    pub(super) tenant: Option<&'a str>,
    pub(super) url: &'a str,
}

impl<'a> Registration<'a> {
    /// As owned strings, for an index.
    pub fn owned(self) -> (Option<String>, String) {
        (self.tenant.map(String::from), self.url.to_string())
    }

    /// One text naming it: the URL alone for the operator (as before tenants, so that an
    /// index of the operator's hooks costs what it did), the tenant id and the URL apart by a
    /// NUL otherwise (a URL holds no NUL). Also what a claim on it is named by.
    pub fn key(self) -> std::borrow::Cow<'a, str> {
        match self.tenant {
            None => std::borrow::Cow::Borrowed(self.url),
            Some(t) => std::borrow::Cow::Owned(format!("{t}\0{}", self.url)),
        }
    }
}

/// Parses an `eventID` parameter: comma-separated, trimmed, lowercased, empty items dropped.
/// `None` when no id remains.
pub(crate) fn parse_event_ids(value: &str) -> Option<Vec<String>> {
    let ids: Vec<String> = value
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    (!ids.is_empty()).then_some(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_trimmed_and_lowercased() {
        assert_eq!(
            parse_event_ids(" User-Joined ,meeting-ended,,"),
            Some(vec!["user-joined".to_string(), "meeting-ended".to_string()])
        );
        assert_eq!(parse_event_ids(" , "), None);
    }

    #[test]
    fn wants_is_case_insensitive() {
        let hook = Hook {
            id: HookId(1),
            callback_url: "http://h/".into(),
            meeting_id: None,
            event_ids: Some(vec!["user-joined".into()]),
            get_raw: false,
            permanent: false,
            tenant: None,
            disabled: None,
            signing: None,
        };
        assert!(hook.wants("USER-JOINED"));
        assert!(!hook.wants("user-left"));
    }
}
