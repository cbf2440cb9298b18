//! `delivery.on_give_up = "disable"` (`docs/receivers.md`): a hook whose retries ran out stays
//! registered and listed, disabled, keeps the callbacks of the events that come meanwhile, and
//! resumes with `hookrelay hooks enable ID` (the admin API) or a `hooks/create` of its URL,
//! sending what it kept in order. The real binary, a real receiver that fails and recovers.

use std::time::Duration;

use serde_json::Value;

use crate::support::{
    RelayProcess, Reply, TestReceiver, TestRedis, metric_value,
    process::{cli, show_until},
    relay::{create_hook, http_client},
    user_joined, user_name,
    wait::until,
};

/// Publishes joins named `n{range}`.
async fn joins(redis: &TestRedis, range: std::ops::Range<usize>) {
    for i in range {
        redis
            .publish(&user_joined("m1", &format!("u{i}"), &format!("n{i}")))
            .await;
    }
}

#[tokio::test]
async fn a_disabled_hook_keeps_its_callbacks_and_resumes_in_order() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    rx.set_default(Reply::Status(500));
    let relay = RelayProcess::start(&redis, "on_give_up = \"disable\"\n").await;
    let cfg = relay.config.to_str().expect("path");
    let url = rx.url("/d");
    let id = create_hook(&http_client(), relay.api, &url, "").await;
    joins(&redis, 0..5).await;
    // Four failed attempts of n0 (the schedule: 50, 100, 150 ms), then disabled, not removed.
    show_until(cfg, id, |h| h["state"] == "disabled").await;
    assert!(relay.call("list", "").await.contains(&url), "still listed");
    let (code, list, _) = cli(&["hooks", "list", "-c", cfg]);
    assert_eq!(code, 0);
    assert!(list.contains(&format!("{id:>6}  disabled")), "{list}");
    joins(&redis, 5..10).await;
    let tried = rx.received().len();
    assert_eq!(tried, 4, "n0's four attempts");
    // Proves that nothing is sent while disabled (no condition can show an absence).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rx.received().len(), tried, "a disabled hook sends nothing");

    rx.set_default(Reply::Status(200));
    let (code, out, err) = cli(&["hooks", "enable", &id.to_string(), "-c", cfg]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!("enabled hook {id}: its kept callbacks are sent, in order\n")
    );
    let names: Vec<String> = rx
        .wait_delivered(10)
        .await
        .iter()
        .map(|r| user_name(&r.event()))
        .collect();
    let want: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
    assert_eq!(names, want, "every kept callback once, in order");
    show_until(cfg, id, |h| h["state"] == "ok").await;

    // Disabled again; this time `hooks/create` of its URL (what the specification tells
    // integrators to do) brings it back, with its id.
    rx.set_default(Reply::Status(503));
    joins(&redis, 10..13).await;
    show_until(cfg, id, |h| h["state"] == "disabled").await;
    rx.set_default(Reply::Status(200));
    assert_eq!(create_hook(&http_client(), relay.api, &url, "").await, id);
    let got = rx.wait_delivered(13).await;
    let names: Vec<String> = got.iter().map(|r| user_name(&r.event())).collect();
    let want: Vec<String> = (0..13).map(|i| format!("n{i}")).collect();
    assert_eq!(names, want);
    let metrics = relay.metrics().await;
    assert_eq!(
        metric_value(
            &metrics,
            r#"hookrelay_hooks_disabled_total{tenant="",reason="failures"}"#
        ),
        2.0
    );
    assert_eq!(
        metric_value(
            &metrics,
            r#"hookrelay_hooks_removed_total{tenant="",reason="failures"}"#
        ),
        0.0
    );
    // Enabling a hook that is not disabled says so; an unknown one fails.
    let (code, out, _) = cli(&["hooks", "enable", &id.to_string(), "-c", cfg]);
    assert_eq!(
        (code, out.as_str()),
        (0, format!("hook {id} was not disabled\n").as_str())
    );
    let (code, _, err) = cli(&["hooks", "enable", "999", "-c", cfg]);
    assert_ne!(code, 0);
    assert!(err.contains("999"), "{err}");
}

/// The default stays the specification's: removed.
#[tokio::test]
async fn by_default_a_hook_whose_retries_ran_out_is_removed() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    rx.set_default(Reply::Status(500));
    let relay = RelayProcess::start(&redis, "").await;
    let url = rx.url("/r");
    create_hook(&http_client(), relay.api, &url, "").await;
    joins(&redis, 0..1).await;
    until("removed", async || {
        let list = relay.call("list", "").await;
        match list.contains(&url) {
            false => Ok(()),
            true => Err(list),
        }
    })
    .await;
    assert_eq!(
        metric_value(
            &relay.metrics().await,
            r#"hookrelay_hooks_disabled_total{tenant="",reason="failures"}"#
        ),
        0.0
    );
}

/// Recovery in bulk: `hookrelay redeliver --all --since T --meeting M` queues again, for every
/// hook, the kept callbacks of that meeting, each hook's in its original order.
#[tokio::test]
async fn a_bulk_redelivery_by_meeting_reaches_every_hook_in_order() {
    use crate::support::meeting_created_with_metadata;
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let relay = RelayProcess::start(&redis, "").await;
    let cfg = relay.config.to_str().expect("path");
    let http = http_client();
    let a = create_hook(&http, relay.api, &rx.url("/a"), "").await;
    let b = create_hook(&http, relay.api, &rx.url("/b"), "eventID=user-joined").await;
    for m in ["m1", "m2"] {
        redis
            .publish(&meeting_created_with_metadata(
                m,
                &format!("e-{m}"),
                &serde_json::json!({}),
            ))
            .await;
    }
    for i in 0..4 {
        let m = if i % 2 == 0 { "m1" } else { "m2" };
        redis
            .publish(&user_joined(m, &format!("u{i}"), &format!("n{i}")))
            .await;
    }
    // a: two creations and four joins; b: four joins.
    rx.wait_delivered(10).await;
    // A callback is kept a moment after its receiver has it (with its round): wait until all
    // ten are, then ask once. (Asking until the answer is right queued some twice.)
    until("the ten callbacks kept", async || {
        let kept = redis.kept_callbacks().await.len();
        if kept == 10 { Ok(()) } else { Err(kept) }
    })
    .await;
    let (code, out, err) = cli(&[
        "redeliver",
        "--all",
        "--since",
        "10m",
        "--meeting",
        "e-m1",
        "-c",
        cfg,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.ends_with("queued 5 callbacks again for 2 hooks\n"),
        "{out}"
    );
    assert!(
        out.starts_with(&format!("queued 3 callbacks again for hook {a} (from ")),
        "{out}"
    );
    assert!(
        out.contains(&format!("queued 2 callbacks again for hook {b} (from ")),
        "{out}"
    );
    let all = rx.wait_delivered(15).await;
    let again = |path: &str| -> Vec<String> {
        all.iter()
            .filter(|r| {
                r.uri.starts_with(path) && r.headers.get("x-hookrelay-redelivery").is_some()
            })
            .map(|r| {
                let v: Value = serde_json::from_str(&r.event()).expect("JSON");
                format!(
                    "{} {}",
                    v["data"]["id"].as_str().unwrap_or(""),
                    user_name(&r.event())
                )
            })
            .collect()
    };
    assert_eq!(
        again("/a?"),
        ["meeting-created ", "user-joined n0", "user-joined n2"]
    );
    assert_eq!(again("/b?"), ["user-joined n0", "user-joined n2"]);
    // One of the two: a hook's id or --all.
    let (code, _, err) = cli(&["redeliver", "--since", "10m", "-c", cfg]);
    assert_eq!(code, 2, "{err}");
}

/// Events about hooks: a hook whose eventID names them gets `hook-failing` (after
/// `delivery.failing_after` = 3 failures), `hook-disabled` and, once it delivers again,
/// `hook-recovered`, in that order; a hook without an eventID list gets none of them.
#[tokio::test]
async fn events_about_a_failing_hook_reach_the_hooks_that_ask_for_them_only() {
    let redis = TestRedis::start().await;
    let (bad, rx) = (TestReceiver::start().await, TestReceiver::start().await);
    bad.set_default(Reply::Status(500));
    let relay = RelayProcess::start(&redis, "on_give_up = \"disable\"\n").await;
    let cfg = relay.config.to_str().expect("path");
    let http = http_client();
    let failing = create_hook(&http, relay.api, &bad.url("/f"), "").await;
    let ids = "eventID=hook-failing,hook-disabled,hook-removed,hook-recovered";
    create_hook(&http, relay.api, &rx.url("/watch"), ids).await;
    create_hook(&http, relay.api, &rx.url("/plain"), "").await;
    joins(&redis, 0..1).await;
    show_until(cfg, failing, |h| h["state"] == "disabled").await;
    bad.set_default(Reply::Status(200));
    let (code, _, err) = cli(&["hooks", "enable", &failing.to_string(), "-c", cfg]);
    assert_eq!(code, 0, "{err}");
    bad.wait_delivered(1).await;
    // The watcher: three events about the failing hook; the plain hook: the join only.
    let got = rx.wait_delivered(4).await;
    let about: Vec<(String, Value)> = got
        .iter()
        .filter(|r| r.uri.starts_with("/watch"))
        .map(|r| {
            let v: Value = serde_json::from_str(&r.event()).expect("JSON");
            (
                v["data"]["id"].as_str().unwrap_or("").to_string(),
                v["data"]["attributes"]["hook"].clone(),
            )
        })
        .collect();
    let names: Vec<&str> = about.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(names, ["hook-failing", "hook-disabled", "hook-recovered"]);
    for (_, hook) in &about {
        assert_eq!(hook["id"], failing);
        assert_eq!(hook["callback-url"], bad.url("/f").as_str());
    }
    assert_eq!(about[0].1["failures"], 3);
    assert_eq!(about[0].1["last-status"], 500);
    assert_eq!(about[1].1["failures"], 4);
    assert_eq!(about[2].1["last-status"], 200);
    let plain: Vec<String> = got
        .iter()
        .filter(|r| r.uri.starts_with("/plain"))
        .map(|r| user_name(&r.event()))
        .collect();
    assert_eq!(plain, ["n0"]);
    let m = relay.metrics().await;
    assert_eq!(
        metric_value(&m, r#"hookrelay_hook_notices_total{event="hook-failing"}"#),
        1.0
    );
    assert_eq!(
        metric_value(
            &m,
            r#"hookrelay_hook_notices_total{event="hook-recovered"}"#
        ),
        1.0
    );
}
