//! Several relay instances sharing one store (`[fleet]`). One instance at a time, the holder of
//! the [`lease`], queues and delivers, exactly as a single relay does. The others serve the API
//! (hooks are shared through the store, `hooks::sync`), listen to every source and
//! keep its last messages ([`backlog`]). The holder writes, with each batch it queues, a
//! [`cursor`] per source: the digests of the last two messages of that source it queued.
//! Whoever takes the lease over reads the cursors, finds them in what it kept, and queues
//! everything after them before going on with the bus: nothing that Redis published while it
//! was listening is lost, and nothing queued is queued twice. Only an instance whose kept
//! messages reach back to the cursors asks for a free lease while another can ([`reach`]): an
//! instance started again after the holder died kept nothing from before its start.

mod backlog;
pub(crate) mod cursor;
mod lease;
pub(crate) mod mark;
pub(crate) mod reach;
pub(crate) mod spread;
pub mod status;

pub(crate) use backlog::{Backlog, Resume};
pub(crate) use cursor::{Cursor, Cursors, Mark};
pub(crate) use lease::{Fence, Lease, LeaseStop};
pub(crate) use mark::AlreadyQueued;
pub(crate) use reach::{Decision, Reach};

use std::time::Duration;

use crate::config::FleetConfig;

/// The store key of the fleet lease.
pub(crate) const LEASE_KEY: &str = "hookrelay:fleet:lease";

/// This instance's name: configured, or `<host name>-<process id>`.
pub(crate) fn instance_name(config: &FleetConfig) -> String {
    if !config.instance.is_empty() {
        return config.instance.clone();
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "relay".into());
    format!("{host}-{}", std::process::id())
}

/// The lease of `config`, held by `instance`.
pub(crate) fn lease(config: &FleetConfig, instance: &str) -> lease::Lease {
    lease::Lease::new(LEASE_KEY, instance, Duration::from_millis(config.lease_ms))
}
