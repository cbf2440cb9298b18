//! Hooks the reference service (bbb-webhooks) left in Redis, in either of its layouts (3.x:
//! UUID members of the set the relay uses too; 2.x: a set and hashes of its own), planned one
//! by one and imported under new numeric ids. Runs at every start and as
//! `hookrelay import-reference`. The reference's records stay as they were, so that going back
//! to bbb-webhooks finds every hook, until the operator says the switch is final ([`finish`]);
//! each record looked at is remembered in the relay's own keys, so that it is imported once.

use crate::base::ids::HookId;

use std::collections::{HashMap, HashSet};

use crate::store_conn::StoreConn;
use redis::AsyncCommands;

use super::{
    Hook,
    record::{StoreError, parse_hook, stored_id, write_hook},
};
use crate::{
    base::{
        callback_url::Guard,
        redis_keys::{
            HOOK_PREFIX, HOOKS_SET, ID_COUNTER, REFERENCE_FINISHED, REFERENCE_HOOKS_IMPORTED,
            REFERENCE_SEEN, V2_EVENTS_PREFIX, V2_HOOK_PREFIX, V2_HOOKS_SET,
        },
    },
    redis_index::load_all,
};

/// Which of the reference's layouts a record is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    V2,
    V3,
}

impl Layout {
    /// How a record of this layout is named among those looked at: a 2.x hook's id can be a
    /// number the relay uses too.
    fn seen_key(self, member: &str) -> String {
        match self {
            Self::V2 => format!("2.x:{member}"),
            Self::V3 => format!("3.x:{member}"),
        }
    }

    fn keys(self) -> (&'static str, &'static str) {
        match self {
            Self::V2 => (V2_HOOKS_SET, V2_HOOK_PREFIX),
            Self::V3 => (HOOKS_SET, HOOK_PREFIX),
        }
    }
}

/// What happens to one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Registered under a new id; the record stays, remembered as imported.
    Import,
    /// Not registered (why); the record stays, remembered as looked at.
    Drop(String),
    /// Looked at before: imported as the hook it names, or dropped.
    Seen(String),
    /// Not registered: `hooks/create` would refuse its URL (why). The record stays, so that a
    /// wider allow-list imports it later.
    Refuse(String),
    /// Not registered: the record has no callback URL. It stays.
    Unreadable,
}

/// One record of the reference and what happens to it.
#[derive(Debug, Clone)]
pub struct Found {
    pub layout: Layout,
    /// Its id in the reference's records.
    pub member: String,
    pub hook: Option<Hook>,
    pub action: Action,
    /// Events a 2.x hook still had queued: the reference would have sent them again; they go
    /// with its record (the relay cannot replay 2.x queues).
    pub pending: u64,
}

/// Reads the reference's records and decides for each, against the relay's `own` hooks (a URL
/// registered already is not imported again) and the configured permanent URLs.
///
/// # Errors
/// When Redis cannot be read.
pub async fn plan(
    conn: &mut StoreConn,
    guard: &Guard,
    own: &[Hook],
    permanent_urls: &[String],
) -> Result<Vec<Found>, StoreError> {
    // The reference's hooks are the operator's: a tenant's hook of one URL is another.
    let mut urls: HashSet<String> = own
        .iter()
        .filter(|h| h.tenant.is_none())
        .map(|h| h.callback_url.clone())
        .collect();
    let seen: HashMap<String, String> = conn.hgetall(REFERENCE_SEEN).await?;
    let mut found = Vec::new();
    for layout in [Layout::V3, Layout::V2] {
        let (set, prefix) = layout.keys();
        for (member, fields) in load_all(conn, set, prefix).await? {
            // The relay's own records share the 3.x set: numeric ids.
            if layout == Layout::V3 && stored_id(&member, &fields).is_some() {
                continue;
            }
            let hook = parse_hook(&fields);
            let action = match &hook {
                _ if seen.contains_key(&layout.seen_key(&member)) => {
                    Action::Seen(seen[&layout.seen_key(&member)].clone())
                }
                None => Action::Unreadable,
                Some(h) => match guard.check_url(&h.callback_url) {
                    Err(why) => Action::Refuse(why.to_string()),
                    Ok(()) if h.permanent && !permanent_urls.contains(&h.callback_url) => {
                        Action::Drop("a permanent hook the configuration does not name".into())
                    }
                    Ok(()) if !urls.insert(h.callback_url.clone()) => {
                        Action::Drop("a hook with this callback URL exists".into())
                    }
                    Ok(()) => Action::Import,
                },
            };
            let pending = match layout {
                Layout::V2 => conn.llen(format!("{V2_EVENTS_PREFIX}{member}")).await?,
                Layout::V3 => 0,
            };
            found.push(Found {
                layout,
                member,
                hook,
                action,
                pending,
            });
        }
    }
    Ok(found)
}

/// The relay's own hooks as stored (numeric ids), for a plan made outside the relay.
///
/// # Errors
/// When Redis cannot be read.
pub async fn stored_own(conn: &mut StoreConn) -> Result<Vec<Hook>, StoreError> {
    Ok(load_all(conn, HOOKS_SET, HOOK_PREFIX)
        .await?
        .into_iter()
        .filter_map(|(member, fields)| {
            let id = stored_id(&member, &fields)?;
            Some(Hook {
                id,
                ..parse_hook(&fields)?
            })
        })
        .collect())
}

/// Carries out `plan`: each hook to import gets the next id (the counter first raised past
/// `max_id`, the highest id in use); imported and dropped records are remembered as looked at,
/// and stay as they were. Returns the imported hooks.
///
/// # Errors
/// When Redis fails; what was done stays done, and the rest is planned again next time (a hook
/// written but not yet remembered is then dropped, its URL being registered).
pub async fn apply(
    conn: &mut StoreConn,
    plan: &[Found],
    max_id: HookId,
) -> Result<Vec<Hook>, StoreError> {
    let current: Option<u64> = conn.get(ID_COUNTER).await?;
    if current.unwrap_or(0) < max_id.0 {
        let _: () = conn.set(ID_COUNTER, max_id).await?;
    }
    let mut imported = Vec::new();
    for f in plan {
        let seen = match (&f.action, &f.hook) {
            (Action::Import, Some(h)) => {
                let id: HookId = conn.incr(ID_COUNTER, 1).await?;
                let h = Hook { id, ..h.clone() };
                write_hook(conn, &h).await?;
                imported.push(h);
                format!("imported as hook {id}")
            }
            (Action::Drop(why), _) => format!("dropped: {why}"),
            _ => continue,
        };
        let _: () = conn
            .hset(REFERENCE_SEEN, f.layout.seen_key(&f.member), seen)
            .await?;
    }
    if !imported.is_empty() {
        // Their receivers expect the reference's callback form from now on.
        let _: () = conn.incr(REFERENCE_HOOKS_IMPORTED, imported.len()).await?;
    }
    Ok(imported)
}

/// The switch from the reference service is final: the records it left that were looked at
/// (imported or dropped) are removed, with a 2.x hook's queued events. Returns how many.
///
/// # Errors
/// When Redis fails; running it again removes the rest.
pub async fn finish(conn: &mut StoreConn) -> Result<usize, StoreError> {
    let seen: HashMap<String, String> = conn.hgetall(REFERENCE_SEEN).await?;
    let mut removed = 0;
    for layout in [Layout::V3, Layout::V2] {
        let (set, prefix) = layout.keys();
        let members: Vec<String> = conn.smembers(set).await?;
        for member in members
            .into_iter()
            .filter(|m| seen.contains_key(&layout.seen_key(m)))
        {
            let mut pipe = redis::pipe();
            pipe.atomic()
                .del(format!("{prefix}{member}"))
                .ignore()
                .srem(set, &member)
                .ignore();
            if layout == Layout::V2 {
                pipe.del(format!("{V2_EVENTS_PREFIX}{member}")).ignore();
            }
            pipe.query_async::<()>(conn).await?;
            removed += 1;
        }
    }
    let _: () = conn
        .set(REFERENCE_FINISHED, crate::base::time::now_ms())
        .await?;
    Ok(removed)
}

/// Whether hooks of the reference service were ever imported into the store.
///
/// # Errors
/// When Redis fails.
pub async fn reference_hooks_imported(conn: &mut StoreConn) -> Result<bool, redis::RedisError> {
    conn.exists(REFERENCE_HOOKS_IMPORTED).await
}
