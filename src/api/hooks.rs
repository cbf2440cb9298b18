//! The create, destroy and list calls: checked parameters ([`super::params`]) and the
//! tenant's limits ([`super::limits`]) to the store, the change recorded in the audit, and the
//! XML answer.

use std::{sync::Arc, time::Duration};

use super::{
    ApiState, Call,
    limits::retry_after_s,
    params::{ApiError, Caller, Params, authenticate_caller, hook_id, new_hook},
    xml,
};
use crate::{
    audit::{Action, Record},
    base::secret::Secret,
    hooks::{CreateOutcome, Hook, Snapshot},
    tenants::View,
};

/// One call as it came.
pub(crate) struct Asked<'a> {
    pub(super) call: Call,
    /// As sent, for the checksum.
    pub(super) call_name: &'a str,
    pub(super) query: &'a str,
    /// The host it was made to: its first label may name a tenant.
    pub(super) host: Option<&'a str>,
    /// Who made it, for the audit (an address).
    pub(super) caller: String,
}

/// What a call was answered.
pub(crate) struct Answered {
    pub(super) returncode: &'static str,
    /// For the metrics.
    pub(super) message_key: &'static str,
    pub(super) body: String,
    /// The tenant that made it (its id), for the metrics; `None`: the operator, or a call
    /// whose checksum matched no one.
    pub(super) tenant: Option<String>,
    /// Over its tenant's rate: how long until it may call again (HTTP 429, `Retry-After`).
    pub(super) retry_after: Option<Duration>,
}

/// Runs one call.
pub(crate) async fn answer(state: &ApiState, asked: Asked<'_>) -> Answered {
    let mut tenant = None;
    let result = run(state, asked, &mut tenant).await;
    match result {
        Ok((key, body)) => Answered {
            returncode: "SUCCESS",
            message_key: key,
            body,
            tenant,
            retry_after: None,
        },
        Err(e) => Answered {
            returncode: "FAILED",
            message_key: e.message_key(),
            body: xml::failed(e.message_key(), &e.to_string()),
            tenant,
            retry_after: match e {
                ApiError::TooManyRequests(s) => Some(Duration::from_secs(s)),
                _ => None,
            },
        },
    }
}

/// Who made a call: the tenant (or the operator) its checksum says, and its address.
struct Who<'a> {
    caller: Caller,
    address: &'a str,
}

impl Who<'_> {
    /// An audit record of `action` made by this caller.
    fn record(&self, action: Action) -> Record {
        let tenant = match &self.caller {
            Caller::Operator => None,
            Caller::Tenant(t) => Some((t.id.as_str(), t.name.as_str())),
        };
        Record::now(action, self.address).of_tenant(tenant)
    }
}

async fn run(
    state: &ApiState,
    asked: Asked<'_>,
    tenant_of_call: &mut Option<String>,
) -> Result<(&'static str, String), ApiError> {
    let tenants = state.tenants.load();
    let tenant = asked.host.and_then(|h| tenants.of_host(h));
    let (params, caller) = authenticate_caller(
        asked.call_name,
        asked.query,
        state.secret.expose(),
        tenant,
        &state.algorithms,
    )?;
    if let Caller::Tenant(t) = &caller {
        *tenant_of_call = Some(t.id.clone());
        if let Err(wait) = state.limits.take_call(&t.id) {
            return Err(ApiError::TooManyRequests(retry_after_s(wait)));
        }
    }
    let who = Who {
        caller,
        address: &asked.caller,
    };
    match asked.call {
        Call::Create => create(state, &params, &who).await,
        Call::Destroy => destroy(state, &params, &who).await,
        Call::List => Ok(("", list(state, &params, &who.caller))),
        Call::Ping => Ok(("", String::new())),
    }
}

async fn create(
    state: &ApiState,
    p: &Params<'_>,
    who: &Who<'_>,
) -> Result<(&'static str, String), ApiError> {
    let mut new = new_hook(p, &state.guard)?;
    new.tenant = who.caller.tenant_id().map(String::from);
    new.max_hooks = new.tenant.as_ref().and(state.limits.max_hooks);
    new.own_secret = state.hook_secrets;
    let url = new.callback_url.clone();
    match state.store.create(new).await {
        Ok(CreateOutcome::Created(hook)) => {
            tracing::info!(hook_id = hook.id.0, meeting = ?hook.meeting_id, raw = hook.get_raw, tenant = hook.tenant.as_deref(), caller = who.address, "hook created");
            state.count_hooks();
            state
                .audit
                .record(who.record(Action::Create).hook(hook.id.0, &url))
                .await;
            let secret = hook.signing.as_ref().map(|s| &s.current);
            Ok(("", xml::created(&hook, secret)))
        }
        Ok(CreateOutcome::Duplicate(id)) => {
            // The same caller asking again gets the hook's secret again (it is given one if
            // it was made before hooks had their own).
            let secret = match state.hook_secrets {
                true => duplicate_secret(state, id).await?,
                false => None,
            };
            state
                .audit
                .record(
                    who.record(Action::Create)
                        .hook(id.0, &url)
                        .detail("duplicate"),
                )
                .await;
            Ok(("duplicateWarning", xml::duplicate(id, secret.as_ref())))
        }
        Ok(CreateOutcome::QuotaExceeded(max)) => {
            state
                .audit
                .record(
                    who.record(Action::Create)
                        .detail("quotaExceeded")
                        .with_url(&url),
                )
                .await;
            Err(ApiError::QuotaExceeded(max))
        }
        Err(e) => {
            tracing::error!(error = %e, "could not create a hook");
            Err(ApiError::CreateFailed)
        }
    }
}

/// The signing secret of hook `id`, given one now if it has none.
async fn duplicate_secret(
    state: &ApiState,
    id: crate::base::ids::HookId,
) -> Result<Option<Secret>, ApiError> {
    match state.store.ensure_secret(id).await {
        Ok(s) => Ok(s.map(|s| s.current)),
        Err(e) => {
            tracing::error!(hook_id = id.0, error = %e, "could not give a hook its signing secret");
            Err(ApiError::CreateFailed)
        }
    }
}

async fn destroy(
    state: &ApiState,
    p: &Params<'_>,
    who: &Who<'_>,
) -> Result<(&'static str, String), ApiError> {
    let id = hook_id(p)?;
    // Another tenant's hook is answered as an unknown one: its existence is not told.
    let seen: Option<Arc<Hook>> = state.store.registry().load().get(id).cloned();
    if seen.as_ref().is_some_and(|h| !who.caller.sees(h)) {
        return Err(ApiError::DestroyMissingHook);
    }
    match state.store.destroy(id).await {
        Ok(true) => {
            tracing::info!(
                hook_id = id.0,
                tenant = seen.as_ref().and_then(|h| h.tenant.as_deref()),
                caller = who.address,
                "hook destroyed"
            );
            state.count_hooks();
            let url = seen.as_ref().map_or("", |h| h.callback_url.as_str());
            state
                .audit
                .record(who.record(Action::Destroy).hook(id.0, url))
                .await;
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
pub(crate) struct ListCache(std::sync::Mutex<Option<Listed>>);

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
