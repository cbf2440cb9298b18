//! End-to-end load tool: a real `redis-server` on a free port, the relay (release build, same
//! `run` as the binary), real HTTP receivers on loopback. Publishes N `user-joined` messages and
//! measures how fast they reach every hook, and checks they arrive in bus order, none lost, none
//! duplicated.
//!
//! `cargo run --release --example load -- --events 20000 --hooks 1 [--plugin testing_keep_typed]`

#[path = "../tests/it/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;

use std::time::{Duration, Instant};

use clap::Parser;
use support::{TestReceiver, TestRedis, TestRelay, user_joined};

#[derive(Parser)]
struct Args {
    /// Events to publish.
    #[arg(long, default_value_t = 20_000)]
    events: usize,
    /// Global hooks, each with its own receiver.
    #[arg(long, default_value_t = 1)]
    hooks: usize,
    /// Run this plugin (a crate of plugins/, e.g. testing_keep_typed or testing_replace_json)
    /// on every callback; repeatable, applied in the order given.
    #[arg(long = "plugin")]
    plugins: Vec<String>,
    /// delivery.max_unacked (1: each delivery marked in Redis before the next is sent).
    #[arg(long, default_value_t = 16)]
    max_unacked: usize,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let redis = TestRedis::start().await;
    let mut config = TestRelay::config(&redis);
    // Room for the whole burst: the bound would otherwise drop the oldest (by design).
    config.delivery.max_queue = args.events;
    config.delivery.max_unacked = args.max_unacked;
    let plugin_dir = support::PluginDir::new();
    if !args.plugins.is_empty() {
        for (i, name) in args.plugins.iter().enumerate() {
            plugin_dir.add(&format!("{i:02}-{name}"), name, None);
        }
        config.plugins.dir = Some(plugin_dir.path().to_path_buf());
    }
    let relay = TestRelay::start_with(&redis, config).await;
    let mut receivers = Vec::new();
    for i in 0..args.hooks {
        let rx = TestReceiver::start().await;
        relay.create_hook(&rx.url(&format!("/hook/{i}")), "").await;
        receivers.push(rx);
    }
    let messages: Vec<String> = (0..args.events)
        .map(|i| user_joined("int-load", &format!("w_{i}"), &format!("user {i}")))
        .collect();
    let start = Instant::now();
    redis.publish_all(&messages).await;
    let published = start.elapsed();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let done = receivers
            .iter()
            .map(|r| r.delivered().len())
            .min()
            .unwrap_or(0);
        if done >= args.events || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = start.elapsed();
    let mut in_order = true;
    let mut total = 0;
    for rx in &receivers {
        let got = rx.delivered();
        total += got.len();
        let names: Vec<String> = got.iter().map(|r| support::user_name(&r.event())).collect();
        in_order &= names.len() == args.events
            && names
                .iter()
                .enumerate()
                .all(|(i, n)| *n == format!("user {i}"));
    }
    let rss_kib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(String::from)
        })
        .unwrap_or_default();
    println!(
        "events={} hooks={} delivered={} in_order_no_loss_no_dup={} publish={:.3}s total={:.3}s rate={:.0} callbacks/s ({:.0} events/s per hook) peak {}",
        args.events,
        args.hooks,
        total,
        in_order,
        published.as_secs_f64(),
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64(),
        args.events as f64 / elapsed.as_secs_f64(),
        rss_kib.trim()
    );
    relay.stop().await;
}
