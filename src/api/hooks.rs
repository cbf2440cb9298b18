//! The create, destroy and list calls: checked parameters ([`super::params`]) to the store, and
//! the XML answer.

use std::sync::Arc;

use super::{
    ApiState, Call,
    params::{ApiError, Caller, Params, authenticate_caller, hook_id, new_hook},
    xml,
};
use crate::{
    hooks::{CreateOutcome, Snapshot},
    tenants::View,
};

/// One call as it came.
pub struct Asked<'a> {
    pub call: Call,
    /// As sent, for the checksum.
    pub call_name: &'a str,
    pub query: &'a str,
    /// The host it was made to: its first label may name a tenant.
    pub host: Option<&'a str>,
}

/// Runs one call: (returncode, messageKey for metrics, XML body).
pub async fn answer(state: &ApiState, asked: Asked<'_>) -> (&'static str, &'static str, String) {
    match run(state, asked).await {
        Ok((key, body)) => ("SUCCESS", key, body),
        Err(e) => (
            "FAILED",
            e.message_key(),
            xml::failed(e.message_key(), &e.to_string()),
        ),
    }
}

async fn run(state: &ApiState, asked: Asked<'_>) -> Result<(&'static str, String), ApiError> {
    let tenants = state.tenants.load();
    let tenant = asked.host.and_then(|h| tenants.of_host(h));
    let (params, caller) = authenticate_caller(
        asked.call_name,
        asked.query,
        state.secret.expose(),
        tenant,
        &state.algorithms,
    )?;
    match asked.call {
        Call::Create => create(state, &params, &caller).await,
        Call::Destroy => destroy(state, &params, &caller).await,
        Call::List => Ok(("", list(state, &params, &caller))),
        Call::Ping => Ok(("", String::new())),
    }
}

async fn create(
    state: &ApiState,
    p: &Params<'_>,
    caller: &Caller,
) -> Result<(&'static str, String), ApiError> {
    let mut new = new_hook(p, &state.guard)?;
    new.tenant = caller.tenant_id().map(String::from);
    match state.store.create(new).await {
        Ok(CreateOutcome::Created(hook)) => {
            tracing::info!(hook_id = hook.id.0, meeting = ?hook.meeting_id, raw = hook.get_raw, tenant = hook.tenant.as_deref(), "hook created");
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

async fn destroy(
    state: &ApiState,
    p: &Params<'_>,
    caller: &Caller,
) -> Result<(&'static str, String), ApiError> {
    let id = hook_id(p)?;
    // Another tenant's hook is answered as an unknown one: its existence is not told.
    let seen = state.store.registry().load().get(id).cloned();
    if seen.is_some_and(|h| !caller.sees(&h)) {
        return Err(ApiError::DestroyMissingHook);
    }
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

/// The last unfiltered `hooks/list` answer and the hook snapshot and tenants it shows: listing
/// every hook renders them once per change, not once per call.
#[derive(Default)]
pub struct ListCache(std::sync::Mutex<Option<Listed>>);

/// A list answer: the snapshot and tenants it shows, and its XML.
type Listed = (Arc<Snapshot>, Arc<View>, Arc<str>);

fn list(state: &ApiState, p: &Params<'_>, caller: &Caller) -> String {
    let snapshot = state.store.registry().load();
    let hooks: Vec<Arc<_>> = match p.get("meetingID") {
        None => match caller.tenant_id() {
            Some(t) => snapshot.of_tenant(t).cloned().collect(),
            None => return list_all(state, &snapshot),
        },
        Some(m) => {
            let mut v: Vec<_> = snapshot
                .globals()
                .chain(snapshot.bound_to(m))
                .filter(|h| caller.sees(h))
                .cloned()
                .collect();
            v.sort_by_key(|h| h.id);
            v
        }
    };
    let tenants = state.tenants.load();
    xml::list(&hooks, (*caller == Caller::Operator).then_some(&*tenants))
}

/// Every hook (the operator's unfiltered list), rendered once per snapshot.
fn list_all(state: &ApiState, snapshot: &Arc<Snapshot>) -> String {
    let tenants = state.tenants.load();
    let mut cache = state.list_cache.0.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((s, t, xml)) = cache.as_ref()
        && Arc::ptr_eq(s, snapshot)
        && Arc::ptr_eq(t, &tenants)
    {
        return xml.to_string();
    }
    let all: Vec<Arc<_>> = snapshot.all().cloned().collect();
    let xml = xml::list(&all, Some(&tenants));
    *cache = Some((snapshot.clone(), tenants, xml.as_str().into()));
    xml
}
