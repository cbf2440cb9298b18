//! Hooks: what a hook is ([`model`]), where hooks live ([`store`], Redis), the in-memory snapshot
//! that delivery reads ([`registry`]) and which hooks an event goes to ([`matcher`]).

pub mod matcher;
pub mod model;
pub mod registry;
pub mod store;

pub use model::Hook;
pub use registry::{Registry, Snapshot};
pub use store::{CreateOutcome, HookStore, StoreError};
