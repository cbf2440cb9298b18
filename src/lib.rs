//! hookrelay: a drop-in replacement for BigBlueButton's webhooks service.
//!
//! Codemap, in data-flow order (a bus message goes bus -> decode -> map -> match -> plugins ->
//! per-hook queue -> signed delivery):
//! - [`bus`]: subscribes to BBB's Redis pub/sub channels, hands on raw messages in bus order.
//! - [`event`]: [`event::decode`] parses a message, [`event::mapping`] keeps internal -> external
//!   ids, [`event::catalogue`] maps it to a processed webhook event.
//! - [`hooks`]: the hook records ([`hooks::store`] in Redis, [`hooks::registry`] in memory) and
//!   [`hooks::matcher`], which picks the hooks an event goes to; in a fleet, the changes other
//!   instances make ([`hooks::sync`]).
//! - [`route`]: process -> match -> plugin chain for a batch, the one place the pipeline and
//!   [`replay`] (plugin authors' dry run over recorded messages) share; it also gives each
//!   callback its per-hook timestamp.
//! - [`plugin_host`]: WebAssembly plugins that keep, replace or drop each (event, hook) pair
//!   after matching, hot reloaded from a folder.
//! - [`delivery`]: per-hook FIFO queues kept in Redis, retries, signing and the HTTP client, in
//!   layers that import only downwards (listed in its doc comment, kept by a test).
//! - [`api`]: `hooks/create`, `hooks/destroy`, `hooks/list` (BBB checksum, BBB XML).
//! - [`conference`]: the meetings, participants and recordings the events show, for the
//!   `bbb_*` metrics (fed by [`event::process`], read by [`metrics`]).
//! - [`metrics`]: the Prometheus endpoint.
//! - [`fleet`]: several instances on one store: the lease, the messages kept while not holding
//!   it, the cursors and delivery spread over the instances.
//! - [`pipeline`]: wires the stages at start (sources, recovery of queues, the processing
//!   stage, the fleet's follower); [`config`] (plain data), [`shutdown`] and [`systemd`]
//!   (readiness) serve it.
//! - Redis below them all: [`store_conn`] is the connection to the relay's own store (one
//!   server, Sentinel's master or a Cluster), [`redis_conn`] the clients that notice a dead
//!   peer, [`redis_index`] the set-plus-hashes layout the stores share.
//! - [`base`]: leaf modules everyone may use and that use nothing of the crate: secrets, digest
//!   algorithms, the callback URL policy, Redis key names, form encoding, the clock.
//!
//! Layers, bottom first, each importing only from those before it (`src/layers.rs` tests it):
//! `base`, `redis_conn`, `shutdown`, `systemd`; `config`; `store_conn`; `redis_index`,
//! `metrics`; `bus`; `fleet`; `event`; `hooks`; `conference`, `plugin_host`; `route`;
//! `delivery`; `api`, `replay`; `pipeline`. Where a lower layer must reach a higher one it
//! defines the interface: [`event::process::Observer`] (the conference follows the events),
//! [`hooks::store::QueueRemover`] (a removed hook's queue goes too).
//!
//! The binary's commands are in `src/main.rs`, `src/tools.rs` and `src/admin/`.

pub mod api;
pub mod base;
pub mod bus;
pub mod conference;
pub mod config;
pub mod delivery;
pub mod event;
pub mod fleet;
pub mod hooks;
pub mod metrics;
pub mod pipeline;
pub mod plugin_host;
pub mod redis_conn;
pub mod redis_index;
pub mod replay;
pub mod route;
pub mod shutdown;
pub mod store_conn;
pub mod systemd;

pub use config::Config;
pub use pipeline::{Listeners, run};
pub use shutdown::Shutdown;

#[cfg(test)]
mod layers;
