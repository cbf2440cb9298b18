//! How this instance runs, decided once from the configuration (a relay alone, an instance of
//! a fleet, or one that spreads delivery over the fleet), and what follows from it at the
//! start: who restores the hooks, what fences the workers, and the order of the steps before
//! processing ([`Mode::steps`]), whose rules the tests below keep.

use std::time::Duration;

use crate::{
    config::Config,
    fleet::{Fence, Lease, LeaseStop},
};

/// How this instance runs.
#[derive(Clone)]
pub(super) enum Mode {
    /// A relay alone: the one writer of the queues from its start, delivering every hook.
    Alone,
    /// An instance of a fleet: follows the holder of the fleet lease until it takes it, then
    /// writes the queues and delivers every hook while it holds it.
    Fleet { instance: String, lease: Lease },
    /// An instance of a fleet that spreads delivery: as [`Mode::Fleet`] for the queues, but it
    /// delivers, from its start, the hooks whose delivery lease (`hook_lease` long) it holds.
    Spread {
        instance: String,
        lease: Lease,
        hook_lease: Duration,
    },
}

/// A step of the start, before processing, whose place depends on the mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Moves the queues of earlier versions to this version's names; merged only
    /// `as_writer`, by the one writer of the queues.
    MoveLegacyQueues { as_writer: bool },
    /// Starts delivering this instance's share of the hooks (the balancer of delivery leases).
    StartSpread,
    /// Follows the holder, keeping the bus messages, until this instance takes the fleet lease.
    TakeLease,
    /// Restores the hooks: imports the reference's, makes the permanent ones exist.
    RestoreHooks,
    /// Reads back each source's mappings and conference state and seeds the conference.
    RestoreState,
}

impl std::fmt::Debug for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Self::Alone => "alone",
            Self::Fleet { .. } => "fleet",
            Self::Spread { .. } => "spread",
        };
        match self.instance() {
            Some(instance) => write!(f, "{kind} ({instance})"),
            None => f.write_str(kind),
        }
    }
}

impl Mode {
    /// The mode `config` asks for.
    pub(super) fn new(config: &Config) -> Self {
        let fleet = &config.fleet;
        if !fleet.enabled {
            return Self::Alone;
        }
        let instance = crate::fleet::instance_name(fleet);
        let lease = crate::fleet::lease(fleet, &instance);
        if fleet.spread {
            let hook_lease = Duration::from_millis(fleet.lease_ms);
            Self::Spread {
                instance,
                lease,
                hook_lease,
            }
        } else {
            Self::Fleet { instance, lease }
        }
    }

    /// In a fleet, this instance's name.
    pub(super) fn instance(&self) -> Option<&str> {
        match self {
            Self::Alone => None,
            Self::Fleet { instance, .. } | Self::Spread { instance, .. } => Some(instance),
        }
    }

    /// In a fleet, the fleet lease.
    pub(super) fn lease(&self) -> Option<&Lease> {
        match self {
            Self::Alone => None,
            Self::Fleet { lease, .. } | Self::Spread { lease, .. } => Some(lease),
        }
    }

    /// With delivery spread: the length of a hook's delivery lease.
    pub(super) fn hook_lease(&self) -> Option<Duration> {
        match self {
            Self::Spread { hook_lease, .. } => Some(*hook_lease),
            _ => None,
        }
    }

    pub(super) fn spreads(&self) -> bool {
        matches!(self, Self::Spread { .. })
    }

    /// Whether the hooks are restored when they are first read; a fleet's instances only read
    /// them (and follow the changes) until one holds the lease.
    pub(super) fn restores_hooks_at_once(&self) -> bool {
        matches!(self, Self::Alone)
    }

    /// What stops the processing stage queueing once the fleet lease is lost (nothing alone);
    /// `stop` stops the relay then.
    pub(super) fn fence(&self, stop: &LeaseStop) -> Fence {
        match self.lease() {
            Some(lease) => Fence::new(lease.clone(), stop.clone()),
            None => Fence::none(),
        }
    }

    /// What each worker checks before sending: the stage's fence, but with delivery spread
    /// each hook's own delivery lease fences its worker instead.
    pub(super) fn worker_fence(&self, fence: &Fence) -> Fence {
        if self.spreads() {
            Fence::none()
        } else {
            fence.clone()
        }
    }

    /// The steps before processing, in order. Before this instance delivers anything the queues
    /// of earlier versions are moved (merged only by the writer); a spread instance delivers
    /// its share while it follows; the hooks are restored, the state read back and the
    /// queues moved again as their writer only once the lease is held (an instance of an
    /// earlier version may have held it).
    pub(super) fn steps(&self) -> &'static [Step] {
        use Step::{MoveLegacyQueues, RestoreHooks, RestoreState, StartSpread, TakeLease};
        match self {
            Self::Alone => &[MoveLegacyQueues { as_writer: true }, RestoreState],
            Self::Fleet { .. } => &[
                MoveLegacyQueues { as_writer: false },
                TakeLease,
                RestoreHooks,
                RestoreState,
                MoveLegacyQueues { as_writer: true },
            ],
            Self::Spread { .. } => &[
                MoveLegacyQueues { as_writer: false },
                StartSpread,
                TakeLease,
                RestoreHooks,
                RestoreState,
                MoveLegacyQueues { as_writer: true },
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modes() -> [Mode; 3] {
        let lease = Lease::new("lease", "a", Duration::from_secs(5));
        [
            Mode::Alone,
            Mode::Fleet {
                instance: "a".into(),
                lease: lease.clone(),
            },
            Mode::Spread {
                instance: "a".into(),
                lease,
                hook_lease: Duration::from_secs(5),
            },
        ]
    }

    fn at(steps: &[Step], step: Step) -> Option<usize> {
        steps.iter().position(|s| *s == step)
    }

    #[test]
    fn the_queues_are_moved_before_anything_else_and_merged_only_by_their_writer() {
        for mode in modes() {
            let steps = mode.steps();
            let alone = matches!(mode, Mode::Alone);
            assert_eq!(
                steps[0],
                Step::MoveLegacyQueues { as_writer: alone },
                "{mode:?}"
            );
            let merges = at(steps, Step::MoveLegacyQueues { as_writer: true });
            let taken = at(steps, Step::TakeLease);
            match (alone, merges, taken) {
                (true, Some(_), None) => {}
                (false, Some(m), Some(t)) => assert!(m > t, "{mode:?} merges before the lease"),
                other => panic!("{mode:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_fleet_restores_hooks_and_state_only_holding_the_lease() {
        for mode in modes() {
            let steps = mode.steps();
            let state = at(steps, Step::RestoreState).expect("state read back");
            match at(steps, Step::TakeLease) {
                None => {
                    assert!(mode.restores_hooks_at_once());
                    assert_eq!(at(steps, Step::RestoreHooks), None);
                }
                Some(t) => {
                    assert!(!mode.restores_hooks_at_once());
                    let hooks = at(steps, Step::RestoreHooks).expect("hooks restored");
                    assert!(t < hooks && hooks < state, "{mode:?}");
                }
            }
        }
    }

    #[test]
    fn only_a_spread_instance_delivers_before_the_lease_and_its_workers_have_no_fleet_fence() {
        for mode in modes() {
            let steps = mode.steps();
            let fence = mode.fence(&LeaseStop::default());
            assert_eq!(fence.is_fleet(), mode.lease().is_some());
            let worker = mode.worker_fence(&fence);
            match at(steps, Step::StartSpread) {
                Some(s) => {
                    assert!(mode.spreads() && mode.hook_lease().is_some());
                    assert!(s < at(steps, Step::TakeLease).expect("lease"));
                    assert!(!worker.is_fleet());
                }
                None => {
                    assert!(!mode.spreads() && mode.hook_lease().is_none());
                    assert_eq!(worker.is_fleet(), fence.is_fleet());
                }
            }
        }
    }

    #[test]
    fn every_step_runs_once() {
        for mode in modes() {
            let steps = mode.steps();
            for step in steps {
                let n = steps.iter().filter(|s| *s == step).count();
                assert_eq!(n, 1, "{mode:?}: {step:?}");
            }
        }
    }
}
