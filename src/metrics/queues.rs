//! The queue series of each hook: its depth and the age of its oldest callback, whose series
//! go when the hook has nothing queued. A tenant's hook's series carry its `tenant` too.

use super::{Metrics, labels::HookLabel};
use crate::base::ids::HookId;

/// The tenant (its id) of a hook, for its series' `tenant` label.
pub(super) type TenantOf<'a> = &'a dyn Fn(HookId) -> Option<String>;

impl Metrics {
    /// Sets the callbacks queued in all and per hook (`(hook, depth)`).
    pub fn report_queues(&self, depths: &[(HookId, usize)], tenant_of: TenantOf<'_>) {
        let queued: usize = depths.iter().map(|(_, n)| n).sum();
        self.queued_callbacks.set(queued as i64);
        self.set_queue_depths(depths, tenant_of);
    }

    /// Sets the age of the oldest queued callback of each hook of `oldest` (timestamps, ms) at
    /// `now` (ms); hooks not in it lose their series.
    pub fn report_oldest(&self, now: u64, oldest: &[(HookId, u64)], tenant_of: TenantOf<'_>) {
        let labels: Vec<(HookLabel, f64)> = oldest
            .iter()
            .map(|(hook, ts)| {
                let age = now.saturating_sub(*ts) as f64 / 1e3;
                (label(*hook, tenant_of), age)
            })
            .collect();
        let mut had = self.oldest_hooks.lock().unwrap_or_else(|e| e.into_inner());
        for gone in had.iter().filter(|h| !labels.iter().any(|(l, _)| l == *h)) {
            self.queue_oldest_age.remove(gone);
        }
        for (l, age) in &labels {
            self.queue_oldest_age.get_or_create(l).set(*age);
        }
        *had = labels.into_iter().map(|(l, _)| l).collect();
    }

    /// Sets the per-hook queue depths; hooks not in `depths` lose their series.
    fn set_queue_depths(&self, depths: &[(HookId, usize)], tenant_of: TenantOf<'_>) {
        let labels: Vec<(HookLabel, usize)> = depths
            .iter()
            .map(|(hook, n)| (label(*hook, tenant_of), *n))
            .collect();
        let mut had = self.depth_hooks.lock().unwrap_or_else(|e| e.into_inner());
        for gone in had.iter().filter(|h| !labels.iter().any(|(l, _)| l == *h)) {
            self.queue_depth.remove(gone);
        }
        for (l, n) in &labels {
            self.queue_depth.get_or_create(l).set(*n as i64);
        }
        *had = labels.into_iter().map(|(l, _)| l).collect();
    }
}

fn label(hook: HookId, tenant_of: TenantOf<'_>) -> HookLabel {
    HookLabel {
        hook: hook.to_string(),
        tenant: tenant_of(hook),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenants_hook_has_a_tenant_label_and_the_operators_none() {
        let m = Metrics::new();
        let tenant_of = |h: HookId| (h.0 == 2).then(|| "acme".to_string());
        m.report_queues(&[(HookId(1), 3), (HookId(2), 4)], &tenant_of);
        let text = m.render();
        assert!(
            text.contains("hookrelay_queue_depth{hook=\"1\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("hookrelay_queue_depth{hook=\"2\",tenant=\"acme\"} 4"),
            "{text}"
        );
        m.report_queues(&[(HookId(1), 1)], &tenant_of);
        let text = m.render();
        assert!(!text.contains("tenant=\"acme\""), "{text}");
    }
}
