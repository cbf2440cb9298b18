//! The create, destroy and list calls: checked parameters ([`super::params`]) to the store, and
//! the XML answer.

use std::sync::Arc;

use super::{
    ApiState, Call,
    params::{ApiError, Params, authenticate, hook_id, new_hook},
    xml,
};
use crate::hooks::{CreateOutcome, Snapshot};

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
    let params = authenticate(call_name, query, state.secret.expose(), &state.algorithms)?;
    match call {
        Call::Create => create(state, &params).await,
        Call::Destroy => destroy(state, &params).await,
        Call::List => Ok(("", list(state, &params))),
        Call::Ping => Ok(("", String::new())),
    }
}

async fn create(state: &ApiState, p: &Params<'_>) -> Result<(&'static str, String), ApiError> {
    let new = new_hook(p, &state.guard)?;
    match state.store.create(new).await {
        Ok(CreateOutcome::Created(hook)) => {
            tracing::info!(hook_id = hook.id.0, meeting = ?hook.meeting_id, raw = hook.get_raw, "hook created");
            {
                let hooks = state.store.registry().load();
                state.metrics.count_hooks(hooks.len(), hooks.counts());
            }
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
    let id = hook_id(p)?;
    match state.store.destroy(id).await {
        Ok(true) => {
            tracing::info!(hook_id = id.0, "hook destroyed");
            {
                let hooks = state.store.registry().load();
                state.metrics.count_hooks(hooks.len(), hooks.counts());
            }
            Ok(("", xml::removed()))
        }
        Ok(false) => Err(ApiError::DestroyMissingHook),
        Err(e) => {
            tracing::error!(hook_id = id.0, error = %e, "could not destroy a hook");
            Err(ApiError::DestroyFailed)
        }
    }
}

/// The last unfiltered `hooks/list` answer and the hook snapshot it shows: listing every hook
/// renders them once per change, not once per call.
#[derive(Default)]
pub struct ListCache(std::sync::Mutex<Option<(Arc<Snapshot>, Arc<str>)>>);

fn list(state: &ApiState, p: &Params<'_>) -> String {
    let snapshot = state.store.registry().load();
    let hooks: Vec<Arc<_>> = match p.get("meetingID") {
        None => {
            let mut cache = state.list_cache.0.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((s, xml)) = cache.as_ref()
                && Arc::ptr_eq(s, &snapshot)
            {
                return xml.to_string();
            }
            let all: Vec<Arc<_>> = snapshot.all().cloned().collect();
            let xml = xml::list(&all);
            *cache = Some((snapshot, xml.as_str().into()));
            return xml;
        }
        Some(m) => {
            let mut v: Vec<_> = snapshot
                .globals()
                .chain(snapshot.bound_to(m))
                .cloned()
                .collect();
            v.sort_by_key(|h| h.id);
            v
        }
    };
    xml::list(&hooks)
}
