//! Meeting and user mappings in Redis (the reference v3 keys, per source: [`SourceKeys`]): read back at start-up, and each
//! batch's changes added to the pipeline that also persists that batch's callbacks, so a
//! mapping is exactly as durable as the callbacks made after it. User attributes are stored as
//! typed JSON, so they come back as they were (the reference turns them into strings:
//! bbb-events.md section 9, item 22).

use std::collections::HashMap;

use crate::store_conn::StoreConn;

use super::mapping::{MappingWrite, StoredMeeting, UserAttributes, UserEntry};
use crate::base::redis_keys::SourceKeys;
use crate::redis_index::load_all;

/// Reads every stored meeting mapping.
///
/// # Errors
/// When Redis cannot be read.
pub(crate) async fn load_meetings(
    conn: &mut StoreConn,
    keys: &SourceKeys,
) -> Result<Vec<StoredMeeting>, redis::RedisError> {
    let hashes = load_all(conn, &keys.mappings_set, &keys.mapping_prefix).await?;
    Ok(hashes
        .into_iter()
        .filter_map(|(_, h)| {
            Some(StoredMeeting {
                internal: h.get("internalMeetingID")?.clone(),
                external: h.get("externalMeetingID")?.clone(),
                last_activity_ms: h.get("lastActivity")?.parse().ok()?,
                facts: h.get(FACTS_FIELD).map(|f| f.as_str().into()),
            })
        })
        .collect())
}

/// The mapping hash's field that holds what plugins are told of the meeting (the reference
/// service has no such field and ignores it).
const FACTS_FIELD: &str = "hookrelayMeeting";

/// Reads every stored user mapping as (internal meeting id, internal user id, entry).
///
/// # Errors
/// When Redis cannot be read.
pub(crate) async fn load_users(
    conn: &mut StoreConn,
    keys: &SourceKeys,
) -> Result<Vec<(String, String, UserEntry)>, redis::RedisError> {
    let hashes = load_all(conn, &keys.users_set, &keys.user_prefix).await?;
    Ok(hashes
        .into_iter()
        .filter_map(|(_, h)| parse_user(&h))
        .collect())
}

fn parse_user(h: &HashMap<String, String>) -> Option<(String, String, UserEntry)> {
    let user = UserAttributes::parse(h.get("user")?)?;
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

/// Adds the commands that persist `writes`, in order, to `pipe` (their replies ignored). Every
/// command is idempotent, so the pipeline can be sent again after a lost reply.
pub(crate) fn add_writes(pipe: &mut redis::Pipeline, keys: &SourceKeys, writes: &[MappingWrite]) {
    let SourceKeys {
        mappings_set,
        mapping_prefix,
        users_set,
        user_prefix,
        ..
    } = keys;
    for w in writes {
        match w {
            MappingWrite::Meeting {
                internal,
                external,
                last_activity_ms,
                facts,
            } => {
                let last = last_activity_ms.to_string();
                let mut fields = vec![
                    ("id", internal.as_str()),
                    ("internalMeetingID", internal.as_str()),
                    ("externalMeetingID", external.as_str()),
                    ("lastActivity", last.as_str()),
                ];
                if let Some(facts) = facts {
                    fields.push((FACTS_FIELD, facts));
                }
                pipe.hset_multiple(format!("{mapping_prefix}{internal}"), &fields)
                    .ignore()
                    .sadd(mappings_set, internal)
                    .ignore();
            }
            MappingWrite::DeleteMeeting { internal } => {
                pipe.del(format!("{mapping_prefix}{internal}"))
                    .ignore()
                    .srem(mappings_set, internal)
                    .ignore();
            }
            MappingWrite::User {
                meeting,
                internal,
                entry,
            } => {
                let id = format!("{meeting}:{internal}");
                pipe.hset_multiple(
                    format!("{user_prefix}{id}"),
                    &[
                        ("id", id.as_str()),
                        ("internalUserID", internal.as_str()),
                        ("externalUserID", entry.external.as_str()),
                        ("meetingId", meeting.as_str()),
                        ("user", entry.user.json()),
                        ("screenshare", bool_str(entry.screenshare)),
                        ("raiseHand", bool_str(entry.raise_hand)),
                    ],
                )
                .ignore()
                .sadd(users_set, &id)
                .ignore();
            }
            MappingWrite::DeleteUser { meeting, internal } => {
                let id = format!("{meeting}:{internal}");
                pipe.del(format!("{user_prefix}{id}"))
                    .ignore()
                    .srem(users_set, &id)
                    .ignore();
            }
        }
    }
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
        assert_eq!(e.user.to_map()["userdata"]["a"], 1, "types survive");
        assert!(e.screenshare && !e.raise_hand && e.presenter());
    }
}
