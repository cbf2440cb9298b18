//! Delivery: per-hook FIFO queues ([`queue`]) with one worker each and one callback in flight
//! ([`worker`]), kept in Redis ([`journal`]), read back a page at a time ([`backlog`]) and
//! marked delivered there in batches ([`ack`]), within a byte budget of all queues ([`budget`]), moved from earlier versions' key names at start
//! ([`migrate`]); in a fleet that spreads delivery, the queues of the hooks this instance holds
//! ([`held`]); the retry schedule ([`retry`]), signing ([`sign`], pure), the HTTP client
//! ([`client`]) and its address check at connection time ([`ssrf`]).

pub mod ack;
pub mod backlog;
pub mod budget;
pub mod client;
pub mod held;
pub mod hook_queue;
pub mod incident;
pub mod journal;
pub mod migrate;
pub mod queue;
pub mod retry;
pub mod sign;
pub mod ssrf;
pub mod tidy;
pub mod worker;
