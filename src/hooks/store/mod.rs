//! Hooks in Redis: a set of ids and one hash per hook (the reference v3 layout, so existing
//! tooling finds them), ids from `INCR`. Every change is written to Redis first and then to the
//! [`Registry`], which stays the authority for matching and listing.

use crate::base::ids::HookId;

use std::{
    collections::HashMap,
    hash::{BuildHasher, RandomState},
    sync::{Arc, LazyLock},
};

use crate::store_conn::StoreConn;
use redis::{AsyncCommands, Script};
use tokio::sync::{Mutex, RwLock};

mod restore;
mod state;

use super::{
    Hook, Registry,
    announce::{Claim, Fleet},
    model::{HookSecrets, Registration},
    record::{StoreError, fields, parse_hook, stored_id, write_hook},
};
use crate::{
    base::{
        callback_url::Guard,
        redis_keys::{HOOK_PREFIX, HOOKS_SET, ID_COUNTER, cursor_key, hook_key, queue_key},
        standard_webhooks::new_secret,
    },
    config::PermanentHook,
    redis_index::load_all,
};

/// What `hooks/create` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CreateOutcome {
    Created(Hook),
    /// A hook with that URL exists; nothing was changed.
    Duplicate(HookId),
    /// The tenant has its most hooks already (`tenancy.max_hooks`); nothing was created.
    QuotaExceeded(usize),
}

/// Removes a removed hook's queue from the store, releasing the shared payloads it refers to:
/// delivery's layout, which the pipeline gives ([`HookStore::with_queue_remover`]).
pub(crate) type QueueRemover = Arc<
    dyn Fn(StoreConn, HookId) -> futures_util::future::BoxFuture<'static, redis::RedisResult<()>>
        + Send
        + Sync,
>;

/// Locks that creates of different URLs spread over.
const URL_LOCKS: usize = 64;
/// Locks that creates of different tenants spread over (a tenant's count of hooks is checked
/// and raised under one).
const TENANT_LOCKS: usize = 16;

/// What a new hook asks for (the id is allocated by the store).
#[derive(Debug, Clone)]
pub struct NewHook {
    pub(crate) callback_url: String,
    pub(crate) meeting_id: Option<String>,
    pub(crate) event_ids: Option<Vec<String>>,
    pub(crate) get_raw: bool,
    /// The tenant asking (`None`: the operator).
    pub(crate) tenant: Option<String>,
    /// The most hooks the tenant may have (`None`: no limit, the operator's).
    pub(crate) max_hooks: Option<usize>,
    /// Give the hook its own signing secret (`delivery.hook_secrets`).
    pub(crate) own_secret: bool,
}

impl NewHook {
    fn registration(&self) -> Registration<'_> {
        Registration {
            tenant: self.tenant.as_deref(),
            url: &self.callback_url,
        }
    }
}

/// What [`HookStore::restore`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Restored {
    /// Hooks registered (stored, imported and permanent).
    pub(crate) hooks: usize,
    /// Stored hooks left out because their callback URL is not allowed (left in Redis, so that
    /// a wider allow-list brings them back).
    pub(crate) refused: usize,
}

/// Hooks in Redis plus the registry that mirrors them.
pub(crate) struct HookStore {
    conn: StoreConn,
    registry: Arc<Registry>,
    /// Creates share it; restore, destroy, removals, reloads and refreshes take it alone.
    /// Delivery never waits on it.
    changes: RwLock<()>,
    /// Creates of one callback URL take turns (so that only one of them wins); creates of
    /// different URLs mostly hold different locks and run at once.
    url_locks: Box<[Mutex<()>]>,
    /// Creates of one tenant with a limit take turns, so that no two pass its limit at once.
    tenant_locks: Box<[Mutex<()>]>,
    /// Changes of a hook's state ([`state`]) take turns: of two asking for one change (a
    /// worker and the orphans' follower disabling one hook), one makes it, the other finds it
    /// made.
    state_changes: Mutex<()>,
    url_hasher: RandomState,
    /// URLs of the configured permanent hooks.
    permanent_urls: Vec<String>,
    /// The rules `hooks/create` applies; stored and imported hooks must pass them too.
    guard: Arc<Guard>,
    /// In a fleet: changes announced to the other instances, callback URLs claimed.
    fleet: Fleet,
    /// Removes a removed hook's queue; without it, queues of removed hooks go at the next
    /// start.
    queues: Option<QueueRemover>,
}

impl HookStore {
    pub(crate) fn new(
        conn: StoreConn,
        registry: Arc<Registry>,
        permanent: &[PermanentHook],
        guard: Arc<Guard>,
    ) -> Self {
        Self {
            conn,
            registry,
            changes: RwLock::new(()),
            url_locks: (0..URL_LOCKS).map(|_| Mutex::new(())).collect(),
            tenant_locks: (0..TENANT_LOCKS).map(|_| Mutex::new(())).collect(),
            state_changes: Mutex::new(()),
            url_hasher: RandomState::new(),
            permanent_urls: permanent.iter().map(|p| p.url.clone()).collect(),
            guard,
            fleet: Fleet::default(),
            queues: None,
        }
    }

    /// Removes each removed hook's queue with `remover` too.
    pub(crate) fn with_queue_remover(mut self, remover: QueueRemover) -> Self {
        self.queues = Some(remover);
        self
    }

    /// In a fleet, as instance `instance`: announces every change to the other instances, and
    /// claims callback URLs before creating hooks.
    pub(crate) fn with_announcements(mut self, instance: &str) -> Self {
        self.fleet = Fleet::new(instance);
        self
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

    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Every stored hook (hooks of the reference service apart) whose callback URL passes,
    /// and how many did not.
    async fn read_all(
        &self,
        conn: &mut StoreConn,
    ) -> Result<(Vec<Hook>, usize), redis::RedisError> {
        let mut hooks = Vec::new();
        let mut refused = 0;
        for (member, fields) in load_all(conn, HOOKS_SET, HOOK_PREFIX).await? {
            // Hooks of the reference service (UUID ids) are imported by `restore`.
            let Some(id) = stored_id(&member, &fields) else {
                continue;
            };
            let Some(h) = parse_hook(&fields) else {
                tracing::warn!(member, "skipping a stored hook that cannot be read");
                continue;
            };
            if !self.allowed(&member, &h) {
                refused += 1;
                continue;
            }
            hooks.push(Hook { id, ..h });
        }
        Ok((hooks, refused))
    }

    /// Reads every hook from Redis into the registry and changes nothing in Redis (an instance
    /// of a fleet that does not hold the lease). Returns how many there are.
    ///
    /// # Errors
    /// When Redis cannot be read.
    pub(crate) async fn reload(&self) -> Result<usize, redis::RedisError> {
        let _guard = self.changes.write().await;
        let (hooks, _) = self.read_all(&mut self.conn.clone()).await?;
        let n = hooks.len();
        self.registry.replace_all(hooks);
        Ok(n)
    }

    /// Makes the registry's hook `id` what Redis holds (another instance changed it).
    ///
    /// # Errors
    /// When Redis cannot be read.
    pub(crate) async fn refresh(&self, id: HookId) -> Result<(), redis::RedisError> {
        let _guard = self.changes.write().await;
        let fields: HashMap<String, String> = self.conn.clone().hgetall(hook_key(id)).await?;
        match parse_hook(&fields) {
            Some(h) if self.allowed(&id.to_string(), &h) => {
                self.registry.upsert(Hook { id, ..h });
            }
            _ => {
                self.registry.remove(id);
            }
        }
        Ok(())
    }

    /// Registers a hook unless one with the same URL exists.
    ///
    /// # Errors
    /// When Redis fails; nothing is registered then.
    pub(crate) async fn create(&self, new: NewHook) -> Result<CreateOutcome, StoreError> {
        // Before any lock: a refresh of the registry (which the wait needs) takes `changes`.
        let mut conn = self.conn.clone();
        let claim = self
            .fleet
            .claim_url(&mut conn, &self.registry, new.registration());
        if let Claim::Existing(id) = claim.await? {
            self.enable_if_disabled(id).await?;
            return Ok(CreateOutcome::Duplicate(id));
        }
        let (tenant, url) = new.registration().owned();
        let created = self.create_claimed(new).await;
        if matches!(created, Err(_) | Ok(CreateOutcome::QuotaExceeded(_))) {
            let registration = Registration {
                tenant: tenant.as_deref(),
                url: &url,
            };
            self.fleet
                .unclaim_url(&mut self.conn.clone(), registration)
                .await;
        }
        created
    }

    /// [`create`](Self::create), the URL claimed.
    async fn create_claimed(&self, new: NewHook) -> Result<CreateOutcome, StoreError> {
        let _shared = self.changes.read().await;
        // The tenant's lock before the URL's, always in that order.
        let _tenant = match (&new.tenant, new.max_hooks) {
            (Some(t), Some(_)) => {
                let stripe = self.url_hasher.hash_one(t) as usize % TENANT_LOCKS;
                Some(self.tenant_locks[stripe].lock().await)
            }
            _ => None,
        };
        let stripe = self.url_hasher.hash_one(new.registration()) as usize % URL_LOCKS;
        let _url = self.url_locks[stripe].lock().await;
        if let Some(existing) = self.registry.load().by_registration(new.registration()) {
            // What the specification tells integrators to do every few minutes brings a
            // disabled hook back.
            let id = existing.id;
            self.enable_if_disabled(id).await?;
            return Ok(CreateOutcome::Duplicate(id));
        }
        if let (Some(t), Some(max)) = (&new.tenant, new.max_hooks)
            && self.registry.load().of_tenant(t).count() >= max
        {
            return Ok(CreateOutcome::QuotaExceeded(max));
        }
        let signing = match new.own_secret {
            true => Some(HookSecrets {
                current: new_secret()?,
                previous: None,
            }),
            false => None,
        };
        let mut hook = Hook {
            id: HookId(0),
            // Permanent hooks are the operator's configuration.
            permanent: new.tenant.is_none() && self.permanent_urls.contains(&new.callback_url),
            callback_url: new.callback_url,
            meeting_id: new.meeting_id,
            event_ids: new.event_ids,
            get_raw: new.get_raw,
            tenant: new.tenant,
            disabled: None,
            signing,
        };
        let max_id = self.registry.load().max_id().unwrap_or_default();
        let mut conn = self.conn.clone();
        if conn.is_cluster() {
            // The counter, the hook and the index sit in different slots: one at a time, the
            // hook written before the index names it.
            hook.id = next_id(&mut conn, max_id).await?;
            write_hook(&mut conn, &hook).await?;
        } else {
            let mut call = CREATE_SCRIPT.key(ID_COUNTER);
            call.key(HOOKS_SET).arg(max_id).arg(HOOK_PREFIX);
            for (name, value) in fields(&hook) {
                call.arg(name).arg(value);
            }
            hook.id = call.invoke_async(&mut conn).await?;
        }
        self.registry.upsert(hook.clone());
        self.fleet.announce(&mut self.conn.clone(), hook.id).await;
        Ok(CreateOutcome::Created(hook))
    }

    /// Removes a hook through the API. Permanent and unknown hooks are not removed: `Ok(false)`.
    ///
    /// # Errors
    /// When Redis fails; the hook stays registered then.
    pub(crate) async fn destroy(&self, id: HookId) -> Result<bool, StoreError> {
        let _guard = self.changes.write().await;
        match self.registry.load().get(id) {
            Some(h) if !h.permanent => {}
            _ => return Ok(false),
        }
        let hook = self.registry.load().get(id).cloned();
        self.delete_hook(&mut self.conn.clone(), id).await?;
        self.registry.remove(id);
        self.fleet.announce(&mut self.conn.clone(), id).await;
        if let Some(h) = hook {
            self.fleet
                .unclaim_url(&mut self.conn.clone(), h.registration())
                .await;
        }
        Ok(true)
    }

    /// Removes a hook whose callbacks kept failing: from memory at once (so it gets no more
    /// events), then from Redis.
    ///
    /// # Errors
    /// When Redis fails; the hook is gone from memory all the same and its record is retried at
    /// the next restore (it comes back then).
    pub(crate) async fn remove_failed(&self, id: HookId) -> Result<(), StoreError> {
        let _guard = self.changes.write().await;
        let hook = self.registry.remove(id);
        self.delete_hook(&mut self.conn.clone(), id).await?;
        self.fleet.announce(&mut self.conn.clone(), id).await;
        if let Some(h) = hook {
            self.fleet
                .unclaim_url(&mut self.conn.clone(), h.registration())
                .await;
        }
        Ok(())
    }

    /// Removes the hook, then its queue (releasing the shared payloads it refers to); a queue
    /// left by a crash in between goes at the next start. On a Redis Cluster, where queues
    /// hold their payloads, the hook's hash and queue go in one transaction (they share a
    /// slot).
    async fn delete_hook(&self, conn: &mut StoreConn, id: HookId) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        pipe.atomic().del(hook_key(id)).ignore();
        if conn.is_cluster() {
            pipe.unlink(&[queue_key(id), cursor_key(id)]).ignore();
        }
        pipe.srem(HOOKS_SET, id).ignore();
        pipe.query_async::<()>(conn).await?;
        if !conn.is_cluster()
            && let Some(remove) = &self.queues
        {
            remove(conn.clone(), id).await?;
        }
        Ok(())
    }
}

/// Gives the next hook id and stores a hook under it, in one round trip. `ARGV[1]` is the highest
/// id in use (a Redis that lost its data must never give a live id again), `ARGV[2]` the prefix
/// of hook keys, the rest the hook's fields but its id. Returns the id.
const CREATE: &str = r"
local id = redis.call('INCR', KEYS[1])
if id <= tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  id = redis.call('INCR', KEYS[1])
end
local key = ARGV[2] .. id
redis.call('DEL', key)
redis.call('HSET', key, 'id', id, unpack(ARGV, 3))
redis.call('SADD', KEYS[2], id)
return id
";

static CREATE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(CREATE));

/// The next hook id, above `max_id` (as [`CREATE`] gives it, in commands of their own).
async fn next_id(conn: &mut StoreConn, max_id: HookId) -> Result<HookId, StoreError> {
    let id: HookId = conn.incr(ID_COUNTER, 1).await?;
    if id > max_id {
        return Ok(id);
    }
    // Raised past `max_id` by adding, never set: another instance's id is never given again.
    Ok(conn.incr(ID_COUNTER, max_id.0 - id.0 + 1).await?)
}
