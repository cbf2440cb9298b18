//! hookrelay: a drop-in replacement for BigBlueButton's webhooks service.
//!
//! Codemap, in data-flow order (a bus message goes bus -> decode -> map -> match -> plugins ->
//! per-hook queue -> signed delivery):
//! - [`bus`]: subscribes to BBB's Redis pub/sub channels, hands on raw messages in bus order.
//! - [`event`]: `event/decode.rs` parses a message, `mapping.rs` keeps internal -> external
//!   ids, `catalogue/` maps it to a processed webhook event.
//! - [`hooks`]: the hook records (`hooks/store/` in Redis, `registry.rs` in memory) and
//!   `hooks::matcher`, which picks the hooks an event goes to; in a fleet, the changes it
//!   announces (`announce.rs`) and those other instances make (`sync.rs`).
//! - [`route`]: process -> match -> plugin chain for a batch, the one place the pipeline and
//!   [`replay`] (plugin authors' dry run over recorded messages) share; it also gives each
//!   callback its per-hook timestamp.
//! - [`plugin_host`]: WebAssembly plugins that keep, replace or drop each (event, hook) pair
//!   after matching, hot reloaded from a folder. In the relay a pair a plugin takes is queued
//!   unchanged (`plugin_host::Deferred`) and its hook's worker runs the chain when it sends
//!   it, on threads of lower priority (`plugin_host/threads.rs`).
//! - [`authoring`]: the plugin authors' workflow around the engine (`plugin new`, `build`,
//!   `test`, `deploy`, `record`): finds a project and its language, writes one from a template,
//!   builds it with pinned tools, runs its golden cases through [`route`], deploys it into a
//!   running relay's folder, and records what a bus carries for the cases and [`replay`].
//! - [`delivery`]: per-hook FIFO queues kept in Redis, retries, signing and the HTTP client, in
//!   layers that import only downwards (listed in its doc comment, kept by a test). Each hook's
//!   worker runs on a delivery lane (one thread per core) with that lane's connections.
//! - [`xapi`]: the second output, xAPI statements about meetings to Learning Record Stores:
//!   translated from each batch's events in the processing stage, queued per LRS in the
//!   batch's transaction, sent in order by a sender per LRS.
//! - [`destinations`]: events into message brokers (NATS JetStream, AMQP, MQTT) and files,
//!   picked from each batch's events in the processing stage, queued per destination in the
//!   batch's transaction, published in order by a sender per destination.
//! - [`api`]: `hooks/create`, `hooks/destroy`, `hooks/list` (BBB checksum, BBB XML).
//! - [`admin_api`]: each hook's delivery state and last attempts, as JSON on a listener of its
//!   own (`[admin]`), read from what delivery keeps in the store (`delivery::records`).
//! - [`conference`]: the meetings, participants and recordings the events show, for the
//!   `bbb_*` metrics (fed by [`event::process`], read by [`metrics`]).
//! - [`metrics`]: the Prometheus endpoint.
//! - [`traces`]: OpenTelemetry traces, one per bus message, to each callback's attempts
//!   (`[tracing]`), exported over OTLP.
//! - [`tenants`]: the tenants of a hosted cluster (Scalelite's, read from its Redis, or
//!   configured): the API finds a call's tenant by its host, matching keeps a tenant's hooks to
//!   its meetings, and delivery signs with its secret.
//! - [`audit`]: the record of every change asked of the relay (hooks created, destroyed,
//!   enabled, disabled, removed, secrets rotated, redeliveries), kept in the store.
//! - [`fleet`]: several instances on one store: the lease, the messages kept while not holding
//!   it, the cursors and delivery spread over the instances (`fleet/spread.rs`). Its layer is
//!   below the events and the hooks: it knows the bus, the store and the tenants only, so that
//!   the pipeline's parts of an instance in a fleet (`pipeline/follower.rs`, the instance
//!   without the lease, then its holder; `pipeline/balancer.rs`, spread delivery) wire it to
//!   delivery.
//! - [`pipeline`]: wires the stages at start (sources, recovery of queues, the processing
//!   stage, the fleet's follower); [`config`] (plain data), [`shutdown`] and [`systemd`]
//!   (readiness) serve it.
//! - [`edge`]: the relay as an edge on a BBB server of a pool (`[edge]`): its bus, through an
//!   outbox in its own Redis, into the pool's store; nothing else.
//! - Redis below them all: [`store_conn`] is the connection to the relay's own store (one
//!   server, Sentinel's master or a Cluster), [`redis_conn`] the clients that notice a dead
//!   peer and speak TLS to `rediss://` servers, [`redis_index`] the set-plus-hashes layout the stores share.
//! - [`base`]: leaf modules everyone may use and that use nothing of the crate: secrets, digest
//!   algorithms, the callback URL policy, Redis key names, form encoding, the clock, CA files.
//!
//! Layers, bottom first, each importing only from those before it (`src/layers/` tests it):
//! `base`; `redis_conn`, `shutdown`, `systemd`; `config`; `store_conn`; `redis_index`,
//! `metrics`, `audit`; `traces`; `bus`, `tenants`; `fleet`; `event`; `hooks`; `conference`,
//! `plugin_host`; `route`; `delivery`; `destinations`; `admin_api`, `api`, `authoring`,
//! `replay`, `xapi`; `pipeline`; `edge`. Where a lower
//! layer must reach a higher one it defines the interface: `event::Observer` (the
//! conference follows the events), `QueueRemover` of `hooks/store/` (a removed hook's queue goes
//! too).
//!
//! The interface. Four modules are public as they are: [`authoring`] (the plugin authors'
//! workflow), [`base`] (leaf helpers: digests, form encoding, ids, Redis key names),
//! [`config`] (the configuration, plain data) and [`replay`] (the plugin authors' dry run).
//! The rest is the crate's own, reached through the `pub use` items below.
//!
//! Front doors. Below a folder's `mod.rs` every submodule is private (`mod x;`): what other
//! folders may use is re-exported from the `mod.rs` (`pub(crate) use x::Y;`), so a folder's
//! `mod.rs` is all a newcomer reads to know what it offers, and the compiler sees its inside
//! (`unreachable_pub` and the dead-code lint are on). A file named like `mod.rs`'s
//! re-exports is the door; anything else there is the folder's own. The submodules left open
//! are listed in `src/layers/doors.rs` and named here, each with why: the public libraries of
//! parts ([`authoring`], [`base`], [`config`]: each of their files is a door); the modules
//! the library's surface below gives whole, for the tests, the benches and the binary
//! (`api::params`, `conference::seed`, `delivery::journal`, `delivery::tidy`, `event::schema`,
//! `fleet::status`, `hooks::import`, `hooks::takeover`, `hooks::matcher`, `metrics::merge`);
//! delivery's read side for the admin API and recovery (`delivery::records`); and modules
//! whose functions are called by their module's name, which says what they act on
//! (`bus::stream`, `conference::persist`, `event::persist`, `fleet::cursor`, `fleet::mark`,
//! `fleet::reach`, `fleet::spread`). Files of one job have one name in the crate: the files
//! of `src/admin/` are named after the commands they implement (`fleet`, `health`, `import`).
//!
//! The binary's commands are in `src/main.rs` (the command line, `serve`), `src/tools.rs`
//! (`check-config`, `plugin check`, `replay`), `src/plugin_cli.rs` (`plugin new`, `build`,
//! `test`, `deploy`, and `record`, over [`authoring`]) and `src/admin/` (`hooks`,
//! `deliveries`, `redeliver`, `import-reference`, `fleet status`, `sign`, `verify`,
//! `admin-token`) and `src/events_cli.rs` (`events list`, `events schema`).

pub(crate) mod admin_api;
pub(crate) mod api;
pub(crate) mod audit;
pub mod authoring;
pub mod base;
pub(crate) mod bus;
pub(crate) mod conference;
pub mod config;
pub(crate) mod delivery;
pub(crate) mod destinations;
pub(crate) mod edge;
pub(crate) mod event;
pub(crate) mod fleet;
pub(crate) mod hooks;
pub(crate) mod metrics;
pub(crate) mod pipeline;
pub(crate) mod plugin_host;
pub(crate) mod redis_conn;
pub(crate) mod redis_index;
pub mod replay;
pub(crate) mod route;
pub(crate) mod shutdown;
pub(crate) mod store_conn;
pub(crate) mod systemd;
pub(crate) mod tenants;
pub(crate) mod traces;
pub(crate) mod xapi;

// The interface. Four modules are public as they are (the codemap above names them); the
// rest is the crate's own: the binary's commands, the integration tests and the benches use
// what follows, and nothing else.

/// The service: its configuration, its start and its stop.
pub use config::Config;
pub use edge::run as run_edge;
pub use pipeline::{Listeners, run};
pub use shutdown::Shutdown;

/// The API's parameter checks (the fuzz targets in `fuzz/`).
pub use api::params;
/// Metrics and the conference state (`check-config`, the benches).
pub use conference::{ConferenceExport, SharedConference, seed};
/// Signing callbacks, and sending them (`hookrelay callback`, `replay --send`, integrators'
/// checks).
pub use delivery::{CallbackClient, Signer, callback_checksum, signed_url, spec_body, unsign_url};
/// The store: the connection, the hooks of the reference service (`hookrelay import`), the
/// fleet's state (`hookrelay fleet status`), and the queues' layout (the durability tests).
pub use delivery::{journal, tidy};
/// The destinations' queues and states (`hookrelay destinations`).
pub use destinations::{DestinationReport, report as destinations_report};
/// Events and hooks, for `replay`, `plugin check` and the benches.
pub use event::{
    Event, EventFilter, Mappings, OUTPUT_IDS, Payload, Processor, schema as event_schema,
};
pub use fleet::status as fleet_status;
pub use hooks::{Hook, Registry, matcher};
pub use hooks::{import, takeover};
pub use metrics::{Metrics, merge};
/// Plugins (`plugin check`, `replay`, the benches).
pub use plugin_host::{
    Defaults, Host, Plugin, PluginSet, Settings, Verdict, check_file, wasm_digest,
};
pub use store_conn::StoreConn;
/// A queued callback's place in its message's trace (`journal::Entry::trace`).
pub use traces::TraceParent;

#[cfg(test)]
mod layers;

/// The release binary's list of hot functions as `build.rs` hands it to the linker; compiled
/// here only for its tests.
#[path = "../link/order.rs"]
#[cfg(test)]
mod link_order;
