//! Recovery at start: every hook's durable queue is read back and handed to the dispatcher, in
//! order, and each hook's clock set past the last id its queue ever held; queues of hooks that
//! are gone are deleted.

use redis::aio::ConnectionManager;
use tokio_util::sync::CancellationToken;

use crate::{
    delivery::{journal, queue::Dispatcher},
    hooks::Registry,
    route::Clock,
    shutdown::retry_until_ok,
};

/// Resumes every hook's queue; returns how many callbacks were queued again, or `None` when the
/// relay stopped first.
pub async fn resume_queues(
    conn: &ConnectionManager,
    registry: &Registry,
    dispatcher: &mut Dispatcher,
    clock: &mut Clock,
    token: &CancellationToken,
) -> Option<usize> {
    let snapshot = registry.load();
    let mut total = 0;
    for hook in snapshot.all() {
        let (entries, last) = retry_until_ok(token, "read a hook's queue", || {
            let mut c = conn.clone();
            let id = hook.id;
            async move {
                let last = journal::last_ts(&mut c, id).await?;
                Ok::<_, redis::RedisError>((journal::load(&mut c, id).await?, last))
            }
        })
        .await?;
        clock.observe(hook.id, last);
        if let Some(e) = entries.last() {
            clock.observe(hook.id, e.ts);
        }
        total += entries.len();
        dispatcher.resume(hook, entries);
    }
    let live = |id| snapshot.get(id).is_some();
    match journal::remove_orphans(&mut conn.clone(), live).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(queues = n, "removed the queues of hooks that are gone"),
        Err(e) => tracing::warn!(error = %e, "cannot look for orphaned queues"),
    }
    Some(total)
}
