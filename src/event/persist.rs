//! Meeting and user mappings in Redis (the reference v3 keys): read back at start-up, written by
//! one background task that batches whatever has queued up into one pipeline, so the hot path
//! never waits for Redis. User attributes are stored as typed JSON, so they come back as they
//! were (the reference turns them into strings: bbb-events.md section 9, item 22).

use std::collections::HashMap;

use redis::aio::ConnectionManager;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use serde_json::{Map, Value};

use super::mapping::{MappingWrite, UserEntry};
use crate::redis_index::load_all;
use crate::shutdown::retry_until_ok;

const MAPPINGS_SET: &str = "bigbluebutton:webhooks:proc:mappings";
const MAPPING_PREFIX: &str = "bigbluebutton:webhooks:proc:mapping:";
const USERS_SET: &str = "bigbluebutton:webhooks:proc:userMaps";
const USER_PREFIX: &str = "bigbluebutton:webhooks:proc:userMap:";
/// Most writes sent in one pipeline.
const BATCH: usize = 512;

/// Reads every stored meeting mapping as (internal, external, last activity ms).
///
/// # Errors
/// When Redis cannot be read.
pub async fn load_meetings(
    conn: &mut ConnectionManager,
) -> Result<Vec<(String, String, u64)>, redis::RedisError> {
    let hashes = load_all(conn, MAPPINGS_SET, MAPPING_PREFIX).await?;
    Ok(hashes
        .into_iter()
        .filter_map(|(_, h)| {
            Some((
                h.get("internalMeetingID")?.clone(),
                h.get("externalMeetingID")?.clone(),
                h.get("lastActivity")?.parse().ok()?,
            ))
        })
        .collect())
}

/// Reads every stored user mapping as (internal meeting id, internal user id, entry).
///
/// # Errors
/// When Redis cannot be read.
pub async fn load_users(
    conn: &mut ConnectionManager,
) -> Result<Vec<(String, String, UserEntry)>, redis::RedisError> {
    let hashes = load_all(conn, USERS_SET, USER_PREFIX).await?;
    Ok(hashes
        .into_iter()
        .filter_map(|(_, h)| parse_user(&h))
        .collect())
}

fn parse_user(h: &HashMap<String, String>) -> Option<(String, String, UserEntry)> {
    let user: Map<String, Value> = serde_json::from_str(h.get("user")?).ok()?;
    let flag = |k: &str| h.get(k).is_some_and(|v| v == "true");
    Some((
        h.get("meetingId")?.clone(),
        h.get("internalUserID")?.clone(),
        UserEntry {
            external: h.get("externalUserID").cloned().unwrap_or_default(),
            user,
            screenshare: flag("screenshare"),
            raise_hand: flag("raiseHand"),
        },
    ))
}

/// Writes mapping changes until `token` is cancelled; a failed batch is retried (in order) once
/// Redis answers again.
pub async fn run_writer(
    mut conn: ConnectionManager,
    mut rx: UnboundedReceiver<MappingWrite>,
    token: CancellationToken,
) {
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let n = tokio::select! {
            n = rx.recv_many(&mut batch, BATCH) => n,
            () = token.cancelled() => {
                // Last chance for what is queued.
                while let Ok(w) = rx.try_recv() { batch.push(w); }
                if !batch.is_empty() {
                    let _ = write_batch(&mut conn, &batch).await;
                }
                return;
            }
        };
        if n == 0 {
            return;
        }
        let what = format!("persist {} id mapping changes", batch.len());
        let written = retry_until_ok(&token, what, || {
            let mut c = conn.clone();
            let batch = &batch;
            async move { write_batch(&mut c, batch).await }
        })
        .await;
        if written.is_none() {
            return;
        }
        batch.clear();
    }
}

async fn write_batch(
    conn: &mut ConnectionManager,
    batch: &[MappingWrite],
) -> Result<(), redis::RedisError> {
    let mut pipe = redis::pipe();
    for w in batch {
        match w {
            MappingWrite::Meeting {
                internal,
                external,
                last_activity_ms,
            } => {
                pipe.hset_multiple(
                    format!("{MAPPING_PREFIX}{internal}"),
                    &[
                        ("id", internal.as_str()),
                        ("internalMeetingID", internal.as_str()),
                        ("externalMeetingID", external.as_str()),
                        ("lastActivity", &last_activity_ms.to_string()),
                    ],
                )
                .ignore()
                .sadd(MAPPINGS_SET, internal)
                .ignore();
            }
            MappingWrite::DeleteMeeting { internal } => {
                pipe.del(format!("{MAPPING_PREFIX}{internal}"))
                    .ignore()
                    .srem(MAPPINGS_SET, internal)
                    .ignore();
            }
            MappingWrite::User {
                meeting,
                internal,
                entry,
            } => {
                let id = format!("{meeting}:{internal}");
                let user = Value::Object(entry.user.clone()).to_string();
                pipe.hset_multiple(
                    format!("{USER_PREFIX}{id}"),
                    &[
                        ("id", id.as_str()),
                        ("internalUserID", internal.as_str()),
                        ("externalUserID", entry.external.as_str()),
                        ("meetingId", meeting.as_str()),
                        ("user", user.as_str()),
                        ("screenshare", bool_str(entry.screenshare)),
                        ("raiseHand", bool_str(entry.raise_hand)),
                    ],
                )
                .ignore()
                .sadd(USERS_SET, &id)
                .ignore();
            }
            MappingWrite::DeleteUser { meeting, internal } => {
                let id = format!("{meeting}:{internal}");
                pipe.del(format!("{USER_PREFIX}{id}"))
                    .ignore()
                    .srem(USERS_SET, &id)
                    .ignore();
            }
        }
    }
    pipe.query_async::<()>(conn).await
}

fn bool_str(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_hash_round_trip() {
        let h: HashMap<String, String> = [
            ("meetingId", "m"),
            ("internalUserID", "u"),
            ("externalUserID", "x"),
            (
                "user",
                r#"{"internal-user-id":"u","presenter":true,"userdata":{"a":1}}"#,
            ),
            ("screenshare", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let (m, u, e) = parse_user(&h).unwrap();
        assert_eq!(
            (m.as_str(), u.as_str(), e.external.as_str()),
            ("m", "u", "x")
        );
        assert_eq!(e.user["userdata"]["a"], 1, "types survive");
        assert!(e.screenshare && !e.raise_hand && e.presenter());
    }
}
