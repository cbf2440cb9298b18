//! Delivery, in layers that import only downwards (`src/layers/` tests it), from
//! the bottom:
//!
//! 1. Parts: the retry schedule ([`retry`]), signing ([`sign`]: the pure parts, and the one rule of whose secrets sign a hook), the address check at
//!    connection time ([`ssrf`]), the byte budget of all queues ([`budget`]), what the log says
//!    of a hook's troubles ([`incident`]), each receiver's circuit ([`circuit`]); then the
//!    HTTP client ([`client`], with the receivers' rates and circuits) and the threads
//!    workers run on, each with its own connections ([`lanes`]).
//! 2. Redis: each hook's queue as a stream ([`journal`]); beside it, the callbacks sent to each
//!    URL kept a while in the same form ([`retain`]); store lists used as inboxes ([`inbox`]),
//!    the events about hooks told through one ([`notices`]); on them, delivered callbacks marked in
//!    batches ([`ack`]), each hook's attempts and state and the callbacks to keep written in
//!    batches ([`insight`]), streams of earlier versions moved at start ([`migrate`]) and idle empty
//!    streams removed ([`tidy`]).
//! 3. One hook's queue in memory ([`hook_queue`]); the payloads read back that the queues
//!    share ([`payloads`]); a batch's callbacks planned as entries, without I/O ([`plan`]).
//! 4. What every worker and pager share, in four typed parts ([`context`]).
//! 5. One callback's attempts as steps: prepare, send, record ([`attempt`]); what an attempt
//!    decides, pure ([`judge`], beside the client in the layers); giving a hook up when its
//!    schedule ran out, and the hook notices told ([`abandon`]).
//!
//! Beside them, the read side of what delivery keeps in the store, for the admin API and the
//! pipeline's recovery ([`records`]). From outside, delivery is what this file re-exports.
//! 6. The loops of one hook: its worker, one callback in flight ([`worker`]), and its pager,
//!    reading back what waits in Redis only ([`pager`]).
//! 7. In a fleet that spreads delivery, the queues of the hooks this instance holds ([`held`]).
//! 8. The dispatcher, which queues each batch's callbacks ([`dispatch`]).

mod abandon;
mod ack;
mod attempt;
mod budget;
mod circuit;
mod client;
mod context;
mod dispatch;
mod held;
mod hook_queue;
mod inbox;
mod incident;
mod insight;
pub mod journal;
mod judge;
mod lanes;
mod migrate;
mod notices;
mod pager;
mod payloads;
mod plan;
pub(crate) mod records;
mod retain;
mod retry;
mod sign;
mod ssrf;
pub mod tidy;
mod worker;

pub(crate) use ack::Acker;
pub use client::CallbackClient;
pub(crate) use client::{CallbackHeaders, Circuits};
pub(crate) use context::{DeliveryContext, Wiring};
pub(crate) use dispatch::Dispatcher;
pub(crate) use held::Held;
pub(crate) use insight::{AttemptRecord, Insight, Retention};
pub(crate) use retry::RetryPolicy;
pub use sign::{Signer, callback_checksum, signed_url, spec_body, unsign_url};
pub(crate) use ssrf::GuardedResolver;
