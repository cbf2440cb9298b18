use super::*;

/// A decision as the tests compare it (errors are not comparable).
#[derive(Debug, PartialEq)]
enum Brief {
    Delivered(Option<Tell>),
    Retry(Duration, bool, Option<Tell>),
    Exhausted(Option<Tell>),
    Refused,
}

fn brief(decision: &Decision) -> Brief {
    match decision {
        Decision::Delivered { tell, .. } => Brief::Delivered(*tell),
        Decision::Retry {
            wait, tried, tell, ..
        } => Brief::Retry(*wait, *tried, *tell),
        Decision::Exhausted { tell, .. } => Brief::Exhausted(*tell),
        Decision::Refused(_) => Brief::Refused,
    }
}

fn decide(
    outcome: Result<u16, DeliveryError>,
    spell: Spell,
    policy: &RetryPolicy,
    failing_after: usize,
) -> (Brief, Spell) {
    let (decision, spell) = judge(Ok(outcome), spell, policy, failing_after);
    (brief(&decision), spell)
}

fn policy(permanent: bool) -> RetryPolicy {
    RetryPolicy::new(&[100, 1_000, 5_000], permanent)
}

fn spell(failures: usize) -> Spell {
    Spell {
        failures,
        told_failing: false,
    }
}

#[test]
fn a_2xx_is_delivered_whatever_came_before() {
    for failures in [0, 1, 3, 10] {
        assert_eq!(
            decide(Ok(204), spell(failures), &policy(false), 5).0,
            Brief::Delivered(None)
        );
    }
}

#[test]
fn failures_follow_the_schedule_then_give_up() {
    let p = policy(false);
    let mut s = Spell::default();
    let mut decisions = Vec::new();
    for _ in 1..=4 {
        let (d, next) = decide(Err(DeliveryError::Status(500)), s, &p, 10);
        decisions.push(d);
        s = next;
    }
    let retry = |ms| Brief::Retry(Duration::from_millis(ms), true, None);
    assert_eq!(
        decisions,
        [
            retry(100),
            retry(1_000),
            retry(5_000),
            Brief::Exhausted(None)
        ]
    );
    assert_eq!(s.failures(), 4);
}

#[test]
fn every_kind_of_failure_is_judged_alike() {
    let p = policy(false);
    for e in [
        DeliveryError::Timeout,
        DeliveryError::Connect("refused".into()),
        DeliveryError::Request("reset".into()),
        DeliveryError::Blocked("blocked: 10.0.0.1".into()),
        DeliveryError::Status(404),
    ] {
        assert_eq!(wait(&e, 2, &p), Some(Duration::from_secs(1)));
        assert_eq!(wait(&e, 4, &p), None);
    }
}

#[test]
fn a_busy_receiver_gets_the_time_it_asks_for_and_is_not_given_up_for_asking() {
    let p = policy(false).with_max_retry_after(Duration::from_secs(600));
    let busy = |s| DeliveryError::AskedToWait {
        status: 429,
        retry_after: Duration::from_secs(s),
    };
    // Within the bound: the wait asked, not counted, never a reason to give up.
    assert!(!counts(&Err(busy(30)), &p));
    for failures in [0, 3, 10] {
        assert_eq!(wait(&busy(30), failures, &p), Some(Duration::from_secs(30)));
        let (d, next) = decide(Err(busy(30)), spell(failures), &p, 1);
        assert_eq!(next.failures(), failures, "not counted");
        assert_eq!(d, Brief::Retry(Duration::from_secs(30), true, None));
    }
    // Beyond it: counted, the bound as the wait while the schedule goes on.
    assert!(counts(&Err(busy(3600)), &p));
    assert_eq!(wait(&busy(3600), 1, &p), Some(Duration::from_secs(600)));
    assert_eq!(wait(&busy(3600), 4, &p), None);
    // Without a bound (0), an ordinary failure on the schedule.
    let off = policy(false).with_max_retry_after(Duration::ZERO);
    assert!(counts(&Err(busy(30)), &off));
    assert_eq!(wait(&busy(30), 1, &off), Some(Duration::from_millis(100)));
    assert!(counts(&Err(DeliveryError::Status(503)), &p));
    assert!(!counts(&Ok(200), &p));
}

#[test]
fn a_permanent_hook_is_never_given_up() {
    let p = policy(true);
    for failures in [4, 5, 100, 100_000] {
        assert_eq!(
            wait(&DeliveryError::Timeout, failures, &p),
            Some(Duration::from_millis(5_000))
        );
    }
}

#[test]
fn failing_is_told_once_when_the_failures_reach_the_threshold_and_recovery_after_it() {
    let p = policy(true);
    let mut s = Spell::default();
    let mut told = Vec::new();
    for _ in 0..5 {
        let (d, next) = judge(Ok(Err(DeliveryError::Status(500))), s, &p, 3);
        told.push(d.tell());
        s = next;
    }
    assert_eq!(told, [None, None, Some(Tell::Failing), None, None]);
    // Enabled again after a disabling: the schedule restarts, the spell goes on (told once).
    let s = s.restarted();
    assert_eq!(s.failures(), 0);
    let (d, _) = decide(Err(DeliveryError::Status(500)), s, &p, 1);
    assert_eq!(d, Brief::Retry(Duration::from_millis(100), true, None));
    assert_eq!(
        decide(Ok(200), s, &p, 3).0,
        Brief::Delivered(Some(Tell::Recovered))
    );
    assert_eq!(Tell::Recovered.event_id(), "hook-recovered");
    assert_eq!(Tell::Failing.event_id(), "hook-failing");
}

#[test]
fn a_held_back_callback_is_no_attempt_and_an_unsigned_one_is_refused() {
    let p = policy(false);
    let held = DeliveryError::CircuitOpen {
        retry_in: Duration::from_secs(7),
    };
    let (d, next) = judge(Ok(Err(held)), spell(2), &p, 1);
    assert!(d.attempted().is_none(), "no attempt");
    assert_eq!(brief(&d), Brief::Retry(Duration::from_secs(7), false, None));
    assert_eq!(next, spell(2), "not counted");
    let (d, next) = judge(Err(UnknownTenant("gone".into())), spell(2), &p, 1);
    assert!(d.attempted().is_none());
    assert_eq!(brief(&d), Brief::Refused);
    assert_eq!(next, spell(2));
    // A delivered or failed attempt is one to record, with what the receiver answered.
    let (d, _) = judge(Ok(Ok(204)), spell(0), &p, 1);
    assert!(matches!(d.attempted(), Some(Ok(204))));
    let (d, _) = judge(Ok(Err(DeliveryError::Status(500))), spell(0), &p, 1);
    assert!(matches!(
        d.attempted(),
        Some(Err(DeliveryError::Status(500)))
    ));
}
