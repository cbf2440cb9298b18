//! End-to-end load tool: a real `redis-server` on a free port, the relay binary as its own
//! process (so that its memory and CPU are its own), and lean HTTP receivers on loopback in this
//! process. Each scenario checks that every hook got every event exactly once, in bus order.
//!
//! ```text
//! cargo build --release --bin hookrelay    # alone: see BENCHMARKS.md
//! cargo build --release --example load
//! target/release/examples/load burst --events 20000 --hooks 1 --runs 3
//! target/release/examples/load baseline --requests 20000
//! target/release/examples/load burst --events 10000 --hooks 9 --slow-hooks 1
//! target/release/examples/load open --rate 2000 --seconds 10
//! target/release/examples/load restart --hooks 1000 --events 100
//! target/release/examples/load idle --seconds 10
//! target/release/examples/load api --hooks 1000
//! target/release/examples/load api --hooks 10000 --tenants 1000
//! target/release/examples/load burst --hooks 100 --events 2000 --tenants 1000
//! target/release/examples/load tenancy --tenants 1000
//! target/release/examples/load outage --hooks 10 --events 10000
//! target/release/examples/load meetings --meetings 1000 --users 10
//! target/release/examples/load fanout --hooks 2000 --events 5
//! target/release/examples/load slow-plugin --rate 50 --seconds 6 --slow-hooks 10 --plugin-ms 10
//! target/release/examples/load xapi --meetings 200 [--ralph]
//! target/release/examples/load destinations --events 10000 [--rate 2000]
//! ```
//! `--relay-bin OLD --relay-bin NEW` alternates two builds run by run (ratios in one run).
//! `burst --hooks 1` also runs `baseline` against the same receiver in every run and ends with
//! `ratio to baseline: R`: the relay's callbacks/s over the bare loop's POSTs/s.

#[path = "../../tests/it/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;

mod api;
mod baseline;
mod commandstats;
mod destinations;
mod edges;
mod launch;
mod memory;
mod plugins;
mod pool;
mod procstat;
mod scenario;
mod sink;
mod tenancy;
mod xapi;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    scenario: Option<Scenario>,
    /// Runs of each scenario (medians are printed).
    #[arg(long, default_value_t = 1, global = true)]
    runs: usize,
    /// The relay binary (default: `hookrelay` beside this tool); given twice, the two builds
    /// alternate run by run.
    #[arg(long = "relay-bin", global = true)]
    relay_bins: Vec<PathBuf>,
    /// delivery.max_unacked.
    #[arg(long, default_value_t = 16, global = true)]
    max_unacked: usize,
    /// Run this plugin (a crate of plugins/, e.g. testing_keep_typed) on every callback;
    /// repeatable, applied in the order given.
    #[arg(long = "plugin", global = true)]
    plugins: Vec<String>,
    /// Relay instances sharing the Redis as a fleet (`[fleet]`); 0: one relay without a fleet.
    /// Hooks are registered on the first (the lease holder); `burst` counts the CPU of all.
    #[arg(long, default_value_t = 0, global = true)]
    instances: usize,
    /// With --instances: the holder of the fleet lease sends everything (`fleet.spread =
    /// false`) instead of each instance its share of the hooks.
    #[arg(long, global = true)]
    no_spread: bool,
    /// `burst` with the store on a Redis Cluster of three primaries started for each run (the
    /// bus stays on its own Redis); its nodes' CPU counts in redis_cpu_s.
    #[arg(long, global = true)]
    cluster_store: bool,
    /// `burst`: an argument for the store's redis-server, repeated for several (e.g.
    /// `--redis-arg=--stream-node-max-entries --redis-arg=16`).
    #[arg(long = "redis-arg", global = true, allow_hyphen_values = true)]
    redis_args: Vec<String>,
    /// `delivery.attempt_log`: attempts kept per hook (0: none).
    #[arg(long, default_value_t = 100, global = true)]
    attempt_log: usize,
    /// `delivery.retain`: how long sent callbacks are kept for redelivery ("0s": none).
    #[arg(long, default_value = "1h", global = true)]
    retain: String,
    /// `[[tenants]]` configured (`t0`, `t1`, ...): `burst` registers its hooks as tenant
    /// t0's, whose meeting its events are of; `api` spreads its hooks over the tenants and
    /// measures a tenant's calls beside the operator's. 0: no tenants.
    #[arg(long, default_value_t = 0, global = true)]
    tenants: usize,
    /// A `[[delivery.receivers]]` rule matching every receiver, with this rate (callbacks/s);
    /// 0: no rule. A rate above what is reached measures a rule's cost per callback.
    #[arg(long, default_value_t = 0, global = true)]
    receiver_rate: u32,
    /// Traces on, every message sampled, exported over OTLP/HTTP to a collector of the load
    /// tool's that takes every export (builds with `[tracing]` only).
    #[arg(long, global = true)]
    otlp: bool,
}

#[derive(Subcommand, Clone)]
pub enum Scenario {
    /// Publish N events at once; time until every fast hook has them all.
    Burst {
        #[arg(long, default_value_t = 20_000)]
        events: usize,
        /// Fast hooks (each its own receiver).
        #[arg(long, default_value_t = 1)]
        hooks: usize,
        /// Hooks whose receiver answers after --slow-ms (not waited for).
        #[arg(long, default_value_t = 0)]
        slow_hooks: usize,
        #[arg(long, default_value_t = 50)]
        slow_ms: u64,
    },
    /// Publish at a fixed rate; latency from publish to arrival.
    Open {
        #[arg(long, default_value_t = 2_000)]
        rate: u64,
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        #[arg(long, default_value_t = 1)]
        hooks: usize,
    },
    /// Queue hooks x events callbacks, kill -9 the relay, start it again: time to subscribe,
    /// to the first callback and to the last.
    Restart {
        #[arg(long, default_value_t = 1_000)]
        hooks: usize,
        #[arg(long, default_value_t = 100)]
        events: usize,
    },
    /// CPU used by an idle relay with some hooks.
    Idle {
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        #[arg(long, default_value_t = 10)]
        hooks: usize,
    },
    /// Receivers that hang while events arrive: Redis bytes and relay RSS per queued
    /// callback, then the time to deliver them all once the receivers are back.
    Outage {
        #[arg(long, default_value_t = 10)]
        hooks: usize,
        #[arg(long, default_value_t = 10_000)]
        events: usize,
    },
    /// Meetings begin with their users (no hook): Redis bytes and relay RSS per meeting.
    Meetings {
        #[arg(long, default_value_t = 1_000)]
        meetings: usize,
        #[arg(long, default_value_t = 10)]
        users: usize,
    },
    /// Many hooks on one receiver: the relay's memory at the fan-out's peak, per hook.
    Fanout {
        #[arg(long, default_value_t = 2_000)]
        hooks: usize,
        #[arg(long, default_value_t = 5)]
        events: usize,
    },
    /// One plugin-free hook beside hooks in the scope of a slow plugin (the test plugin `loop`,
    /// running to its deadline on every call), events at a fixed rate: the plugin-free hook's
    /// p99 latency with the slow plugin loaded and without it, in the same run, and the slow
    /// hooks' callbacks/s.
    SlowPlugin {
        #[arg(long, default_value_t = 50)]
        rate: u64,
        #[arg(long, default_value_t = 6)]
        seconds: u64,
        /// Hooks in the plugin's scope.
        #[arg(long, default_value_t = 10)]
        slow_hooks: usize,
        /// The plugin's deadline: what each call costs.
        #[arg(long, default_value_t = 10)]
        plugin_ms: u64,
        /// The plugin's `max_instances`.
        #[arg(long, default_value_t = 1)]
        plugin_instances: u32,
        /// The plugin (a crate of plugins/): `testing_loop` spins to its deadline, another
        /// shows what the plugin machinery alone costs.
        #[arg(long, default_value = "testing_loop")]
        plugin_crate: String,
        /// `[plugins] cpu_priority`: auto, normal, low or idle.
        #[arg(long, default_value = "normal")]
        plugin_priority: String,
        /// A control: load no plugin, and make the slow hooks' receivers take this long per
        /// callback instead, so they fall behind as far with no CPU spent on plugins.
        #[arg(long, default_value_t = 0)]
        slow_receiver_ms: u64,
        /// A control: load no plugin, and keep one core busy at the lowest priority (a thread
        /// of this tool at `SCHED_IDLE`) while the second relay runs: what any busy core costs.
        #[arg(long)]
        idle_spinner: bool,
    },
    /// The xAPI output: the fixtures' meeting N times over, statements to a lean receiver (or
    /// to Ralph, a real LRS): statements/s and the relay's CPU per statement.
    Xapi {
        #[arg(long, default_value_t = 200)]
        meetings: usize,
        /// Send to Ralph (scripts/ensure-ralph.sh installs it) instead of a lean receiver.
        #[arg(long)]
        ralph: bool,
    },
    /// Destinations (docs/destinations.md) beside a hook: NATS JetStream, MQTT, AMQP (the
    /// machine's RabbitMQ) and a file, and one HTTP hook to the lean receiver, `events` joins
    /// at once (`--rate 0`) or at `rate` a second: each output's messages/s and p50 / p99 from
    /// the bus to its consumer, and the relay's CPU per event and per message.
    Destinations {
        #[arg(long, default_value_t = 10_000)]
        events: usize,
        #[arg(long, default_value_t = 0)]
        rate: u64,
    },
    /// The loopback limit: a bare client loop (one connection, one request in flight) posting
    /// callback-sized bodies to the lean receiver; no relay.
    Baseline {
        #[arg(long, default_value_t = 20_000)]
        requests: usize,
        #[arg(long, default_value_t = baseline::CALLBACK_BYTES)]
        body_bytes: usize,
    },
    /// The bare loop of `baseline`, run by the tool as a process of its own.
    #[command(hide = true)]
    PostLoop {
        #[arg(long)]
        url: String,
        #[arg(long)]
        requests: usize,
        #[arg(long)]
        body_bytes: usize,
    },
    /// Tenants: each creates a hook (one in ten to a closed port) and gets a meeting: the
    /// time of a tenant's create, the series the relay exports, the audit's cost in Redis.
    Tenancy {
        #[arg(long, default_value_t = 1_000)]
        tenants: usize,
    },
    /// Edges (docs/pool.md) on loopback, each on a BBB server of its own publishing at a fixed
    /// rate into one pool store: latency to the store, loss, each edge's CPU per message and
    /// RSS; with --outage-s, the store stopped that long mid-run and the catch-up.
    Edges {
        #[arg(long, default_value_t = 20)]
        edges: usize,
        /// Messages a second, per edge.
        #[arg(long, default_value_t = 500)]
        rate: u64,
        #[arg(long, default_value_t = 30)]
        seconds: u64,
        #[arg(long, default_value_t = 0)]
        outage_s: u64,
    },
    /// A pool (docs/pool.md): edges on loopback into one store, taken by two pool relays as a
    /// fleet with one hook per meeting, all to one receiver: latency from the bus to the
    /// receiver, loss, the relays' CPU per event and the edges' per message; with --outage-s,
    /// the store stopped that long mid-run and the catch-up.
    Pool {
        #[arg(long, default_value_t = 20)]
        edges: usize,
        /// Meetings (and hooks) a server.
        #[arg(long, default_value_t = 50)]
        meetings: usize,
        /// Events a second, per server.
        #[arg(long, default_value_t = 500)]
        rate: u64,
        #[arg(long, default_value_t = 20)]
        seconds: u64,
        #[arg(long, default_value_t = 0)]
        outage_s: u64,
    },
    /// hooks/list and hooks/create throughput with wrk.
    Api {
        #[arg(long, default_value_t = 1_000)]
        hooks: usize,
        #[arg(long, default_value_t = 10)]
        seconds: u64,
    },
}

fn main() {
    let args = Args::parse();
    if let Some(Scenario::PostLoop {
        url,
        requests,
        body_bytes,
    }) = &args.scenario
    {
        baseline::post_loop(url, *requests, *body_bytes);
        return;
    }
    tokio::runtime::Runtime::new()
        .expect("a runtime")
        .block_on(scenarios(args));
}

async fn scenarios(args: Args) {
    let scenario = args.scenario.clone().unwrap_or(Scenario::Burst {
        events: 20_000,
        hooks: 1,
        slow_hooks: 0,
        slow_ms: 50,
    });
    let bins = if args.relay_bins.is_empty() {
        vec![support::process::binary()]
    } else {
        args.relay_bins.clone()
    };
    // Kept for the whole run: the relays export to it.
    let collector = match args.otlp {
        true => Some(sink::Sink::start(std::time::Duration::ZERO).await),
        false => None,
    };
    let mut results: Vec<Vec<scenario::Figures>> = vec![Vec::new(); bins.len()];
    for run in 0..args.runs {
        for (b, bin) in bins.iter().enumerate() {
            let setup = launch::Setup {
                bin: bin.clone(),
                max_unacked: args.max_unacked,
                plugins: args.plugins.clone(),
                instances: args.instances,
                spread: !args.no_spread,
                cluster_store: args.cluster_store,
                attempt_log: args.attempt_log,
                retain: args.retain.clone(),
                tenants: args.tenants,
                receiver_rate: args.receiver_rate,
                metrics: matches!(scenario, Scenario::Tenancy { .. }),
                redis_args: args.redis_args.clone(),
                otlp: collector.as_ref().map(|c| c.url("")),
            };
            let figures = scenario::run(&scenario, &setup).await;
            println!("run {} {}: {}", run + 1, bin.display(), figures.line());
            results[b].push(figures);
        }
    }
    if let Some(c) = &collector {
        println!("otlp: {} exports taken by the collector", c.count());
    }
    if args.runs > 1 || bins.len() > 1 {
        let medians: Vec<scenario::Figures> = results.iter().map(|r| scenario::median(r)).collect();
        for (bin, m) in bins.iter().zip(&medians) {
            println!("median {}: {}", bin.display(), m.line());
        }
        if let [old, new] = medians.as_slice() {
            println!("ratio new/old: {}", new.ratio_line(old));
        }
    }
    // Last: each build's callbacks/s over the bare loop's POSTs/s (medians of the runs' ratios).
    let to_baseline: Vec<f64> = results
        .iter()
        .filter_map(|r| scenario::median(r).get("ratio_to_baseline"))
        .collect();
    if let [.., last] = to_baseline.as_slice() {
        if let [old, _] = to_baseline.as_slice() {
            println!("ratio to baseline of {}: {old:.3}", bins[0].display());
        }
        println!("ratio to baseline: {last:.3}");
    }
}
