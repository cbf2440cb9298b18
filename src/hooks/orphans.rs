//! The hooks of tenants that are gone: a hook whose tenant is no longer in force (removed from
//! Scalelite or the configuration, or refused for its secrets) is disabled (`tenant_unknown`),
//! keeps what it has queued, is enabled again when its tenant is back under the same id, and is
//! removed once it has waited `tenancy.removed_grace_s`. [`plan`] decides (pure); [`Orphans::follow`]
//! carries it out, looking again every second, once the tenants in force say which exist.

use std::{sync::Arc, time::Duration};

use tokio_util::sync::CancellationToken;

use super::{
    HookStore, Snapshot,
    model::{Disabled, DisabledReason, Hook},
};
use crate::{
    audit::{Action, Audit, RELAY, Record},
    base::{ids::HookId, time::now_ms},
    metrics::{Metrics, TenantReasonLabels},
    tenants::{Tenants, View},
};

/// What to do with one hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Its tenant is gone: disabled until it is back.
    Disable(HookId),
    /// Its tenant is back: enabled again.
    Enable(HookId),
    /// Its tenant stayed gone past the grace period: removed.
    Remove(HookId),
}

/// The changes the tenants in force (`view`) ask of the hooks of `snapshot` at `now` (ms),
/// a gone tenant's hooks removed after `grace_ms`.
pub(crate) fn plan(snapshot: &Snapshot, view: &View, now: u64, grace_ms: u64) -> Vec<Change> {
    let mut changes = Vec::new();
    for tenant in snapshot.tenant_ids() {
        let known = view.by_id(tenant).is_some();
        for hook in snapshot.of_tenant(tenant) {
            let waiting = match hook.disabled {
                Some(Disabled {
                    reason: DisabledReason::TenantUnknown,
                    since,
                }) => Some(since),
                _ => None,
            };
            match (known, waiting) {
                (true, Some(_)) => changes.push(Change::Enable(hook.id)),
                (false, None) => changes.push(Change::Disable(hook.id)),
                (false, Some(since)) if now.saturating_sub(since) >= grace_ms => {
                    changes.push(Change::Remove(hook.id));
                }
                _ => {}
            }
        }
    }
    changes.sort_by_key(|c| match c {
        Change::Disable(id) | Change::Enable(id) | Change::Remove(id) => *id,
    });
    changes
}

/// What [`Orphans::follow`] needs.
pub(crate) struct Orphans {
    pub(crate) store: Arc<HookStore>,
    pub(crate) tenants: Arc<Tenants>,
    pub(crate) grace: Duration,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) audit: Audit,
}

impl Orphans {
    /// Carries out [`plan`] every second until `token` is cancelled, once the tenants in force
    /// say which tenants exist.
    pub(crate) async fn follow(self, token: CancellationToken) {
        self.tenants.wait_settled(&token).await;
        let grace_ms = u64::try_from(self.grace.as_millis()).unwrap_or(u64::MAX);
        loop {
            let snapshot = self.store.registry().load();
            let view = self.tenants.load();
            for change in plan(&snapshot, &view, now_ms(), grace_ms) {
                self.carry_out(&snapshot, change).await;
            }
            tokio::select! {
                () = token.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    async fn carry_out(&self, snapshot: &Snapshot, change: Change) {
        let (id, action, done) = match change {
            Change::Disable(id) => (
                id,
                Action::Disable,
                self.store
                    .set_disabled(id, Some(DisabledReason::TenantUnknown))
                    .await,
            ),
            Change::Enable(id) => (id, Action::Enable, self.store.set_disabled(id, None).await),
            Change::Remove(id) => (id, Action::Remove, self.store.destroy(id).await),
        };
        let Some(hook) = snapshot.get(id) else {
            return;
        };
        match done {
            Ok(true) => self.told(hook, action).await,
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(hook_id = id.0, error = %e, "cannot change the hook of a tenant that is gone or back; tried again in a second");
            }
        }
    }

    /// Says what was done to `hook`: the log, the metrics, the audit.
    async fn told(&self, hook: &Hook, action: Action) {
        let (id, tenant) = (hook.id.0, hook.tenant.as_deref());
        let reason = DisabledReason::TenantUnknown.as_str();
        let labels = TenantReasonLabels::of(tenant, reason);
        match action {
            Action::Disable => {
                tracing::warn!(
                    hook_id = id,
                    tenant,
                    "the hook's tenant is not known: the hook is disabled, its callbacks kept until the tenant is back (or tenancy.removed_grace_s passes)"
                );
                self.metrics.hooks_disabled.get_or_create(&labels).inc();
            }
            Action::Enable => {
                tracing::info!(
                    hook_id = id,
                    tenant,
                    "the hook's tenant is back: the hook is enabled, its kept callbacks are sent"
                );
            }
            _ => {
                tracing::warn!(
                    hook_id = id,
                    tenant,
                    "the hook's tenant stayed gone past tenancy.removed_grace_s: the hook is removed"
                );
                self.metrics.hooks_removed.get_or_create(&labels).inc();
            }
        }
        let hooks = self.store.registry().load();
        self.metrics.count_hooks(hooks.len(), hooks.counts());
        let name = tenant.map(|id| self.tenants.name_of(id));
        let record = Record::now(action, RELAY)
            .of_tenant(tenant.zip(name.as_deref()))
            .hook(id, &hook.callback_url)
            .detail(reason);
        self.audit.record(record).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{base::secret::Secret, hooks::Registry, tenants::Tenant};

    fn hook(id: u64, tenant: Option<&str>, disabled: Option<(DisabledReason, u64)>) -> Hook {
        Hook {
            id: HookId(id),
            callback_url: format!("http://h/{id}"),
            meeting_id: None,
            event_ids: None,
            get_raw: false,
            permanent: false,
            tenant: tenant.map(String::from),
            disabled: disabled.map(|(reason, since)| Disabled { reason, since }),
            signing: None,
        }
    }

    #[test]
    fn a_gone_tenants_hooks_are_disabled_enabled_when_it_is_back_removed_after_the_grace() {
        use DisabledReason::{Failures, TenantUnknown};
        let registry = Registry::default();
        registry.replace_all(vec![
            hook(1, None, None),
            hook(2, Some("acme"), None),
            hook(3, Some("gone"), None),
            hook(4, Some("gone"), Some((Failures, 10))),
            hook(5, Some("gone"), Some((TenantUnknown, 1_000))),
            hook(6, Some("gone"), Some((TenantUnknown, 5_000))),
            hook(7, Some("acme"), Some((TenantUnknown, 1_000))),
            hook(8, Some("acme"), Some((Failures, 1_000))),
        ]);
        let acme = Tenant::new("acme", "acme", vec![Secret::new("acme-secret-0001")]);
        let view = View::of(acme.map(Arc::new));
        let changes = plan(&registry.load(), &view, 11_000, 10_000);
        assert_eq!(
            changes,
            [
                // A hook of no tenant, and one of a tenant in force, are left alone.
                Change::Disable(HookId(3)),
                // Disabled for its failures: its tenant's absence takes over (and its time).
                Change::Disable(HookId(4)),
                Change::Remove(HookId(5)),
                Change::Enable(HookId(7)),
            ]
        );
        // Hook 6 has waited 6 s of 10: it stays disabled.
        assert!(!changes.contains(&Change::Remove(HookId(6))));
    }
}
