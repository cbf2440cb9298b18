//! `slow-plugin`: what a slow plugin costs the hooks outside its scope. Each run starts two
//! relays, one after the other, on fresh Redis servers: without any plugin, then with the test
//! plugin `loop` scoped to the slow hooks; both get one plugin-free hook (id 1) and the slow
//! hooks (ids 2 and up), and the same events at the same rate.

use std::time::{Duration, Instant};

use crate::{
    launch::{Relay, Setup},
    scenario::{Figures, in_order, latencies, percentile, publish_at_rate, wait_all},
    sink::Sink,
    support::{PluginDir, TestRedis},
};

/// One side's parameters.
pub(crate) struct Side {
    pub rate: u64,
    pub total: usize,
    pub slow_hooks: usize,
    /// What one call of the plugin costs (its deadline).
    pub plugin_ms: u64,
    pub instances: u32,
    /// The plugin's crate in plugins/.
    pub plugin: String,
    /// `[plugins] cpu_priority`.
    pub priority: String,
    /// A control (when not 0): no plugin; the slow hooks' receivers take this many ms a call.
    pub receiver_ms: u64,
    /// A control: no plugin; a thread of this tool spins at `SCHED_IDLE` during the second run.
    pub idle_spinner: bool,
}

/// What one side measured.
struct Measured {
    free_p99_ms: f64,
    /// Callbacks per second of the slow hooks, from the first publish to their last arrival.
    slow_per_s: f64,
    ok: bool,
}

pub(crate) async fn slow_plugin(setup: &Setup, side: &Side) -> Figures {
    let without = measure(setup, side, false).await;
    let with = measure(setup, side, true).await;
    let mut f = Figures {
        ok: without.ok && with.ok,
        ..Figures::default()
    };
    f.push("free_p99_ms_without", without.free_p99_ms);
    f.push("free_p99_ms_with", with.free_p99_ms);
    f.push("free_p99_ratio", with.free_p99_ms / without.free_p99_ms);
    f.push("slow_callbacks_per_s", with.slow_per_s);
    f
}

async fn measure(setup: &Setup, side: &Side, slow: bool) -> Measured {
    let plugin = slow;
    let redis = TestRedis::start().await;
    let dir = PluginDir::new();
    let mut extra = format!("max_queue = {}\n", side.total);
    let plugin = plugin && side.receiver_ms == 0 && !side.idle_spinner;
    let _spinner = (slow && side.idle_spinner).then(Spinner::start);
    let slow_delay = if slow && side.receiver_ms > 0 {
        Duration::from_millis(side.receiver_ms)
    } else {
        Duration::ZERO
    };
    if plugin {
        let ids: Vec<String> = (2..side.slow_hooks + 2).map(|i| i.to_string()).collect();
        let toml = format!(
            "on_error = \"pass\"\ntimeout_ms = {}\nmax_failures = 1000000000\nmax_instances = {}\n[scope]\nhooks = [{}]\n",
            side.plugin_ms,
            side.instances,
            ids.join(", ")
        );
        dir.add("50-slow", &side.plugin, Some(&toml));
        extra.push_str(&format!(
            "[plugins]\ndir = \"{}\"\ncache_dir = \"{}\"\ncpu_priority = \"{}\"\n",
            dir.path().display(),
            dir.path().join(".cache").display(),
            side.priority
        ));
    }
    let (relay, _) = Relay::start(setup, &redis, &extra).await;
    let free = Sink::start(Duration::ZERO).await;
    assert_eq!(relay.create_hook(&free.url("/free")).await, 1);
    let mut slow = Vec::new();
    for i in 0..side.slow_hooks {
        let s = Sink::start(slow_delay).await;
        relay.create_hook(&s.url(&format!("/slow/{i}"))).await;
        slow.push(s);
    }
    let start = Instant::now();
    let published = publish_at_rate(&redis, side.total, side.rate).await;
    let free = [free];
    wait_all(&free, side.total).await;
    wait_all(&slow, side.total).await;
    let last = slow
        .iter()
        .filter_map(Sink::last_arrival)
        .max()
        .unwrap_or(start);
    let free_latencies = latencies(&free, &published);
    let ok = free
        .iter()
        .chain(&slow)
        .all(|s| in_order(s, side.total, false));
    relay.kill9().await;
    Measured {
        free_p99_ms: percentile(&free_latencies, 99.0),
        slow_per_s: (side.total * side.slow_hooks) as f64
            / last.duration_since(start).as_secs_f64().max(1e-9),
        ok,
    }
}

/// A thread that keeps one core busy at the lowest priority until dropped.
struct Spinner(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Spinner {
    fn start() -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            // SAFETY: lowers this thread's own policy; `param` outlives the call.
            unsafe {
                let param = libc::sched_param { sched_priority: 0 };
                libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
            }
            while !flag.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        Self(stop)
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
