//! Delivery insight and recovery with the real binary, a real `redis-server` and real receivers
//! that fail on purpose: `hooks show`, the state column of `hooks list`, `deliveries` and
//! `redeliver` (through the admin API), alone and in a fleet of two; every bad input is one
//! line and a non-zero exit.

use std::{process::Stdio, time::Duration};

use serde_json::Value;

use crate::{
    fleet::FLEET,
    support::{
        RelayProcess, Reply, TestReceiver, TestRedis, metric_value,
        process::{binary, show_until},
        relay::{create_hook, http_client},
        user_joined, user_name,
        wait::{until, until_within},
    },
};

/// Runs the binary with `env` set: (exit code, stdout, stderr).
fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = std::process::Command::new(binary())
        .args(args)
        .env_remove("HOOKRELAY_CONFIG")
        .env_remove("HOOKRELAY_ADMIN__BEARER_TOKEN")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("hookrelay");
    let text = |b: Vec<u8>| String::from_utf8(b).expect("utf-8");
    (
        out.status.code().unwrap_or(-1),
        text(out.stdout),
        text(out.stderr),
    )
}

/// Runs a command that must succeed and prints JSON; returns the JSON.
fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let (code, out, err) = run(&all, &[]);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?} printed {out}: {e}"))
}

/// A failure: exit `code` and one line on stderr containing `what`.
fn refused(result: (i32, String, String), code: i32, what: &str) {
    let (got, out, err) = result;
    assert_eq!(got, code, "stdout {out} stderr {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(what), "{err}");
}

#[tokio::test]
async fn a_failing_hook_shows_its_state_and_attempts_and_its_callbacks_come_back() {
    let redis = TestRedis::start().await;
    let (ok, flaky) = (TestReceiver::start().await, TestReceiver::start().await);
    // Every attempt at the flaky receiver times out (the relay waits 1 s; it answers later).
    flaky.set_default(Reply::Delay(Duration::from_millis(1500), 503));
    let relay = RelayProcess::start(&redis, "").await;
    let cfg = relay.config.to_str().expect("path");
    let http = http_client();
    let a = create_hook(&http, relay.api, &ok.url("/a"), "").await;
    let b_url = flaky.url("/b");
    let b = create_hook(&http, relay.api, &b_url, "").await;
    let names = ["Ann", "Bob", "Cy"];
    let joins: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| user_joined("m1", &format!("u{i}"), n))
        .collect();
    redis.publish_all(&joins).await;
    let first = ok.wait_delivered(3).await;

    let shown = show_until(cfg, a, |h| h["queued"] == 0 && !h["last_success"].is_null()).await;
    assert_eq!(shown["state"], "ok");
    assert_eq!(shown["failures_in_row"], 0);
    assert!(shown["last_failure"].is_null() && shown["removal_due"].is_null());

    // B fails: shown failing, with its error and when it goes if this goes on.
    let failing = show_until(cfg, b, |h| h["state"] == "failing").await;
    assert_eq!(
        failing["last_error"],
        "no answer within the request timeout"
    );
    assert_eq!(failing["queued"], 3, "{failing}");
    assert!(failing["removal_due"].is_string(), "{failing}");
    assert!(
        failing["oldest_queued_age_s"]
            .as_f64()
            .is_some_and(|a| a >= 0.0)
    );
    let (_, text, _) = run(&["hooks", "show", &b.to_string(), "-c", cfg], &[]);
    assert!(text.starts_with(&format!("hook {b}: {b_url}\n")), "{text}");
    assert!(text.contains("  state:        failing ("), "{text}");
    assert!(
        text.contains("no answer within the request timeout"),
        "{text}"
    );
    assert!(text.contains("if the failures go on"), "{text}");

    // The schedule (50, 100, 150 ms) runs out after 4 attempts: removed, and still shown.
    let removed = show_until(cfg, b, |h| h["removed"].is_string()).await;
    assert_eq!(removed["state"], "removed");
    assert_eq!(removed["callback_url"], b_url.as_str());
    assert!(removed["removed"].is_string() && removed["removal_due"].is_null());
    let (code, list, _) = run(&["hooks", "list", "-c", cfg], &[]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(
        lines[0],
        "    id  state    kind       meeting       events                callback URL"
    );
    assert!(lines[1].starts_with(&format!("{a:>6}  ok ")), "{list}");
    assert!(lines[1].ends_with(&ok.url("/a")), "{list}");
    assert!(lines[2].starts_with(&format!("{b:>6}  removed")), "{list}");
    assert!(lines[2].ends_with(&b_url), "{list}");

    // Its four attempts, newest first, all of its first callback.
    let attempts = json(&["deliveries", &b.to_string(), "-c", cfg, "--failed"]);
    let attempts = attempts["deliveries"].as_array().expect("list").clone();
    let tries: Vec<u64> = attempts
        .iter()
        .map(|a| a["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(tries, [4, 3, 2, 1]);
    let ts0 = attempts[0]["timestamp"].as_u64().expect("timestamp");
    for at in &attempts {
        assert_eq!(at["event_id"], "user-joined");
        assert_eq!(at["ok"], false);
        assert_eq!(at["timestamp"], ts0, "every try sends the same callback");
        assert_eq!(at["error"], "no answer within the request timeout");
        assert!(
            at["latency_ms"].as_f64().is_some_and(|l| l >= 900.0),
            "{at}"
        );
    }
    let (_, table, _) = run(&["deliveries", &b.to_string(), "-c", cfg], &[]);
    let rows: Vec<&str> = table.lines().collect();
    assert!(rows[0].starts_with("time "), "{table}");
    assert_eq!(rows.len(), 5, "{table}");
    assert!(
        rows[1].contains("user-joined") && rows[1].contains("failed"),
        "{table}"
    );

    // A's three, all taken; none failed; --since and --limit narrow them.
    let got = json(&["deliveries", &a.to_string(), "-c", cfg, "--since", "10m"]);
    let got = got["deliveries"].as_array().expect("list").clone();
    assert_eq!(got.len(), 3);
    let stamps: Vec<u64> = got
        .iter()
        .map(|a| a["timestamp"].as_u64().unwrap())
        .collect();
    let sent: Vec<u64> = first.iter().rev().map(|r| r.timestamp()).collect();
    assert_eq!(
        stamps, sent,
        "newest first, the timestamps the receiver got"
    );
    assert!(got.iter().all(|a| a["status"] == 200 && a["ok"] == true));
    let failed = run(&["deliveries", &a.to_string(), "-c", cfg, "--failed"], &[]);
    assert_eq!(failed.1, "no attempts\n");
    let one = json(&["deliveries", &a.to_string(), "-c", cfg, "--limit", "1"]);
    assert_eq!(one["deliveries"].as_array().map(Vec::len), Some(1));

    // B's URL registered again: the callbacks B never delivered come back, in order, each
    // with its original timestamp and signature, marked as redelivered.
    flaky.set_default(Reply::Status(200));
    let b2 = create_hook(&http, relay.api, &b_url, "").await;
    assert_ne!(b2, b);
    let (code, out, err) = run(
        &["redeliver", &b2.to_string(), "--since", "10m", "-c", cfg],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("queued 3 callbacks again for hook {b2} (from ")),
        "{out}"
    );
    let again = flaky.wait_delivered(3).await;
    assert_eq!(
        again
            .iter()
            .map(|r| user_name(&r.event()))
            .collect::<Vec<_>>(),
        names
    );
    assert_eq!(again[0].timestamp(), ts0);
    for r in &again {
        assert_eq!(r.headers["x-hookrelay-redelivery"], "true");
        r.assert_signed(&b_url);
    }
    assert!(
        again
            .windows(2)
            .all(|w| w[0].timestamp() < w[1].timestamp())
    );

    // A's delivered callbacks again: byte for byte what it got first, after them.
    let json_out = json(&[
        "redeliver",
        &a.to_string(),
        "--since",
        "10m",
        "--event-id",
        "user-joined",
        "-c",
        cfg,
    ]);
    assert_eq!(json_out["queued"], 3);
    let all = ok.wait_delivered(6).await;
    for (orig, re) in first.iter().zip(&all[3..]) {
        assert_eq!((&orig.uri, &orig.body), (&re.uri, &re.body));
        assert!(orig.headers.get("x-hookrelay-redelivery").is_none());
        assert_eq!(re.headers["x-hookrelay-redelivery"], "true");
    }
    let none = json(&[
        "redeliver",
        &a.to_string(),
        "--since",
        "10m",
        "--event-id",
        "meeting-ended",
        "-c",
        cfg,
    ]);
    assert_eq!(none["queued"], 0, "no such event in the window");
    // A redelivery is not kept again: asked once more, each callback comes once more.
    // Proves that nothing happens: the callbacks sent again are not kept (else the next
    // redelivery would queue six).
    tokio::time::sleep(Duration::from_millis(600)).await;
    let twice = json(&["redeliver", &a.to_string(), "--since", "10m", "-c", cfg]);
    assert_eq!(twice["queued"], 3);
    let all = ok.wait_delivered(9).await;
    assert_eq!(
        all[6..].iter().map(|r| &r.body).collect::<Vec<_>>(),
        first.iter().map(|r| &r.body).collect::<Vec<_>>()
    );
    let metrics = relay.metrics().await;
    assert_eq!(metric_value(&metrics, "hookrelay_redelivered_total"), 9.0);

    // Bad input: one line, a non-zero exit.
    refused(
        run(&["redeliver", "999", "--since", "5m", "-c", cfg], &[]),
        1,
        "hook 999 is not registered",
    );
    refused(
        run(
            &["redeliver", &b.to_string(), "--since", "5m", "-c", cfg],
            &[],
        ),
        1,
        "register its URL again",
    );
    refused(
        run(
            &["redeliver", &a.to_string(), "--since", "3h", "-c", cfg],
            &[],
        ),
        1,
        "callbacks are kept for 1h (delivery.retain), and the oldest kept is from ",
    );
    refused(
        run(
            &[
                "redeliver",
                &a.to_string(),
                "--since",
                "yesterday",
                "-c",
                cfg,
            ],
            &[],
        ),
        2,
        "--since: `yesterday` is neither",
    );
    refused(
        run(&["redeliver", &a.to_string(), "-c", cfg], &[]),
        2,
        "--since",
    );
    refused(
        run(&["hooks", "show", "999", "-c", cfg], &[]),
        1,
        "no hook 999",
    );
    refused(
        run(&["deliveries", "999", "-c", cfg], &[]),
        1,
        "no hook 999",
    );
    refused(
        run(
            &["deliveries", &a.to_string(), "--since", "soon", "-c", cfg],
            &[],
        ),
        2,
        "--since",
    );
    let nowhere = format!("http://127.0.0.1:{}", crate::support::free_port());
    // Without the admin API the list is still there, its states unknown.
    let (code, list, err) = run(&["hooks", "list", "-c", cfg, "--admin-url", &nowhere], &[]);
    assert_eq!(code, 0, "{err}");
    let row = format!("{a:>6}  ?  ");
    assert!(
        list.lines().nth(1).is_some_and(|l| l.starts_with(&row)),
        "{list}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("hookrelay: no hook states: "), "{err}");
    refused(
        run(
            &[
                "hooks",
                "show",
                &a.to_string(),
                "-c",
                cfg,
                "--admin-url",
                &nowhere,
            ],
            &[],
        ),
        3,
        "cannot reach the admin API",
    );
}

#[tokio::test]
async fn the_admin_api_wants_its_token_and_bounds_a_redelivery() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let token = [("HOOKRELAY_ADMIN__BEARER_TOKEN", "s3cret-admin")];
    // max_queue bounds a redelivery too.
    let relay = RelayProcess::start_env(&redis, "max_queue = 2\n", "info", &token).await;
    let cfg = relay.config.to_str().expect("path");
    let id = create_hook(&http_client(), relay.api, &rx.url("/t"), "").await;
    redis
        .publish_all(&[user_joined("m", "u1", "A"), user_joined("m", "u2", "B")])
        .await;
    // Sent before the third comes: three queued at once would be one more than max_queue.
    rx.wait_delivered(2).await;
    redis.publish(&user_joined("m", "u3", "C")).await;
    rx.wait_delivered(3).await;
    // Attempts are written after the callbacks they kept: once all three show, all are kept.
    until_within(
        "three attempts shown",
        Duration::from_secs(10),
        async || {
            let (_, out, _) = run(
                &["deliveries", &id.to_string(), "-c", cfg, "--json"],
                &token,
            );
            match out.matches("\"ok\": true").count() == 3 {
                true => Ok(()),
                false => Err(out),
            }
        },
    )
    .await;
    // Through its socket (the default), the socket's mode is the credential: no token.
    let (code, out, err) = run(&["hooks", "show", &id.to_string(), "-c", cfg], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("state:        ok"), "{out}");
    // Over TCP, the token: this configuration's, not the one derived from the secret.
    let admin_url = format!("http://{}", relay.admin);
    let show = [
        "hooks",
        "show",
        &id.to_string(),
        "-c",
        cfg,
        "--admin-url",
        &admin_url,
    ];
    refused(run(&show, &[]), 1, "wrong or missing token");
    refused(
        run(&show, &[("HOOKRELAY_ADMIN__BEARER_TOKEN", "s3cret-admix")]),
        1,
        "wrong or missing token",
    );
    let (code, out, _) = run(&show, &token);
    assert_eq!(code, 0);
    assert!(out.contains("state:        ok"), "{out}");
    // The API answers a wrong token 401 with nothing else.
    let raw = http_client()
        .get(format!("http://{}/v1/hooks", relay.admin))
        .bearer_auth("nope")
        .send()
        .await
        .expect("answer");
    assert_eq!(raw.status(), 401);
    // Three delivered callbacks are more than max_queue (2) lets one redelivery queue.
    let (got_code, _, err) = run(
        &["redeliver", &id.to_string(), "--since", "10m", "-c", cfg],
        &token,
    );
    assert_eq!(got_code, 1, "{err}");
    assert!(
        err.contains("the window holds 3 callbacks") && err.contains("more than the 2"),
        "{err}"
    );
    // The first two fit.
    let delivered = rx.delivered();
    let until = hookrelay::base::time::rfc3339(delivered[1].timestamp());
    let (code, out, err) = run(
        &[
            "redeliver",
            &id.to_string(),
            "--since",
            "10m",
            "--until",
            &until,
            "-c",
            cfg,
        ],
        &token,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("queued 2 callbacks again"), "{out}");
    let again = rx.wait_delivered(5).await;
    assert_eq!(
        again[3..]
            .iter()
            .map(|r| user_name(&r.event()))
            .collect::<Vec<_>>(),
        ["A", "B"]
    );
}

/// A fleet of two: either instance shows what the holder delivered, and a redelivery asked of
/// the other one is queued by the holder.
#[tokio::test]
async fn in_a_fleet_either_instance_shows_and_redelivers() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let first = RelayProcess::start(&redis, FLEET).await;
    crate::fleet::wait_until_holder(&first).await;
    let second = RelayProcess::start(&redis, FLEET).await;
    let id = create_hook(&http_client(), second.api, &rx.url("/f"), "").await;
    until("the holder sees the hook", async || {
        let list = first.call("list", "").await;
        match list.contains("/f") {
            true => Ok(()),
            false => Err(list),
        }
    })
    .await;
    let joins: Vec<String> = (0..5)
        .map(|i| user_joined("m", &format!("u{i}"), &format!("N{i}")))
        .collect();
    redis.publish_all(&joins).await;
    let got = rx.wait_delivered(5).await;
    let (c1, c2) = (
        first.config.to_str().unwrap(),
        second.config.to_str().unwrap(),
    );
    let a1 = format!("http://{}", first.admin);
    let a2 = format!("http://{}", second.admin);
    let by_first = show_until(c1, id, |h| !h["delivered_by"].is_null() && h["queued"] == 0).await;
    let what = "the other instance shows the same last success";
    let by_second = until_within(what, Duration::from_secs(10), async || {
        let h = json(&[
            "hooks",
            "show",
            &id.to_string(),
            "-c",
            c2,
            "--admin-url",
            &a2,
        ]);
        match h["last_success"] == by_first["last_success"] {
            true => Ok(h),
            false => Err(format!("{h} vs {by_first}")),
        }
    })
    .await;
    assert_eq!(by_first["delivered_by"], by_second["delivered_by"]);
    let seen1 = json(&["deliveries", &id.to_string(), "-c", c1, "--admin-url", &a1]);
    let seen2 = json(&["deliveries", &id.to_string(), "-c", c2, "--admin-url", &a2]);
    assert_eq!(seen1["deliveries"], seen2["deliveries"]);
    assert_eq!(seen2["deliveries"].as_array().map(Vec::len), Some(5));
    // Asked of the instance that does not process the bus; queued by the one that does.
    let (code, out, err) = run(
        &[
            "redeliver",
            &id.to_string(),
            "--since",
            "5m",
            "-c",
            c2,
            "--admin-url",
            &a2,
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("queued 5 callbacks again"), "{out}");
    let all = rx.wait_delivered(10).await;
    sent_again(&got, &all[5..]);
}

/// What is kept stays within `delivery.retain_max_mib`: the oldest callbacks go first, and a
/// redelivery sends the newest that are left, in order.
#[tokio::test]
async fn kept_callbacks_stay_within_their_bytes_and_the_oldest_go_first() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let relay = RelayProcess::start(&redis, "retain_max_mib = 1\n").await;
    let cfg = relay.config.to_str().expect("path");
    let id = create_hook(&http_client(), relay.api, &rx.url("/k"), "").await;
    // About 1.5 MiB of callbacks: more than the one MiB kept.
    const N: usize = 2500;
    let joins: Vec<String> = (0..N)
        .map(|i| user_joined("m", &format!("u{i}"), &format!("{i:0>300}")))
        .collect();
    redis.publish_all(&joins).await;
    let first = rx.wait_delivered(N).await;
    until("nothing queued and a success shown", async || {
        let h = json(&["hooks", "show", &id.to_string(), "-c", cfg]);
        match h["queued"] == 0 && h["last_success"].is_string() {
            true => Ok(()),
            false => Err(h),
        }
    })
    .await;
    // The callbacks are kept before their attempts are written: once the last one's attempt
    // shows, every callback went through what is kept.
    let last = first[N - 1].timestamp();
    last_attempt_shown(id, cfg, last).await;
    let asked = json(&["redeliver", &id.to_string(), "--since", "10m", "-c", cfg]);
    let kept = asked["queued"].as_u64().expect("queued") as usize;
    let bytes: usize = first[N - kept..].iter().map(|r| r.event().len()).sum();
    assert!(kept > 0 && kept < N, "kept {kept} of {N}");
    assert!(
        bytes <= 1 << 20 && bytes > 1 << 19,
        "{bytes} bytes kept: the bound, used"
    );
    let again = rx.wait_delivered(N + kept).await;
    assert_eq!(
        names(&again[N..]),
        names(&first[N - kept..]),
        "the newest, in order"
    );
}

/// A Redis that forgot the scripts (restarted, failed over: `SCRIPT FLUSH` here) keeps each
/// sent callback once: the kept entries are added before the script that trims them, and only
/// the script is sent again.
#[tokio::test]
async fn kept_callbacks_are_kept_once_when_redis_forgot_the_scripts() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let relay = RelayProcess::start(&redis, "").await;
    let cfg = relay.config.to_str().expect("path");
    let id = create_hook(&http_client(), relay.api, &rx.url("/once"), "").await;
    let joins = |from: usize| {
        (from..from + 10)
            .map(|i| user_joined("m", &format!("u{i}"), "x"))
            .collect::<Vec<String>>()
    };
    redis.publish_all(&joins(0)).await;
    rx.wait_delivered(10).await;
    let mut c = redis.conn().await.expect("redis");
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut c)
        .await
        .expect("SCRIPT FLUSH");
    redis.publish_all(&joins(10)).await;
    let sent = rx.wait_delivered(20).await;
    let last = sent[19].timestamp();
    last_attempt_shown(id, cfg, last).await;
    let kept = redis.kept_callbacks().await;
    assert_eq!(kept.len(), 20, "each sent callback kept once: {kept:#?}");
    let counted: Vec<String> = redis::cmd("KEYS")
        .arg("hookrelay:retained:*:bytes")
        .query_async(&mut c)
        .await
        .expect("keys");
    let counted: u64 = redis::cmd("GET")
        .arg(&counted[0])
        .query_async(&mut c)
        .await
        .expect("the kept bytes");
    assert!(
        counted > 20 * 64,
        "the script counted the second round too: {counted}"
    );
    let asked = json(&["redeliver", &id.to_string(), "--since", "10m", "-c", cfg]);
    assert_eq!(asked["queued"], 20, "{asked}");
    let again = rx.wait_delivered(40).await;
    assert_eq!(
        names(&again[20..]),
        names(&again[..20]),
        "the same, in order"
    );
}

/// What an earlier version kept (an entry a callback) and what this one keeps (a round's
/// callbacks in a group entry) are sent again together, in order, each body as it was sent:
/// an upgrade keeps what was kept. A round's callbacks take fewer entries than callbacks.
#[tokio::test]
async fn callbacks_kept_an_entry_each_and_in_groups_are_redelivered_together() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let relay = RelayProcess::start(&redis, "").await;
    let cfg = relay.config.to_str().expect("path");
    let id = create_hook(&http_client(), relay.api, &rx.url("/mixed"), "").await;
    let joins = |from: usize, n: usize| {
        (from..from + n)
            .map(|i| user_joined("m", &format!("u{i}"), &format!("N{i}")))
            .collect::<Vec<String>>()
    };
    redis.publish_all(&joins(0, 3)).await;
    let first = rx.wait_delivered(3).await;
    last_attempt_shown(id, cfg, first[2].timestamp()).await;
    // Rewritten as an earlier version wrote them: an entry a callback, with its fields.
    let kept = redis.kept_by_stream().await;
    let [(stream, earlier)] = &kept[..] else {
        panic!("one URL's callbacks kept: {kept:?}");
    };
    assert_eq!(earlier.len(), 3, "{earlier:?}");
    let mut c = redis.conn().await.expect("redis");
    let () = redis::cmd("DEL")
        .arg(stream)
        .query_async(&mut c)
        .await
        .expect("DEL");
    for fields in earlier {
        let mut xadd = redis::cmd("XADD");
        xadd.arg(stream).arg("*");
        for (k, v) in fields {
            xadd.arg(k).arg(v);
        }
        let _: String = xadd.query_async(&mut c).await.expect("XADD");
    }
    // Then this version's, a burst at once.
    const N: usize = 20;
    redis.publish_all(&joins(3, N)).await;
    let sent = rx.wait_delivered(3 + N).await;
    last_attempt_shown(id, cfg, sent[2 + N].timestamp()).await;
    let entries: usize = redis::cmd("XLEN")
        .arg(stream)
        .query_async(&mut c)
        .await
        .expect("XLEN");
    assert!(
        entries > 3 && entries - 3 < N,
        "{N} callbacks kept in {} entries",
        entries - 3
    );
    assert_eq!(redis.kept_callbacks().await.len(), 3 + N);
    let asked = json(&["redeliver", &id.to_string(), "--since", "10m", "-c", cfg]);
    assert_eq!(asked["queued"], 3 + N, "{asked}");
    let again = rx.wait_delivered(2 * (3 + N)).await;
    sent_again(&sent, &again[3 + N..]);
}

/// With many URLs each keeps a small share of `delivery.retain_max_mib`; its groups are smaller
/// than the share, so the trim (whole groups) keeps most of it: 64 URLs, 16 KiB each, 70 KiB
/// of callbacks each.
#[tokio::test]
async fn with_many_urls_each_keeps_most_of_its_small_share() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let relay = RelayProcess::start(&redis, "retain_max_mib = 1\n").await;
    const URLS: usize = 64;
    const N: usize = 100;
    let http = http_client();
    for u in 0..URLS {
        create_hook(&http, relay.api, &rx.url(&format!("/share{u}")), "").await;
    }
    let joins: Vec<String> = (0..N)
        .map(|i| user_joined("m", &format!("u{i}"), &format!("{i:0>300}")))
        .collect();
    redis.publish_all(&joins).await;
    rx.wait_delivered(URLS * N).await;
    let share = (1u64 << 20) / URLS as u64;
    until("every URL keeps most of its share", async || {
        let kept = redis.kept_by_stream().await;
        let bytes: Vec<u64> = (kept.iter())
            .map(|(_, callbacks)| {
                (callbacks.iter().flatten())
                    .filter(|(k, _)| k == "z")
                    .map(|(_, z)| z.parse::<u64>().expect("a size"))
                    .sum()
            })
            .collect();
        assert!(bytes.iter().all(|b| *b <= share), "over {share}: {bytes:?}");
        match bytes.len() == URLS && bytes.iter().all(|b| *b > share / 2) {
            true => Ok(()),
            false => Err(bytes),
        }
    })
    .await;
}

/// Waits until `deliveries` shows an attempt of the callback of timestamp `last` as the hook's
/// newest: callbacks are kept before their attempts are written, so every earlier one is kept.
async fn last_attempt_shown(id: u64, cfg: &str, last: u64) {
    until("the last callback's attempt shown", async || {
        let newest = json(&["deliveries", &id.to_string(), "-c", cfg, "--limit", "1"]);
        match newest["deliveries"][0]["timestamp"] == last {
            true => Ok(()),
            false => Err(newest),
        }
    })
    .await;
}

/// Each of `again` is the callback of `sent` at its place, sent again: the same body, marked
/// as a redelivery.
fn sent_again(
    sent: &[crate::support::receiver::Received],
    again: &[crate::support::receiver::Received],
) {
    for (orig, re) in sent.iter().zip(again) {
        assert_eq!(orig.body, re.body, "the same body, in order");
        assert_eq!(re.headers["x-hookrelay-redelivery"], "true");
    }
}

/// The user names of callbacks, in order.
fn names(rs: &[crate::support::receiver::Received]) -> Vec<String> {
    rs.iter().map(|r| user_name(&r.event())).collect()
}
