//! `GET /v1/destinations`: each destination (`[[destinations]]`) with its state, last error
//! and queue, as its sender last wrote them in the store; `POST
//! /v1/destinations/{name}/redeliver`: what it published in a window, queued again.

use std::sync::Arc;

use axum::{
    Extension, Form, Json,
    extract::{Path, State},
};
use serde::Serialize;

use super::{
    AdminError, AdminState, Caller,
    redeliver::{MAX_CALLBACKS, Window, bad, times},
};
use crate::{
    audit::{Action, Record},
    base::time::{now_ms, rfc3339},
    destinations::{DestinationReport, Message, Requeued, report, requeue},
};

/// The answer.
#[derive(Debug, Serialize)]
pub(super) struct DestinationList {
    destinations: Vec<DestinationReport>,
}

pub(super) async fn list(
    State(admin): State<Arc<AdminState>>,
) -> Result<Json<DestinationList>, AdminError> {
    Ok(Json(DestinationList {
        destinations: all(&admin).await?,
    }))
}

/// Every destination, in the configuration's order.
///
/// # Errors
/// When the store cannot be read.
pub(super) async fn all(admin: &AdminState) -> Result<Vec<DestinationReport>, AdminError> {
    let mut conn = admin.conn.clone();
    Ok(report(&admin.destinations, &mut conn).await?)
}

/// What a redelivery to a destination queued.
#[derive(Debug, Serialize)]
pub(super) struct Redelivered {
    destination: String,
    queued: usize,
    since: String,
    until: String,
    /// When the first and last of them were published (ms).
    first_published: Option<u64>,
    last_published: Option<u64>,
}

/// `POST /v1/destinations/{name}/redeliver`: the messages destination `name` published in the
/// window (and of its event ids and meeting, if given) queued again, in their order, after
/// what it has queued, each with a new message id.
pub(super) async fn redeliver(
    State(admin): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Form(window): Form<Window>,
) -> Result<Json<Redelivered>, AdminError> {
    if !admin.destinations.iter().any(|d| d.name == name) {
        return Err(AdminError::UnknownDestination(name));
    }
    if admin.retain.is_none() {
        return Err(bad(
            "delivery.retain is 0 on this relay: no published messages are kept to send again"
                .into(),
        ));
    }
    let (since, until) = times(&window, now_ms())?;
    let (events, meeting) = (window.events(), window.meeting());
    let wanted = |m: &Message| {
        events.as_ref().is_none_or(|e| e.contains(&m.event))
            && meeting.is_none_or(|id| m.meeting == id)
    };
    let most = admin.max_queue.min(MAX_CALLBACKS);
    let mut conn = admin.conn.clone();
    let times = match requeue(&mut conn, &name, (since, until), most, wanted).await? {
        Requeued::Queued(t) => t,
        Requeued::TooMany(n) => {
            return Err(bad(format!(
                "the window holds {n} messages or more, more than the {most} one redelivery may queue: narrow it with until or event_id"
            )));
        }
    };
    tracing::info!(destination = %name, caller = caller.0, queued = times.len(), "messages queued again for a destination (admin API)");
    let record = Record::now(Action::Redeliver, caller.0.as_str())
        .detail(format!("destination {name}: {} messages", times.len()));
    admin.audit.record(record).await;
    Ok(Json(Redelivered {
        destination: name,
        queued: times.len(),
        since: rfc3339(since),
        until: if until == u64::MAX {
            "the last published".into()
        } else {
            rfc3339(until)
        },
        first_published: times.first().copied(),
        last_published: times.last().copied(),
    }))
}
