//! The fleet lease: a Redis key written with `SET NX PX` by whoever takes it and renewed by a
//! script that checks the owner. The holder knows how long it may act without asking Redis:
//! half the lease from the moment it last sent a renewal that succeeded, which ends before the
//! key can expire in Redis, so that two instances never both believe they hold it.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use crate::store_conn::StoreConn;
use redis::Script;

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

/// What queueing and sending check first: outside a fleet, nothing; in a fleet, that the lease
/// is still held. A check only: the lease's holder (the pipeline's `hold`) is what stops the
/// relay when the lease is lost; until then a failed check only holds the work back.
#[derive(Clone)]
pub(crate) struct Fence {
    lease: Option<Lease>,
}

impl Fence {
    /// No fleet: never fenced.
    pub(crate) fn none() -> Self {
        Self { lease: None }
    }

    pub(crate) fn new(lease: Lease) -> Self {
        Self { lease: Some(lease) }
    }

    /// Whether the relay runs in a fleet.
    pub(crate) fn is_fleet(&self) -> bool {
        self.lease.is_some()
    }

    /// Whether this instance may queue or send now (by its own clock, as [`Lease::is_held`]).
    pub(crate) fn check(&self) -> Result<(), LeaseLost> {
        match &self.lease {
            Some(l) if !l.is_held() => Err(LeaseLost),
            _ => Ok(()),
        }
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
        assert!(matches!(Fence::new(lease).check(), Err(LeaseLost)));
    }

    #[test]
    fn a_held_lease_passes_the_check_until_half_its_time_is_gone() {
        let lease = unheld();
        lease.held_from(lease.now_ms());
        assert!(Fence::new(lease).check().is_ok());
        // A lease of 4 ms is held for 2 ms from its renewal's sending, then no more.
        let short = Lease::new("k", "me", Duration::from_millis(4));
        short.held_from(short.now_ms());
        std::thread::sleep(Duration::from_millis(3));
        assert!(matches!(Fence::new(short).check(), Err(LeaseLost)));
    }

    #[test]
    fn outside_a_fleet_the_fence_always_passes() {
        assert!(Fence::none().check().is_ok());
    }
}
