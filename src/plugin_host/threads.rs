//! The threads plugin calls run on: a blocking pool of their own whose threads may run at a
//! lower CPU priority (`[plugins] cpu_priority`: `idle` takes only CPU time nothing else wants,
//! `low` is ten nice steps down, `normal`, the default, is the relay's own), so that on a
//! machine short of cores a plugin that burns CPU can be kept from slowing the relay's own
//! work (the bus, the other hooks' callbacks, the API).

use std::sync::{LazyLock, OnceLock};

use tokio::{runtime::Runtime, task::JoinError};

use crate::config::CpuPriority;

/// How many nice steps plugin threads are below the relay's own with [`CpuPriority::Low`].
const NICE_STEPS: libc::c_int = 10;

/// Set once at start from the configuration; [`CpuPriority::default`] until then.
static PRIORITY: OnceLock<CpuPriority> = OnceLock::new();

/// Sets the plugin threads' priority (before the first plugin call; later calls change
/// nothing).
pub fn set_priority(priority: CpuPriority) {
    let _ = PRIORITY.set(priority);
}

/// The plugin threads' runtime; `None` when it cannot be built (plugins then run on tokio's
/// blocking pool at the relay's priority).
static THREADS: LazyLock<Option<Runtime>> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("hookrelay-plugin")
        .on_thread_start(lower_priority)
        .build()
        .inspect_err(|e| tracing::warn!(error = %e, "cannot start the plugin threads; plugins run at the relay's priority"))
        .ok()
});

/// Runs `f` (plugin calls) on a plugin thread; its result once done.
///
/// # Errors
/// When `f` panicked.
pub async fn run<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<R, JoinError> {
    match &*THREADS {
        Some(rt) => rt.spawn_blocking(f).await,
        None => tokio::task::spawn_blocking(f).await,
    }
}

/// Lowers the calling thread's priority as configured. Only this thread: on Linux a thread id
/// given to `setpriority` or `sched_setscheduler` names one thread.
fn lower_priority() {
    let priority = PRIORITY.get().copied().unwrap_or_default();
    // SAFETY: gettid, getpriority, setpriority and sched_setscheduler touch no memory of the
    // process but `param`, which outlives the call; a failure (not expected: lowering one's own
    // priority needs no privilege) leaves the priority as it was.
    unsafe {
        let tid = libc::gettid();
        match priority {
            CpuPriority::Normal => {}
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
mod tests {
    #[tokio::test]
    async fn plugin_calls_run_on_threads_that_take_only_idle_cpu() {
        super::set_priority(crate::config::CpuPriority::Idle);
        // SAFETY: sched_getscheduler reads the calling thread's policy.
        let policy = || unsafe { libc::sched_getscheduler(0) };
        assert_eq!(policy(), libc::SCHED_OTHER);
        let theirs = super::run(policy).await.expect("ran");
        assert_eq!(theirs, libc::SCHED_IDLE);
        let name = super::run(|| std::thread::current().name().map(String::from))
            .await
            .expect("ran");
        assert_eq!(name.as_deref(), Some("hookrelay-plugin"));
    }
}
