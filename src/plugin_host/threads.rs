//! The threads plugin calls run on: pools of their own whose threads may run at a lower CPU
//! priority (`[plugins] cpu_priority`), so that on a machine short of cores a plugin that burns
//! CPU does not slow the relay's own work (the bus, the other hooks' callbacks, the API).
//!
//! `auto` runs calls on threads that take only CPU time nothing else wants (Linux's
//! `SCHED_IDLE`); a call that has not started within [`STARVED`] (the machine is saturated)
//! moves to a thread at the relay's priority, and so do the calls of the next [`RESCUED`].
//! Threads are not raised back from `SCHED_IDLE`: an unprivileged process may not. A call
//! that has started at idle priority still waits for CPU on a saturated machine, so `normal`
//! stays the default.

use std::{
    sync::{
        Arc, LazyLock, Mutex, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use prometheus_client::metrics::counter::Counter;
use tokio::{runtime::Runtime, sync::oneshot};

use crate::config::CpuPriority;

/// How many nice steps plugin threads are below the relay's own with [`CpuPriority::Low`].
const NICE_STEPS: libc::c_int = 10;

/// How long a call may wait for an idle-priority thread to start it before it moves to a
/// thread at the relay's priority (`auto`).
pub(crate) const STARVED: Duration = Duration::from_millis(500);

/// After a call was moved, how long new calls go straight to the relay's priority before idle
/// threads are tried again (`auto`).
pub(crate) const RESCUED: Duration = Duration::from_secs(2);

/// A plugin call that did not finish: it panicked outside the chain's own guard.
#[derive(Debug, thiserror::Error)]
#[error("the plugin call panicked")]
pub(crate) struct Panicked;

/// The threads one relay's plugin calls run on, at its `cpu_priority`, and its count of calls
/// moved off idle threads. Owned by the relay (its [`super::Plugins`]): two relays in one
/// process each have their own. The pools start at the first call.
pub(crate) struct PluginThreads {
    priority: CpuPriority,
    /// `hookrelay_plugin_starved_total`: calls moved off idle threads.
    starved: Counter,
    /// At the configured priority (`auto`: idle).
    first: OnceLock<Option<Runtime>>,
    /// For `auto`: at the relay's priority, for calls that starved on `first`.
    rescue: OnceLock<Option<Runtime>>,
    /// Until when (milliseconds since [`START`]) new calls go straight to `rescue`.
    rescuing_until: AtomicU64,
    /// The first pool's name and most threads (tests make small ones).
    first_pool: (&'static str, Option<usize>),
}

impl PluginThreads {
    pub(crate) fn new(priority: CpuPriority, starved: Counter) -> Self {
        Self::named(priority, starved, "hookrelay-plugin", None)
    }

    fn named(
        priority: CpuPriority,
        starved: Counter,
        name: &'static str,
        threads: Option<usize>,
    ) -> Self {
        Self {
            priority,
            starved,
            first: OnceLock::new(),
            rescue: OnceLock::new(),
            rescuing_until: AtomicU64::new(0),
            first_pool: (name, threads),
        }
    }

    fn first(&self) -> &Option<Runtime> {
        self.first.get_or_init(|| {
            let at = match self.priority {
                CpuPriority::Auto => CpuPriority::Idle,
                p => p,
            };
            pool(self.first_pool.0, at, self.first_pool.1)
        })
    }

    fn rescue(&self) -> &Option<Runtime> {
        self.rescue
            .get_or_init(|| pool("hookrelay-plugin-rescue", CpuPriority::Normal, None))
    }

    /// Runs `f` (plugin calls) on a plugin thread; its result once done. With `auto`, a call
    /// that has not started within [`STARVED`] moves to a thread at the relay's priority (and
    /// the calls of the next [`RESCUED`] go there at once).
    ///
    /// # Errors
    /// When `f` panicked.
    pub(crate) async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, Panicked> {
        let (tx, mut rx) = oneshot::channel();
        let slot: Slot<R> = Arc::new(Mutex::new(Some((Box::new(f), tx))));
        if self.priority != CpuPriority::Auto {
            spawn(self.first(), slot);
            return rx.await.map_err(|_| Panicked);
        }
        if now_ms() < self.rescuing_until.load(Ordering::Relaxed) {
            spawn(self.rescue(), slot);
            return rx.await.map_err(|_| Panicked);
        }
        spawn(self.first(), slot.clone());
        if let Ok(done) = tokio::time::timeout(STARVED, &mut rx).await {
            return done.map_err(|_| Panicked);
        }
        let waiting = slot.lock().map(|s| s.is_some()).unwrap_or(false);
        if waiting {
            let until = now_ms() + RESCUED.as_millis() as u64;
            self.rescuing_until.store(until, Ordering::Relaxed);
            if self.starved.inc() == 0 {
                tracing::info!(
                    "plugin calls wait for CPU at idle priority (the machine is saturated); such calls move to threads at the relay's priority (hookrelay_plugin_starved counts them)"
                );
            }
            spawn(self.rescue(), slot);
        }
        rx.await.map_err(|_| Panicked)
    }
}

impl Drop for PluginThreads {
    /// The pools stop without waiting: a relay may be dropped inside an async task, where a
    /// runtime must not block.
    fn drop(&mut self) {
        for pool in [self.first.take(), self.rescue.take()]
            .into_iter()
            .flatten()
            .flatten()
        {
            pool.shutdown_background();
        }
    }
}

/// A pool of plugin threads at one priority; `None` when it cannot be built (plugins then run
/// on tokio's blocking pool at the relay's priority).
fn pool(name: &'static str, at: CpuPriority, threads: Option<usize>) -> Option<Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(1)
        .thread_name(name)
        .on_thread_start(move || lower_priority(at));
    if let Some(n) = threads {
        builder.max_blocking_threads(n);
    }
    builder
        .build()
        .inspect_err(|e| tracing::warn!(error = %e, "cannot start the plugin threads; plugins run at the relay's priority"))
        .ok()
}

static START: LazyLock<Instant> = LazyLock::new(Instant::now);

fn now_ms() -> u64 {
    START.elapsed().as_millis() as u64
}

/// A call waiting for the first thread that takes it, and where its result goes.
type Slot<R> = Arc<Mutex<Option<(Box<dyn FnOnce() -> R + Send>, oneshot::Sender<R>)>>>;

/// Takes the call out of `slot` (unless another thread took it first) and runs it.
fn runner<R: Send + 'static>(slot: Slot<R>) -> impl FnOnce() + Send + 'static {
    move || {
        let taken = slot.lock().map(|mut s| s.take()).unwrap_or(None);
        if let Some((f, tx)) = taken {
            let _ = tx.send(f());
        }
    }
}

fn spawn<R: Send + 'static>(pool: &Option<Runtime>, slot: Slot<R>) {
    match pool {
        Some(rt) => drop(rt.spawn_blocking(runner(slot))),
        None => drop(tokio::task::spawn_blocking(runner(slot))),
    }
}

/// Lowers the calling thread's priority to `at`. Only this thread: on Linux a thread id given
/// to `setpriority` or `sched_setscheduler` names one thread.
fn lower_priority(at: CpuPriority) {
    // SAFETY: gettid, getpriority, setpriority and sched_setscheduler touch no memory of the
    // process but `param`, which outlives the call; a failure (not expected: lowering one's own
    // priority needs no privilege) leaves the priority as it was.
    unsafe {
        let tid = libc::gettid();
        match at {
            CpuPriority::Normal | CpuPriority::Auto => {}
            CpuPriority::Low => {
                let now = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
                let nice = (now + NICE_STEPS).min(19);
                libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
            }
            CpuPriority::Idle => {
                let param = libc::sched_param { sched_priority: 0 };
                libc::sched_setscheduler(tid, libc::SCHED_IDLE, &param);
            }
        }
    }
}

#[cfg(test)]
mod tests;
