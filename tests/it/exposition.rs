//! `/metrics` in the format the scraper asks for, as bbb-exporter and Prometheus' client
//! libraries answer: the text format 0.0.4 unless `Accept` prefers OpenMetrics. The text is
//! checked by Debian's `promtool check metrics` (Prometheus 2.42, which refuses OpenMetrics'
//! `gaugehistogram`), the OpenMetrics by an OpenMetrics parser; both carry the same series.

use crate::support::{
    RelayProcess, TestRedis, meeting_created, metric_value, on_path, relay::PROMETHEUS_ACCEPT,
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

#[tokio::test]
async fn metrics_come_in_the_format_the_scraper_asks_for() {
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, "").await;
    // A meeting with a participant: the bbb_room_* gauge histograms have a room to count.
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
