//! The pure part of the API: the checksum check and the parameters of each call, turned into
//! what the store needs or into an [`ApiError`]. No I/O, so it can be fuzzed.

use crate::base::ids::HookId;

use std::{borrow::Cow, collections::HashMap, sync::Arc};

use super::{MAX_QUERY_BYTES, checksum};
use crate::{
    base::{
        callback_url::{Guard, Refusal},
        digest::Algorithm,
    },
    hooks::{Hook, NewHook, parse_event_ids},
    tenants::Tenant,
};

/// Every FAILED answer of the API; turned into XML at the edge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    #[error("You did not pass the checksum security check.")]
    Checksum,
    #[error("You must specify a callbackURL in the parameters.")]
    MissingCallbackUrl,
    #[error("You must specify a hookID in the parameters.")]
    MissingHookId,
    #[error("The hook informed was not found.")]
    DestroyMissingHook,
    #[error("An error happened while creating your hook. Check the logs.")]
    CreateFailed,
    #[error("An error happened while removing your hook. Check the logs.")]
    DestroyFailed,
    /// The tenant has its most hooks (`tenancy.max_hooks`).
    #[error("You have {0} hooks, the most you may have: destroy one first.")]
    QuotaExceeded(usize),
    /// The tenant called faster than `tenancy.api_rate_per_s`; it may call again in this many
    /// seconds (`Retry-After`).
    #[error("Too many calls: call again in {0} s.")]
    TooManyRequests(u64),
    /// A parameter that is present but unusable.
    #[error("{message}")]
    Invalid {
        key: &'static str,
        message: Cow<'static, str>,
    },
}

impl ApiError {
    pub fn message_key(&self) -> &'static str {
        match self {
            Self::Checksum => "checksumError",
            Self::MissingCallbackUrl => "missingParamCallbackURL",
            Self::MissingHookId => "missingParamHookID",
            Self::DestroyMissingHook => "destroyMissingHook",
            Self::CreateFailed => "createHookError",
            Self::DestroyFailed => "destroyHookError",
            Self::QuotaExceeded(_) => "quotaExceeded",
            Self::TooManyRequests(_) => "tooManyRequests",
            Self::Invalid { key, .. } => key,
        }
    }

    fn invalid(key: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Self::Invalid {
            key,
            message: message.into(),
        }
    }
}

/// Parsed query parameters; a repeated name is refused.
pub struct Params<'a>(HashMap<Cow<'a, str>, Cow<'a, str>>);

impl<'a> Params<'a> {
    pub fn parse(query: &'a str) -> Result<Self, ApiError> {
        let mut map = HashMap::new();
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            if let Some(_dup) = map.insert(k.clone(), v) {
                return Err(ApiError::invalid(
                    "repeatedParam",
                    format!("The parameter {k} is given more than once."),
                ));
            }
        }
        Ok(Self(map))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|v| v.as_ref())
    }
}

/// Who made an API call, as its checksum says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// Signed with `bbb.secret`: every hook, every event.
    Operator,
    /// Signed with one of the secrets of the tenant its host names: its own hooks only.
    Tenant(Arc<Tenant>),
}

impl Caller {
    /// The tenant id its hooks carry (`None`: the operator's).
    pub fn tenant_id(&self) -> Option<&str> {
        match self {
            Self::Operator => None,
            Self::Tenant(t) => Some(&t.id),
        }
    }

    /// Whether the caller may see and remove `hook`: the operator every hook, a tenant its own.
    pub fn sees(&self, hook: &Hook) -> bool {
        matches!(self, Self::Operator) || hook.tenant.as_deref() == self.tenant_id()
    }
}

/// Checks the query's size and checksum, then parses it.
///
/// # Errors
/// `checksumError` for a missing, repeated or wrong checksum; a FAILED answer for a query too
/// long or a repeated parameter.
pub fn authenticate<'a>(
    call_name: &str,
    query: &'a str,
    secret: &str,
    algorithms: &[Algorithm],
) -> Result<Params<'a>, ApiError> {
    authenticate_caller(call_name, query, secret, None, algorithms).map(|(p, _)| p)
}

/// Checks the query's size and checksum (the operator's secret first, then those of `tenant`,
/// the tenant the call's host names), then parses it.
///
/// # Errors
/// As [`authenticate`]: a checksum that matches no secret tried is `checksumError`.
pub fn authenticate_caller<'a>(
    call_name: &str,
    query: &'a str,
    operator: &str,
    tenant: Option<&Arc<Tenant>>,
    algorithms: &[Algorithm],
) -> Result<(Params<'a>, Caller), ApiError> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(ApiError::invalid(
            "queryTooLong",
            "The query string is too long.",
        ));
    }
    // The checksum comes first: nothing about the parameters is revealed without it.
    let mut checksums = form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k == "checksum")
        .map(|(_, v)| v);
    let supplied = checksums.next().unwrap_or_default();
    if checksums.next().is_some() {
        return Err(ApiError::Checksum);
    }
    // The operator's secret first, then the tenant's: one digest per secret, the query cut once.
    let tenant_secrets = tenant
        .into_iter()
        .flat_map(|t| t.secrets().iter().map(|s| s.expose()));
    let secrets = std::iter::once(operator).chain(tenant_secrets);
    let caller = match checksum::matching_secret(call_name, query, &supplied, secrets, algorithms) {
        None => return Err(ApiError::Checksum),
        Some(0) => Caller::Operator,
        // Past the operator's: one of the tenant's.
        Some(_) => Caller::Tenant(tenant.cloned().ok_or(ApiError::Checksum)?),
    };
    Ok((Params::parse(query)?, caller))
}

/// The hook `hooks/create` asks for (the operator's; [`NewHook::tenant`] says otherwise).
///
/// # Errors
/// A FAILED answer naming the parameter that is missing or unusable.
pub fn new_hook(p: &Params<'_>, guard: &Guard) -> Result<NewHook, ApiError> {
    let url = p.get("callbackURL").ok_or(ApiError::MissingCallbackUrl)?;
    guard.check_url(url).map_err(|refusal| match refusal {
        Refusal::Invalid(m) => ApiError::invalid("invalidCallbackURL", m),
        Refusal::NotAllowed(why) => ApiError::invalid(
            "invalidCallbackURL",
            format!("callbackURL is not allowed: {why}."),
        ),
    })?;
    let get_raw = match p.get("getRaw").map(str::to_ascii_lowercase).as_deref() {
        None | Some("") | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            return Err(ApiError::invalid(
                "invalidGetRaw",
                "getRaw must be true or false.",
            ));
        }
    };
    let meeting_id = match p.get("meetingID") {
        Some("") => {
            return Err(ApiError::invalid(
                "invalidMeetingID",
                "meetingID must not be empty.",
            ));
        }
        other => other.map(String::from),
    };
    let event_ids = match p.get("eventID") {
        None => None,
        Some(v) => Some(parse_event_ids(v).ok_or_else(|| {
            ApiError::invalid("invalidEventID", "eventID must name at least one event.")
        })?),
    };
    Ok(NewHook {
        callback_url: url.to_string(),
        meeting_id,
        event_ids,
        get_raw,
        tenant: None,
        max_hooks: None,
        own_secret: false,
    })
}

/// The hook `hooks/destroy` names.
///
/// # Errors
/// `missingParamHookID`, or a FAILED answer when it is not a number.
pub fn hook_id(p: &Params<'_>) -> Result<HookId, ApiError> {
    let id = p.get("hookID").ok_or(ApiError::MissingHookId)?;
    id.trim()
        .parse()
        .map_err(|_| ApiError::invalid("invalidHookID", "hookID must be a number."))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const SECRET: &str = "s3cr3t";

    fn sign(call: &str, query: &str) -> String {
        let sum =
            Algorithm::Sha1.hex_digest(&[call.as_bytes(), query.as_bytes(), SECRET.as_bytes()]);
        if query.is_empty() {
            format!("checksum={sum}")
        } else {
            format!("{query}&checksum={sum}")
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// Any query, signed or not: an answer, never a panic.
        #[test]
        fn any_query_gets_an_answer(query in "[a-zA-Z%=&+.:/?#\\[\\]0-9\\-_ ]{0,200}", signed in any::<bool>()) {
            let q = if signed { sign("hooks/create", &query) } else { query.clone() };
            let guard = Guard::new(true, vec![]);
            if let Ok(p) = authenticate("hooks/create", &q, SECRET, &Algorithm::ALL) {
                let _ = new_hook(&p, &guard);
                let _ = hook_id(&p);
            }
        }

        /// Whatever the values, a correctly signed create is authenticated, and its URL survives
        /// encoding unchanged.
        #[test]
        fn signed_values_round_trip(url in "https?://[a-z]{1,10}\\.example/[ -~]{0,40}", meeting in "[ -~]{1,20}") {
            let q = format!(
                "callbackURL={}&meetingID={}",
                crate::base::form::form_encode(&url),
                crate::base::form::form_encode(&meeting)
            );
            let signed = sign("hooks/create", &q);
            let p = authenticate("hooks/create", &signed, SECRET, &Algorithm::ALL).unwrap();
            prop_assert_eq!(p.get("callbackURL"), Some(url.as_str()));
            prop_assert_eq!(p.get("meetingID"), Some(meeting.as_str()));
            if let Ok(h) = new_hook(&p, &Guard::new(true, vec![])) {
                prop_assert_eq!(h.callback_url, url);
            }
        }
    }

    #[test]
    fn a_tenants_secret_signs_for_that_tenant_only_and_the_operators_wins() {
        let acme = Arc::new(
            Tenant::new(
                "u-1",
                "acme",
                vec![
                    crate::base::secret::Secret::new("acme-new-secret"),
                    crate::base::secret::Secret::new("acme-old-secret"),
                ],
            )
            .expect("tenant"),
        );
        let signed = |secret: &str, alg: Algorithm| {
            let q = "meetingID=m";
            let sum = alg.hex_digest(&[b"hooks/list", q.as_bytes(), secret.as_bytes()]);
            format!("{q}&checksum={sum}")
        };
        let who = |q: &str, tenant| {
            authenticate_caller("hooks/list", q, SECRET, tenant, &Algorithm::ALL).map(|(_, c)| c)
        };
        for alg in Algorithm::ALL {
            for secret in ["acme-new-secret", "acme-old-secret"] {
                assert_eq!(
                    who(&signed(secret, alg), Some(&acme)),
                    Ok(Caller::Tenant(acme.clone()))
                );
                // The same call at a host of no tenant: a checksum error.
                assert_eq!(who(&signed(secret, alg), None), Err(ApiError::Checksum));
            }
            assert_eq!(who(&signed(SECRET, alg), Some(&acme)), Ok(Caller::Operator));
            assert_eq!(
                who(&signed("someone-else", alg), Some(&acme)),
                Err(ApiError::Checksum)
            );
        }
        let mine = Hook {
            id: HookId(1),
            callback_url: "http://h/".into(),
            meeting_id: None,
            event_ids: None,
            get_raw: false,
            permanent: false,
            tenant: Some("u-1".into()),
            disabled: None,
            signing: None,
        };
        let operators = Hook {
            tenant: None,
            disabled: None,
            signing: None,
            ..mine.clone()
        };
        let tenant = Caller::Tenant(acme);
        assert!(tenant.sees(&mine) && !tenant.sees(&operators));
        assert!(Caller::Operator.sees(&mine) && Caller::Operator.sees(&operators));
    }

    #[test]
    fn parameters_of_create_and_destroy() {
        let guard = Guard::new(true, vec![]);
        let q = sign(
            "hooks/create",
            "callbackURL=https%3A%2F%2Fh.example%2Fx&getRaw=TRUE&eventID=A,b",
        );
        let h = new_hook(
            &authenticate("hooks/create", &q, SECRET, &Algorithm::ALL).unwrap(),
            &guard,
        )
        .unwrap();
        assert!(h.get_raw);
        assert_eq!(h.event_ids, Some(vec!["a".to_string(), "b".to_string()]));
        let q = sign("hooks/destroy", "hookID=%2012");
        assert_eq!(
            hook_id(&authenticate("hooks/destroy", &q, SECRET, &Algorithm::ALL).unwrap()),
            Ok(HookId(12))
        );
        let long = sign("hooks/list", &"a".repeat(9000));
        assert_eq!(
            authenticate("hooks/list", &long, SECRET, &Algorithm::ALL)
                .err()
                .map(|e| e.message_key()),
            Some("queryTooLong")
        );
    }
}
