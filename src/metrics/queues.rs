//! The queue series of each hook: its depth and the age of its oldest callback, whose series
//! go when the hook has nothing queued.

use super::{Metrics, labels::HookLabel};
use crate::base::ids::HookId;

impl Metrics {
    /// Sets the callbacks queued in all and per hook (`(hook, depth)`).
    pub fn report_queues(&self, depths: &[(HookId, usize)]) {
        let queued: usize = depths.iter().map(|(_, n)| n).sum();
        self.queued_callbacks.set(queued as i64);
        self.set_queue_depths(depths);
    }

    /// Sets the age of the oldest queued callback of each hook of `oldest` (timestamps, ms) at
    /// `now` (ms); hooks not in it lose their series.
    pub fn report_oldest(&self, now: u64, oldest: &[(HookId, u64)]) {
        let label = |hook: HookId| HookLabel {
            hook: hook.to_string(),
        };
        let mut had = self.oldest_hooks.lock().unwrap_or_else(|e| e.into_inner());
        for gone in had.iter().filter(|h| !oldest.iter().any(|(o, _)| o == *h)) {
            self.queue_oldest_age.remove(&label(*gone));
        }
        for (hook, ts) in oldest {
            let age = now.saturating_sub(*ts) as f64 / 1e3;
            self.queue_oldest_age.get_or_create(&label(*hook)).set(age);
        }
        *had = oldest.iter().map(|(h, _)| *h).collect();
    }

    /// Sets the per-hook queue depths; hooks not in `depths` lose their series.
    pub fn set_queue_depths(&self, depths: &[(HookId, usize)]) {
        let label = |hook: HookId| HookLabel {
            hook: hook.to_string(),
        };
        let mut had = self.depth_hooks.lock().unwrap_or_else(|e| e.into_inner());
        for gone in had.iter().filter(|h| !depths.iter().any(|(d, _)| d == *h)) {
            self.queue_depth.remove(&label(*gone));
        }
        for (hook, n) in depths {
            self.queue_depth.get_or_create(&label(*hook)).set(*n as i64);
        }
        *had = depths.iter().map(|(h, _)| *h).collect();
    }
}
