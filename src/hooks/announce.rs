//! What the hook store does in a fleet: it announces each change it makes on a store channel
//! (the other instances follow them, [`super::sync`]), and before creating a hook it claims
//! the callback URL, so that two instances asked for one URL at once make one hook. Outside a
//! fleet, nothing.

use crate::base::ids::HookId;

use std::time::Duration;

use redis::AsyncCommands;

use super::{Registry, model::Registration};
use crate::{fleet::Lease, store_conn::StoreConn};

/// The store channel on which hook changes are announced: the hook id.
pub(crate) const CHANNEL: &str = "hookrelay:hooks:changed";

/// How long a claim on a callback URL lasts: long enough for the hook created under it to
/// reach every instance's registry (an announcement takes milliseconds).
const CLAIM: Duration = Duration::from_secs(3);
/// How often an instance waiting on another's claim looks again.
const CLAIM_POLL: Duration = Duration::from_millis(20);

/// The claim on a registration (by digest: a URL may carry tokens).
fn claim_key(registration: Registration<'_>) -> String {
    let digest =
        crate::base::digest::Algorithm::Sha256.hex_digest(&[registration.key().as_bytes()]);
    format!("hookrelay:hooks:claim:{digest}")
}

/// What [`Fleet::claim_url`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// This instance may create the hook.
    Mine,
    /// The hook exists (another instance made it): its id.
    Existing(HookId),
}

/// In a fleet, this instance's name; outside one, nothing.
#[derive(Debug, Default)]
pub(crate) struct Fleet {
    instance: Option<String>,
}

impl Fleet {
    pub(crate) fn new(instance: &str) -> Self {
        Self {
            instance: Some(instance.to_string()),
        }
    }

    /// Tells the other instances of a fleet that hook `id` changed (nothing outside a fleet).
    /// A lost announcement is made up for when they next subscribe.
    pub(crate) async fn announce(&self, conn: &mut StoreConn, id: HookId) {
        if self.instance.is_none() {
            return;
        }
        let sent: redis::RedisResult<i64> = conn.publish(CHANNEL, id).await;
        if let Err(e) = sent {
            tracing::warn!(hook_id = id.0, error = %e, "cannot tell the other instances of a hook change");
        }
    }

    /// In a fleet, claims a registration (a callback URL within its tenant) before a hook is created for it. While another
    /// instance holds the claim, waits until its hook reaches `registry`, or the claim runs
    /// out (the other failed). Outside a fleet, always [`Claim::Mine`].
    ///
    /// # Errors
    /// When Redis fails.
    pub(crate) async fn claim_url(
        &self,
        conn: &mut StoreConn,
        registry: &Registry,
        registration: Registration<'_>,
    ) -> Result<Claim, redis::RedisError> {
        let Some(claim) = self.claim(registration) else {
            return Ok(Claim::Mine);
        };
        loop {
            if let Some(h) = registry.load().by_registration(registration) {
                return Ok(Claim::Existing(h.id));
            }
            if claim.try_take(conn).await? {
                return Ok(Claim::Mine);
            }
            tokio::time::sleep(CLAIM_POLL).await;
        }
    }

    /// Frees a registration at once if this instance claimed it (its hook is gone, or was
    /// not made): a new hook for it need not wait for the claim to run out.
    pub(crate) async fn unclaim_url(&self, conn: &mut StoreConn, registration: Registration<'_>) {
        let Some(claim) = self.claim(registration) else {
            return;
        };
        if let Err(e) = claim.release(conn).await {
            tracing::debug!(error = %e, "cannot free a callback URL's claim: it runs out by itself");
        }
    }

    /// In a fleet, this instance's claim on a registration: a lease on [`claim_key`].
    fn claim(&self, registration: Registration<'_>) -> Option<Lease> {
        let instance = self.instance.as_deref()?;
        Some(Lease::new(claim_key(registration), instance, CLAIM))
    }
}
