//! bbb-exporter's published Grafana dashboards against hookrelay's real exposition. Their
//! template variable queries and panel expressions, as published, are in
//! `tests/fixtures/bbb-exporter/dashboards.json` (source and licence noted there; nothing is
//! fetched at run time). After a scripted meeting (bus messages, and BBB's API answering
//! `getMeetings` and `getRecordings`):
//! - every `bbb_*` series and label those queries read is in the relay's exposition;
//! - loaded into a real Prometheus (Debian's `prometheus` package, which scripts/test.sh
//!   installs; started here on a free port, scraping the relay as job `bbb`), every bbb query
//!   of the dashboards returns data, and their template variables have values.
//!
//! Also: the reconciliation with `getMeetings` and `getRecordings`, `bbb_api_up` following
//! the API, and, in a fleet, the `bbb_*` series on the holder of the lease only.

use std::{collections::BTreeSet, time::Duration};

use serde_json::{Value, json};

use crate::support::{
    RelayProcess, TestRedis, TestRelay, akka,
    bbb_api::FakeBbbApi,
    meeting_created_with_metadata, metric_value,
    prometheus::{TestPrometheus, prometheus},
    rap,
    wait::{until, until_within},
};

const FIXTURE: &str = include_str!("../fixtures/bbb-exporter/dashboards.json");

/// One query of a dashboard: where it is, and its PromQL.
#[derive(Debug, Clone)]
struct Query {
    dashboard: String,
    panel: String,
    expr: String,
}

fn fixture() -> Value {
    serde_json::from_str(FIXTURE).expect("the fixture is JSON")
}

/// Every panel expression of the three dashboards that reads a `bbb_*` series.
fn bbb_queries() -> Vec<Query> {
    let f = fixture();
    let mut out = Vec::new();
    for (dashboard, d) in f["dashboards"].as_object().expect("dashboards") {
        for p in d["panels"].as_array().expect("panels") {
            for e in p["exprs"].as_array().expect("exprs") {
                let expr = e.as_str().expect("expr").to_string();
                if expr.contains("bbb_") {
                    out.push(Query {
                        dashboard: dashboard.clone(),
                        panel: p["title"].as_str().unwrap_or_default().to_string(),
                        expr,
                    });
                }
            }
        }
    }
    out
}

/// Every template variable query that reads a `bbb_*` series: `label_values(SERIES, LABEL)`.
fn bbb_variables() -> BTreeSet<(String, String)> {
    let f = fixture();
    let mut out = BTreeSet::new();
    for d in f["dashboards"].as_object().expect("dashboards").values() {
        for v in d["variables"].as_array().expect("variables") {
            let q = v["query"].as_str().unwrap_or_default();
            if let Some(args) = q
                .strip_prefix("label_values(")
                .and_then(|r| r.strip_suffix(')'))
                && args.starts_with("bbb_")
            {
                let (series, label) = args.split_once(',').expect("two arguments");
                out.insert((series.trim().to_string(), label.trim().to_string()));
            }
        }
    }
    out
}

/// A label matcher of a selector: name, operator, value.
type Matcher = (String, String, String);

/// What an expression reads: each `bbb_*` series with its matchers, and the labels its
/// `by (...)` clauses group by.
fn reads(expr: &str) -> (Vec<(String, Vec<Matcher>)>, Vec<String>) {
    let chars: Vec<char> = expr.chars().collect();
    let mut series = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let word_start = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if word_start && expr[byte(expr, i)..].starts_with("bbb_") {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            let mut matchers = Vec::new();
            if chars.get(i) == Some(&'{') {
                let end = (i..chars.len())
                    .find(|&j| chars[j] == '}')
                    .expect("closing }");
                let inside: String = chars[i + 1..end].iter().collect();
                matchers = parse_matchers(&inside);
                i = end;
            }
            series.push((name, matchers));
        }
        i += 1;
    }
    let mut by = Vec::new();
    for (at, _) in expr.match_indices("by (") {
        let rest = &expr[at + 4..];
        let inside = &rest[..rest.find(')').expect("closing )")];
        by.extend(inside.split(',').map(|l| l.trim().to_string()));
    }
    (series, by)
}

/// The byte offset of char `i` of `s`.
fn byte(s: &str, i: usize) -> usize {
    s.char_indices().nth(i).map_or(s.len(), |(b, _)| b)
}

fn parse_matchers(inside: &str) -> Vec<Matcher> {
    inside
        .split(',')
        .filter(|m| !m.trim().is_empty())
        .map(|m| {
            let m = m.trim();
            let op_at = m.find(['=', '!']).expect("an operator");
            let name = m[..op_at].trim().to_string();
            let rest = &m[op_at..];
            let op_len =
                if rest.starts_with("=~") || rest.starts_with("!=") || rest.starts_with("!~") {
                    2
                } else {
                    1
                };
            let value = rest[op_len..].trim().trim_matches('"').to_string();
            (name, rest[..op_len].to_string(), value)
        })
        .collect()
}

/// The samples of an exposition: name and labels (name, value) of each.
fn samples(text: &str) -> Vec<(String, Vec<(String, String)>)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, _) = l.rsplit_once(' ').expect("a value");
            match series.split_once('{') {
                None => (series.to_string(), Vec::new()),
                Some((name, labels)) => {
                    let labels = labels.trim_end_matches('}');
                    let pairs = labels
                        .split("\",")
                        .filter(|p| !p.is_empty())
                        .map(|p| {
                            let (k, v) = p.split_once("=\"").expect("label=\"value\"");
                            (k.to_string(), v.trim_end_matches('"').to_string())
                        })
                        .collect();
                    (name.to_string(), pairs)
                }
            }
        })
        .collect()
}

/// Labels that Prometheus adds to every scraped series (the exposition must not have them).
const TARGET_LABELS: [&str; 2] = ["job", "instance"];

/// A `getMeetings` answer with the scripted meeting (`int-1`, origin metadata, four people:
/// a voice user with a camera, a listener, one more on html5, one by phone) and a breakout
/// room with one person.
fn meetings_xml() -> String {
    let attendee = |id: &str, client: &str, listen: bool, voice: bool, video: bool| {
        format!(
            "<attendee><userID>{id}</userID><clientType>{client}</clientType>\
             <isListeningOnly>{listen}</isListeningOnly><hasJoinedVoice>{voice}</hasJoinedVoice>\
             <hasVideo>{video}</hasVideo></attendee>"
        )
    };
    format!(
        "<response><returncode>SUCCESS</returncode><meetings>\
         <meeting><internalMeetingID>int-1</internalMeetingID><isBreakout>false</isBreakout>\
         <metadata><bbb-origin>Moodle</bbb-origin><bbb-origin-server-name>lms.example</bbb-origin-server-name></metadata>\
         <attendees>{}{}{}{}</attendees></meeting>\
         <meeting><internalMeetingID>br-1</internalMeetingID><isBreakout>true</isBreakout>\
         <attendees>{}</attendees></meeting></meetings></response>",
        attendee("a", "HTML5", false, true, true),
        attendee("b", "HTML5", true, false, false),
        attendee("c", "HTML5", false, false, false),
        attendee("p", "DIAL-IN", false, true, false),
        attendee("d", "HTML5", false, false, false),
    )
}

/// The scripted meeting on the bus: the meeting with its origin metadata, its people, a
/// breakout room, and the recording pipeline.
fn script() -> Vec<String> {
    let joined = |mid: &str, uid: &str, client: &str| {
        akka(
            "UserJoinedMeetingEvtMsg",
            mid,
            uid,
            json!({"intId": uid, "name": uid, "clientType": client}),
        )
    };
    let metadata = json!({"bbb-origin": "Moodle", "bbb-origin-server-name": "lms.example"});
    let breakout = crate::support::meeting_created("br-1", "ext-br")
        .replace(r#""isBreakout":false"#, r#""isBreakout":true"#);
    vec![
        meeting_created_with_metadata("int-1", "ext-1", &metadata),
        joined("int-1", "a", "HTML5"),
        joined("int-1", "b", "HTML5"),
        joined("int-1", "c", "HTML5"),
        joined("int-1", "p", "dial-in-user"),
        akka(
            "UserJoinedVoiceConfToClientEvtMsg",
            "int-1",
            "a",
            json!({"listenOnly": false}),
        ),
        akka(
            "UserBroadcastCamStartedEvtMsg",
            "int-1",
            "a",
            json!({"stream": "a_1"}),
        ),
        breakout,
        joined("br-1", "d", "HTML5"),
        rap("sanity_ended", "r0"),
        rap("process_started", "r1"),
        rap("published", "r2"),
    ]
}

/// A relay with BBB's API (reconciled every second), after the scripted meeting.
async fn relay_after_a_meeting(redis: &TestRedis) -> (TestRelay, FakeBbbApi) {
    let api = FakeBbbApi::start(meetings_xml()).await;
    api.set_recordings(&[
        ("r1", "processing"),
        ("r2", "published"),
        ("r3", "unpublished"),
        ("r4", "deleted"),
    ]);
    let mut config = TestRelay::config(redis);
    config.bbb.api_url = api.url.clone();
    config.bbb.reconcile_interval_s = 1;
    let relay = TestRelay::start_with(redis, config).await;
    for m in script() {
        redis.publish(&m).await;
    }
    // Two reconciliations: getMeetings and every getRecordings state timed twice.
    until("reconciled twice", async || {
        let m = relay.metrics().await;
        let count = metric_value(
            &m,
            r#"bbb_api_latency_count{endpoint="getRecordings",parameters="state=deleted"}"#,
        );
        match count >= 2.0 && metric_value(&m, "bbb_unique_meetings_total") == 1.0 {
            true => Ok(()),
            false => Err(m),
        }
    })
    .await;
    (relay, api)
}

#[tokio::test]
async fn every_series_and_label_the_exporters_dashboards_read_is_exposed() {
    let redis = TestRedis::start().await;
    let (relay, _api) = relay_after_a_meeting(&redis).await;
    let text = relay.metrics().await;
    let exposed = samples(&text);
    let queries = bbb_queries();
    assert_eq!(queries.len(), 99, "the fixture's bbb queries");
    let mut checked = BTreeSet::new();
    for q in &queries {
        let (series, by) = reads(&q.expr);
        assert!(!series.is_empty(), "{q:?}");
        for (name, matchers) in series {
            let ok = exposed.iter().any(|(n, labels)| {
                let has = |label: &str| labels.iter().any(|(k, _)| k == label);
                *n == name
                    && matchers.iter().all(|(label, op, value)| {
                        TARGET_LABELS.contains(&label.as_str())
                            || (has(label)
                                && (op != "="
                                    || labels.iter().any(|(k, v)| k == label && v == value)))
                    })
                    && by
                        .iter()
                        .all(|l| TARGET_LABELS.contains(&l.as_str()) || has(l))
            });
            assert!(
                ok,
                "{}: panel {:?} reads {name} {matchers:?} by {by:?}, not in the exposition:\n{text}",
                q.dashboard, q.panel
            );
            checked.insert(name);
        }
    }
    for (series, label) in bbb_variables() {
        assert!(
            exposed.iter().any(|(n, _)| *n == series),
            "template variable label_values({series}, {label})"
        );
        assert!(TARGET_LABELS.contains(&label.as_str()));
        checked.insert(series);
    }
    // The table of docs/metrics.md names every one of them.
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md"))
        .expect("docs/metrics.md");
    for s in &checked {
        assert!(
            page.contains(&format!("`{s}`")),
            "the table of docs/metrics.md lacks {s}"
        );
    }
    assert_eq!(checked.len(), 21, "{checked:?}");
    // What the values say: the meeting as getMeetings and getRecordings report it.
    for (series, want) in [
        ("bbb_api_up", 1.0),
        (r#"bbb_exporter{version="0.1.0-hookrelay"}"#, 1.0),
        ("bbb_meetings_participants", 5.0),
        ("bbb_meetings_listeners", 1.0),
        ("bbb_meetings_voice_participants", 2.0),
        ("bbb_meetings_video_participants", 1.0),
        (
            r#"bbb_meetings_participants_origin{server="lms.example",name="moodle"}"#,
            4.0,
        ),
        (
            r#"bbb_meetings_participants_origin{server="",name=""}"#,
            1.0,
        ),
        ("bbb_room_participants_gcount", 2.0),
        ("bbb_room_participants_gsum", 5.0),
        (r#"bbb_room_participants_bucket{le="1"}"#, 1.0),
        (r#"bbb_room_participants_bucket{le="5"}"#, 2.0),
        (r#"bbb_room_voice_participants_bucket{le="0"}"#, 1.0),
        ("bbb_recordings_unprocessed", 1.0),
        ("bbb_recordings_processing", 1.0),
        ("bbb_recordings_published", 1.0),
        ("bbb_recordings_unpublished", 1.0),
        ("bbb_recordings_deleted", 1.0),
    ] {
        assert_eq!(metric_value(&text, series), want, "{series} in\n{text}");
    }
    assert!(
        text.contains(r#"bbb_api_latency_bucket{le="0.01",endpoint="getMeetings",parameters=""}"#),
        "{text}"
    );
    relay.stop().await;
}

#[tokio::test]
async fn every_bbb_query_of_the_exporters_dashboards_returns_data_in_a_real_prometheus() {
    let Some(binary) = prometheus() else {
        eprintln!("prometheus is not installed: the dashboards' queries are not evaluated");
        return;
    };
    let redis = TestRedis::start().await;
    let (relay, _api) = relay_after_a_meeting(&redis).await;
    let prom = TestPrometheus::start(&binary, relay.metrics).await;
    // Enough scrapes for rate(...[5m]) and increase(...): two at least, with the API's
    // latency counts growing in between.
    let what = "Prometheus scraped the relay 6 times";
    until_within(what, Duration::from_secs(60), async || {
        let scrapes = prom
            .query("count_over_time(bbb_exporter{job=\"bbb\"}[5m])")
            .await;
        let n = scrapes
            .first()
            .and_then(|r| r["value"][1].as_str())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        match n >= 6.0 {
            true => Ok(()),
            false => Err(format!("{n} scrapes")),
        }
    })
    .await;
    let instance = relay.metrics.to_string();
    for (series, label) in bbb_variables() {
        let values = prom.label_values(&series, &label).await;
        let want = if label == "job" {
            "bbb"
        } else {
            instance.as_str()
        };
        assert_eq!(values, [want], "label_values({series}, {label})");
    }
    let mut empty = Vec::new();
    for q in bbb_queries() {
        let expr = q
            .expr
            .replace("$job", "bbb")
            .replace("$instance", &instance)
            .replace("$__range", "5m");
        let result = prom.query(&expr).await;
        if result.is_empty() {
            empty.push(q);
        }
    }
    // Every panel line has data, getRecordings?state=processed's latency included (asked as
    // bbb-exporter asks it).
    assert!(empty.is_empty(), "queries without data: {empty:#?}");
    relay.stop().await;
}

#[tokio::test]
async fn reconciliation_removes_what_bbb_no_longer_has_and_bbb_api_up_follows_the_api() {
    let redis = TestRedis::start().await;
    let (relay, api) = relay_after_a_meeting(&redis).await;
    let wait_for = |series: &'static str, want: f64| {
        let relay = &relay;
        async move {
            until(&format!("{series} {want}"), async || {
                let m = relay.metrics().await;
                match metric_value(&m, series) == want {
                    true => Ok(m),
                    false => Err(m),
                }
            })
            .await
        }
    };
    // BBB crashed and came back without the meeting: no bus message says so.
    api.set_meetings(
        "<response><returncode>SUCCESS</returncode><meetings/><messageKey>noMeetings</messageKey></response>"
            .into(),
    );
    api.set_recordings(&[("r2", "published"), ("r9", "published")]);
    let m = wait_for("bbb_meetings", 0.0).await;
    assert_eq!(metric_value(&m, "bbb_meetings_participants"), 0.0);
    let m = wait_for("bbb_recordings_published", 2.0).await;
    assert_eq!(metric_value(&m, "bbb_recordings_processing"), 0.0);
    assert_eq!(
        metric_value(&m, "bbb_recordings_unprocessed"),
        1.0,
        "r0 waits to be processed: getRecordings cannot list it"
    );
    // The API fails: bbb_api_up 0, one log line; it answers again: 1, one line.
    api.set_meetings("<response><returncode>FAILED</returncode></response>".into());
    wait_for("bbb_api_up", 0.0).await;
    // Part of the scenario: the API stays down over a few reconciliations (one a second).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    api.set_meetings(meetings_xml());
    let m = wait_for("bbb_api_up", 1.0).await;
    assert_eq!(metric_value(&m, "bbb_meetings"), 2.0);
    relay.stop().await;
}

/// In a fleet, the instance that does not hold the lease exports no `bbb_*` series, so that the
/// all_servers dashboard does not show it as an empty server; the holder does.
#[tokio::test]
async fn in_a_fleet_only_the_holder_exports_the_bbb_series() {
    let redis = TestRedis::start().await;
    let holder = RelayProcess::start(&redis, crate::fleet::FLEET).await;
    crate::fleet::wait_until_holder(&holder).await;
    let other = RelayProcess::start(&redis, crate::fleet::FLEET).await;
    for m in script() {
        redis.publish(&m).await;
    }
    until("the holder counted the meeting", async || {
        let participants = metric_value(&holder.metrics().await, "bbb_meetings_participants");
        match participants == 5.0 {
            true => Ok(()),
            false => Err(participants),
        }
    })
    .await;
    let text = other.metrics().await;
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("bbb_") || l.contains(" bbb_")),
        "{text}"
    );
    assert!(holder.metrics().await.contains("bbb_exporter{"));
}
