//! Hooks: what a hook is ([`model`]), where hooks live ([`store`], Redis), the in-memory snapshot
//! that delivery reads ([`registry`]), which hooks an event goes to ([`matcher`]), and the
//! import of the reference service's hooks ([`import`]).

pub mod import;
pub mod matcher;
pub mod model;
pub mod registry;
pub mod store;

pub use model::Hook;
pub use registry::{Registry, Snapshot};
pub use store::{CreateOutcome, HookStore, StoreError};
