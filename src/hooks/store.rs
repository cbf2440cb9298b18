//! Hooks in Redis: a set of ids and one hash per hook (the reference v3 layout, so existing
//! tooling finds them), ids from `INCR`. Every change is written to Redis first and then to the
//! [`Registry`], which stays the authority for matching and listing.

use std::{collections::HashMap, sync::Arc};

use redis::{AsyncCommands, aio::ConnectionManager};
use tokio::sync::Mutex;

use super::{Hook, Registry};
use crate::{
    base::{
        callback_url::Guard,
        redis_keys::{HOOK_PREFIX, HOOKS_SET, ID_COUNTER, hook_key},
    },
    config::PermanentHook,
    redis_index::load_all,
};

/// A storage failure; the API turns it into `createHookError` / `destroyHookError`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
}

/// What `hooks/create` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateOutcome {
    Created(Hook),
    /// A hook with that URL exists; nothing was changed.
    Duplicate(u64),
}

/// What a new hook asks for (the id is allocated by the store).
#[derive(Debug, Clone)]
pub struct NewHook {
    pub callback_url: String,
    pub meeting_id: Option<String>,
    pub event_ids: Option<Vec<String>>,
    pub get_raw: bool,
}

/// What [`HookStore::restore`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    /// Hooks registered (stored, imported and permanent).
    pub hooks: usize,
    /// Stored hooks left out because their callback URL is not allowed (left in Redis, so that
    /// a wider allow-list brings them back).
    pub refused: usize,
}

/// Hooks in Redis plus the registry that mirrors them.
pub struct HookStore {
    conn: ConnectionManager,
    registry: Arc<Registry>,
    /// Serializes create and destroy, so that two creates of one URL cannot both win. Only the
    /// API takes it; delivery never waits on it.
    changes: Mutex<()>,
    /// URLs of the configured permanent hooks.
    permanent_urls: Vec<String>,
    /// The rules `hooks/create` applies; stored and imported hooks must pass them too.
    guard: Arc<Guard>,
}

impl HookStore {
    pub fn new(
        conn: ConnectionManager,
        registry: Arc<Registry>,
        permanent: &[PermanentHook],
        guard: Arc<Guard>,
    ) -> Self {
        Self {
            conn,
            registry,
            changes: Mutex::new(()),
            permanent_urls: permanent.iter().map(|p| p.url.clone()).collect(),
            guard,
        }
    }

    /// Whether a stored hook may be delivered to; logs why not (never the URL: it may carry
    /// tokens).
    fn allowed(&self, member: &str, h: &Hook) -> bool {
        match self.guard.check_url(&h.callback_url) {
            Ok(()) => true,
            Err(why) => {
                tracing::warn!(
                    hook = member,
                    %why,
                    "not loading a stored hook: its callback URL is refused by the same rules as hooks/create"
                );
                false
            }
        }
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Reads every hook from Redis into the registry, then makes the configured permanent hooks
    /// exist as configured (and demotes stored permanent hooks the configuration no longer names,
    /// removing them). A stored or reference hook whose URL `hooks/create` would refuse is not
    /// loaded (nor imported) and is counted in [`Restored::refused`].
    ///
    /// # Errors
    /// When Redis cannot be read or written.
    pub async fn restore(&self, permanent: &[PermanentHook]) -> Result<Restored, StoreError> {
        let _guard = self.changes.lock().await;
        let mut conn = self.conn.clone();
        let mut hooks = Vec::new();
        let mut refused = 0;
        // Hooks of the reference service (UUID ids) are imported below with a number.
        let mut foreign = Vec::new();
        for (member, fields) in load_all(&mut conn, HOOKS_SET, HOOK_PREFIX).await? {
            let parsed = parse_hook(&fields);
            if let Some(h) = &parsed
                && !self.allowed(&member, h)
            {
                refused += 1;
                continue;
            }
            match (stored_id(&member, &fields), parsed) {
                (Some(id), Some(h)) => hooks.push(Hook { id, ..h }),
                (None, Some(h)) => foreign.push((member, h)),
                _ => tracing::warn!(member, "skipping a stored hook that cannot be read"),
            }
        }
        // Hooks stored as permanent whose URL left the configuration are removed.
        let mut stale = Vec::new();
        hooks.retain(|h| {
            let keep = !h.permanent || self.permanent_urls.contains(&h.callback_url);
            if !keep {
                stale.push(h.id);
            }
            keep
        });
        for id in stale {
            tracing::info!(
                hook_id = id,
                "removing a permanent hook no longer in the configuration"
            );
            delete_hook(&mut conn, id).await?;
        }
        // The counter must never hand out a stored id again.
        if let Some(max) = hooks.iter().map(|h| h.id).max() {
            let current: Option<u64> = conn.get(ID_COUNTER).await?;
            if current.unwrap_or(0) < max {
                let _: () = conn.set(ID_COUNTER, max).await?;
            }
        }
        for (member, mut h) in foreign {
            let _: () = conn.del(hook_key(&member)).await?;
            let _: () = conn.srem(HOOKS_SET, &member).await?;
            let stale_permanent = h.permanent && !self.permanent_urls.contains(&h.callback_url);
            if stale_permanent || hooks.iter().any(|o| o.callback_url == h.callback_url) {
                continue;
            }
            h.id = conn.incr(ID_COUNTER, 1).await?;
            write_hook(&mut conn, &h).await?;
            tracing::info!(hook_id = h.id, old_id = %member, "imported a hook of the reference service");
            hooks.push(h);
        }
        for p in permanent {
            match hooks.iter_mut().find(|h| h.callback_url == p.url) {
                Some(h)
                    if h.permanent
                        && h.get_raw == p.get_raw
                        && h.meeting_id.is_none()
                        && h.event_ids.is_none() => {}
                Some(h) => {
                    h.permanent = true;
                    h.get_raw = p.get_raw;
                    h.meeting_id = None;
                    h.event_ids = None;
                    write_hook(&mut conn, h).await?;
                }
                None => {
                    let id: u64 = conn.incr(ID_COUNTER, 1).await?;
                    let h = Hook {
                        id,
                        callback_url: p.url.clone(),
                        meeting_id: None,
                        event_ids: None,
                        get_raw: p.get_raw,
                        permanent: true,
                    };
                    write_hook(&mut conn, &h).await?;
                    hooks.push(h);
                }
            }
        }
        let n = hooks.len();
        self.registry.replace_all(hooks);
        Ok(Restored { hooks: n, refused })
    }

    /// Registers a hook unless one with the same URL exists.
    ///
    /// # Errors
    /// When Redis fails; nothing is registered then.
    pub async fn create(&self, new: NewHook) -> Result<CreateOutcome, StoreError> {
        let _guard = self.changes.lock().await;
        if let Some(existing) = self.registry.load().by_url(&new.callback_url) {
            return Ok(CreateOutcome::Duplicate(existing.id));
        }
        let mut conn = self.conn.clone();
        let mut id: u64 = conn.incr(ID_COUNTER, 1).await?;
        // Redis lost its data (restarted without persistence): never hand out a live id again.
        if let Some(max) = self
            .registry
            .load()
            .all()
            .map(|h| h.id)
            .max()
            .filter(|m| id <= *m)
        {
            let _: () = conn.set(ID_COUNTER, max).await?;
            id = conn.incr(ID_COUNTER, 1).await?;
        }
        let hook = Hook {
            id,
            permanent: self.permanent_urls.contains(&new.callback_url),
            callback_url: new.callback_url,
            meeting_id: new.meeting_id,
            event_ids: new.event_ids,
            get_raw: new.get_raw,
        };
        write_hook(&mut conn, &hook).await?;
        self.registry.upsert(hook.clone());
        Ok(CreateOutcome::Created(hook))
    }

    /// Removes a hook through the API. Permanent and unknown hooks are not removed: `Ok(false)`.
    ///
    /// # Errors
    /// When Redis fails; the hook stays registered then.
    pub async fn destroy(&self, id: u64) -> Result<bool, StoreError> {
        let _guard = self.changes.lock().await;
        match self.registry.load().get(id) {
            Some(h) if !h.permanent => {}
            _ => return Ok(false),
        }
        delete_hook(&mut self.conn.clone(), id).await?;
        self.registry.remove(id);
        Ok(true)
    }

    /// Removes a hook whose callbacks kept failing: from memory at once (so it gets no more
    /// events), then from Redis.
    ///
    /// # Errors
    /// When Redis fails; the hook is gone from memory all the same and its record is retried at
    /// the next restore (it comes back then).
    pub async fn remove_failed(&self, id: u64) -> Result<(), StoreError> {
        let _guard = self.changes.lock().await;
        self.registry.remove(id);
        delete_hook(&mut self.conn.clone(), id).await
    }
}

async fn write_hook(conn: &mut ConnectionManager, h: &Hook) -> Result<(), StoreError> {
    let key = hook_key(h.id);
    let mut fields: Vec<(&str, String)> = vec![
        ("id", h.id.to_string()),
        ("callbackURL", h.callback_url.clone()),
        ("permanent", h.permanent.to_string()),
        ("getRaw", h.get_raw.to_string()),
    ];
    if let Some(m) = &h.meeting_id {
        fields.push(("externalMeetingID", m.clone()));
    }
    if let Some(ids) = &h.event_ids {
        fields.push(("eventID", ids.join(",")));
    }
    let mut pipe = redis::pipe();
    pipe.atomic()
        .del(&key)
        .ignore()
        .hset_multiple(&key, &fields)
        .ignore()
        .sadd(HOOKS_SET, h.id)
        .ignore();
    pipe.query_async::<()>(conn).await?;
    Ok(())
}

/// Removes the hook, then its queue (releasing the shared payloads it refers to); a queue left
/// by a crash in between goes at the next start.
async fn delete_hook(conn: &mut ConnectionManager, id: u64) -> Result<(), StoreError> {
    let mut pipe = redis::pipe();
    pipe.atomic()
        .del(hook_key(id))
        .ignore()
        .srem(HOOKS_SET, id)
        .ignore();
    pipe.query_async::<()>(conn).await?;
    crate::delivery::journal::delete(conn, id).await?;
    Ok(())
}

/// The numeric id of a stored hook; `None` for the reference's UUID ids.
fn stored_id(member: &str, f: &HashMap<String, String>) -> Option<u64> {
    f.get("id")
        .or_else(|| f.get("hookID"))
        .map_or(member, String::as_str)
        .parse()
        .ok()
}

/// Reads a stored hook (id 0: see [`stored_id`]); accepts the reference's forms too (`hookID`,
/// eventID as JSON array).
fn parse_hook(f: &HashMap<String, String>) -> Option<Hook> {
    let callback_url = f.get("callbackURL")?.clone();
    let event_ids = f
        .get("eventID")
        .and_then(|v| match serde_json::from_str::<Vec<String>>(v) {
            Ok(list) => super::model::parse_event_ids(&list.join(",")),
            Err(_) => super::model::parse_event_ids(v),
        });
    Some(Hook {
        id: 0,
        callback_url,
        meeting_id: f.get("externalMeetingID").cloned(),
        event_ids,
        get_raw: f.get("getRaw").is_some_and(|v| v == "true"),
        permanent: f.get("permanent").is_some_and(|v| v == "true"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_event_id_forms() {
        let mut f = HashMap::new();
        f.insert("callbackURL".to_string(), "http://h/".to_string());
        f.insert(
            "eventID".to_string(),
            r#"["user-joined","meeting-ended"]"#.to_string(),
        );
        assert_eq!(stored_id("7", &f), Some(7));
        let h = parse_hook(&f).unwrap();
        assert_eq!(
            h.event_ids,
            Some(vec!["user-joined".into(), "meeting-ended".into()])
        );
        f.insert(
            "eventID".to_string(),
            "user-joined,meeting-ended".to_string(),
        );
        f.insert("hookID".to_string(), "9".to_string());
        assert_eq!(stored_id("x", &f), Some(9));
        let h = parse_hook(&f).unwrap();
        assert_eq!(
            h.event_ids,
            Some(vec!["user-joined".into(), "meeting-ended".into()])
        );
        assert!(parse_hook(&HashMap::new()).is_none());
        assert_eq!(
            stored_id("3416336b-8c9e-5362-a2be-e2dd12b8523c", &HashMap::new()),
            None
        );
    }
}
