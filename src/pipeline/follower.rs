//! The fleet side of the wiring: an instance without the lease keeps the sources' messages
//! ([`Backlog`]) and says how far back they reach ([`reach`]) until it takes the lease, which
//! it asks for only when it is the instance to resume; then it reads where the last holder
//! stood and hands the rest on to be queued first. The holder renews the lease and stops the relay the moment
//! it is lost (its service manager starts it again, as an instance without the lease). With
//! delivery spread, every instance also delivers its share of the hooks from the start
//! ([`spread`]).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use crate::store_conn::StoreConn;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::balancer::Balancer;
use crate::{
    base::{ids::HookId, sources::SourceTable},
    bus::BusMessage,
    config::FleetConfig,
    delivery::{Acker, DeliveryContext, Held},
    fleet::{
        AlreadyQueued, Backlog, Cursor, Decision, Lease, LeaseStop, Mark, Reach, Resume, cursor,
        mark, reach,
    },
    hooks::Registry,
    metrics::Metrics,
};

/// Starts delivering this instance's share of the hooks: the balancer of delivery leases and
/// the listener of what the queue writer announces. Returns the queues delivered here.
pub(super) fn spread(
    delivery: &Arc<DeliveryContext>,
    instance: &str,
    config: &FleetConfig,
    registry: &Arc<Registry>,
    acker: &Arc<Acker>,
) -> Arc<Held> {
    let held = Held::new(delivery.clone());
    let (conn, metrics) = (delivery.queues().conn(), delivery.books().metrics());
    let (token, tracker) = (delivery.control().token(), delivery.control().tracker());
    let balancer = Balancer::new(
        instance.to_string(),
        Duration::from_millis(config.lease_ms),
        conn.clone(),
        held.clone(),
        registry.clone(),
        acker.clone(),
        metrics.clone(),
        token.clone(),
    );
    tracker.spawn(balancer.run());
    tracker.spawn(super::balancer::listen(
        held.clone(),
        conn.clone(),
        token.clone(),
    ));
    held
}

/// What a new holder of the lease queues first.
#[derive(Debug, Default)]
pub(super) struct Resumed {
    /// In order, the messages after the last holder's cursors.
    pub(super) messages: Vec<BusMessage>,
    /// The cursors, by source.
    pub(super) cursors: Vec<Option<Cursor>>,
    /// Callbacks of `messages` already queued (a Redis Cluster store: [`mark`]).
    pub(super) queued: AlreadyQueued,
}

/// Keeps the bus messages until this instance takes the lease; then returns, in order, those
/// the last holder had not queued. `None` when the relay stops first.
pub(super) async fn follow(
    bus: &mut mpsc::Receiver<BusMessage>,
    follower: Follower<'_>,
    token: &CancellationToken,
) -> Option<Resumed> {
    let Follower {
        lease,
        conn,
        sources,
        metrics,
        ..
    } = follower;
    let mut state = FollowState::new(&follower);
    let mut tick = tokio::time::interval(lease.period());
    tracing::info!(instance = lease.owner(), "waiting for the fleet lease");
    loop {
        tokio::select! {
            () = token.cancelled() => {
                if let Err(e) = reach::leave(&mut conn.clone(), lease.owner()).await {
                    tracing::debug!(error = %e, "cannot take this instance's record out of the store");
                }
                return None;
            }
            m = bus.recv() => match m {
                Some(m) => state.backlog.push(m),
                None => return None,
            },
            _ = tick.tick() => {
                while let Ok(m) = bus.try_recv() {
                    state.backlog.push(m);
                }
                match state.round(&follower).await {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e, "cannot ask the store for the fleet lease"),
                }
            }
        }
    }
    // Whatever arrived meanwhile is kept too.
    while let Ok(m) = bus.try_recv() {
        state.backlog.push(m);
    }
    let (cursors, marks) = where_the_holder_stood(conn, sources, token).await?;
    let kept = state.backlog.len();
    let (resume, found) = state.backlog.after(&cursors);
    warn_where_not_found(&found, sources, metrics);
    let queued = AlreadyQueued::find(&resume, &cursors, sources, &marks);
    metrics.fleet.takeovers.inc();
    metrics.fleet.resumed.inc_by(resume.len() as u64);
    metrics.fleet.cursor_reachable.set(1);
    tracing::info!(
        instance = lease.owner(),
        kept,
        queued_first = resume.len(),
        marked_hooks = queued.len(),
        "took the fleet lease"
    );
    Some(Resumed {
        messages: resume,
        cursors,
        queued,
    })
}

/// Warns of each source whose last holder's place this instance cannot resume from exactly
/// (`found`, by source), and counts it.
fn warn_where_not_found(found: &[Resume], sources: &SourceTable, metrics: &Metrics) {
    for (i, how) in found.iter().enumerate() {
        let source = sources.name(u16::try_from(i).unwrap_or(0));
        match how {
            Resume::CursorNotFound => {
                metrics.fleet.cursor_not_found(&source);
                tracing::warn!(%source, "the last holder's place in this source was not among the messages kept: all of them are queued, some perhaps again");
            }
            Resume::AcrossGap => {
                metrics.fleet.cursor_not_found(&source);
                tracing::warn!(%source, "this instance's subscription was made again since the last holder's place in this source: what was published in between is lost");
            }
            _ => {}
        }
    }
}

/// [`read_where_the_holder_stood`], again every 200 ms while the store fails; `None` when the
/// relay stops first.
async fn where_the_holder_stood(
    conn: &StoreConn,
    sources: &SourceTable,
    token: &CancellationToken,
) -> Option<(Vec<Option<Cursor>>, Vec<(HookId, Mark)>)> {
    loop {
        match read_where_the_holder_stood(conn, sources).await {
            Ok(read) => return Some(read),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the sources' cursors; retrying");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(200)) => {}
                    () = token.cancelled() => return None,
                }
            }
        }
    }
}

/// The sources' cursors, and on a Redis Cluster the hooks' batch marks.
async fn read_where_the_holder_stood(
    conn: &StoreConn,
    sources: &SourceTable,
) -> redis::RedisResult<(Vec<Option<Cursor>>, Vec<(HookId, Mark)>)> {
    let (_, cursors) = read_cursors(conn, sources).await?;
    let marks = if conn.is_cluster() {
        mark::read(conn).await?
    } else {
        Vec::new()
    };
    Ok((cursors, marks))
}

/// What an instance without the lease needs to follow the holder.
pub(super) struct Follower<'a> {
    pub(super) lease: &'a Lease,
    pub(super) conn: &'a StoreConn,
    pub(super) config: &'a FleetConfig,
    pub(super) sources: &'a SourceTable,
    /// Each source's subscription counter: a new subscription means messages may be missing.
    pub(super) subscriptions: Vec<watch::Receiver<u64>>,
    pub(super) metrics: &'a Metrics,
}

/// A follower's memory: what it kept, and what it last found of each cursor.
struct FollowState {
    backlog: Backlog,
    subscriptions: Vec<watch::Receiver<u64>>,
    /// By source: the cursor read at the last round, and whether it was found then.
    last: Vec<(Option<Cursor>, bool)>,
    /// The instance this one is leaving a free lease to.
    waiting_for: Option<String>,
    /// Since when this instance, unable to resume, has found the lease free with no live
    /// instance able to either.
    unable_since: Option<Instant>,
}

impl FollowState {
    fn new(f: &Follower<'_>) -> Self {
        Self {
            backlog: Backlog::new(
                f.sources.len(),
                Duration::from_secs(f.config.buffer_s),
                usize::try_from(f.config.buffer_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
            ),
            subscriptions: f.subscriptions.clone(),
            last: vec![(None, false); f.sources.len()],
            waiting_for: None,
            unable_since: None,
        }
    }

    /// One round: says in the store how far back this instance reaches and, when the lease
    /// is free and this instance is the one to resume, asks for it. `Ok(true)`: taken.
    async fn round(&mut self, f: &Follower<'_>) -> redis::RedisResult<bool> {
        let now = Instant::now();
        for (i, w) in self.subscriptions.iter_mut().enumerate() {
            if w.has_changed().unwrap_or(false) {
                let epoch = *w.borrow_and_update();
                self.backlog.subscribed(i, epoch, now);
            }
        }
        let (holder, cursors) = read_cursors(f.conn, f.sources).await?;
        let mut states = self.backlog.states(&cursors, now);
        for ((state, cursor), last) in states.iter_mut().zip(&cursors).zip(&mut self.last) {
            // A cursor that moved since it was last found here is most likely one this
            // instance has not received yet (it follows the holder a few messages behind):
            // only one that stays where it is and is not found means this instance lacks it.
            let lagging = state.resume == Resume::CursorNotFound && last.1 && last.0 != *cursor;
            if lagging {
                state.resume = Resume::AfterCursor;
            }
            *last = (cursor.clone(), state.resume == Resume::AfterCursor);
        }
        let names: Vec<std::sync::Arc<str>> = (0..f.sources.len())
            .map(|i| f.sources.name(u16::try_from(i).unwrap_or(0)))
            .collect();
        for (name, s) in names.iter().zip(&states) {
            f.metrics.fleet.set_kept(name, s.kept, s.whole);
        }
        let me = Reach::follower(
            f.lease.owner(),
            &names.iter().map(|n| &**n).collect::<Vec<&str>>(),
            &states,
            Duration::from_secs(f.config.buffer_s),
        );
        f.metrics.fleet.cursor_reachable.set(i64::from(me.able));
        let ttl = Duration::from_millis(f.config.lease_ms);
        let others = reach::report(&mut f.conn.clone(), &me, ttl).await?;
        if !f.config.spread {
            f.metrics.fleet.instances.set(others.len() as i64);
        }
        if holder.is_some() {
            self.waiting_for = None;
            self.unable_since = None;
            return Ok(false);
        }
        match reach::decide(&me, &others) {
            Decision::Take if me.able => f.lease.try_take(&mut f.conn.clone()).await,
            Decision::Take => {
                // No live record can resume better, but records run out while the store is
                // away: one whole lease more for every live instance to say it can.
                let since = *self.unable_since.get_or_insert(now);
                if now.duration_since(since) < ttl {
                    return Ok(false);
                }
                tracing::warn!(
                    instance = f.lease.owner(),
                    "the fleet lease is free and no live instance's kept messages reach back to where the last holder stopped: taking it with what this instance kept"
                );
                f.lease.try_take(&mut f.conn.clone()).await
            }
            Decision::WaitFor(other) => {
                if self.waiting_for.as_ref() != Some(&other) {
                    f.metrics.fleet.deferrals.inc();
                    tracing::info!(
                        instance = f.lease.owner(),
                        resumes = %other,
                        "the fleet lease is free, but this instance's kept messages do not reach back to where the last holder stopped: leaving it to an instance whose do"
                    );
                }
                self.waiting_for = Some(other);
                self.unable_since = None;
                Ok(false)
            }
        }
    }
}

/// The fleet lease's holder (`None`: free) and each source's cursor, in one round trip.
async fn read_cursors(
    conn: &StoreConn,
    sources: &SourceTable,
) -> redis::RedisResult<(Option<String>, Vec<Option<Cursor>>)> {
    let mut pipe = redis::pipe();
    pipe.get(crate::fleet::LEASE_KEY);
    for i in 0..sources.len() {
        pipe.get(cursor::key(&sources.name(u16::try_from(i).unwrap_or(0))));
    }
    let mut values: Vec<Option<String>> = pipe.query_async(&mut conn.clone()).await?;
    if values.is_empty() {
        return Ok((None, Vec::new()));
    }
    let holder = values.remove(0);
    let cursors = values
        .iter()
        .map(|v| v.as_deref().and_then(Cursor::parse))
        .collect();
    Ok((holder, cursors))
}

/// Renews the lease until the relay stops (then gives it up) or it is lost: the store gave it
/// to another instance, or a renewal failed after this instance's own clock says it ran out
/// (then `stop` stops the relay, as the fence does when queueing or sending finds it lost).
/// Each renewal also says in the store that this instance holds it ([`reach`], for `fleet
/// status`).
pub(super) async fn hold(lease: Lease, conn: StoreConn, stop: LeaseStop, token: CancellationToken) {
    let mut tick = tokio::time::interval(lease.period());
    let record = Reach::holder(lease.owner());
    loop {
        tokio::select! {
            () = token.cancelled() => {
                if lease.is_held() && let Err(e) = lease.release(&mut conn.clone()).await {
                    tracing::warn!(error = %e, "cannot give the fleet lease up: another instance takes it when it runs out");
                }
                if let Err(e) = reach::leave(&mut conn.clone(), lease.owner()).await {
                    tracing::debug!(error = %e, "cannot take this instance's record out of the store");
                }
                return;
            }
            _ = tick.tick() => {}
        }
        let renewed = lease.renew(&mut conn.clone()).await;
        if matches!(renewed, Ok(true)) {
            let ttl = lease.period() * 4;
            if let Err(e) = reach::report(&mut conn.clone(), &record, ttl).await {
                tracing::debug!(error = %e, "cannot say in the store that this instance holds the lease");
            }
        }
        let why = match renewed {
            Ok(true) => continue,
            Ok(false) => "the fleet lease is another instance's now".to_string(),
            Err(e) if lease.is_held() => {
                tracing::warn!(error = %e, "cannot renew the fleet lease; retrying");
                continue;
            }
            Err(e) => format!("the fleet lease ran out unrenewed ({e})"),
        };
        stop.lease_lost(&why);
        return;
    }
}
