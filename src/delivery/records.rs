//! The read side of what delivery keeps in the store, for the admin API and the pipeline's
//! recovery: the queues (their positions, the stored callbacks, a removed hook's queue, the
//! orphans), the callbacks kept for `redeliver` and the redeliveries asked, each hook's state
//! and last attempts, the notices about hooks, the reference's queues to move, the queues'
//! memory budget. Delivery's own modules write these records; others go through this door.

pub(crate) use super::budget::resolve_budget;
pub(crate) use super::insight::{HookState, State, attempts, oldest_queued, removed_hooks, states};
pub(crate) use super::journal::{
    Position, Stored, StoredBody, delete, last_shared, position, remove_orphans,
};
pub(crate) use super::migrate::{Moved, legacy_queues};
pub(crate) use super::notices::{notices_taken, notices_told};
pub(crate) use super::retain::{
    Bounds, Found, Request, ask_redelivery, oldest_kept, read_kept, read_kept_ids,
    redeliveries_asked, redeliveries_taken,
};
