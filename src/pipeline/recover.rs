//! Recovery at start: each hook's clock is set past the last id its queue ever held and its
//! worker started on what the queue holds, read a page at a time in the background (all hooks
//! at once) while the bus is already processed; queues of hooks that are gone are deleted in the
//! background too. Only the queues' positions are read before the bus is processed.

use crate::store_conn::StoreConn;
use futures_util::{StreamExt, TryStreamExt};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    delivery::{journal, queue::Dispatcher},
    hooks::Registry,
    route::Clock,
    shutdown::retry_until_ok,
};

/// Hooks whose positions are read at once.
const PARALLEL: usize = 64;

/// Resumes every hook's queue; returns how many callbacks they hold, or `None` when the relay
/// stopped first.
pub async fn resume_queues(
    conn: &StoreConn,
    registry: &Registry,
    dispatcher: &mut Dispatcher,
    clock: &mut Clock,
    tracker: &TaskTracker,
    token: &CancellationToken,
) -> Option<usize> {
    let snapshot = registry.load();
    let ids: Vec<u64> = snapshot.all().map(|h| h.id).collect();
    let (positions, last_shared) = retry_until_ok(token, "read the queues' positions", || {
        positions(conn.clone(), ids.clone())
    })
    .await?;
    dispatcher.observe_shared(last_shared);
    let mut total = 0;
    for (id, pos) in positions {
        clock.observe(id, pos.last_ts);
        if let (Some(hook), true) = (snapshot.get(id), pos.length > 0) {
            total += pos.length;
            dispatcher.recover(hook, pos.last_ts, pos.length);
        }
    }
    tracker.spawn(remove_orphans(conn.clone(), snapshot, token.clone()));
    Some(total)
}

/// Every hook's queue position, and the last shared payload reference.
async fn positions(
    conn: StoreConn,
    ids: Vec<u64>,
) -> Result<(Vec<(u64, journal::Position)>, u64), redis::RedisError> {
    let positions = queue_positions(&conn, ids).await?;
    let last_shared = journal::last_shared(&mut conn.clone()).await?;
    Ok((positions, last_shared))
}

/// The queue positions of hooks `ids`, read [`PARALLEL`] at a time.
///
/// # Errors
/// When Redis fails.
pub(super) async fn queue_positions(
    conn: &StoreConn,
    ids: Vec<u64>,
) -> Result<Vec<(u64, journal::Position)>, redis::RedisError> {
    futures_util::stream::iter(ids)
        .map(|id| {
            let mut c = conn.clone();
            async move { Ok::<_, redis::RedisError>((id, journal::position(&mut c, id).await?)) }
        })
        .buffer_unordered(PARALLEL)
        .try_collect()
        .await
}

/// Deletes the queues of hooks not in `snapshot`.
async fn remove_orphans(
    conn: StoreConn,
    snapshot: std::sync::Arc<crate::hooks::Snapshot>,
    token: CancellationToken,
) {
    let removed = retry_until_ok(&token, "remove orphaned queues", || {
        let snapshot = snapshot.clone();
        journal::remove_orphans(conn.clone(), move |id| snapshot.get(id).is_some())
    })
    .await;
    if let Some(n @ 1..) = removed {
        tracing::info!(queues = n, "removed the queues of hooks that are gone");
    }
}
