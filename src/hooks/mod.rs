//! Hooks, in files that import only downwards: what a hook is ([`model`]); its record in
//! Redis ([`record`]); the in-memory snapshot that delivery reads ([`registry`]) and which
//! hooks an event goes to ([`matcher`]); in a fleet, change announcements and callback URL
//! claims ([`fleet`]); the import of the reference service's hooks ([`import`]) and the
//! takeover from it recorded in the store ([`takeover`]); the store
//! that keeps Redis and the registry together ([`store`]); in a fleet, following the
//! changes other instances make ([`sync`]); and the hooks of tenants that are gone, disabled,
//! enabled when they are back, removed after a grace period ([`orphans`]).

mod announce;
pub mod import;
pub mod matcher;
mod model;
mod orphans;
mod record;
mod registry;
mod store;
mod sync;
pub mod takeover;

pub(crate) use model::{DisabledReason, parse_event_ids};
pub(crate) use orphans::Orphans;
pub(crate) use record::StoreError;
pub(crate) use store::NewHook;
pub(crate) use sync::follow;

pub use model::Hook;
pub use registry::Registry;
pub(crate) use registry::Snapshot;
pub(crate) use store::{CreateOutcome, HookStore};
