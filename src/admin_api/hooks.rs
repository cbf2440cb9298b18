//! `GET /v1/hooks`, `GET /v1/hooks/{id}` and `GET /v1/hooks/{id}/deliveries`: each hook with
//! its delivery state (the hooks removed after failures too, while their state is kept), and
//! one hook's last attempts, newest first. Times are RFC 3339 (UTC).

use std::sync::Arc;

use axum::{
    Extension, Json,
    extract::{Path, Query, State},
};
use serde::{Deserialize, Serialize};

use super::{AdminError, AdminState, Caller};
use crate::{
    audit::{Action, Record},
    base::{
        ids::HookId,
        time::{now_ms, parse_since, rfc3339},
    },
    delivery::{
        AttemptRecord,
        records::{self, HookState, State as Word},
    },
    hooks::{DisabledReason, Hook},
};

/// One hook as the API shows it.
#[derive(Debug, Serialize)]
pub(super) struct HookView {
    pub(super) id: u64,
    pub(super) callback_url: String,
    meeting_id: Option<String>,
    event_ids: Option<Vec<String>>,
    get_raw: bool,
    permanent: bool,
    /// `ok`, `failing` or `removed`.
    pub(super) state: Word,
    pub(super) queued: u64,
    oldest_queued: Option<String>,
    pub(super) oldest_queued_age_s: Option<f64>,
    pub(super) last_success: Option<String>,
    pub(super) last_failure: Option<String>,
    pub(super) last_error: Option<String>,
    failures_in_row: u64,
    /// When it is removed if its failures go on.
    pub(super) removal_due: Option<String>,
    pub(super) removed: Option<String>,
    /// In a fleet, the instance that delivered its last callback.
    pub(super) delivered_by: Option<String>,
    /// The tenant whose hook it is (its name; its id when no longer known); none for the
    /// operator's.
    pub(super) tenant: Option<String>,
    /// Its receiver's circuit on this instance: `open` (its callbacks wait, one probe at a
    /// time tries it) or `closed`; none without circuits (`delivery.circuit_after`).
    receiver_circuit: Option<&'static str>,
    /// Why it is disabled: `failures` (its retries ran out) or `tenant_unknown` (its tenant is
    /// gone); none while enabled.
    pub(super) disabled_reason: Option<&'static str>,
    /// Since when it is disabled.
    pub(super) disabled_since: Option<String>,
    /// Whether it has its own signing secret (`delivery.hook_secrets`; never the secret).
    own_secret: bool,
    /// Until when the secret it had before its last rotation signs too.
    previous_secret_until: Option<String>,
}

impl HookView {
    fn new(id: HookId, hook: Option<&Hook>, s: HookState, now: u64, admin: &AdminState) -> Self {
        let time = |t: Option<u64>| t.map(rfc3339);
        let tenants = admin.tenants.load();
        let receiver_circuit = admin.circuits.as_ref().zip(hook).map(|(c, h)| {
            if c.is_open(&h.callback_url) {
                "open"
            } else {
                "closed"
            }
        });
        let tenant = hook.and_then(|h| h.tenant.as_deref()).map(|t| {
            tenants
                .by_id(t)
                .map_or_else(|| t.to_string(), |t| t.name.clone())
        });
        Self {
            tenant,
            receiver_circuit,
            id: id.0,
            callback_url: hook
                .map(|h| h.callback_url.clone())
                .or_else(|| s.url.clone())
                .unwrap_or_default(),
            meeting_id: hook.and_then(|h| h.meeting_id.clone()),
            event_ids: hook.and_then(|h| h.event_ids.clone()),
            get_raw: hook.is_some_and(|h| h.get_raw),
            permanent: hook.is_some_and(|h| h.permanent),
            // Gone from the registry: removed (by hooks/destroy, or its failures before the
            // mark is written).
            state: match hook {
                None => Word::Removed,
                Some(h) if h.disabled.is_some() => Word::Disabled,
                Some(_) => s.state(),
            },
            disabled_reason: hook.and_then(|h| h.disabled).map(|d| d.reason.as_str()),
            disabled_since: hook
                .and_then(|h| h.disabled)
                .filter(|d| d.since > 0)
                .map(|d| rfc3339(d.since)),
            own_secret: hook.is_some_and(|h| h.signing.is_some()),
            previous_secret_until: hook
                .and_then(|h| h.signing.as_ref())
                .and_then(|s| s.previous.as_ref())
                .filter(|(_, until)| *until > now)
                .map(|(_, until)| rfc3339(*until)),
            queued: s.queued,
            oldest_queued: time(s.oldest_queued),
            oldest_queued_age_s: s.oldest_queued.map(|t| now.saturating_sub(t) as f64 / 1e3),
            last_success: time(s.last_ok),
            last_failure: time(s.last_failure),
            last_error: s.last_error,
            failures_in_row: s.failures_in_row,
            removal_due: match hook.and_then(|h| h.disabled) {
                Some(d) if d.reason == DisabledReason::TenantUnknown && d.since > 0 => {
                    Some(rfc3339(d.since.saturating_add(admin.removed_grace_ms)))
                }
                _ => time(s.removal_due),
            },
            removed: time(s.removed),
            delivered_by: s.instance,
        }
    }
}

#[derive(Serialize)]
pub(super) struct HookList {
    hooks: Vec<HookView>,
}

/// The filter of the lists: `?tenant=NAME` (or its id) keeps that tenant's hooks.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ListFilter {
    pub(super) tenant: Option<String>,
}

pub(super) async fn list(
    State(admin): State<Arc<AdminState>>,
    Query(filter): Query<ListFilter>,
) -> Result<Json<HookList>, AdminError> {
    Ok(Json(HookList {
        hooks: all(&admin, &filter).await?,
    }))
}

/// Every registered hook, then the hooks removed after failures whose state is kept; with a
/// tenant filter, that tenant's registered hooks.
pub(super) async fn all(
    admin: &AdminState,
    filter: &ListFilter,
) -> Result<Vec<HookView>, AdminError> {
    let snapshot = admin.store.registry().load();
    let tenants = admin.tenants.load();
    let mut ids: Vec<HookId> = match &filter.tenant {
        Some(t) => {
            let id = tenants.by_name(t).map_or(t.as_str(), |t| t.id.as_str());
            snapshot.of_tenant(id).map(|h| h.id).collect()
        }
        None => snapshot.all().map(|h| h.id).collect(),
    };
    if filter.tenant.is_none() {
        for id in records::removed_hooks(&admin.conn).await? {
            if snapshot.get(id).is_none() {
                ids.push(id);
            }
        }
    }
    let states = records::states(&admin.conn, &ids).await?;
    let now = now_ms();
    let hooks = ids
        .into_iter()
        .zip(states)
        .filter_map(|(id, s)| {
            let hook = snapshot.get(id).map(|h| &**h);
            // A removed hook whose state expired meanwhile is left out.
            (hook.is_some() || s.removed.is_some()).then(|| HookView::new(id, hook, s, now, admin))
        })
        .collect();
    Ok(hooks)
}

/// One hook, registered or removed after failures.
pub(super) async fn view(admin: &AdminState, id: u64) -> Result<HookView, AdminError> {
    let hook = HookId(id);
    let snapshot = admin.store.registry().load();
    let registered = snapshot.get(hook).map(|h| &**h);
    let state = records::states(&admin.conn, &[hook])
        .await?
        .pop()
        .unwrap_or_default();
    if registered.is_none()
        && state.removed.is_none()
        && state.last_failure.is_none()
        && state.last_ok.is_none()
    {
        return Err(AdminError::UnknownHook(id));
    }
    Ok(HookView::new(hook, registered, state, now_ms(), admin))
}

/// What `POST /v1/hooks/{id}/enable` did.
#[derive(Serialize)]
pub(super) struct Enabled {
    hook_id: u64,
    /// `false` when it was not disabled.
    enabled: bool,
}

/// `POST /v1/hooks/{id}/enable`: a disabled hook resumes, its kept callbacks first.
pub(super) async fn enable(
    State(admin): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<u64>,
) -> Result<Json<Enabled>, AdminError> {
    enable_hook(&admin, &caller, id).await.map(Json)
}

/// An audit record of `action` on `hook` made by `caller` through the admin API.
pub(super) fn record_of(
    admin: &AdminState,
    caller: &Caller,
    action: Action,
    hook: &Hook,
) -> Record {
    let tenants = admin.tenants.load();
    let tenant = hook.tenant.as_deref().map(|id| {
        let name = tenants.by_id(id).map_or(id, |t| t.name.as_str());
        (id, name)
    });
    Record::now(action, caller.0.as_str())
        .of_tenant(tenant)
        .hook(hook.id.0, &hook.callback_url)
}

/// Enables hook `id` (asked by `caller`). A hook whose tenant is gone stays disabled until the
/// tenant is back.
pub(super) async fn enable_hook(
    admin: &AdminState,
    caller: &Caller,
    id: u64,
) -> Result<Enabled, AdminError> {
    let hook = registered(admin, id)?;
    if hook
        .disabled
        .is_some_and(|d| d.reason == DisabledReason::TenantUnknown)
    {
        return Err(AdminError::TenantGone(id));
    }
    let enabled = admin.store.set_disabled(HookId(id), None).await?;
    if enabled {
        tracing::info!(hook_id = id, caller = caller.0, "hook enabled (admin API)");
        admin
            .audit
            .record(record_of(admin, caller, Action::Enable, &hook))
            .await;
    }
    Ok(Enabled {
        hook_id: id,
        enabled,
    })
}

/// What `POST /v1/hooks/{id}/rotate-secret` did: the hook's new signing secret (the only
/// answer that carries one), and until when the old one signs too.
#[derive(Serialize)]
pub(super) struct Rotated {
    hook_id: u64,
    signing_secret: String,
    previous_secret_until: Option<String>,
}

/// `POST /v1/hooks/{id}/rotate-secret`: a new signing secret for the hook; its old one signs
/// too for `delivery.hook_secret_overlap_s`.
pub(super) async fn rotate_secret(
    State(admin): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<u64>,
) -> Result<Json<Rotated>, AdminError> {
    let hook = registered(&admin, id)?;
    let secrets = admin
        .store
        .rotate_secret(HookId(id), admin.hook_secret_overlap_ms)
        .await?
        .ok_or(AdminError::NotRegistered(id))?;
    tracing::info!(
        hook_id = id,
        caller = caller.0,
        "hook's signing secret rotated (admin API)"
    );
    admin
        .audit
        .record(record_of(&admin, &caller, Action::RotateSecret, &hook))
        .await;
    Ok(Json(Rotated {
        hook_id: id,
        signing_secret: secrets.current.expose().to_string(),
        previous_secret_until: secrets.previous.map(|(_, until)| rfc3339(until)),
    }))
}

pub(super) async fn show(
    State(admin): State<Arc<AdminState>>,
    Path(id): Path<u64>,
) -> Result<Json<HookView>, AdminError> {
    view(&admin, id).await.map(Json)
}

/// The filters of `deliveries`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Filter {
    /// Only failed attempts.
    #[serde(default)]
    failed: bool,
    /// Only attempts at or after this time (RFC 3339, or a duration back from now: `15m`).
    since: Option<String>,
    /// At most this many (newest first); default 100.
    limit: Option<usize>,
}

/// One attempt as the API shows it.
#[derive(Debug, Serialize)]
pub(super) struct AttemptView {
    pub(super) at: String,
    pub(super) event_id: String,
    /// The callback's `timestamp`.
    timestamp: u64,
    pub(super) attempt: u32,
    pub(super) ok: bool,
    pub(super) status: Option<u16>,
    pub(super) error: Option<String>,
    pub(super) latency_ms: f64,
    /// The trace of the callback's bus message (`[tracing]`): its attempt's span is in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) trace_id: Option<String>,
}

impl From<AttemptRecord> for AttemptView {
    fn from(r: AttemptRecord) -> Self {
        Self {
            at: rfc3339(r.at),
            ok: r.ok(),
            event_id: r.event,
            timestamp: r.ts,
            attempt: r.attempt,
            status: r.status,
            error: r.error,
            latency_ms: r.latency_ms,
            trace_id: r.trace_id,
        }
    }
}

#[derive(Serialize)]
pub(super) struct Deliveries {
    hook: HookView,
    deliveries: Vec<AttemptView>,
}

pub(super) async fn deliveries(
    State(admin): State<Arc<AdminState>>,
    Path(id): Path<u64>,
    Query(filter): Query<Filter>,
) -> Result<Json<Deliveries>, AdminError> {
    let hook = view(&admin, id).await?;
    let deliveries = attempts(&admin, id, &filter).await?;
    Ok(Json(Deliveries { hook, deliveries }))
}

/// Hook `id`'s last attempts that `filter` lets through, newest first.
pub(super) async fn attempts(
    admin: &AdminState,
    id: u64,
    filter: &Filter,
) -> Result<Vec<AttemptView>, AdminError> {
    let since = match &filter.since {
        Some(s) => parse_since(s, now_ms()).map_err(AdminError::BadParameter)?,
        None => 0,
    };
    Ok(records::attempts(&admin.conn, HookId(id))
        .await?
        .into_iter()
        .filter(|a| a.at >= since && !(filter.failed && a.ok()))
        .take(filter.limit.unwrap_or(100))
        .map(AttemptView::from)
        .collect())
}

/// Hook `id` as registered now, or [`AdminError::NotRegistered`].
fn registered(admin: &AdminState, id: u64) -> Result<Arc<Hook>, AdminError> {
    let hooks = admin.store.registry().load();
    hooks
        .get(HookId(id))
        .cloned()
        .ok_or(AdminError::NotRegistered(id))
}
