//! The plugin threads' priorities, and the move of calls that wait too long to start.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;

use super::{CpuPriority, Pools, RESCUED, STARVED, configure, pool, run};

/// The policy and the name of the thread that ran a call.
fn whoami() -> (libc::c_int, Option<String>) {
    // SAFETY: sched_getscheduler reads the calling thread's policy.
    let policy = unsafe { libc::sched_getscheduler(0) };
    (policy, std::thread::current().name().map(String::from))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_runs_calls_at_idle_priority_and_moves_those_that_cannot_start() {
    let starved = Counter::default();
    configure(CpuPriority::Auto, starved.clone());
    // SAFETY: as in `whoami`.
    assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_OTHER);

    // The relay's pools: idle threads.
    let (policy, name) = run(whoami).await.expect("ran");
    assert_eq!(policy, libc::SCHED_IDLE);
    assert_eq!(name.as_deref(), Some("hookrelay-plugin"));

    // Idle threads that cannot start a call (a saturated machine gives them no CPU; here the
    // pool's one thread is busy): after STARVED the call moves to the relay's priority.
    // Leaked: a runtime may not be dropped inside another.
    let pools: &'static Pools = Box::leak(Box::new(Pools::new(pool(
        "test-idle",
        CpuPriority::Idle,
        Some(1),
    ))));
    let busy = pools.run(false, || std::thread::sleep(STARVED * 3));
    let busy = tokio::spawn(busy);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (policy, name) = pools.run(true, whoami).await.expect("ran");
    assert_eq!(policy, libc::SCHED_OTHER);
    assert_eq!(name.as_deref(), Some("hookrelay-plugin-rescue"));
    assert_eq!(starved.get(), 1);

    // The next calls go straight to the relay's priority for a while, then to idle again.
    let (_, name) = pools.run(true, whoami).await.expect("ran");
    assert_eq!(name.as_deref(), Some("hookrelay-plugin-rescue"));
    busy.await.expect("joined").expect("ran");
    tokio::time::sleep(RESCUED).await;
    let (policy, name) = pools.run(true, whoami).await.expect("ran");
    assert_eq!(policy, libc::SCHED_IDLE);
    assert_eq!(name.as_deref(), Some("test-idle"));
    assert_eq!(starved.get(), 1);

    // A panic is an error, not a caller left waiting.
    let panicked = run(|| -> u8 { panic!("a plugin call that panics") }).await;
    assert!(panicked.is_err());
}
