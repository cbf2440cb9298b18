//! Delivery, in layers that import only downwards (`src/layers.rs` tests it), from
//! the bottom:
//!
//! 1. Parts: the retry schedule ([`retry`]), signing ([`sign`], pure), the address check at
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
//! 5. One callback's attempts as steps: prepare, send, judge, record ([`attempt`]); giving a
//!    hook up when its schedule ran out ([`abandon`]).
//! 6. The loops of one hook: its worker, one callback in flight ([`worker`]), and its pager,
//!    reading back what waits in Redis only ([`pager`]).
//! 7. In a fleet that spreads delivery, the queues of the hooks this instance holds ([`held`]).
//! 8. The dispatcher, which queues each batch's callbacks ([`dispatch`]).

pub(crate) mod abandon;
pub(crate) mod ack;
pub(crate) mod attempt;
pub(crate) mod budget;
pub(crate) mod circuit;
pub(crate) mod client;
pub(crate) mod context;
pub(crate) mod dispatch;
pub(crate) mod held;
pub(crate) mod hook_queue;
pub(crate) mod inbox;
pub(crate) mod incident;
pub(crate) mod insight;
pub mod journal;
pub(crate) mod lanes;
pub(crate) mod migrate;
pub(crate) mod notices;
pub(crate) mod pager;
pub(crate) mod payloads;
pub(crate) mod plan;
pub(crate) mod retain;
pub(crate) mod retry;
pub(crate) mod sign;
pub(crate) mod ssrf;
pub mod tidy;
pub(crate) mod worker;
