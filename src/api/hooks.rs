//! The create, destroy and list calls: parameter checks, the store call, the XML answer.

use std::{borrow::Cow, collections::HashMap, sync::Arc};

use super::{ApiState, Call, MAX_QUERY_BYTES, checksum, xml};
use crate::hooks::{
    CreateOutcome,
    model::{parse_event_ids, validate_callback_url},
    store::NewHook,
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
struct Params<'a>(HashMap<Cow<'a, str>, Cow<'a, str>>);

impl<'a> Params<'a> {
    fn parse(query: &'a str) -> Result<Self, ApiError> {
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

    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|v| v.as_ref())
    }
}

/// Runs one call: (returncode, messageKey for metrics, XML body).
pub async fn answer(
    state: &ApiState,
    call: Call,
    call_name: &str,
    query: &str,
) -> (&'static str, &'static str, String) {
    match run(state, call, call_name, query).await {
        Ok((key, body)) => ("SUCCESS", key, body),
        Err(e) => (
            "FAILED",
            e.message_key(),
            xml::failed(e.message_key(), &e.to_string()),
        ),
    }
}

async fn run(
    state: &ApiState,
    call: Call,
    call_name: &str,
    query: &str,
) -> Result<(&'static str, String), ApiError> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(ApiError::invalid(
            "queryTooLong",
            "The query string is too long.",
        ));
    }
    // The checksum comes first: nothing about the parameters is revealed without it. A repeated
    // checksum is refused.
    let mut checksums = form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k == "checksum")
        .map(|(_, v)| v);
    let supplied = checksums.next().unwrap_or_default();
    if checksums.next().is_some()
        || !checksum::verify(
            call_name,
            query,
            &supplied,
            state.secret.expose(),
            &state.algorithms,
        )
    {
        return Err(ApiError::Checksum);
    }
    let params = Params::parse(query)?;
    match call {
        Call::Create => create(state, &params).await,
        Call::Destroy => destroy(state, &params).await,
        Call::List => Ok(("", list(state, &params))),
        Call::Ping => Ok(("", String::new())),
    }
}

async fn create(state: &ApiState, p: &Params<'_>) -> Result<(&'static str, String), ApiError> {
    let url = p.get("callbackURL").ok_or(ApiError::MissingCallbackUrl)?;
    validate_callback_url(url).map_err(|m| ApiError::invalid("invalidCallbackURL", m))?;
    state.guard.check_url(url).map_err(|why| {
        ApiError::invalid(
            "invalidCallbackURL",
            format!("callbackURL is not allowed: {why}."),
        )
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
    let new = NewHook {
        callback_url: url.to_string(),
        meeting_id,
        event_ids,
        get_raw,
    };
    match state.store.create(new).await {
        Ok(CreateOutcome::Created(hook)) => {
            tracing::info!(hook_id = hook.id, meeting = ?hook.meeting_id, raw = hook.get_raw, "hook created");
            state
                .metrics
                .hooks_registered
                .set(state.store.registry().load().len() as i64);
            Ok(("", xml::created(&hook)))
        }
        Ok(CreateOutcome::Duplicate(id)) => Ok(("duplicateWarning", xml::duplicate(id))),
        Err(e) => {
            tracing::error!(error = %e, "could not create a hook");
            Err(ApiError::CreateFailed)
        }
    }
}

async fn destroy(state: &ApiState, p: &Params<'_>) -> Result<(&'static str, String), ApiError> {
    let id = p.get("hookID").ok_or(ApiError::MissingHookId)?;
    let id: u64 = id
        .trim()
        .parse()
        .map_err(|_| ApiError::invalid("invalidHookID", "hookID must be a number."))?;
    match state.store.destroy(id).await {
        Ok(true) => {
            tracing::info!(hook_id = id, "hook destroyed");
            state
                .metrics
                .hooks_registered
                .set(state.store.registry().load().len() as i64);
            Ok(("", xml::removed()))
        }
        Ok(false) => Err(ApiError::DestroyMissingHook),
        Err(e) => {
            tracing::error!(hook_id = id, error = %e, "could not destroy a hook");
            Err(ApiError::DestroyFailed)
        }
    }
}

fn list(state: &ApiState, p: &Params<'_>) -> String {
    let snapshot = state.store.registry().load();
    let hooks: Vec<Arc<_>> = match p.get("meetingID") {
        None => snapshot.all().cloned().collect(),
        Some(m) => {
            let mut v: Vec<_> = snapshot
                .globals()
                .iter()
                .chain(snapshot.bound_to(m))
                .cloned()
                .collect();
            v.sort_by_key(|h| h.id);
            v
        }
    };
    xml::list(&hooks)
}
