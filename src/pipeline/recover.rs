//! Recovery at start: each hook's clock is set past the last id its queue ever held and its
//! worker started on what the queue holds, read a page at a time in the background (all hooks
//! at once) while the bus is already processed; queues of hooks that are gone are deleted in the
//! background too. Only the queues' positions are read before the bus is processed. Before
//! that, streams named as by earlier versions are moved to their current names.

use crate::base::ids::{HookId, RecordRef};

use crate::store_conn::StoreConn;
use futures_util::{StreamExt, TryStreamExt};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use std::time::Duration;

use crate::{
    base::redis_keys::lease_key,
    config::Config,
    delivery::{Dispatcher, records},
    fleet::Lease,
    hooks::{HookStore, Registry},
    metrics::Metrics,
    route::Clock,
    shutdown::retry_until_ok,
};

/// Hooks whose positions are read at once.
const PARALLEL: usize = 64;

/// The lock held by the one instance of a fleet moving the queues of an earlier version.
const MOVING_KEY: &str = "hookrelay:queues:moving";
/// How long that lock lasts unrenewed: another instance waits at most this long for a holder
/// that died.
const MOVING_TTL: Duration = Duration::from_secs(10);

/// What a moved hook's delivery lease is set to: held by nobody for a lease's time.
const MOVED_HOLDER: &str = "(queue moved)";

/// Moves the streams of earlier versions to their current names (`delivery::records::legacy_queues`): at start,
/// before this instance delivers anything, and in a fleet again on taking the fleet lease (an
/// instance of the earlier version may have written meanwhile). Streams are merged only with
/// `merge`, which only the one writer of the queues may ask (a relay alone, or the holder of
/// the fleet lease); otherwise only renamed. In a fleet (`instance`), one instance at a time
/// moves them, under a lock. With delivery spread (`hook_lease`, the delivery leases' length),
/// each moved hook's delivery lease is then given to nobody for that long: its deliverer
/// stops at its next renewal, before anyone else can take it, and the next one reads the
/// stream from the hook's cursor, the merged entries after what the deliverer had taken. `None` when the relay stopped first.
pub(super) async fn move_legacy_queues(
    conn: &StoreConn,
    instance: Option<&str>,
    merge: bool,
    hook_lease: Option<Duration>,
    token: &CancellationToken,
) -> Option<()> {
    // A stop during the start does not end it here when the move was made: what the bus
    // handed on meanwhile is still processed at the stop.
    let moved = retry_until_ok(
        token,
        "move the queues named as by an earlier version",
        || move_locked(conn, instance, merge, token),
    )
    .await
    .flatten()?;
    if moved.is_empty() {
        return Some(());
    }
    let callbacks: usize = moved.iter().map(|m| m.entries).sum();
    tracing::info!(
        queues = moved.len(),
        callbacks,
        "moved the queues of an earlier version to this version's key names"
    );
    if let Some(ttl) = hook_lease {
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        retry_until_ok(
            token,
            "set the delivery leases of the moved queues aside",
            || {
                let mut pipe = redis::pipe();
                for m in &moved {
                    pipe.cmd("SET")
                        .arg(lease_key(m.hook))
                        .arg(MOVED_HOLDER)
                        .arg("PX")
                        .arg(ttl_ms)
                        .ignore();
                }
                let mut conn = conn.clone();
                async move { pipe.query_async::<()>(&mut conn).await }
            },
        )
        .await?;
    }
    Some(())
}

/// [`records::legacy_queues`], in a fleet under [`MOVING_KEY`], renewed meanwhile; `None` when
/// the relay stopped while it waited for the lock.
async fn move_locked(
    conn: &StoreConn,
    instance: Option<&str>,
    merge: bool,
    token: &CancellationToken,
) -> redis::RedisResult<Option<Vec<records::Moved>>> {
    let Some(instance) = instance else {
        return records::legacy_queues(conn, merge, false).await.map(Some);
    };
    let lock = Lease::new(MOVING_KEY, instance, MOVING_TTL);
    let mut c = conn.clone();
    while !lock.try_take(&mut c).await? {
        tokio::select! {
            () = token.cancelled() => return Ok(None),
            () = tokio::time::sleep(lock.period() / 10) => {}
        }
    }
    // In a fleet, the other instances may be delivering the hooks meanwhile.
    let work = records::legacy_queues(conn, merge, true);
    tokio::pin!(work);
    let mut tick = tokio::time::interval(lock.period());
    tick.tick().await;
    let result = loop {
        tokio::select! {
            r = &mut work => break r,
            _ = tick.tick() => {
                if !lock.renew(&mut c).await.unwrap_or(lock.is_held()) {
                    // Another instance may be moving them now: stop, and wait for the lock.
                    break Err(redis::RedisError::from((
                        redis::ErrorKind::Client,
                        "lost the lock of the queues' move",
                    )));
                }
            }
        }
    };
    if let Err(e) = lock.release(&mut c).await {
        tracing::warn!(error = %e, "cannot give up the lock of the queues' move: it runs out by itself");
    }
    result.map(Some)
}

/// Resumes every hook's queue; returns how many callbacks they hold and the clock of the
/// hooks' timestamps, each after the last its queue ever held (for the router), or `None`
/// when the relay stopped first.
pub(super) async fn resume_queues(
    conn: &StoreConn,
    registry: &Registry,
    dispatcher: &mut Dispatcher,
    tracker: &TaskTracker,
    token: &CancellationToken,
) -> Option<(usize, Clock)> {
    let snapshot = registry.load();
    let ids: Vec<HookId> = snapshot.all().map(|h| h.id).collect();
    let (positions, last_shared) = retry_until_ok(token, "read the queues' positions", || {
        positions(conn.clone(), ids.clone())
    })
    .await?;
    dispatcher.observe_shared(last_shared);
    let (mut total, mut clock) = (0, Clock::default());
    for (id, pos) in positions {
        clock.observe(id, pos.last_ts);
        if let (Some(hook), true) = (snapshot.get(id), pos.length > 0) {
            total += pos.length;
            dispatcher.recover(hook, pos);
        }
    }
    tracker.spawn(remove_orphans(conn.clone(), snapshot, token.clone()));
    Some((total, clock))
}

/// Every hook's queue position, and the last shared payload reference.
async fn positions(
    conn: StoreConn,
    ids: Vec<HookId>,
) -> Result<(Vec<(HookId, records::Position)>, RecordRef), redis::RedisError> {
    let positions = queue_positions(&conn, ids).await?;
    let last_shared = records::last_shared(&mut conn.clone()).await?;
    Ok((positions, last_shared))
}

/// The queue positions of hooks `ids`, read [`PARALLEL`] at a time.
///
/// # Errors
/// When Redis fails.
pub(super) async fn queue_positions(
    conn: &StoreConn,
    ids: Vec<HookId>,
) -> Result<Vec<(HookId, records::Position)>, redis::RedisError> {
    futures_util::stream::iter(ids)
        .map(|id| {
            let mut c = conn.clone();
            async move { Ok::<_, redis::RedisError>((id, records::position(&mut c, id).await?)) }
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
        records::remove_orphans(conn.clone(), move |id| snapshot.get(id).is_some())
    })
    .await;
    if let Some(n @ 1..) = removed {
        tracing::info!(queues = n, "removed the queues of hooks that are gone");
    }
}

/// Reads the hooks into the registry, imports the reference service's and makes the
/// permanent ones exist. `false` when the relay stopped first.
pub(super) async fn restore_hooks(
    store: &HookStore,
    config: &Config,
    metrics: &Metrics,
    token: &CancellationToken,
) -> bool {
    let restored = retry_until_ok(token, "restore hooks", || {
        store.restore(&config.delivery.permanent_hooks)
    })
    .await;
    let Some(restored) = restored else {
        return false;
    };
    {
        let hooks = store.registry().load();
        metrics.count_hooks(hooks.len(), hooks.counts());
    }
    metrics.hooks_refused.inc_by(restored.refused as u64);
    tracing::info!(
        hooks = restored.hooks,
        refused_hooks = restored.refused,
        "hooks restored from Redis"
    );
    true
}
