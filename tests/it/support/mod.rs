//! Test support: a real `redis-server` per test ([`TestRedis`]), a scriptable HTTP receiver
//! ([`TestReceiver`]) and the relay run through the same `run` as the binary ([`TestRelay`]).

pub(crate) mod accept_proxy;
pub(crate) mod bad_receiver;
pub(crate) mod bbb3;
pub(crate) mod bbb_api;
pub(crate) mod brokers;
pub(crate) mod browser;
pub(crate) mod cluster;
mod common;
pub(crate) mod edge;
pub(crate) mod lrs;
pub(crate) mod netns;
pub(crate) mod otlp;
pub(crate) mod plugins;
pub(crate) mod podman;
pub(crate) mod process;
pub(crate) mod prometheus;
pub(crate) mod receiver;
pub(crate) mod redis;
pub(crate) mod relay;
pub(crate) mod scalelite;
pub(crate) mod schema;
pub(crate) mod sentinel;
pub(crate) mod tls;
pub(crate) mod wait;

pub(crate) use common::*;
pub(crate) use plugins::{PluginDir, plugin_wasm};
pub(crate) use process::RelayProcess;
pub(crate) use receiver::{Reply, TestReceiver};
pub(crate) use redis::TestRedis;
pub(crate) use relay::TestRelay;
