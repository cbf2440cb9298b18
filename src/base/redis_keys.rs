//! Every Redis key the relay reads or writes, in one place. Hooks and mappings use the reference
//! service's v3 names, so that existing tooling (and a switch back) finds them.

use crate::base::ids::HookId;

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
/// What the stream of one hook's pending callbacks was named before it took its hook's hash
/// tag: `{LEGACY_QUEUE_PREFIX}{id}` (moved to [`queue_key`] at start).
pub const LEGACY_QUEUE_PREFIX: &str = "bigbluebutton:webhooks:out:queue:";
/// `SCAN` pattern of every hook's stream ([`queue_key`]).
pub const QUEUE_PATTERN: &str = "{bigbluebutton:webhooks:out:hook:*}:queue";
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
/// Set once hooks of the reference service (bbb-webhooks) were imported: their receivers
/// expect its callback form (the `config::compat` module).
pub const REFERENCE_HOOKS_IMPORTED: &str = "hookrelay:reference-hooks-imported";
/// Hash: the callback form and `domain` recorded when the relay first took over from
/// bbb-webhooks (fields `compat`, `domain`), so that purging bbb-webhooks later changes nothing.
pub const TAKEOVER: &str = "hookrelay:takeover";
/// Hash: each record of bbb-webhooks that was looked at once (its id in the reference's
/// records -> the relay's hook id, or `dropped`), so that it is never imported twice while its
/// record stays for a way back.
pub const REFERENCE_SEEN: &str = "hookrelay:reference-seen";
/// Set once the operator said the switch from bbb-webhooks is final
/// (`hookrelay import-reference --finish`).
pub const REFERENCE_FINISHED: &str = "hookrelay:reference-finished";
pub const PAYLOAD_SEQ: &str = "bigbluebutton:webhooks:out:payloadSeq";
/// String: the last good view of Scalelite's tenants (JSON, their secrets in it), taken at a
/// start while Scalelite's Redis cannot be read (`tenants::kept`).
pub const TENANTS_KEPT: &str = "hookrelay:tenants:scalelite";
/// Stream of the audit records (`audit`): one entry per change asked of the relay, trimmed to
/// `audit.keep_days`.
pub const AUDIT: &str = "hookrelay:audit";
/// Sorted set of the hooks removed after failures: id, scored by the time of removal (ms);
/// trimmed to the time their state is kept.
pub const REMOVED_HOOKS: &str = "hookrelay:removed-hooks";
/// List of redeliveries asked for (`hookrelay redeliver`), each a JSON record, newest first;
/// the instance that processes the bus queues them.
pub const REDELIVERIES: &str = "hookrelay:redeliveries";
/// The events about hooks told by the workers, waiting for the instance that processes the bus
/// (a list, JSON).
pub const HOOK_NOTICES: &str = "hookrelay:hook-notices";
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

/// The keys the relay adds to hook `id` carry that hook's hash key, braced, as their Redis
/// Cluster hash tag: a key's slot is that of its tag, and the hash key (the reference's name,
/// which has no braces) is its own tag, so a hook's hash, stream and lease share one slot and
/// one shard.
fn tagged(id: HookId, what: &str) -> String {
    format!("{{{HOOK_PREFIX}{id}}}:{what}")
}

/// The stream holding hook `id`'s pending callbacks; removed with the hook.
pub fn queue_key(id: HookId) -> String {
    tagged(id, "queue")
}

/// Hook `id`'s cursor, a hash: `d`, the timestamp of the last callback delivered from its
/// stream (the entries up to it are delivered; they stay in the stream until their whole node
/// is trimmed), and `x`, the highest id a drop removed; removed with the stream.
pub fn cursor_key(id: HookId) -> String {
    tagged(id, "cursor")
}

/// The hook id of a queue key; `None` for any other key.
pub fn queue_hook_id(key: &str) -> Option<HookId> {
    tagged_hook_id(key, "queue")
}

/// The hook id of a key [`tagged`] `what`.
fn tagged_hook_id(key: &str, what: &str) -> Option<HookId> {
    key.strip_prefix('{')?
        .strip_prefix(HOOK_PREFIX)?
        .strip_suffix(what)?
        .strip_suffix("}:")?
        .parse()
        .ok()
}

/// Where a queue being rebuilt is written before it replaces [`queue_key`] (same slot).
pub fn queue_rebuild_key(id: HookId) -> String {
    tagged(id, "queue:rebuild")
}

/// Hook `id`'s batch mark, on a Redis Cluster in a fleet (the fleet's `mark` module).
pub fn batch_mark_key(id: HookId) -> String {
    tagged(id, "batch")
}

/// `SCAN` pattern of every hook's batch mark ([`batch_mark_key`]).
pub const BATCH_MARK_PATTERN: &str = "{bigbluebutton:webhooks:out:hook:*}:batch";

/// The hook id of a batch mark's key; `None` for any other key.
pub fn batch_mark_hook_id(key: &str) -> Option<HookId> {
    tagged_hook_id(key, "batch")
}

/// Hook `id`'s delivery lease, in a fleet that spreads delivery.
pub fn lease_key(id: HookId) -> String {
    tagged(id, "lease")
}

/// Hook `id`'s last delivery attempts, newest first: a list of JSON records trimmed to
/// `delivery.attempt_log`; kept a while after the hook is removed.
pub fn attempts_key(id: HookId) -> String {
    tagged(id, "attempts")
}

/// Hook `id`'s delivery state: a hash (last success, last failure, failures in a row, when it
/// is removed if they go on, who delivers it); kept a while after the hook is removed.
pub fn status_key(id: HookId) -> String {
    tagged(id, "status")
}

/// The hook id of a stream named as before [`queue_key`]; `None` for any other key.
pub fn legacy_queue_hook_id(key: &str) -> Option<HookId> {
    key.strip_prefix(LEGACY_QUEUE_PREFIX)?.parse().ok()
}

/// In a BBB server's own Redis, the edge's outbox: the bus messages read and not yet in the
/// pool's store (a stream: fields `c`, the channel, and `p`, the payload).
pub const EDGE_OUTBOX: &str = "hookrelay:edge:outbox";
/// In a BBB server's own Redis: a random value made once, naming this outbox's life (a Redis
/// that lost its data makes a new one), so that the pool's cursor of an older outbox is not
/// taken for this one's.
pub const EDGE_EPOCH: &str = "hookrelay:edge:epoch";
/// Set of the servers whose edges write to the pool's store.
pub const EDGES: &str = "hookrelay:edges";
/// Channel on which an edge says, after each write, that its stream has more (the server's
/// name): the pool's relays read at once rather than at their next round.
pub const EDGE_WAKE: &str = "hookrelay:edges:wake";

/// The pool store's keys of the edge of `server`, one hash tag for all (one Cluster slot).
pub struct EdgeKeys {
    /// Stream of its bus messages, in bus order (fields `c` and `p`, as the outbox's).
    pub stream: String,
    /// Which edge instance holds the name (a string with a time to live).
    pub claim: String,
    /// `<epoch> <outbox id>`: the last outbox entry in `stream`.
    pub cursor: String,
    /// Hash of what the edge says of itself (last seen, read, forwarded, buffered, dropped).
    pub info: String,
    /// The id of the last entry of `stream` that the pool's relays queued, written in the
    /// transaction that queued it; the stream is trimmed up to it.
    pub taken: String,
}

impl EdgeKeys {
    pub fn new(server: &str) -> Self {
        let at = |what: &str| format!("hookrelay:edge:{{{server}}}:{what}");
        Self {
            stream: at("bus"),
            claim: at("claim"),
            cursor: at("cursor"),
            info: at("info"),
            taken: at("taken"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_keys_round_trip() {
        assert_eq!(
            queue_key(HookId(42)),
            "{bigbluebutton:webhooks:out:hook:42}:queue"
        );
        assert_eq!(queue_hook_id(&queue_key(HookId(42))), Some(HookId(42)));
        assert_eq!(
            queue_hook_id("{bigbluebutton:webhooks:out:hook:x}:queue"),
            None
        );
        assert_eq!(queue_hook_id(&hook_key(42)), None);
        assert_eq!(queue_hook_id(&lease_key(HookId(42))), None);
        assert_eq!(queue_hook_id(&queue_rebuild_key(HookId(42))), None);
        assert_eq!(queue_hook_id(&batch_mark_key(HookId(42))), None);
        assert_eq!(
            batch_mark_hook_id(&batch_mark_key(HookId(42))),
            Some(HookId(42))
        );
        assert_eq!(queue_hook_id("bigbluebutton:webhooks:out:queue:42"), None);
        assert_eq!(
            legacy_queue_hook_id("bigbluebutton:webhooks:out:queue:42"),
            Some(HookId(42))
        );
        assert_eq!(legacy_queue_hook_id(&queue_key(HookId(42))), None);
    }

    #[test]
    fn a_hooks_keys_share_one_cluster_slot() {
        use redis::cluster_routing::Slot;
        for id in [1, 7, 42, 123_456].map(HookId) {
            let slot = Slot::for_key(hook_key(id).as_bytes());
            for key in [
                queue_key(id),
                queue_rebuild_key(id),
                lease_key(id),
                attempts_key(id),
                status_key(id),
            ] {
                assert_eq!(Slot::for_key(key.as_bytes()), slot, "{key}");
            }
        }
        // Not a property of any two keys: hooks 1 and 2 are on different slots.
        assert_ne!(
            Slot::for_key(hook_key(1).as_bytes()),
            Slot::for_key(hook_key(2).as_bytes())
        );
    }

    #[test]
    fn the_queue_pattern_matches_queues_only() {
        let glob = |key: &str| {
            let (head, tail) = QUEUE_PATTERN.split_once('*').unwrap_or_default();
            key.starts_with(head) && key.ends_with(tail) && key.len() >= head.len() + tail.len()
        };
        assert!(glob(&queue_key(HookId(5))));
        assert!(!glob(&lease_key(HookId(5))));
        assert!(!glob(&queue_rebuild_key(HookId(5))));
        assert!(!glob(&hook_key(5)));
        assert!(!glob(&attempts_key(HookId(5))));
        assert!(!glob(&status_key(HookId(5))));
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
