//! The id tables: per internal meeting id, the external id and the users present (internal ->
//! external user id, their `user-joined` attributes, and the presenter / screen-share /
//! raised-hand tracking some events need). Owned by the single processing task, so it needs no
//! lock and every change is made before the next bus message. Lookups are O(1). Changes are
//! collected as [`MappingWrite`]s, taken after each batch of bus messages and written to Redis
//! ([`super::persist`]) in the same pipeline as that batch's callbacks, so they are exactly as
//! durable (the buffer never holds more than one batch's changes).

use std::{collections::HashMap, sync::Arc};

use indexmap::IndexMap;
use serde_json::{Map, Value};

use super::{decode::flag, facts::MeetingTenant};

/// The tenant that a meeting's facts name.
fn tenant_of(facts: Option<&str>) -> Option<Arc<MeetingTenant>> {
    facts.and_then(MeetingTenant::of_facts).map(Arc::new)
}

/// How stale the `lastActivity` stored in Redis may get before a refresh is written again.
/// Expiry counts in hours, so writing on every event (the reference's write amplification)
/// buys nothing.
const REFRESH_WRITE_MS: u64 = 60_000;

/// A change to persist.
#[derive(Debug, Clone, PartialEq)]
pub enum MappingWrite {
    Meeting {
        internal: String,
        external: String,
        last_activity_ms: u64,
        /// Written with the meeting's creation only ([`Mappings::facts`]).
        facts: Option<Arc<str>>,
    },
    DeleteMeeting {
        internal: String,
    },
    User {
        meeting: String,
        internal: String,
        entry: UserEntry,
    },
    DeleteUser {
        meeting: String,
        internal: String,
    },
}

/// What the relay remembers of a user who joined.
#[derive(Debug, Clone, PartialEq)]
pub struct UserEntry {
    pub(super) external: String,
    /// The `user` attributes of the `user-joined` event (`presenter` kept up to date).
    pub(super) user: UserAttributes,
    /// Sharing the screen since a `meeting-screenshare-started` attributed to this user.
    pub(super) screenshare: bool,
    /// Hand raised through the emoji of older servers (bbb-events.md 2.6).
    pub(super) raise_hand: bool,
}

impl UserEntry {
    /// The stored `presenter` flag (`true` or `"true"`).
    pub fn presenter(&self) -> bool {
        self.user.presenter
    }
}

/// A meeting mapping as read back from Redis.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMeeting {
    pub(crate) internal: String,
    pub(super) external: String,
    pub(crate) last_activity_ms: u64,
    pub(super) facts: Option<Arc<str>>,
}

/// A user's `user` attributes, kept as their JSON text: a meeting of thousands holds one short
/// string per user instead of a map of strings and values (about a third of the memory), and
/// copies for persisting share it. Read back as a map only when an event needs it (`user-left`
/// at a meeting's end), changed only when the presenter changes.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct UserAttributes {
    json: Arc<str>,
    presenter: bool,
    guest: bool,
}

impl UserAttributes {
    pub(super) fn new(map: &Map<String, Value>) -> Self {
        Self::with_text(serde_json::to_string(map).unwrap_or_default().into(), map)
    }

    fn with_text(json: Arc<str>, map: &Map<String, Value>) -> Self {
        Self {
            json,
            presenter: map.get("presenter").is_some_and(flag),
            guest: map.get("guest").is_some_and(flag),
        }
    }

    /// The stored `guest` flag.
    pub(super) fn guest(&self) -> bool {
        self.guest
    }

    /// The attributes as stored (a JSON object, kept as it is), or `None` when `text` is not one.
    pub(super) fn parse(text: &str) -> Option<Self> {
        let map = serde_json::from_str::<Map<String, Value>>(text).ok()?;
        Some(Self::with_text(text.into(), &map))
    }

    /// The JSON text of the object.
    pub(super) fn json(&self) -> &str {
        &self.json
    }

    /// The attributes as a map, keys in their order.
    pub(super) fn to_map(&self) -> Map<String, Value> {
        serde_json::from_str(&self.json).unwrap_or_default()
    }

    /// Sets `presenter` (the key keeps its place, or comes last when it was missing).
    pub(super) fn set_presenter(&mut self, on: bool) {
        self.set("presenter", on.into());
    }

    /// Sets `role` (after a role change), as [`Self::set_presenter`] does.
    pub(super) fn set_role(&mut self, role: &str) {
        self.set("role", role.into());
    }

    fn set(&mut self, key: &str, value: Value) {
        let mut map = self.to_map();
        map.insert(key.into(), value);
        *self = Self::new(&map);
    }
}

#[derive(Debug, Clone)]
struct MeetingState {
    /// `None` for a meeting whose creation the relay did not see (users are still tracked, and
    /// expire with the meeting's inactivity).
    external: Option<String>,
    last_activity_ms: u64,
    /// `last_activity_ms` as last written to Redis.
    persisted_ms: u64,
    /// What plugins are told of the meeting ([`Mappings::facts`]).
    facts: Option<Arc<str>>,
    /// The tenant its facts name.
    tenant: Option<Arc<MeetingTenant>>,
    /// Users present, in join order.
    users: IndexMap<String, UserEntry>,
}

/// Meeting and user mappings.
#[derive(Debug)]
pub struct Mappings {
    meetings: HashMap<String, MeetingState>,
    timeout_ms: u64,
    /// Record changes for persisting; off keeps them in memory only (tools and tests).
    persist: bool,
    /// Changes since the last [`Mappings::take_writes`].
    writes: Vec<MappingWrite>,
}

impl Mappings {
    pub fn new(timeout_ms: u64, persist: bool) -> Self {
        Self {
            meetings: HashMap::new(),
            timeout_ms,
            persist,
            writes: Vec::new(),
        }
    }

    /// The changes made since the last call, in order, for persisting.
    pub fn take_writes(&mut self) -> Vec<MappingWrite> {
        std::mem::take(&mut self.writes)
    }

    /// Puts back what was read from Redis at start-up. Users of a meeting without a stored
    /// mapping count as active now.
    pub fn restore(
        &mut self,
        meetings: impl IntoIterator<Item = StoredMeeting>,
        users: impl IntoIterator<Item = (String, String, UserEntry)>,
        now_ms: u64,
    ) {
        for stored in meetings {
            let m = self.state(&stored.internal, now_ms);
            m.external = Some(stored.external);
            m.last_activity_ms = stored.last_activity_ms;
            m.persisted_ms = stored.last_activity_ms;
            m.tenant = tenant_of(stored.facts.as_deref());
            m.facts = stored.facts;
        }
        for (meeting, internal, entry) in users {
            self.state(&meeting, now_ms).users.insert(internal, entry);
        }
    }

    fn state(&mut self, mid: &str, now_ms: u64) -> &mut MeetingState {
        self.meetings
            .entry(mid.to_string())
            .or_insert_with(|| MeetingState {
                external: None,
                last_activity_ms: now_ms,
                persisted_ms: now_ms,
                facts: None,
                tenant: None,
                users: IndexMap::new(),
            })
    }

    /// Inactivity after which a meeting is dropped (ms).
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }

    /// The meeting as plugins see it: the `meeting` object of its `meeting-created` without
    /// the passwords (JSON); `None` when the relay did not see its creation.
    pub fn facts(&self, mid: &str) -> Option<&Arc<str>> {
        self.meetings.get(mid)?.facts.as_ref()
    }

    /// The tenant the meeting was created for (`docs/tenants.md`).
    pub fn tenant(&self, mid: &str) -> Option<&Arc<MeetingTenant>> {
        self.meetings.get(mid)?.tenant.as_ref()
    }

    pub fn external_meeting(&self, mid: &str) -> Option<&str> {
        self.meetings.get(mid)?.external.as_deref()
    }

    pub fn user(&self, mid: &str, uid: &str) -> Option<&UserEntry> {
        self.meetings.get(mid)?.users.get(uid)
    }

    /// The first user (join order) of meeting `mid` for which `pred` holds.
    pub fn first_user_where(&self, mid: &str, pred: fn(&UserEntry) -> bool) -> Option<&str> {
        self.meetings
            .get(mid)?
            .users
            .iter()
            .find(|(_, u)| pred(u))
            .map(|(uid, _)| uid.as_str())
    }

    /// Ids of the users still present in `mid`, in join order.
    pub fn users_of(&self, mid: &str) -> Vec<String> {
        self.meetings
            .get(mid)
            .map(|m| m.users.keys().cloned().collect())
            .unwrap_or_default()
    }

    pub fn meeting_count(&self) -> usize {
        self.meetings
            .values()
            .filter(|m| m.external.is_some())
            .count()
    }

    pub fn user_count(&self) -> usize {
        self.meetings.values().map(|m| m.users.len()).sum()
    }

    /// A meeting was created: `mid` now maps to `external`; `facts` are what plugins are told
    /// of it.
    pub fn meeting_created(
        &mut self,
        mid: &str,
        external: &str,
        facts: Option<Arc<str>>,
        now_ms: u64,
    ) {
        let m = self.state(mid, now_ms);
        m.external = Some(external.to_string());
        m.last_activity_ms = now_ms;
        m.persisted_ms = now_ms;
        m.tenant = tenant_of(facts.as_deref());
        m.facts = facts.clone();
        self.write(MappingWrite::Meeting {
            internal: mid.to_string(),
            external: external.to_string(),
            last_activity_ms: now_ms,
            facts,
        });
    }

    /// Records activity of a known meeting; persisted at most every [`REFRESH_WRITE_MS`].
    pub fn touch(&mut self, mid: &str, now_ms: u64) {
        let Some(m) = self.meetings.get_mut(mid) else {
            return;
        };
        m.last_activity_ms = m.last_activity_ms.max(now_ms);
        let Some(external) = &m.external else { return };
        if m.last_activity_ms.saturating_sub(m.persisted_ms) >= REFRESH_WRITE_MS {
            m.persisted_ms = m.last_activity_ms;
            let write = MappingWrite::Meeting {
                internal: mid.to_string(),
                external: external.clone(),
                last_activity_ms: m.last_activity_ms,
                facts: None,
            };
            self.write(write);
        }
    }

    /// A user joined meeting `mid` (a rejoin replaces the entry).
    pub fn user_joined(&mut self, mid: &str, uid: &str, user: &Map<String, Value>, now_ms: u64) {
        let external = user
            .get("external-user-id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let entry = UserEntry {
            external,
            user: UserAttributes::new(user),
            screenshare: false,
            raise_hand: false,
        };
        let m = self.state(mid, now_ms);
        m.users.shift_remove(uid);
        m.users.insert(uid.to_string(), entry.clone());
        self.write(MappingWrite::User {
            meeting: mid.to_string(),
            internal: uid.to_string(),
            entry,
        });
    }

    /// A user left; returns what was known of them.
    pub fn user_left(&mut self, mid: &str, uid: &str) -> Option<UserEntry> {
        let entry = self.meetings.get_mut(mid)?.users.shift_remove(uid)?;
        self.write(MappingWrite::DeleteUser {
            meeting: mid.to_string(),
            internal: uid.to_string(),
        });
        Some(entry)
    }

    /// Changes a known user's tracking; returns the closure's result (`None`: unknown user).
    pub fn update_user<R>(
        &mut self,
        mid: &str,
        uid: &str,
        change: impl FnOnce(&mut UserEntry) -> R,
    ) -> Option<R> {
        let entry = self.meetings.get_mut(mid)?.users.get_mut(uid)?;
        let r = change(entry);
        let entry = entry.clone();
        self.write(MappingWrite::User {
            meeting: mid.to_string(),
            internal: uid.to_string(),
            entry,
        });
        Some(r)
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
        for mid in &expired {
            let Some(m) = self.meetings.remove(mid) else {
                continue;
            };
            for uid in m.users.keys() {
                self.write(MappingWrite::DeleteUser {
                    meeting: mid.clone(),
                    internal: uid.clone(),
                });
            }
            if m.external.is_some() {
                self.write(MappingWrite::DeleteMeeting {
                    internal: mid.clone(),
                });
            }
        }
        expired.len()
    }

    fn write(&mut self, w: MappingWrite) {
        if self.persist {
            self.writes.push(w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn user_attributes_keep_their_text_order_and_flags() {
        let a = UserAttributes::new(&user(
            json!({"internal-user-id": "u", "presenter": "true", "guest": true, "n": 1.5}),
        ));
        assert!(a.presenter && a.guest());
        assert_eq!(
            a.json(),
            r#"{"internal-user-id":"u","presenter":"true","guest":true,"n":1.5}"#
        );
        let mut b = a.clone();
        b.set_presenter(false);
        assert!(!b.presenter && b.guest());
        assert_eq!(
            b.json(),
            r#"{"internal-user-id":"u","presenter":false,"guest":true,"n":1.5}"#,
            "the key keeps its place"
        );
        assert_eq!(b.to_map()["n"], 1.5);
        let mut c = UserAttributes::new(&Map::new());
        c.set_presenter(true);
        assert_eq!((c.json(), c.presenter), (r#"{"presenter":true}"#, true));
        assert_eq!(UserAttributes::parse(a.json()), Some(a));
        assert_eq!(UserAttributes::parse("[1]"), None);
        assert_eq!(UserAttributes::parse("{"), None);
    }

    #[test]
    fn created_touched_expired() {
        let mut m = Mappings::new(1000, true);
        m.meeting_created("i", "e", None, 10);
        assert_eq!(m.external_meeting("i"), Some("e"));
        assert!(matches!(
            m.take_writes()[..],
            [MappingWrite::Meeting {
                last_activity_ms: 10,
                ..
            }]
        ));
        m.user_joined(
            "i",
            "u",
            &user(json!({"external-user-id": "x", "presenter": true})),
            900,
        );
        assert!(matches!(m.take_writes()[..], [MappingWrite::User { .. }]));
        m.touch("i", 900);
        assert!(
            m.take_writes().is_empty(),
            "a refresh within a minute is not written"
        );
        assert_eq!(m.user("i", "u").map(|u| u.external.as_str()), Some("x"));
        assert_eq!(m.first_user_where("i", UserEntry::presenter), Some("u"));
        assert_eq!(m.expire(1500), 0, "activity at 900 keeps it");
        assert_eq!(m.expire(1901), 1);
        assert_eq!(m.external_meeting("i"), None);
        assert_eq!(m.user_count(), 0);
        assert_eq!(
            m.take_writes(),
            [
                MappingWrite::DeleteUser {
                    meeting: "i".into(),
                    internal: "u".into()
                },
                MappingWrite::DeleteMeeting {
                    internal: "i".into()
                }
            ]
        );
        let mut memory_only = Mappings::new(1000, false);
        memory_only.meeting_created("i", "e", None, 10);
        assert!(memory_only.take_writes().is_empty());
    }

    #[test]
    fn users_of_unknown_meetings_expire_too() {
        let mut m = Mappings::new(1000, false);
        m.user_joined("nobody-created-me", "u", &Map::new(), 0);
        assert_eq!(m.user_count(), 1);
        assert_eq!(m.meeting_count(), 0);
        assert_eq!(m.expire(2000), 1);
        assert_eq!(m.user_count(), 0);
    }

    #[test]
    fn users_keep_join_order_and_rejoin_moves_last() {
        let mut m = Mappings::new(1000, false);
        for u in ["a", "b", "c"] {
            m.user_joined("i", u, &Map::new(), 0);
        }
        m.user_joined("i", "a", &Map::new(), 0);
        assert_eq!(m.users_of("i"), ["b", "c", "a"]);
        assert!(m.user_left("i", "c").is_some());
        assert!(m.user_left("i", "c").is_none());
        assert_eq!(m.users_of("i"), ["b", "a"]);
    }
}
