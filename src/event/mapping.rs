//! The internal -> external id tables (meetings and users) and the state changes each processed
//! event makes to them. Owned by the pipeline's single processing task, so it needs no lock and
//! every change is made before the next bus message is looked at. Meeting mappings are written
//! through to Redis by [`super::persist`].

use std::collections::HashMap;

use serde_json::{Map, Value};
use tokio::sync::mpsc::UnboundedSender;

/// How stale the `lastActivity` stored in Redis may get before a refresh is written again.
/// Expiry counts in hours, so writing every event (the reference's write amplification) buys
/// nothing.
const REFRESH_WRITE_MS: u64 = 60_000;

/// A write for the Redis writer task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MappingWrite {
    Meeting {
        internal: String,
        external: String,
        last_activity_ms: u64,
    },
    DeleteMeeting {
        internal: String,
    },
}

#[derive(Debug, Clone)]
struct MeetingEntry {
    external: String,
    last_activity_ms: u64,
    /// `last_activity_ms` as last written to Redis.
    persisted_ms: u64,
}

/// What the relay remembers of a user who joined.
#[derive(Debug, Clone)]
pub struct UserEntry {
    pub external: String,
    /// Internal id of the meeting the user joined.
    pub meeting: String,
    /// The `user` attributes of the `user-joined` event.
    pub user: Map<String, Value>,
}

/// Meeting and user mappings.
#[derive(Debug)]
pub struct Mappings {
    meetings: HashMap<String, MeetingEntry>,
    users: HashMap<String, UserEntry>,
    timeout_ms: u64,
    /// Where meeting mapping changes go to be persisted; `None` keeps them in memory only.
    writes: Option<UnboundedSender<MappingWrite>>,
}

impl Mappings {
    pub fn new(timeout_ms: u64, writes: Option<UnboundedSender<MappingWrite>>) -> Self {
        Self {
            meetings: HashMap::new(),
            users: HashMap::new(),
            timeout_ms,
            writes,
        }
    }

    /// Puts back meeting mappings read from Redis at start-up.
    pub fn restore(&mut self, meetings: impl IntoIterator<Item = (String, String, u64)>) {
        for (internal, external, last) in meetings {
            self.meetings.insert(
                internal,
                MeetingEntry {
                    external,
                    last_activity_ms: last,
                    persisted_ms: last,
                },
            );
        }
    }

    pub fn external_meeting(&self, internal: &str) -> Option<&str> {
        self.meetings.get(internal).map(|m| m.external.as_str())
    }

    pub fn user(&self, internal_user: &str) -> Option<&UserEntry> {
        self.users.get(internal_user)
    }

    pub fn meeting_count(&self) -> usize {
        self.meetings.len()
    }

    pub fn user_count(&self) -> usize {
        self.users.len()
    }

    /// The state changes of one processed event (bbb-events.md 2.6), made before it is dispatched.
    pub fn apply(&mut self, event_id: &str, attributes: &Map<String, Value>, now_ms: u64) {
        let meeting = attributes.get("meeting").and_then(Value::as_object);
        let mid = meeting
            .and_then(|m| m.get("internal-meeting-id"))
            .and_then(Value::as_str);
        let user = attributes.get("user").and_then(Value::as_object);
        let uid = user
            .and_then(|u| u.get("internal-user-id"))
            .and_then(Value::as_str);
        match (event_id, mid) {
            ("meeting-created", Some(mid)) => {
                let external = meeting
                    .and_then(|m| m.get("external-meeting-id"))
                    .and_then(Value::as_str);
                if let Some(external) = external {
                    self.meetings.insert(
                        mid.to_string(),
                        MeetingEntry {
                            external: external.to_string(),
                            last_activity_ms: now_ms,
                            persisted_ms: now_ms,
                        },
                    );
                    self.write(MappingWrite::Meeting {
                        internal: mid.to_string(),
                        external: external.to_string(),
                        last_activity_ms: now_ms,
                    });
                }
                return;
            }
            ("meeting-ended", _) => return,
            (_, Some(mid)) => self.touch(mid, now_ms),
            _ => {}
        }
        match (event_id, uid, user, mid) {
            ("user-joined", Some(uid), Some(user), Some(mid)) => {
                let external = user
                    .get("external-user-id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                self.users.insert(
                    uid.to_string(),
                    UserEntry {
                        external: external.to_string(),
                        meeting: mid.to_string(),
                        user: user.clone(),
                    },
                );
            }
            ("user-left", Some(uid), _, _) => {
                self.users.remove(uid);
            }
            _ => {}
        }
    }

    /// Records activity of a known meeting; persisted at most every [`REFRESH_WRITE_MS`].
    fn touch(&mut self, mid: &str, now_ms: u64) {
        let Some(m) = self.meetings.get_mut(mid) else {
            return;
        };
        m.last_activity_ms = m.last_activity_ms.max(now_ms);
        if m.last_activity_ms.saturating_sub(m.persisted_ms) >= REFRESH_WRITE_MS {
            m.persisted_ms = m.last_activity_ms;
            let write = MappingWrite::Meeting {
                internal: mid.to_string(),
                external: m.external.clone(),
                last_activity_ms: m.last_activity_ms,
            };
            self.write(write);
        }
    }

    /// Drops meetings (and their users) without activity for the timeout; returns how many.
    pub fn expire(&mut self, now_ms: u64) -> usize {
        let timeout = self.timeout_ms;
        let expired: Vec<String> = self
            .meetings
            .iter()
            .filter(|(_, m)| now_ms.saturating_sub(m.last_activity_ms) > timeout)
            .map(|(k, _)| k.clone())
            .collect();
        if expired.is_empty() {
            return 0;
        }
        for mid in &expired {
            self.meetings.remove(mid);
            self.write(MappingWrite::DeleteMeeting {
                internal: mid.clone(),
            });
        }
        self.users.retain(|_, u| !expired.contains(&u.meeting));
        expired.len()
    }

    fn write(&self, w: MappingWrite) {
        if let Some(tx) = &self.writes {
            // The writer only stops at shutdown; a write lost then is re-made by the next event.
            let _ = tx.send(w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn created_touched_expired() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut m = Mappings::new(1000, Some(tx));
        let created =
            attrs(json!({"meeting":{"internal-meeting-id":"i","external-meeting-id":"e"}}));
        m.apply("meeting-created", &created, 10);
        assert_eq!(m.external_meeting("i"), Some("e"));
        assert!(matches!(
            rx.try_recv(),
            Ok(MappingWrite::Meeting {
                last_activity_ms: 10,
                ..
            })
        ));
        let joined = attrs(
            json!({"meeting":{"internal-meeting-id":"i"},"user":{"internal-user-id":"u","external-user-id":"x"}}),
        );
        m.apply("user-joined", &joined, 900);
        assert_eq!(m.user("u").map(|u| u.external.as_str()), Some("x"));
        assert!(
            rx.try_recv().is_err(),
            "a refresh within a minute is not written"
        );
        // Activity at 900 keeps the meeting past 10 + timeout.
        assert_eq!(m.expire(1500), 0);
        // meeting-ended does not refresh, and the mapping stays until it expires.
        m.apply("meeting-ended", &created, 1800);
        assert_eq!(m.expire(1901), 1);
        assert_eq!(m.external_meeting("i"), None);
        assert_eq!(m.user_count(), 0);
        assert_eq!(
            rx.try_recv().unwrap(),
            MappingWrite::DeleteMeeting {
                internal: "i".into()
            }
        );
    }

    #[test]
    fn user_left_removes_user() {
        let mut m = Mappings::new(1000, None);
        let a =
            attrs(json!({"meeting":{"internal-meeting-id":"i"},"user":{"internal-user-id":"u"}}));
        m.apply("user-joined", &a, 1);
        m.apply("user-left", &a, 2);
        assert!(m.user("u").is_none());
    }
}
