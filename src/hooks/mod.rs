//! Hooks: what a hook is ([`model`]), where hooks live ([`store`], Redis), the in-memory snapshot
//! that delivery reads ([`registry`]), which hooks an event goes to ([`matcher`]), and the
//! import of the reference service's hooks ([`import`]), and, in a fleet, the changes other
//! instances make ([`sync`]).

pub mod import;
pub mod matcher;
pub mod model;
pub mod registry;
pub mod store;
pub mod sync;

pub use model::Hook;
pub use registry::{Registry, Snapshot};
pub use store::{CreateOutcome, HookStore, StoreError};
