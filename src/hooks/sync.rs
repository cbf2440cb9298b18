//! Hooks shared by the instances of a fleet: each change an instance makes in the store is
//! announced on a store channel, and every instance applies what is announced to its registry
//! (reading the hook back from the store); at each (re)subscription, in case something was
//! missed, every hook is read again. Before creating a hook, an instance claims its callback
//! URL in the store, so that two instances asked for one URL at once make one hook.

use std::{collections::HashMap, sync::Arc, time::Duration};

use redis::AsyncCommands;
use tokio_util::sync::CancellationToken;

use super::{Hook, HookStore, store::parse_hook};
use crate::fleet::lease::Lease;
use crate::{base::redis_keys::hook_key, store_conn::StoreConn};

/// The store channel on which hook changes are announced: the hook id.
pub const CHANNEL: &str = "hookrelay:hooks:changed";

/// How long a claim on a callback URL lasts: long enough for the hook created under it to
/// reach every instance's registry (an announcement takes milliseconds).
const CLAIM: Duration = Duration::from_secs(3);
/// How often an instance waiting on another's claim looks again.
const CLAIM_POLL: Duration = Duration::from_millis(20);

/// The claim on callback URL `url` (by digest: a URL may carry tokens).
fn claim_key(url: &str) -> String {
    let digest = crate::base::digest::Algorithm::Sha256.hex_digest(&[url.as_bytes()]);
    format!("hookrelay:hooks:claim:{digest}")
}

/// What [`HookStore::claim_url`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Claim {
    /// This instance may create the hook.
    Mine,
    /// The hook exists (another instance made it): its id.
    Existing(u64),
}

/// Applies announced changes to `store`'s registry until `token` is cancelled.
pub async fn follow(store: Arc<HookStore>, conn: StoreConn, token: CancellationToken) {
    conn.keep_listening("hook changes of other instances", &token, |client| {
        let (store, token) = (store.clone(), token.clone());
        async move { listen(&store, &client, &token).await }
    })
    .await;
}

impl HookStore {
    /// Reads every hook from Redis into the registry and changes nothing in Redis (an instance
    /// of a fleet that does not hold the lease). Returns how many there are.
    ///
    /// # Errors
    /// When Redis cannot be read.
    pub async fn reload(&self) -> Result<usize, redis::RedisError> {
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
    pub async fn refresh(&self, id: u64) -> Result<(), redis::RedisError> {
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

    /// Tells the other instances of a fleet that hook `id` changed (nothing outside a fleet).
    /// A lost announcement is made up for when they next subscribe.
    pub(super) async fn announce(&self, id: u64) {
        if self.fleet.is_none() {
            return;
        }
        let sent: redis::RedisResult<i64> = self.conn.clone().publish(CHANNEL, id).await;
        if let Err(e) = sent {
            tracing::warn!(hook_id = id, error = %e, "cannot tell the other instances of a hook change");
        }
    }

    /// In a fleet, claims callback URL `url` before a hook is created for it. While another
    /// instance holds the claim, waits until its hook reaches the registry, or the claim runs
    /// out (the other failed). Outside a fleet, always [`Claim::Mine`].
    ///
    /// # Errors
    /// When Redis fails.
    pub(super) async fn claim_url(&self, url: &str) -> Result<Claim, redis::RedisError> {
        let Some(claim) = self.claim(url) else {
            return Ok(Claim::Mine);
        };
        loop {
            if let Some(h) = self.registry.load().by_url(url) {
                return Ok(Claim::Existing(h.id));
            }
            if claim.try_take(&mut self.conn.clone()).await? {
                return Ok(Claim::Mine);
            }
            tokio::time::sleep(CLAIM_POLL).await;
        }
    }

    /// Frees callback URL `url` at once if this instance claimed it (its hook is gone, or was
    /// not made): a new hook for it need not wait for the claim to run out.
    pub(super) async fn unclaim_url(&self, url: &str) {
        let Some(claim) = self.claim(url) else {
            return;
        };
        if let Err(e) = claim.release(&mut self.conn.clone()).await {
            tracing::debug!(error = %e, "cannot free a callback URL's claim: it runs out by itself");
        }
    }

    /// In a fleet, this instance's claim on `url`: a lease on [`claim_key`].
    fn claim(&self, url: &str) -> Option<Lease> {
        let instance = self.fleet.as_deref()?;
        Some(Lease::new(claim_key(url), instance, CLAIM))
    }

    /// In a fleet, as instance `instance`: announces every change to the other instances, and
    /// claims callback URLs before creating hooks.
    pub fn with_announcements(mut self, instance: &str) -> Self {
        self.fleet = Some(instance.to_string());
        self
    }
}

async fn listen(
    store: &HookStore,
    client: &redis::Client,
    token: &CancellationToken,
) -> redis::RedisResult<()> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(CHANNEL).await?;
    // Whatever changed while not subscribed.
    let n = store.reload().await?;
    tracing::debug!(hooks = n, "hooks read again from the store");
    let mut messages = pubsub.into_on_message();
    while let Some(text) = StoreConn::next_message(&mut messages, token).await? {
        match text.parse::<u64>() {
            Ok(id) => store.refresh(id).await?,
            Err(_) => tracing::debug!("ignoring a hook change that names no hook id"),
        }
    }
    Ok(())
}
