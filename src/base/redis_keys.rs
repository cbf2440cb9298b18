//! Every Redis key the relay reads or writes, in one place. Hooks and mappings use the reference
//! service's v3 names, so that existing tooling (and a switch back) finds them.

/// Set of hook ids.
pub const HOOKS_SET: &str = "bigbluebutton:webhooks:out:hooks";
/// Hash of one hook: `{HOOK_PREFIX}{id}`.
pub const HOOK_PREFIX: &str = "bigbluebutton:webhooks:out:hook:";
/// Counter that hands out hook ids (`INCR`).
pub const ID_COUNTER: &str = "bigbluebutton:webhooks:out:hookId";
/// The reference service's 2.x index set of hook ids (imported, then removed).
pub const V2_HOOKS_SET: &str = "bigbluebutton:webhooks:hooks";
/// The reference service's 2.x hash of one hook: `{V2_HOOK_PREFIX}{id}`.
pub const V2_HOOK_PREFIX: &str = "bigbluebutton:webhooks:hook:";
/// The reference service's 2.x list of one hook's pending events: `{V2_EVENTS_PREFIX}{id}`.
pub const V2_EVENTS_PREFIX: &str = "bigbluebutton:webhooks:events:";
/// Stream of one hook's pending callbacks: `{QUEUE_PREFIX}{id}`.
pub const QUEUE_PREFIX: &str = "bigbluebutton:webhooks:out:queue:";
/// Set of internal meeting ids with a stored mapping.
pub const MAPPINGS_SET: &str = "bigbluebutton:webhooks:proc:mappings";
/// Hash of one meeting mapping: `{MAPPING_PREFIX}{internal meeting id}`.
pub const MAPPING_PREFIX: &str = "bigbluebutton:webhooks:proc:mapping:";
/// Set of `{meeting}:{user}` ids with a stored user mapping.
pub const USERS_SET: &str = "bigbluebutton:webhooks:proc:userMaps";
/// Hash of one payload shared by several queued callbacks: `{PAYLOAD_PREFIX}<ref>` with the
/// text (`t`) and the number of queue entries referring to it (`n`).
pub const PAYLOAD_PREFIX: &str = "bigbluebutton:webhooks:out:payload:";
/// The highest payload reference given so far, so that a restarted relay gives higher ones.
pub const PAYLOAD_SEQ: &str = "bigbluebutton:webhooks:out:payloadSeq";
/// Hash of one user mapping: `{USER_PREFIX}{meeting}:{user}`.
pub const USER_PREFIX: &str = "bigbluebutton:webhooks:proc:userMap:";
/// Hash: internal meeting id -> that meeting's room without its users (JSON; rooms written by
/// earlier versions hold their users too), for the `bbb_*` metrics.
pub const CONFERENCE_ROOMS: &str = "bigbluebutton:webhooks:proc:conference";
/// Hash: record id -> the state of that recording (`processing`, `published`, ...).
pub const CONFERENCE_RECORDINGS: &str = "bigbluebutton:webhooks:proc:recordings";

/// The keys of one source's id mappings and conference state. The `default` source keeps the
/// reference service's names (the constants above); any other source's keys carry the hash tag
/// `{src:<name>}` after the same prefix, so that two servers' internal ids never meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceKeys {
    pub mappings_set: String,
    pub mapping_prefix: String,
    pub users_set: String,
    pub user_prefix: String,
    pub conference_rooms: String,
    pub conference_recordings: String,
}

impl SourceKeys {
    /// The keys of the source named `name`.
    pub fn new(name: &str) -> Self {
        if name == "default" {
            return Self {
                mappings_set: MAPPINGS_SET.into(),
                mapping_prefix: MAPPING_PREFIX.into(),
                users_set: USERS_SET.into(),
                user_prefix: USER_PREFIX.into(),
                conference_rooms: CONFERENCE_ROOMS.into(),
                conference_recordings: CONFERENCE_RECORDINGS.into(),
            };
        }
        let tagged = |key: &str| {
            let rest = key.strip_prefix(PROC_PREFIX).unwrap_or(key);
            format!("{PROC_PREFIX}{{src:{name}}}:{rest}")
        };
        Self {
            mappings_set: tagged(MAPPINGS_SET),
            mapping_prefix: tagged(MAPPING_PREFIX),
            users_set: tagged(USERS_SET),
            user_prefix: tagged(USER_PREFIX),
            conference_rooms: tagged(CONFERENCE_ROOMS),
            conference_recordings: tagged(CONFERENCE_RECORDINGS),
        }
    }

    /// Hash of one meeting's users: user id -> that user's part of the room (JSON); the
    /// room's own entry (in `conference_rooms`) holds the rest.
    pub fn conference_members(&self, meeting: &str) -> String {
        format!("{}:{meeting}", self.conference_rooms)
    }
}

/// What the processing state's keys start with.
const PROC_PREFIX: &str = "bigbluebutton:webhooks:proc:";

/// The hash of hook `id`.
pub fn hook_key(id: impl std::fmt::Display) -> String {
    format!("{HOOK_PREFIX}{id}")
}

/// The stream holding hook `id`'s pending callbacks; removed with the hook.
pub fn queue_key(id: u64) -> String {
    format!("{QUEUE_PREFIX}{id}")
}

/// The hook id of a queue key; `None` for any other key.
pub fn queue_hook_id(key: &str) -> Option<u64> {
    key.strip_prefix(QUEUE_PREFIX)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_keys_round_trip() {
        assert_eq!(queue_hook_id(&queue_key(42)), Some(42));
        assert_eq!(queue_hook_id("bigbluebutton:webhooks:out:queue:x"), None);
        assert_eq!(queue_hook_id(&hook_key(42)), None);
    }

    #[test]
    fn the_default_source_keeps_the_reference_names_and_others_are_tagged() {
        let d = SourceKeys::new("default");
        assert_eq!(d.mapping_prefix, MAPPING_PREFIX);
        assert_eq!(
            d.conference_members("m"),
            "bigbluebutton:webhooks:proc:conference:m"
        );
        let b = SourceKeys::new("b1");
        assert_eq!(
            b.mappings_set,
            "bigbluebutton:webhooks:proc:{src:b1}:mappings"
        );
        assert_eq!(
            b.mapping_prefix,
            "bigbluebutton:webhooks:proc:{src:b1}:mapping:"
        );
        assert_eq!(
            b.user_prefix,
            "bigbluebutton:webhooks:proc:{src:b1}:userMap:"
        );
        assert_eq!(
            b.conference_members("m"),
            "bigbluebutton:webhooks:proc:{src:b1}:conference:m"
        );
    }
}
