//! The conference state in Redis, beside the id mappings: one hash of rooms (JSON per meeting,
//! without its users), one hash per meeting of its users (JSON per user), and one hash of
//! recording states. A change writes what changed only (a user's part, not the whole room), in
//! the pipeline that persists the batch's callbacks; everything is read back at start-up.

use std::collections::HashMap;

use crate::store_conn::StoreConn;
use redis::AsyncCommands;

use super::{Changes, Member, RecordingState, Room};
use crate::base::redis_keys::SourceKeys;

/// Adds `changes` to `pipe` (replies ignored).
pub(crate) fn add_changes(pipe: &mut redis::Pipeline, keys: &SourceKeys, changes: &Changes) {
    for (mid, room) in &changes.rooms {
        let members = keys.conference_members(mid);
        pipe.del(&members).ignore();
        match room
            .as_ref()
            .and_then(|r| Some((r, serde_json::to_string(&r.header()).ok()?)))
        {
            Some((room, header)) => {
                pipe.hset(&keys.conference_rooms, mid, header).ignore();
                let fields: Vec<(String, String)> = room
                    .members()
                    .into_iter()
                    .filter_map(|(uid, m)| Some((uid, serde_json::to_string(&m).ok()?)))
                    .collect();
                if !fields.is_empty() {
                    pipe.hset_multiple(&members, &fields).ignore();
                }
            }
            None => {
                pipe.hdel(&keys.conference_rooms, mid).ignore();
            }
        }
    }
    for (mid, uid, member) in &changes.users {
        let key = keys.conference_members(mid);
        match member.as_ref().and_then(|m| serde_json::to_string(m).ok()) {
            Some(json) => pipe.hset(key, uid, json).ignore(),
            None => pipe.hdel(key, uid).ignore(),
        };
    }
    for (record, state) in &changes.recordings {
        match state {
            Some(state) => pipe.hset(&keys.conference_recordings, record, state.as_str()),
            None => pipe.hdel(&keys.conference_recordings, record),
        }
        .ignore();
    }
}

/// Reads the stored state; unreadable entries are skipped (and logged).
///
/// # Errors
/// When Redis cannot be read.
pub(crate) async fn load(
    conn: &mut StoreConn,
    keys: &SourceKeys,
) -> Result<(HashMap<String, Room>, HashMap<String, RecordingState>), redis::RedisError> {
    let rooms: HashMap<String, String> = conn.hgetall(&keys.conference_rooms).await?;
    let recordings: HashMap<String, String> = conn.hgetall(&keys.conference_recordings).await?;
    let mut rooms: HashMap<String, Room> = rooms
        .into_iter()
        .filter_map(|(mid, json)| match serde_json::from_str(&json) {
            Ok(room) => Some((mid, room)),
            Err(e) => {
                tracing::warn!(meeting = %mid, error = %e, "skipping a stored conference room that cannot be read");
                None
            }
        })
        .collect();
    let mids: Vec<String> = rooms.keys().cloned().collect();
    let mut pipe = redis::pipe();
    for mid in &mids {
        pipe.hgetall(keys.conference_members(mid));
    }
    let members: Vec<HashMap<String, String>> = if mids.is_empty() {
        Vec::new()
    } else {
        pipe.query_async(conn).await?
    };
    for (mid, users) in mids.iter().zip(members) {
        let Some(room) = rooms.get_mut(mid) else {
            continue;
        };
        for (uid, json) in users {
            match serde_json::from_str::<Member>(&json) {
                Ok(m) => room.add_member(&uid, m),
                Err(e) => {
                    tracing::warn!(meeting = %mid, error = %e, "skipping a stored conference user that cannot be read");
                }
            }
        }
    }
    let recordings = recordings
        .into_iter()
        .filter_map(|(r, s)| Some((r, RecordingState::parse(&s)?)))
        .collect();
    Ok((rooms, recordings))
}
