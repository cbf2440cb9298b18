//! The plugin threads' priorities, and the move of calls that wait too long to start.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;

use super::{CpuPriority, PluginThreads, RESCUED, STARVED};

/// The policy and the name of the thread that ran a call.
fn whoami() -> (libc::c_int, Option<String>) {
    // SAFETY: sched_getscheduler reads the calling thread's policy.
    let policy = unsafe { libc::sched_getscheduler(0) };
    (policy, std::thread::current().name().map(String::from))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_runs_calls_at_idle_priority_and_moves_those_that_cannot_start() {
    let starved = Counter::default();
    let relay = PluginThreads::new(CpuPriority::Auto, starved.clone());
    // SAFETY: as in `whoami`.
    assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_OTHER);

    // The relay's pools: idle threads.
    let (policy, name) = relay.run(whoami).await.expect("ran");
    assert_eq!(policy, libc::SCHED_IDLE);
    assert_eq!(name.as_deref(), Some("hookrelay-plugin"));

    // Idle threads that cannot start a call (a saturated machine gives them no CPU; here the
    // pool's one thread is busy): after STARVED the call moves to the relay's priority.
    let small = std::sync::Arc::new(PluginThreads::named(
        CpuPriority::Auto,
        starved.clone(),
        "test-idle",
        Some(1),
    ));
    let busy = {
        let small = small.clone();
        tokio::spawn(async move { small.run(|| std::thread::sleep(STARVED * 3)).await })
    };
    // Part of the scenario: the busy call must have taken the pool's one thread first.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (policy, name) = small.run(whoami).await.expect("ran");
    assert_eq!(policy, libc::SCHED_OTHER);
    assert_eq!(name.as_deref(), Some("hookrelay-plugin-rescue"));
    assert_eq!(starved.get(), 1);

    // The next calls go straight to the relay's priority for a while, then to idle again.
    let (_, name) = small.run(whoami).await.expect("ran");
    assert_eq!(name.as_deref(), Some("hookrelay-plugin-rescue"));
    busy.await.expect("joined").expect("ran");
    // Part of the scenario: the rescue window is real time on real threads.
    tokio::time::sleep(RESCUED).await;
    let (policy, name) = small.run(whoami).await.expect("ran");
    assert_eq!(policy, libc::SCHED_IDLE);
    assert_eq!(name.as_deref(), Some("test-idle"));
    assert_eq!(starved.get(), 1);

    // A panic is an error, not a caller left waiting.
    let panicked = relay
        .run(|| -> u8 { panic!("a plugin call that panics") })
        .await;
    assert!(panicked.is_err());
}

/// Two relays in one process (as the integration tests run them): each its own priority and
/// its own count, whichever started first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_in_one_process_keep_their_own_priority_and_count() {
    let (idle_count, normal_count) = (Counter::default(), Counter::default());
    let idle = PluginThreads::new(CpuPriority::Idle, idle_count.clone());
    let normal = PluginThreads::new(CpuPriority::Normal, normal_count.clone());
    let (policy, _) = idle.run(whoami).await.expect("ran");
    assert_eq!(policy, libc::SCHED_IDLE);
    let (policy, _) = normal.run(whoami).await.expect("ran");
    assert_eq!(policy, libc::SCHED_OTHER);
    // A third started later with another priority does not take the first one's.
    let low = PluginThreads::new(CpuPriority::Low, Counter::default());
    // SAFETY: getpriority reads the calling thread's nice value.
    let nice = || unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
    let ours = nice();
    let theirs = low.run(nice).await.expect("ran");
    assert!(theirs > ours, "{theirs} <= {ours}");
    assert_eq!((idle_count.get(), normal_count.get()), (0, 0));
    // Dropped inside the runtime: the pools stop without blocking it.
    drop((idle, normal, low));
}
