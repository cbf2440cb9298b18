//! `POST /v1/hooks/{id}/redeliver`: queues again, for a registered hook, the callbacks kept for
//! its URL whose timestamps are in a window (and whose event ids are listed, if any are), in
//! their original order, after what the hook has queued. The request is checked here (the
//! window within what is kept, its size within the bound) and carried out by the instance that
//! processes the bus.

use std::{collections::HashSet, sync::Arc};

use axum::{
    Extension, Form, Json,
    extract::{Path, State},
};
use serde::{Deserialize, Serialize};

use super::{AdminError, AdminState, Caller, hooks::record_of};
use crate::{
    audit::Action,
    base::{
        ids::HookId,
        time::{now_ms, parse_since, rfc3339},
    },
    delivery::records::{self, Request},
};

/// Most callbacks one redelivery may queue (fewer when `delivery.max_queue` is lower).
pub(super) const MAX_CALLBACKS: usize = 10_000;

/// What to send again.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Window {
    /// From this time (RFC 3339, or a duration back from now: `15m`). Required.
    since: Option<String>,
    /// Up to this time; default: the last callback kept.
    until: Option<String>,
    /// Only these event ids, comma-separated.
    event_id: Option<String>,
    /// Only the events of this meeting (its external id), as the processed events say (a
    /// raw hook's bus messages do not say it: none of them is sent again).
    meeting: Option<String>,
}

impl Window {
    /// The event ids it lists; `None` (a form's empty field too): every event.
    pub(super) fn events(&self) -> Option<HashSet<String>> {
        self.event_id
            .as_deref()
            .map(|l| {
                l.split(',')
                    .map(|e| e.trim().to_ascii_lowercase())
                    .filter(|e| !e.is_empty())
                    .collect::<HashSet<_>>()
            })
            .filter(|set| !set.is_empty())
    }

    /// The meeting it names, if any.
    pub(super) fn meeting(&self) -> Option<&str> {
        self.meeting.as_deref().filter(|m| !m.is_empty())
    }
}

/// What was queued again.
#[derive(Debug, Serialize)]
pub(super) struct Redelivery {
    hook: u64,
    pub(super) queued: usize,
    since: String,
    until: String,
    /// The first and last callbacks' timestamps.
    first_timestamp: Option<u64>,
    last_timestamp: Option<u64>,
}

/// What a redelivery to every hook queued.
#[derive(Debug, Serialize)]
pub(super) struct Bulk {
    /// Callbacks queued again, in all.
    queued: usize,
    /// Each hook that got some, in id order, as [`Redelivery`].
    hooks: Vec<Redelivery>,
}

/// `POST /v1/redeliver`: the window's kept callbacks to every registered hook, each hook's in
/// its original order. A hook whose URL has nothing kept that far back is left out.
pub(super) async fn redeliver_all(
    State(admin): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Form(window): Form<Window>,
) -> Result<Json<Bulk>, AdminError> {
    times(&window, now_ms())?;
    let ids: Vec<u64> = admin
        .store
        .registry()
        .load()
        .all()
        .map(|h| h.id.0)
        .collect();
    let mut bulk = Bulk {
        queued: 0,
        hooks: Vec::new(),
    };
    for id in ids {
        match ask(&admin, &caller, id, &window).await {
            Ok(r) if r.queued > 0 => {
                bulk.queued += r.queued;
                bulk.hooks.push(r);
            }
            // Gone meanwhile, or nothing kept that far back for its URL.
            Ok(_) | Err(AdminError::NotRegistered(_) | AdminError::BeforeWindow { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    tracing::info!(
        callbacks = bulk.queued,
        hooks = bulk.hooks.len(),
        "redelivery to every hook asked for"
    );
    Ok(Json(bulk))
}

/// Checks `window` for hook `id` and asks for its redelivery.
pub(super) async fn redeliver(
    State(admin): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<u64>,
    Form(window): Form<Window>,
) -> Result<Json<Redelivery>, AdminError> {
    ask(&admin, &caller, id, &window).await.map(Json)
}

/// Asks, for `caller`, the redelivery of `window` to hook `id` (the status page's form does
/// too), recorded in the audit with what it queued.
pub(super) async fn ask(
    admin: &AdminState,
    caller: &Caller,
    id: u64,
    window: &Window,
) -> Result<Redelivery, AdminError> {
    let hook = admin
        .store
        .registry()
        .load()
        .get(HookId(id))
        .cloned()
        .ok_or(AdminError::NotRegistered(id))?;
    let Some(bounds) = admin.retain else {
        return Err(bad(
            "delivery.retain is 0 on this relay: no sent callbacks are kept to send again".into(),
        ));
    };
    let now = now_ms();
    let (since, until) = times(window, now)?;
    // What is kept for the hook's registration (its URL within its tenant).
    let kept_for = hook.registration().key().into_owned();
    let oldest = records::oldest_kept(&admin.conn, &kept_for).await?;
    let window_start = now.saturating_sub(bounds.window_ms);
    if since < window_start && oldest.is_none_or(|o| since < o) {
        return Err(AdminError::BeforeWindow {
            since: rfc3339(since),
            kept: humantime::format_duration(std::time::Duration::from_millis(bounds.window_ms))
                .to_string(),
            reach: oldest.map_or_else(
                || "none is kept".into(),
                |o| format!("the oldest kept is from {}", rfc3339(o)),
            ),
        });
    }
    let found = kept(admin, &kept_for, since, until, window).await?;
    let bytes: u64 = found.iter().map(|f| f.bytes).sum();
    let most = admin.max_queue.min(MAX_CALLBACKS);
    if found.len() > most {
        return Err(bad(format!(
            "the window holds {} callbacks ({} KiB), more than the {most} one redelivery may queue: narrow it with until or event_id",
            found.len(),
            bytes >> 10
        )));
    }
    let mut sorted: Vec<_> = found.iter().collect();
    sorted.sort_by_key(|f| f.stored.ts);
    if !sorted.is_empty() {
        records::ask_redelivery(
            &admin.conn,
            &Request {
                hook: hook.id,
                url: kept_for.clone(),
                ids: sorted.iter().map(|f| f.id.clone()).collect(),
            },
        )
        .await?;
    }
    let record = record_of(admin, caller, Action::Redeliver, &hook)
        .detail(format!("{} callbacks", sorted.len()));
    admin.audit.record(record).await;
    Ok(Redelivery {
        hook: id,
        queued: sorted.len(),
        since: rfc3339(since),
        until: if until == u64::MAX {
            "the last kept".into()
        } else {
            rfc3339(until)
        },
        first_timestamp: sorted.first().map(|f| f.stored.ts),
        last_timestamp: sorted.last().map(|f| f.stored.ts),
    })
}

/// The external meeting id of a kept callback: what its plugin chain kept, else its processed
/// event's `data.attributes.meeting.external-meeting-id`.
fn meeting_of(stored: &records::Stored) -> Option<String> {
    if let Some(m) = stored
        .chain
        .as_ref()
        .and_then(|c| c.external_meeting_id.clone())
    {
        return Some(m);
    }
    let records::StoredBody::Inline(text) = &stored.body else {
        return None;
    };
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    v.pointer("/data/attributes/meeting/external-meeting-id")?
        .as_str()
        .map(String::from)
}

/// A request's parameter that cannot be used, and why.
pub(super) fn bad(s: String) -> AdminError {
    AdminError::BadParameter(s)
}

/// The window's bounds at `now` (ms): `since`, required, and `until`, the last callback kept
/// when not given; `since` not after `until`.
pub(super) fn times(window: &Window, now: u64) -> Result<(u64, u64), AdminError> {
    let since = match window.since.as_deref().filter(|s| !s.trim().is_empty()) {
        Some(s) => parse_since(s, now).map_err(|e| bad(format!("since: {e}")))?,
        None => return Err(bad("since is required (e.g. 15m)".into())),
    };
    // No end: everything kept from `since` on (a burst stamps a hook's callbacks a little
    // ahead of the clock, as their timestamps strictly increase).
    let until = match window.until.as_deref().filter(|s| !s.trim().is_empty()) {
        Some(s) => parse_since(s, now).map_err(|e| bad(format!("until: {e}")))?,
        None => u64::MAX,
    };
    if since > until {
        return Err(bad(format!(
            "since ({}) is after until ({})",
            rfc3339(since),
            rfc3339(until)
        )));
    }
    Ok((since, until))
}

/// The callbacks kept for `url` in `[since, until]` whose event ids `window` lists (all of
/// them when it lists none), one copy of each.
async fn kept(
    admin: &AdminState,
    url: &str,
    since: u64,
    until: u64,
    window: &Window,
) -> Result<Vec<records::Found>, AdminError> {
    let events = window.events();
    let meeting = window.meeting();
    let mut seen = HashSet::new();
    Ok(records::read_kept(&admin.conn, url, since, until)
        .await?
        .into_iter()
        .filter(|f| {
            events
                .as_ref()
                .is_none_or(|e| e.contains(&*f.stored.event_id))
        })
        .filter(|f| meeting.is_none_or(|m| meeting_of(&f.stored).as_deref() == Some(m)))
        // One copy of each callback (a round written twice keeps it twice).
        .filter(|f| seen.insert((f.stored.ts, f.stored.event_id.clone())))
        .collect())
}
