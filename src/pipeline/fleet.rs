//! The fleet side of the wiring: an instance without the lease keeps the sources' messages
//! ([`Backlog`]) until it takes the lease; then it reads where the last holder stood and hands
//! the rest on to be queued first. The holder renews the lease and stops the relay the moment
//! it is lost (its service manager starts it again, as an instance without the lease). With
//! delivery spread, every instance also delivers its share of the hooks from the start
//! ([`spread`]).

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use crate::store_conn::StoreConn;
use redis::AsyncCommands;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::share::Balancer;
use crate::{
    base::sources::SourceTable,
    bus::BusMessage,
    config::FleetConfig,
    delivery::{ack::Acker, held::Held, queue::DeliveryContext},
    fleet::{
        backlog::{Backlog, Resume},
        cursor::{self, Cursor},
        lease::Lease,
    },
    hooks::Registry,
    metrics::Metrics,
};

/// Starts delivering this instance's share of the hooks: the balancer of delivery leases and
/// the listener of what the queue writer announces. Returns the queues delivered here.
pub fn spread(
    delivery: &Arc<DeliveryContext>,
    instance: &str,
    config: &FleetConfig,
    registry: &Arc<Registry>,
    acker: &Arc<Acker>,
) -> Arc<Held> {
    let held = Held::new(delivery.clone());
    let balancer = Balancer::new(
        instance.to_string(),
        Duration::from_millis(config.lease_ms),
        delivery.conn.clone(),
        held.clone(),
        registry.clone(),
        acker.clone(),
        delivery.metrics.clone(),
        delivery.token.clone(),
    );
    delivery.tracker.spawn(balancer.run());
    delivery.tracker.spawn(super::share::listen(
        held.clone(),
        delivery.conn.clone(),
        delivery.token.clone(),
    ));
    held
}

/// Keeps the bus messages until this instance takes the lease; then returns, in order, those
/// the last holder had not queued. `None` when the relay stops first.
pub async fn follow(
    bus: &mut mpsc::Receiver<BusMessage>,
    lease: &Lease,
    conn: &StoreConn,
    config: &FleetConfig,
    sources: &SourceTable,
    metrics: &Metrics,
    token: &CancellationToken,
) -> Option<Vec<BusMessage>> {
    let mut backlog = Backlog::new(
        sources.len(),
        Duration::from_secs(config.buffer_s),
        usize::try_from(config.buffer_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
    );
    let mut tick = tokio::time::interval(lease.period());
    tracing::info!(instance = lease.owner(), "waiting for the fleet lease");
    loop {
        tokio::select! {
            () = token.cancelled() => return None,
            m = bus.recv() => match m {
                Some(m) => backlog.push(m),
                None => return None,
            },
            _ = tick.tick() => {
                match lease.try_take(&mut conn.clone()).await {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e, "cannot ask the store for the fleet lease"),
                }
            }
        }
    }
    // Whatever arrived meanwhile is kept too.
    while let Ok(m) = bus.try_recv() {
        backlog.push(m);
    }
    let mut cursors = Vec::with_capacity(sources.len());
    for i in 0..sources.len() {
        let name = sources.name(u16::try_from(i).unwrap_or(0));
        let stored: Option<String> = loop {
            match conn.clone().get(cursor::key(name)).await {
                Ok(v) => break v,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read a source's cursor; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(200)) => {}
                        () = token.cancelled() => return None,
                    }
                }
            }
        };
        cursors.push(stored.as_deref().and_then(Cursor::parse));
    }
    let kept = backlog.len();
    let (resume, found) = backlog.after(&cursors);
    for (i, how) in found.iter().enumerate() {
        let source = sources.name(u16::try_from(i).unwrap_or(0));
        if *how == Resume::CursorNotFound {
            metrics.fleet.cursor_not_found(source);
            tracing::warn!(%source, "the last holder's place in this source was not among the messages kept: all of them are queued, some perhaps again");
        }
    }
    metrics.fleet.takeovers.inc();
    metrics.fleet.resumed.inc_by(resume.len() as u64);
    tracing::info!(
        instance = lease.owner(),
        kept,
        queued_first = resume.len(),
        "took the fleet lease"
    );
    Some(resume)
}

/// Renews the lease until the relay stops (then gives it up) or it is lost (then sets `lost`
/// and stops the relay).
pub async fn hold(lease: Lease, conn: StoreConn, lost: Arc<AtomicBool>, token: CancellationToken) {
    let mut tick = tokio::time::interval(lease.period());
    loop {
        tokio::select! {
            () = token.cancelled() => {
                if lease.is_held() && let Err(e) = lease.release(&mut conn.clone()).await {
                    tracing::warn!(error = %e, "cannot give the fleet lease up: another instance takes it when it runs out");
                }
                return;
            }
            _ = tick.tick() => {}
        }
        let renewed = lease.renew(&mut conn.clone()).await;
        match renewed {
            Ok(true) => continue,
            Ok(false) => tracing::error!("the fleet lease is another instance's now: stopping"),
            Err(e) if lease.is_held() => {
                tracing::warn!(error = %e, "cannot renew the fleet lease; retrying");
                continue;
            }
            Err(e) => tracing::error!(error = %e, "the fleet lease ran out unrenewed: stopping"),
        }
        lost.store(true, Ordering::SeqCst);
        token.cancel();
        return;
    }
}
