//! Delivery: per-hook FIFO queues with one callback in flight ([`queue`]), kept in Redis
//! ([`journal`]) and marked delivered there in batches ([`ack`]), the retry schedule
//! ([`retry`]), signing ([`sign`], pure), the HTTP client ([`client`]) and its address check at
//! connection time ([`ssrf`]).

pub mod ack;
pub mod backlog;
pub mod client;
pub mod hook_queue;
pub mod journal;
pub mod queue;
pub mod retry;
pub mod sign;
pub mod ssrf;
