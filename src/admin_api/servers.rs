//! `GET /v1/servers`: the BBB servers whose edges write to this store (`[edge]`,
//! docs/pool.md), each as its edge last said in the store: when, what it read, forwarded, keeps
//! in its outbox and let go, whether it holds its name now, how long its stream is and how far
//! behind it the pool's relays are.

use std::sync::Arc;

use axum::{
    Extension, Json,
    extract::{Path, State},
};
use serde::Serialize;

use super::{AdminError, AdminState, Caller};
use crate::{
    audit::{Action, Record},
    base::{
        redis_keys::{EDGES, EdgeKeys},
        time::{now_ms, rfc3339},
    },
};

/// One server's edge.
#[derive(Debug, Serialize)]
pub(super) struct ServerView {
    pub(super) server: String,
    /// When the edge last wrote to the store.
    pub(super) last_seen: Option<String>,
    /// How long ago, in seconds.
    pub(super) seconds_since_seen: Option<u64>,
    /// Whether an edge holds the name now (its claim is renewed every 5 s).
    pub(super) running: bool,
    pub(super) read: u64,
    pub(super) forwarded: u64,
    /// In the edge's outbox, not yet in the store (as last said).
    pub(super) buffered: u64,
    pub(super) dropped: u64,
    /// Messages in the server's stream in the store (those not yet taken, and the last one
    /// taken until the next trim).
    stream_length: u64,
    /// How far the pool's relays are behind this server: the age, in seconds, of its oldest
    /// message in the store that no relay has queued yet (0 when none waits).
    pub(super) lag_s: f64,
}

/// The answer.
#[derive(Debug, Serialize)]
pub(super) struct ServerList {
    servers: Vec<ServerView>,
}

pub(super) async fn list(
    State(admin): State<Arc<AdminState>>,
) -> Result<Json<ServerList>, AdminError> {
    Ok(Json(ServerList {
        servers: all(&admin).await?,
    }))
}

/// Every edge's server, by name.
///
/// # Errors
/// When the store cannot be read.
pub(super) async fn all(admin: &AdminState) -> Result<Vec<ServerView>, AdminError> {
    let mut conn = admin.conn.clone();
    let mut names: Vec<String> = redis::cmd("SMEMBERS")
        .arg(EDGES)
        .query_async(&mut conn)
        .await?;
    names.sort();
    let mut servers = Vec::with_capacity(names.len());
    for server in names {
        let keys = EdgeKeys::new(&server);
        let (info, running, stream_length, taken): (
            std::collections::HashMap<String, String>,
            bool,
            u64,
            Option<String>,
        ) = redis::pipe()
            .cmd("HGETALL")
            .arg(&keys.info)
            .cmd("EXISTS")
            .arg(&keys.claim)
            .cmd("XLEN")
            .arg(&keys.stream)
            .cmd("GET")
            .arg(&keys.taken)
            .query_async(&mut conn)
            .await?;
        let after = taken.map_or_else(|| "-".to_string(), |t| format!("({t}"));
        let oldest: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(&keys.stream)
            .arg(after)
            .arg("+")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut conn)
            .await?;
        let waiting_since = (oldest.ids.first())
            .and_then(|e| e.id.split_once('-'))
            .and_then(|(ms, _)| ms.parse::<u64>().ok());
        let number = |k: &str| info.get(k).and_then(|v| v.parse().ok()).unwrap_or(0);
        let seen: Option<u64> = info.get("last_seen_ms").and_then(|v| v.parse().ok());
        servers.push(ServerView {
            server,
            last_seen: seen.map(rfc3339),
            seconds_since_seen: seen.map(|s| now_ms().saturating_sub(s) / 1000),
            running,
            read: number("read"),
            forwarded: number("forwarded"),
            buffered: number("buffered"),
            dropped: number("dropped"),
            stream_length,
            lag_s: waiting_since.map_or(0.0, |t| now_ms().saturating_sub(t) as f64 / 1000.0),
        });
    }
    Ok(servers)
}

/// What forgetting a server did.
#[derive(Debug, Serialize)]
pub(super) struct Forgotten {
    server: String,
    /// Its messages in the store that no relay had queued, now gone.
    messages_dropped: u64,
}

/// `POST /v1/servers/{name}/forget`: takes a server whose edge is stopped out of the store (its
/// name from the set of edges, its stream, cursor, position and counts), recorded in the audit.
/// The relays keep it as a source, reading nothing, until their next start.
///
/// # Errors
/// An unknown name, an edge that runs, or a store that cannot be written.
pub(super) async fn forget(
    State(admin): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Json<Forgotten>, AdminError> {
    let view = all(&admin)
        .await?
        .into_iter()
        .find(|s| s.server == name)
        .ok_or_else(|| AdminError::UnknownServer(name.clone()))?;
    if view.running {
        return Err(AdminError::ServerRunning(name));
    }
    let keys = EdgeKeys::new(&name);
    let mut conn = admin.conn.clone();
    // What waits is the stream but the last entry taken, if it is still there (the relays
    // trim up to it, it included).
    let taken: Option<String> = redis::cmd("GET")
        .arg(&keys.taken)
        .query_async(&mut conn)
        .await?;
    let kept_taken: u64 = match &taken {
        Some(id) => {
            let at: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
                .arg(&keys.stream)
                .arg(id)
                .arg(id)
                .query_async(&mut conn)
                .await?;
            at.ids.len() as u64
        }
        None => 0,
    };
    let waiting = view.stream_length.saturating_sub(kept_taken);
    // One slot for the server's keys, the set apart (a Cluster store).
    let () = redis::pipe()
        .atomic()
        .del(&[
            &keys.stream,
            &keys.info,
            &keys.cursor,
            &keys.taken,
            &keys.claim,
        ])
        .ignore()
        .query_async(&mut conn)
        .await?;
    let () = redis::cmd("SREM")
        .arg(EDGES)
        .arg(&name)
        .query_async(&mut conn)
        .await?;
    tracing::info!(server = %name, caller = caller.0, messages_dropped = waiting, "a pool's server forgotten (admin API)");
    let record = Record::now(Action::ForgetServer, caller.0.as_str()).detail(name.clone());
    admin.audit.record(record).await;
    Ok(Json(Forgotten {
        server: name,
        messages_dropped: waiting,
    }))
}
