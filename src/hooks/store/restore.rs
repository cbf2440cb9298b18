//! What the store makes of the hooks at start: the stored ones read back, the permanent hooks
//! that left the configuration removed, the reference service's imported, the configured
//! permanent hooks made to exist as configured.

use redis::AsyncCommands;

use super::{HookStore, Restored};
use crate::{
    base::{ids::HookId, redis_keys::ID_COUNTER},
    config::PermanentHook,
    hooks::{
        Hook, import,
        record::{StoreError, write_hook},
    },
    store_conn::StoreConn,
};

impl HookStore {
    /// Reads every hook from Redis into the registry, then makes the configured permanent hooks
    /// exist as configured (and demotes stored permanent hooks the configuration no longer names,
    /// removing them). A stored or reference hook whose URL `hooks/create` would refuse is not
    /// loaded (nor imported) and is counted in [`Restored::refused`].
    ///
    /// # Errors
    /// When Redis cannot be read or written.
    pub(crate) async fn restore(
        &self,
        permanent: &[PermanentHook],
    ) -> Result<Restored, StoreError> {
        let _guard = self.changes.write().await;
        let mut conn = self.conn.clone();
        let (mut hooks, mut refused) = self.read_all(&mut conn).await?;
        let mut changed = Vec::new();
        // Hooks stored as permanent whose URL left the configuration are removed.
        let mut stale = Vec::new();
        hooks.retain(|h| {
            let keep = !h.permanent || self.permanent_urls.contains(&h.callback_url);
            if !keep {
                stale.push(h.id);
            }
            keep
        });
        changed.extend(&stale);
        for id in stale {
            tracing::info!(
                hook_id = id.0,
                "removing a permanent hook no longer in the configuration"
            );
            self.delete_hook(&mut conn, id).await?;
        }
        let found = import::plan(&mut conn, &self.guard, &hooks, &self.permanent_urls).await?;
        refused += log_found(&found);
        let max_id = hooks.iter().map(|h| h.id).max().unwrap_or_default();
        for h in import::apply(&mut conn, &found, max_id).await? {
            tracing::info!(hook_id = h.id.0, "imported a hook of the reference service");
            changed.push(h.id);
            hooks.push(h);
        }
        for p in permanent {
            if let Some(id) = ensure_permanent(&mut conn, &mut hooks, p).await? {
                changed.push(id);
            }
        }
        let n = hooks.len();
        self.registry.replace_all(hooks);
        for id in changed {
            self.fleet.announce(&mut self.conn.clone(), id).await;
        }
        Ok(Restored { hooks: n, refused })
    }
}

/// Logs what the reference service's hooks found at start become; how many were refused.
fn log_found(found: &[import::Found]) -> usize {
    let mut refused = 0;
    for f in found {
        match &f.action {
            import::Action::Refuse(why) => {
                refused += 1;
                tracing::warn!(hook = f.member, %why, "not importing a hook of the reference service: its callback URL is refused by the same rules as hooks/create");
            }
            import::Action::Unreadable => {
                tracing::warn!(
                    hook = f.member,
                    "skipping a hook of the reference service that cannot be read"
                );
            }
            import::Action::Drop(why) => {
                tracing::info!(hook = f.member, %why, "not importing a hook of the reference service");
            }
            import::Action::Import | import::Action::Seen(_) => {}
        }
    }
    refused
}

/// Makes the configured permanent hook `p` exist among `hooks` as configured (an operator's,
/// for every meeting and event): written when it was missing or different. The id of the
/// hook written, if one was.
async fn ensure_permanent(
    conn: &mut StoreConn,
    hooks: &mut Vec<Hook>,
    p: &PermanentHook,
) -> Result<Option<HookId>, StoreError> {
    let existing = hooks
        .iter_mut()
        .find(|h| h.tenant.is_none() && h.callback_url == p.url);
    match existing {
        Some(h)
            if h.permanent
                && h.get_raw == p.get_raw
                && h.meeting_id.is_none()
                && h.event_ids.is_none() =>
        {
            Ok(None)
        }
        Some(h) => {
            h.permanent = true;
            h.get_raw = p.get_raw;
            h.meeting_id = None;
            h.event_ids = None;
            write_hook(conn, h).await?;
            Ok(Some(h.id))
        }
        None => {
            let id: HookId = conn.incr(ID_COUNTER, 1).await?;
            let h = Hook {
                id,
                callback_url: p.url.clone(),
                meeting_id: None,
                event_ids: None,
                get_raw: p.get_raw,
                permanent: true,
                tenant: None,
                disabled: None,
                signing: None,
            };
            write_hook(conn, &h).await?;
            hooks.push(h);
            Ok(Some(id))
        }
    }
}
