//! The conference state in Redis, beside the id mappings: one hash of rooms (JSON per meeting)
//! and one of recording states. Changes go into the pipeline that persists the batch's
//! callbacks; everything is read back at start-up.

use std::collections::HashMap;

use redis::{AsyncCommands, aio::ConnectionManager};

use super::{Changes, Recording, Room};
use crate::base::redis_keys::{CONFERENCE_RECORDINGS, CONFERENCE_ROOMS};

/// Adds `changes` to `pipe` (replies ignored).
pub fn add_changes(pipe: &mut redis::Pipeline, changes: &Changes) {
    for (mid, room) in &changes.rooms {
        match room.as_ref().and_then(|r| serde_json::to_string(r).ok()) {
            Some(json) => pipe.hset(CONFERENCE_ROOMS, mid, json).ignore(),
            None => pipe.hdel(CONFERENCE_ROOMS, mid).ignore(),
        };
    }
    for (record, state) in &changes.recordings {
        pipe.hset(CONFERENCE_RECORDINGS, record, state.as_str())
            .ignore();
    }
}

/// Reads the stored state; unreadable entries are skipped (and logged).
///
/// # Errors
/// When Redis cannot be read.
pub async fn load(
    conn: &mut ConnectionManager,
) -> Result<(HashMap<String, Room>, HashMap<String, Recording>), redis::RedisError> {
    let rooms: HashMap<String, String> = conn.hgetall(CONFERENCE_ROOMS).await?;
    let recordings: HashMap<String, String> = conn.hgetall(CONFERENCE_RECORDINGS).await?;
    let rooms = rooms
        .into_iter()
        .filter_map(|(mid, json)| match serde_json::from_str(&json) {
            Ok(room) => Some((mid, room)),
            Err(e) => {
                tracing::warn!(meeting = %mid, error = %e, "skipping a stored conference room that cannot be read");
                None
            }
        })
        .collect();
    let recordings = recordings
        .into_iter()
        .filter_map(|(r, s)| Some((r, Recording::parse(&s)?)))
        .collect();
    Ok((rooms, recordings))
}
