//! `GET /v1/servers`: the BBB servers whose edges write to this store (`[edge]`,
//! docs/pool.md), each as its edge last said in the store: when, what it read, forwarded, keeps
//! in its outbox and let go, whether it holds its name now, and how long its stream is.

use std::sync::Arc;

use axum::{Json, extract::State};
use serde::Serialize;

use super::{AdminError, AdminState};
use crate::base::{
    redis_keys::{EDGES, EdgeKeys},
    time::{now_ms, rfc3339},
};

/// One server's edge.
#[derive(Debug, Serialize)]
pub struct ServerView {
    pub server: String,
    /// When the edge last wrote to the store.
    pub last_seen: Option<String>,
    /// How long ago, in seconds.
    pub seconds_since_seen: Option<u64>,
    /// Whether an edge holds the name now (its claim is renewed every 5 s).
    pub running: bool,
    pub read: u64,
    pub forwarded: u64,
    /// In the edge's outbox, not yet in the store (as last said).
    pub buffered: u64,
    pub dropped: u64,
    /// Messages in the server's stream in the store.
    pub stream_length: u64,
}

/// The answer.
#[derive(Debug, Serialize)]
pub struct ServerList {
    pub servers: Vec<ServerView>,
}

pub async fn list(State(admin): State<Arc<AdminState>>) -> Result<Json<ServerList>, AdminError> {
    let mut conn = admin.conn.clone();
    let mut names: Vec<String> = redis::cmd("SMEMBERS")
        .arg(EDGES)
        .query_async(&mut conn)
        .await?;
    names.sort();
    let mut servers = Vec::with_capacity(names.len());
    for server in names {
        let keys = EdgeKeys::new(&server);
        let (info, running, stream_length): (std::collections::HashMap<String, String>, bool, u64) =
            redis::pipe()
                .cmd("HGETALL")
                .arg(&keys.info)
                .cmd("EXISTS")
                .arg(&keys.claim)
                .cmd("XLEN")
                .arg(&keys.stream)
                .query_async(&mut conn)
                .await?;
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
        });
    }
    Ok(Json(ServerList { servers }))
}
