//! The fleet lease: a Redis key written with `SET NX PX` by whoever takes it and renewed by a
//! script that checks the owner. The holder knows how long it may act without asking Redis:
//! half the lease from the moment it last sent a renewal that succeeded, which ends before the
//! key can expire in Redis, so that two instances never both believe they hold it.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use crate::store_conn::StoreConn;
use redis::Script;
use tokio_util::sync::CancellationToken;

/// Renews the lease if `ARGV[1]` holds it: 1 renewed, 0 someone else holds it (or nobody).
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
";

/// Gives the lease up if `ARGV[1]` holds it.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

/// One instance's view of the lease.
#[derive(Clone)]
pub(crate) struct Lease {
    key: String,
    owner: String,
    ttl: Duration,
    /// Until when (milliseconds after `epoch`) this instance may act; 0: not held.
    valid_until: Arc<AtomicU64>,
    epoch: Instant,
}

impl Lease {
    pub(crate) fn new(key: impl Into<String>, owner: impl Into<String>, ttl: Duration) -> Self {
        Self {
            key: key.into(),
            owner: owner.into(),
            ttl,
            valid_until: Arc::default(),
            epoch: Instant::now(),
        }
    }

    pub(crate) fn owner(&self) -> &str {
        &self.owner
    }

    /// Whether this instance holds the lease now (by its own clock, with the margin above).
    pub(crate) fn is_held(&self) -> bool {
        self.now_ms() < self.valid_until.load(Ordering::Acquire)
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn held_from(&self, sent_ms: u64) {
        let half = self.ttl.as_millis() as u64 / 2;
        self.valid_until.store(sent_ms + half, Ordering::Release);
    }

    /// Takes the lease if nobody holds it. `Ok(true)`: this instance holds it now.
    ///
    /// # Errors
    /// When Redis cannot be reached.
    pub(crate) async fn try_take(&self, conn: &mut StoreConn) -> redis::RedisResult<bool> {
        let sent = self.now_ms();
        let taken: Option<String> = redis::cmd("SET")
            .arg(&self.key)
            .arg(&self.owner)
            .arg("NX")
            .arg("PX")
            .arg(self.ttl.as_millis() as u64)
            .query_async(conn)
            .await?;
        if taken.is_some() {
            // On the replicas first: a failover must not hand the lease to a second instance.
            conn.replicated().await?;
            self.held_from(sent);
        }
        Ok(taken.is_some())
    }

    /// Renews the lease. `Ok(false)`: it is someone else's (or gone): this instance must stop
    /// acting at once.
    ///
    /// # Errors
    /// When Redis cannot be reached (the lease may still run out).
    pub(crate) async fn renew(&self, conn: &mut StoreConn) -> redis::RedisResult<bool> {
        static SCRIPT: std::sync::LazyLock<Script> =
            std::sync::LazyLock::new(|| Script::new(RENEW));
        let sent = self.now_ms();
        let renewed: i64 = SCRIPT
            .key(&self.key)
            .arg(&self.owner)
            .arg(self.ttl.as_millis() as u64)
            .invoke_async(conn)
            .await?;
        if renewed == 1 {
            self.held_from(sent);
        } else {
            self.valid_until.store(0, Ordering::Release);
        }
        Ok(renewed == 1)
    }

    /// Gives the lease up (at a clean stop), so that another instance takes it at once.
    ///
    /// # Errors
    /// When Redis cannot be reached.
    pub(crate) async fn release(&self, conn: &mut StoreConn) -> redis::RedisResult<()> {
        static SCRIPT: std::sync::LazyLock<Script> =
            std::sync::LazyLock::new(|| Script::new(RELEASE));
        self.valid_until.store(0, Ordering::Release);
        SCRIPT
            .key(&self.key)
            .arg(&self.owner)
            .invoke_async::<i64>(conn)
            .await?;
        Ok(())
    }

    /// How often the holder renews, and a follower tries to take it.
    pub(crate) fn period(&self) -> Duration {
        self.ttl / 4
    }
}

/// The fleet lease is no longer this instance's: it may neither queue nor send.
#[derive(Debug, thiserror::Error)]
#[error("the fleet lease is no longer held")]
pub(crate) struct LeaseLost;

/// What turns a lost lease into the relay's stop, the one place that does: the relay's
/// cancellation, and whether a lost lease caused it (then the relay exits with an error, so that
/// its service manager starts it again, waiting for the lease). Owned by the pipeline, which
/// stops and reports; the fence and the lease's holder call it.
#[derive(Clone, Default)]
pub(crate) struct LeaseStop {
    token: CancellationToken,
    lost: Arc<AtomicBool>,
}

impl LeaseStop {
    pub(crate) fn new(token: CancellationToken) -> Self {
        Self {
            token,
            lost: Arc::default(),
        }
    }

    /// Stops the relay because the lease is lost (`why`, said once). A lease that ends because
    /// the relay is stopping anyway is not lost: that stop stays a clean one.
    pub(crate) fn lease_lost(&self, why: &str) {
        if !self.token.is_cancelled() && !self.lost.swap(true, Ordering::SeqCst) {
            tracing::error!("{why}: stopping");
        }
        self.token.cancel();
    }

    /// Whether a lost lease stopped the relay.
    pub(crate) fn was_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }
}

/// What queueing and sending check first: outside a fleet, nothing; in a fleet, that the lease
/// is still held (by this instance's own clock).
#[derive(Clone)]
pub(crate) struct Fence {
    lease: Option<(Lease, LeaseStop)>,
}

impl Fence {
    /// No fleet: never fenced.
    pub(crate) fn none() -> Self {
        Self { lease: None }
    }

    /// The fence of `lease`; `stop` stops the relay when a check finds the lease lost.
    pub(crate) fn new(lease: Lease, stop: LeaseStop) -> Self {
        Self {
            lease: Some((lease, stop)),
        }
    }

    /// Whether the relay runs in a fleet.
    pub(crate) fn is_fleet(&self) -> bool {
        self.lease.is_some()
    }

    /// Whether this instance may queue or send now: a check only.
    pub(crate) fn check(&self) -> Result<(), LeaseLost> {
        match &self.lease {
            Some((l, _)) if !l.is_held() => Err(LeaseLost),
            _ => Ok(()),
        }
    }

    /// [`Fence::check`], and when the lease is lost, the relay stopped through its
    /// [`LeaseStop`]: what queueing and sending do, since nothing may go on without the lease.
    pub(crate) fn check_or_stop(&self) -> Result<(), LeaseLost> {
        let checked = self.check();
        if let (Err(lost), Some((_, stop))) = (&checked, &self.lease) {
            stop.lease_lost(&lost.to_string());
        }
        checked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unheld() -> Lease {
        Lease::new("k", "me", Duration::from_secs(1))
    }

    #[test]
    fn a_lease_not_held_fails_the_check_and_stops_nothing_itself() {
        let lease = unheld();
        assert!(!lease.is_held());
        let stop = LeaseStop::new(CancellationToken::new());
        assert!(matches!(
            Fence::new(lease, stop.clone()).check(),
            Err(LeaseLost)
        ));
        assert!(
            !stop.was_lost() && !stop.token.is_cancelled(),
            "a check only"
        );
    }

    #[test]
    fn queueing_or_sending_without_the_lease_stops_the_relay_once() {
        let stop = LeaseStop::new(CancellationToken::new());
        let fence = Fence::new(unheld(), stop.clone());
        assert!(fence.check_or_stop().is_err());
        assert!(fence.check_or_stop().is_err());
        assert!(stop.was_lost() && stop.token.is_cancelled());
    }

    #[test]
    fn a_lease_given_up_on_stopping_is_not_lost() {
        let token = CancellationToken::new();
        token.cancel();
        let stop = LeaseStop::new(token);
        assert!(Fence::new(unheld(), stop.clone()).check_or_stop().is_err());
        assert!(!stop.was_lost(), "a clean stop");
    }

    #[test]
    fn a_held_lease_passes_the_check_until_half_its_time_is_gone() {
        let lease = unheld();
        lease.held_from(lease.now_ms());
        assert!(Fence::new(lease, LeaseStop::default()).check().is_ok());
        // A lease of 4 ms is held for 2 ms from its renewal's sending, then no more.
        let short = Lease::new("k", "me", Duration::from_millis(4));
        short.held_from(short.now_ms());
        std::thread::sleep(Duration::from_millis(3));
        assert!(matches!(
            Fence::new(short, LeaseStop::default()).check(),
            Err(LeaseLost)
        ));
    }

    #[test]
    fn outside_a_fleet_the_fence_always_passes() {
        assert!(Fence::none().check_or_stop().is_ok());
    }
}
