//! `xapi`: what the xAPI output costs. The fixtures' meeting, `meetings` times over (each with
//! its own ids), published at once; statements go to a lean receiver standing in for an LRS, or
//! to Ralph (a real LRS, `--ralph`). Prints statements/s from the first publish to the last
//! statement received, and the relay's CPU per statement (processing of the bus messages
//! included).

use std::time::{Duration, Instant};

use crate::{
    launch::{Relay, Setup},
    procstat,
    scenario::Figures,
    sink::Sink,
    support::{
        TestRedis,
        lrs::{PASSWORD, Ralph, USER},
    },
};

/// Statements the fixtures' meeting makes.
const PER_MEETING: usize = 19;

fn meeting(i: usize) -> Vec<String> {
    let raw = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/bbb-webhooks/raw-events.json"
    ))
    .expect("fixture");
    raw.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.replace(
                "8043c8452ae9830aac14c517adff3839dbd9228f-1698771157700",
                &format!("load-{i}-int"),
            )
            .replace("random-9019868", &format!("load-{i}-ext"))
        })
        .collect()
}

pub(crate) async fn run(setup: &Setup, meetings: usize, ralph: bool) -> Figures {
    let redis = TestRedis::start().await;
    let lrs = if ralph {
        Some(
            Ralph::start()
                .await
                .expect("Ralph: run scripts/ensure-ralph.sh"),
        )
    } else {
        None
    };
    let sink = Sink::start(Duration::ZERO).await;
    let endpoint = lrs.as_ref().map_or_else(|| sink.url("/lrs"), Ralph::url);
    let extra = format!(
        "[xapi]\nenabled = true\nlrs_endpoint = \"{endpoint}\"\nlrs_username = \"{USER}\"\nlrs_password = \"{PASSWORD}\"\nuuid_namespace = \"01234567-89ab-cdef-0123-456789abcdef\"\nserver_domain = \"bbb.example\"\n"
    );
    let (relay, _) = Relay::start(setup, &redis, &extra).await;
    let messages: Vec<String> = (0..meetings).flat_map(meeting).collect();
    let want = meetings * PER_MEETING;
    let cpu_before = procstat::cpu_seconds(relay.pid()).unwrap_or(0.0);
    let start = Instant::now();
    redis.publish_all(&messages).await;
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut got = 0;
    while got < want && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(if lrs.is_some() { 200 } else { 2 })).await;
        got = match &lrs {
            Some(l) => l.statements().await.len(),
            None => sink.count(),
        };
    }
    let elapsed = match &lrs {
        Some(_) => start.elapsed(),
        None => sink
            .last_arrival()
            .map_or(start.elapsed(), |t| t.duration_since(start)),
    };
    let cpu = procstat::cpu_seconds(relay.pid()).unwrap_or(0.0) - cpu_before;
    relay.kill9().await;
    let mut f = Figures {
        ok: got == want,
        ..Figures::default()
    };
    f.push("statements", got as f64);
    f.push(
        "statements_per_s",
        got as f64 / elapsed.as_secs_f64().max(1e-9),
    );
    f.push("relay_cpu_us_per_statement", cpu * 1e6 / got.max(1) as f64);
    f
}
