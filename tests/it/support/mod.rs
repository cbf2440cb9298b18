//! Test support: a real `redis-server` per test ([`TestRedis`]), a scriptable HTTP receiver
//! ([`TestReceiver`]) and the relay run through the same `run` as the binary ([`TestRelay`]).

pub mod bad_receiver;
pub mod bbb3;
pub mod bbb_api;
pub mod browser;
pub mod cluster;
mod common;
pub mod edge;
pub mod lrs;
pub mod netns;
pub mod plugins;
pub mod podman;
pub mod process;
pub mod prometheus;
pub mod receiver;
pub mod redis;
pub mod relay;
pub mod scalelite;
pub mod schema;
pub mod sentinel;
pub mod tls;
pub mod wait;

pub use common::*;
pub use plugins::{PluginDir, plugin_wasm};
pub use process::RelayProcess;
pub use receiver::{Reply, TestReceiver};
pub use redis::TestRedis;
pub use relay::TestRelay;
