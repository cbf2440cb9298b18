//! hookrelay's own Grafana dashboard (`dashboards/hookrelay.json`, shipped in the package)
//! against the relay's real exposition in a real Prometheus (Debian's package, started here on
//! a free port, scraping the relay binary): after a scripted meeting (a hook that takes its
//! callbacks, a permanent hook whose receiver keeps failing, a plugin that traps on one event,
//! a fleet of one, a tenant whose busy receiver keeps its callbacks queued), every expression of every panel returns data, and the dashboard's
//! `instance` variable lists the relay.

use std::time::{Duration, Instant};

use hookrelay::base::{digest::Algorithm, form::form_encode};
use serde_json::{Value, json};

use crate::support::{
    PluginDir, RelayProcess, Reply, TestReceiver, TestRedis, meeting_created,
    meeting_created_with_metadata,
    prometheus::{TestPrometheus, prometheus},
    relay::{create_hook, http_client, signed_call_at},
    user_joined,
};

/// The tenant's API secret.
const ACME_SECRET: &str = "acme-dashboard-secret-01";

const DASHBOARD: &str = include_str!("../../dashboards/hookrelay.json");

/// Every panel's title with its expressions.
fn panels() -> Vec<(String, Vec<String>)> {
    let d: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    d["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .map(|p| {
            let exprs = p["targets"]
                .as_array()
                .expect("targets")
                .iter()
                .map(|t| t["expr"].as_str().expect("expr").to_string())
                .collect();
            (p["title"].as_str().expect("title").to_string(), exprs)
        })
        .collect()
}

#[test]
fn the_dashboard_reads_the_series_the_issue_asks_for() {
    let all: Vec<String> = panels().into_iter().flat_map(|(_, e)| e).collect();
    for series in [
        "hookrelay_callbacks_delivered_total",
        "hookrelay_callback_failures_total",
        "hookrelay_callback_latency_seconds_bucket",
        "hookrelay_queue_depth",
        "hookrelay_queue_oldest_age_seconds",
        "hookrelay_plugin_errors_total",
        "hookrelay_bus_seconds_since_last_message",
        "hookrelay_fleet_lease_held",
    ] {
        assert!(all.iter().any(|e| e.contains(series)), "{series}");
    }
    assert!(all.iter().all(|e| e.contains("instance=~\"$instance\"")));
}

#[tokio::test]
async fn every_panel_of_the_relays_own_dashboard_returns_data_in_a_real_prometheus() {
    let Some(binary) = prometheus() else {
        eprintln!("prometheus is not installed: hookrelay's dashboard is not evaluated");
        return;
    };
    let redis = TestRedis::start().await;
    let (ok, failing) = (TestReceiver::start().await, TestReceiver::start().await);
    failing.set_default(Reply::Status(500));
    // The tenant's receiver is busy: its attempts fail (503) and its callbacks stay queued.
    let busy = TestReceiver::start().await;
    busy.set_default(Reply::Busy(503, "1".into()));
    let plugins = PluginDir::new();
    plugins.add(
        "10-trap",
        "testing_trap",
        Some("on_error = \"pass\"\n[config]\non = \"user-joined\"\n"),
    );
    let extra = format!(
        "permanent_hooks = [{{ url = \"{}\" }}]\n[fleet]\nenabled = true\nlease_ms = 1000\n[plugins]\ndir = \"{}\"\n[[tenants]]\nname = \"acme\"\nsecrets = [\"{ACME_SECRET}\"]\n",
        failing.url("/perm"),
        plugins.path().display()
    );
    let relay = RelayProcess::start(&redis, &extra).await;
    create_hook(&http_client(), relay.api, &ok.url("/ok"), "").await;
    let query = format!("callbackURL={}", form_encode(&busy.url("/acme")));
    let created = signed_call_at(
        &http_client(),
        relay.api,
        Some("acme.sl.example.com"),
        "create",
        &query,
        (Algorithm::Sha1, ACME_SECRET),
    )
    .await;
    assert!(created.contains("<hookID>"), "{created}");
    // Three meetings of the tenant: its first callback in flight, the two behind it queued.
    for i in 2..5 {
        let tenant = json!({"tenant-id": "acme"});
        let (mid, ext) = (format!("int-{i}"), format!("ext-{i}"));
        redis
            .publish(&meeting_created_with_metadata(&mid, &ext, &tenant))
            .await;
    }
    let mut script = vec![meeting_created("int-1", "ext-1")];
    script.extend((0..5).map(|i| user_joined("int-1", &format!("u{i}"), &format!("N{i}"))));
    redis.publish_all(&script).await;
    ok.wait_delivered(6).await;
    let prom = TestPrometheus::start(&binary, relay.metrics).await;
    let instance = relay.metrics.to_string();
    let exprs: Vec<(String, String)> = panels()
        .into_iter()
        .flat_map(|(title, e)| e.into_iter().map(move |e| (title.clone(), e)))
        .map(|(t, e)| (t, e.replace("$instance", &instance)))
        .collect();
    // Enough scrapes for rate(...[5m]), and the queues sampled (every 10 s).
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut empty: Vec<(String, String)>;
    loop {
        empty = Vec::new();
        for (title, expr) in &exprs {
            if prom.query(expr).await.is_empty() {
                empty.push((title.clone(), expr.clone()));
            }
        }
        let scrapes = prom
            .query("count_over_time(hookrelay_build_info[5m])")
            .await
            .first()
            .and_then(|r| r["value"][1].as_str().and_then(|v| v.parse::<f64>().ok()))
            .unwrap_or(0.0);
        if empty.is_empty() && scrapes >= 4.0 {
            break;
        }
        assert!(Instant::now() < deadline, "panels without data: {empty:#?}");
        // The loop's pace: it polls Prometheus (a scrape a second) until every panel has data.
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
    assert_eq!(
        prom.label_values("hookrelay_build_info", "instance").await,
        [instance]
    );
}
