//! `/metrics` in the format the scraper asks for, as bbb-exporter and Prometheus' client
//! libraries answer: the text format 0.0.4 unless `Accept` prefers OpenMetrics. The text is
//! checked by Debian's `promtool check metrics` (Prometheus 2.42, which refuses OpenMetrics'
//! `gaugehistogram`), the OpenMetrics by an OpenMetrics parser; both carry the same series.

use std::{collections::BTreeSet, time::Duration};

use crate::support::{
    RelayProcess, TestRedis,
    accept_proxy::AcceptProxy,
    meeting_created, metric_value, on_path,
    prometheus::{TestPrometheus, prometheus},
    relay::PROMETHEUS_ACCEPT,
    user_joined, wait,
};

/// `/metrics` with `accept`: its content type and body.
async fn scrape(relay: &RelayProcess, accept: Option<&str>) -> (String, String) {
    let mut request =
        crate::support::relay::http_client().get(format!("http://{}/metrics", relay.metrics));
    if let Some(a) = accept {
        request = request.header("Accept", a);
    }
    let response = request.send().await.expect("scrape");
    assert_eq!(response.status(), 200);
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (content_type, response.text().await.expect("body"))
}

/// A relay whose meeting has a participant: the bbb_room_* gauge histograms have a room to
/// count.
async fn relay_with_a_meeting(redis: &TestRedis) -> RelayProcess {
    let relay = RelayProcess::start(redis, "").await;
    redis
        .publish_all(&[
            meeting_created("int-1", "ext-1"),
            user_joined("int-1", "u1", "Ann"),
        ])
        .await;
    wait::until("the meeting counted", async || {
        let (_, text) = scrape(&relay, None).await;
        match metric_value(&text, "bbb_meetings") == 1.0 {
            true => Ok(()),
            false => Err(text.len()),
        }
    })
    .await;
    relay
}

#[tokio::test]
async fn metrics_come_in_the_format_the_scraper_asks_for() {
    let redis = TestRedis::start().await;
    let relay = relay_with_a_meeting(&redis).await;

    for accept in [None, Some("*/*"), Some("text/plain; version=0.0.4")] {
        let (content_type, text) = scrape(&relay, accept).await;
        assert_eq!(
            content_type, "text/plain; version=0.0.4; charset=utf-8",
            "{accept:?}"
        );
        assert!(!text.contains("# EOF") && !text.contains("gaugehistogram"));
        assert!(
            text.contains("# TYPE bbb_room_participants histogram"),
            "{text}"
        );
        let promtool = on_path("promtool").expect("promtool (scripts/ensure-prometheus.sh)");
        let mut check = std::process::Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("promtool");
        use std::io::Write;
        check
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write");
        let out = check.wait_with_output().expect("promtool's answer");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && !said.contains("error"),
            "promtool check metrics: {said}"
        );
    }

    let (content_type, openmetrics) = scrape(&relay, Some(PROMETHEUS_ACCEPT)).await;
    assert_eq!(
        content_type,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(openmetrics.ends_with("# EOF\n"));
    assert!(openmetrics.contains("# TYPE bbb_room_participants gaugehistogram"));
    let parsed = openmetrics_parser::openmetrics::parse_openmetrics(&openmetrics)
        .expect("a valid OpenMetrics exposition");
    // The same series either way.
    let (_, text) = scrape(&relay, None).await;
    for series in [
        "bbb_meetings",
        "bbb_meetings_participants",
        "hookrelay_bus_messages_total{source=\"default\"}",
    ] {
        assert_eq!(
            metric_value(&text, series),
            metric_value(&openmetrics, series),
            "{series}"
        );
    }
    assert!(parsed.families.contains_key("bbb_room_participants"));
    drop(relay);
}

/// The series a Prometheus holds of job `bbb`: each one's name and labels (its value left out,
/// since the two servers scrape at different times).
async fn held(prom: &TestPrometheus) -> BTreeSet<String> {
    prom.query("{job=\"bbb\"}")
        .await
        .iter()
        .map(|s| s["metric"].to_string())
        .collect()
}

/// Two real Prometheus servers scrape one relay: one as it asks (OpenMetrics), one through a
/// proxy that asks for the text format 0.0.4 as Telegraf and vmagent do. Each ingests every
/// family, the gauge histograms included, and they hold the same series with the same buckets.
#[tokio::test]
async fn a_real_prometheus_ingests_either_format_to_the_same_series() {
    let Some(binary) = prometheus() else {
        eprintln!("prometheus is not installed: the formats are not scraped by it");
        return;
    };
    let redis = TestRedis::start().await;
    let relay = relay_with_a_meeting(&redis).await;
    let proxy = AcceptProxy::start("text/plain;version=0.0.4").await;
    let by_text = TestPrometheus::start_via(&binary, relay.metrics, Some(proxy.addr)).await;
    let by_openmetrics = TestPrometheus::start(&binary, relay.metrics).await;
    let what = "both hold the same series";
    // A scrape that times out on a loaded machine leaves one server without the series for a
    // second: the two are compared until they agree.
    let series = wait::until_within(what, Duration::from_secs(120), async || {
        let (text, openmetrics) = (held(&by_text).await, held(&by_openmetrics).await);
        let full = text
            .iter()
            .any(|s| s.contains("bbb_room_participants_gcount"));
        match full && text == openmetrics {
            true => Ok(text),
            false => Err(format!(
                "only by the text format: {:?}\nonly by OpenMetrics: {:?}",
                text.difference(&openmetrics).collect::<Vec<_>>(),
                openmetrics.difference(&text).collect::<Vec<_>>()
            )),
        }
    })
    .await;
    for name in [
        "bbb_meetings",
        "bbb_room_participants_bucket",
        "bbb_room_participants_gsum",
        "hookrelay_bus_messages_total",
        "up",
    ] {
        let name = format!("\"__name__\":\"{name}\"");
        assert!(
            series.iter().any(|s| s.contains(&name)),
            "{name}: {series:?}"
        );
    }
    // The relay's own histograms' bounds as OpenMetrics spells them, in both.
    assert!(
        series
            .iter()
            .any(|s| s.contains("_bucket") && s.contains("\"le\":\"1.0\"")),
        "{series:?}"
    );
    // The room of one participant, in the +Inf bucket.
    let room = by_text
        .query("bbb_room_participants_bucket{job=\"bbb\",le=\"+Inf\"}")
        .await;
    assert_eq!(
        room.first().map(|s| s["value"][1].clone()),
        Some("1".into())
    );
    let answered = proxy.answered();
    assert!(!answered.is_empty());
    assert!(
        answered
            .iter()
            .all(|t| t == "text/plain; version=0.0.4; charset=utf-8"),
        "{answered:?}"
    );
    for prom in [&by_text, &by_openmetrics] {
        let up = prom.query("up{job=\"bbb\"}").await;
        assert_eq!(up.first().map(|s| s["value"][1].clone()), Some("1".into()));
    }
}
