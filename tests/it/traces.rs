//! Traces (`[tracing]`, docs/tracing.md), exported to a real OTLP collector (OpenTelemetry's
//! protobuf messages, decoded by PyPI's opentelemetry-proto): one trace per bus message, its
//! spans, parents and attributes; attempts in the message's trace after a restart; the
//! receiver's `traceparent`; the `OTEL_*` variables over the file; a collector that refuses
//! or hangs costs counted drops, never a delivery.

use serde_json::Value;

use crate::support::{
    PluginDir, RelayProcess, Reply, TestReceiver, TestRedis, TestRelay, meeting_created,
    metric_value,
    otlp::{Answer, Collector, attr, named, of_trace},
    process::cli,
    user_joined,
    wait::until,
};

const MEETING: &str = "183f0bf3a0982a127bdb8161e0c44eb696b3e75c-1531240585189";

/// The root span of the message named `message`.
fn root<'a>(spans: &'a [Value], message: &str) -> Option<&'a Value> {
    spans
        .iter()
        .find(|s| s["parent_span_id"] == "" && attr(s, "bbb.message.name") == message)
}

/// The `traceparent` header of a received callback.
fn traceparent(r: &crate::support::receiver::Received) -> String {
    r.headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .expect("a traceparent header")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_to_two_hooks_one_failing_twice_is_one_trace() {
    let collector = Collector::start("http", Answer::Ok);
    let redis = TestRedis::start().await;
    let plugins = PluginDir::new();
    plugins.add(
        "20-redact",
        "redact",
        Some("[scope]\nhooks = [2]\n[config]\nfields = [\"name\"]\nmode = \"mask\"\n"),
    );
    let mut config = TestRelay::config(&redis);
    config.tracing.otlp_endpoint = collector.endpoint();
    config.delivery.traceparent = true;
    config.plugins.dir = Some(plugins.path().to_path_buf());
    config.plugins.cache_dir = Some(plugins.path().join(".cache"));
    let relay = TestRelay::start_with(&redis, config).await;
    let (steady, flaky) = (TestReceiver::start().await, TestReceiver::start().await);
    let first = relay.create_hook(&steady.url("/steady"), "").await;
    // A token in the query: it must not reach the spans.
    let second = relay
        .create_hook(&flaky.url("/flaky?token=do-not-trace"), "")
        .await;
    redis.publish(&meeting_created(MEETING, "ext-1")).await;
    steady.wait_delivered(1).await;
    flaky.wait_delivered(1).await;
    flaky.script([Reply::Status(500), Reply::Status(500)]);
    redis.publish(&user_joined(MEETING, "w_1", "Ada")).await;
    steady.wait_delivered(2).await;
    flaky.wait_delivered(2).await;

    let spans = collector
        .wait(
            "the user-joined message's spans, its three attempts to the flaky hook among them",
            |s| {
                root(s, "UserJoinedMeetingEvtMsg").is_some_and(|r| {
                    let t = of_trace(s, r["trace_id"].as_str().unwrap_or(""));
                    named(&t, "POST").len() == 4 && named(&t, "enqueue").len() == 2
                })
            },
        )
        .await;
    let r = root(&spans, "UserJoinedMeetingEvtMsg").expect("root");
    let trace = r["trace_id"].as_str().expect("trace id").to_string();
    let t = of_trace(&spans, &trace);
    let root_id = r["span_id"].as_str().expect("span id");
    assert_eq!(r["name"], "receive from-akka-apps-redis-channel");
    assert_eq!(r["kind"], 5, "a consumer span");
    assert_eq!(r["service"], "hookrelay");
    assert_eq!(attr(r, "messaging.system"), "redis");
    assert_eq!(
        attr(r, "messaging.destination.name"),
        "from-akka-apps-redis-channel"
    );
    assert_eq!(attr(r, "bbb.meeting.internal_id"), MEETING);
    assert_eq!(attr(r, "bbb.meeting.id"), "ext-1");
    assert_eq!(attr(r, "bbb.server"), "default");

    let process = named(&t, "process");
    assert_eq!(process.len(), 1);
    assert_eq!(process[0]["parent_span_id"], root_id);
    assert_eq!(
        attr(process[0], "hookrelay.event.ids"),
        &serde_json::json!(["user-joined"])
    );
    let route = named(&t, "route");
    assert_eq!(route.len(), 1);
    assert_eq!(route[0]["parent_span_id"], root_id);
    assert_eq!(attr(route[0], "hookrelay.hooks.matched"), 2);
    assert_eq!(attr(route[0], "hookrelay.destinations.matched"), 0);

    let enqueue_of = |hook: u64| -> &Value {
        let e: Vec<&Value> = named(&t, "enqueue")
            .into_iter()
            .filter(|s| attr(s, "hookrelay.hook.id") == hook)
            .collect();
        assert_eq!(e.len(), 1, "one enqueue span for hook {hook}");
        assert_eq!(e[0]["parent_span_id"], root_id);
        e[0]
    };
    let attempts_of = |hook: u64| -> Vec<&Value> {
        let id = enqueue_of(hook)["span_id"].clone();
        let mut a: Vec<&Value> = named(&t, "POST")
            .into_iter()
            .filter(|s| s["parent_span_id"] == id)
            .collect();
        a.sort_by_key(|s| s["start"].as_u64());
        a
    };
    let steady_attempts = attempts_of(first);
    assert_eq!(steady_attempts.len(), 1);
    assert_eq!(attr(steady_attempts[0], "http.response.status_code"), 200);
    assert_eq!(attr(steady_attempts[0], "hookrelay.verdict"), "delivered");
    let flaky_attempts = attempts_of(second);
    let seen: Vec<(Value, Value, Value)> = flaky_attempts
        .iter()
        .map(|s| {
            (
                attr(s, "http.response.status_code").clone(),
                attr(s, "hookrelay.verdict").clone(),
                attr(s, "http.request.resend_count").clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (500.into(), "retry".into(), Value::Null),
            (500.into(), "retry".into(), 1.into()),
            (200.into(), "delivered".into(), 2.into()),
        ]
    );
    for a in &flaky_attempts {
        assert_eq!(a["kind"], 3, "a client span");
        assert_eq!(attr(a, "http.request.method"), "POST");
        assert_eq!(attr(a, "hookrelay.hook.id"), second);
        assert_eq!(attr(a, "hookrelay.event.id"), "user-joined");
        assert_eq!(attr(a, "server.address"), "127.0.0.1");
        assert_eq!(attr(a, "url.full"), &Value::from(flaky.url("/flaky")));
    }
    assert_eq!(
        flaky_attempts[0]["status"]["code"], 2,
        "a failed attempt is an error"
    );
    assert_eq!(attr(flaky_attempts[0], "error.type"), "500");
    let text = serde_json::to_string(&spans).expect("json");
    assert!(
        !text.contains("do-not-trace"),
        "a callback URL's query never reaches a span"
    );

    // The redact plugin ran for the flaky hook only, once (retries send what it made).
    let plugin = named(&t, "plugin 20-redact");
    assert_eq!(plugin.len(), 1, "{plugin:?}");
    assert_eq!(plugin[0]["parent_span_id"], enqueue_of(second)["span_id"]);
    assert_eq!(attr(plugin[0], "hookrelay.plugin.result"), "replace");

    // Each attempt's callback carries its own span as traceparent.
    let joined: Vec<_> = flaky
        .received()
        .into_iter()
        .filter(|r| r.body.contains("user-joined"))
        .collect();
    let sent: Vec<String> = joined.iter().map(traceparent).collect();
    let expected: Vec<String> = flaky_attempts
        .iter()
        .map(|s| format!("00-{trace}-{}-01", s["span_id"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(sent, expected);
    let steady_joined = steady
        .received()
        .into_iter()
        .find(|r| r.body.contains("user-joined"))
        .expect("user-joined");
    assert!(traceparent(&steady_joined).starts_with(&format!("00-{trace}-")));

    // Every kept attempt names its trace (the attempts are written down in batches).
    let joined_attempts = until("the three attempts kept", async || {
        let deliveries = relay
            .admin_get(&format!("/v1/hooks/{second}/deliveries"))
            .await;
        let joined: Vec<Value> = deliveries["deliveries"]
            .as_array()
            .map(|d| {
                d.iter()
                    .filter(|d| d["event_id"] == "user-joined")
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        match joined.len() {
            3 => Ok(joined),
            _ => Err(deliveries),
        }
    })
    .await;
    assert!(
        joined_attempts
            .iter()
            .all(|d| d["trace_id"] == trace.as_str())
    );
    let m = relay.metrics().await;
    assert_eq!(
        metric_value(
            &m,
            "hookrelay_trace_spans_dropped_total{reason=\"queue_full\"}"
        ),
        0.0
    );
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_after_a_kill_and_a_restart_join_the_message_trace() {
    let collector = Collector::start("http", Answer::Ok);
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    rx.set_default(Reply::Status(500));
    let extra = format!(
        "on_give_up = \"disable\"\n[tracing]\notlp_endpoint = \"{}\"\n",
        collector.endpoint()
    );
    let relay = RelayProcess::start(&redis, &extra).await;
    let hook = crate::support::relay::hook_id_of(
        &relay
            .call("create", &format!("callbackURL={}", rx.url("/cb")))
            .await,
    )
    .expect("hook id");
    redis.publish(&user_joined(MEETING, "w_1", "Ada")).await;
    // All four attempts fail, the hook is disabled, and the spans are out.
    let spans = collector
        .wait("four failed attempts", |s| {
            s.iter()
                .filter(|x| x["name"] == "POST" && attr(x, "http.response.status_code") == 500)
                .count()
                == 4
        })
        .await;
    let r = root(&spans, "UserJoinedMeetingEvtMsg")
        .expect("root")
        .clone();
    let trace = r["trace_id"].as_str().expect("trace").to_string();
    relay.wait_log("the failure's log line", &trace).await;
    relay.kill9().await;

    rx.set_default(Reply::Status(200));
    let relay = RelayProcess::start(&redis, &extra).await;
    let cfg = relay.config.to_str().expect("path").to_string();
    let id = hook.to_string();
    let (code, out, err) = cli(&["hooks", "enable", &id, "-c", &cfg]);
    assert_eq!(code, 0, "{out}{err}");
    rx.wait_delivered(1).await;
    let spans = collector
        .wait("the attempt after the restart", |s| {
            s.iter()
                .any(|x| x["name"] == "POST" && attr(x, "http.response.status_code") == 200)
        })
        .await;
    let t = of_trace(&spans, &trace);
    let enqueue = named(&t, "enqueue");
    assert_eq!(enqueue.len(), 1);
    let attempts = named(&t, "POST");
    assert_eq!(
        attempts.len(),
        5,
        "four before the kill, one after, in one trace"
    );
    assert!(
        attempts
            .iter()
            .all(|a| a["parent_span_id"] == enqueue[0]["span_id"])
    );
    let after = attempts
        .iter()
        .find(|a| attr(a, "http.response.status_code") == 200)
        .expect("the delivery");
    assert_eq!(attr(after, "hookrelay.verdict"), "delivered");
    assert!(
        spans.iter().filter(|s| s["name"] == "POST").count() == 5,
        "no attempt outside the message's trace"
    );
    // From the hook to its trace: `hooks show` and `deliveries` name it for each attempt.
    // The attempts are written down in batches: the last one shortly after it was made.
    let shown = until("hooks show with the five attempts' traces", async || {
        let (code, shown, _) = cli(&["hooks", "show", &id, "-c", &cfg]);
        match code == 0 && shown.lines().filter(|l| l.contains(&trace)).count() == 5 {
            true => Ok(shown),
            false => Err(shown),
        }
    })
    .await;
    let traces: Vec<&str> = shown.lines().filter(|l| l.contains(&trace)).collect();
    assert!(traces[0].trim_start().starts_with("traces:"), "{shown}");
    let (code, listed, _) = cli(&["deliveries", &id, "-c", &cfg]);
    assert_eq!(code, 0, "{listed}");
    assert_eq!(
        listed
            .lines()
            .filter(|l| l.ends_with(&format!("trace {trace}")))
            .count(),
        5,
        "{listed}"
    );
    relay.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otel_variables_override_the_file_and_bad_ones_never_stop_the_start() {
    let collector = Collector::start("http", Answer::Ok);
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    // The file names a collector that is not there, and another service name.
    let extra = "[tracing]\notlp_endpoint = \"http://127.0.0.1:9\"\nservice_name = \"from-file\"\nsample_ratio = 0.0\n";
    let endpoint = collector.endpoint();
    let relay = RelayProcess::start_env(
        &redis,
        extra,
        "info",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_SERVICE_NAME", "relay-eu-1"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=k%3D1"),
            ("OTEL_TRACES_SAMPLER", "always_on"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon"),
        ],
    )
    .await;
    relay
        .wait_log(
            "the unusable variable passed over",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        )
        .await;
    relay
        .call("create", &format!("callbackURL={}", rx.url("/cb")))
        .await;
    redis.publish(&user_joined(MEETING, "w_1", "Ada")).await;
    rx.wait_delivered(1).await;
    let spans = collector
        .wait("spans at the variables' collector", |s| {
            s.iter().any(|x| x["name"] == "POST")
        })
        .await;
    assert!(spans.iter().all(|s| s["service"] == "relay-eu-1"));
    assert!(
        spans
            .iter()
            .all(|s| s["headers"]["x-collector-key"] == "k=1")
    );
    assert!(spans.iter().all(|s| s["path"] == "/v1/traces"));
    relay.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_go_over_grpc_too() {
    let collector = Collector::start("grpc", Answer::Ok);
    let redis = TestRedis::start().await;
    let mut config = TestRelay::config(&redis);
    config.tracing.otlp_endpoint = collector.endpoint();
    config.tracing.protocol = hookrelay::config::traces::OtlpProtocol::Grpc;
    config.tracing.headers.insert(
        "x-collector-key".into(),
        hookrelay::base::secret::Secret::new("g"),
    );
    let relay = TestRelay::start_with(&redis, config).await;
    let rx = TestReceiver::start().await;
    relay.create_hook(&rx.url("/"), "").await;
    redis.publish(&user_joined(MEETING, "w_1", "Ada")).await;
    rx.wait_delivered(1).await;
    let spans = collector
        .wait("the attempt's span over gRPC", |s| {
            s.iter().any(|x| x["name"] == "POST")
        })
        .await;
    let r = root(&spans, "UserJoinedMeetingEvtMsg").expect("root");
    assert_eq!(
        of_trace(&spans, r["trace_id"].as_str().unwrap_or("")).len(),
        5
    );
    assert!(spans.iter().all(|s| s["headers"]["x-collector-key"] == "g"));
    relay.stop().await;
}

/// The relay with traces to `endpoint` (`timeout_ms`, `max_queue`) delivers `n` events in
/// order; the spans dropped, by reason.
async fn deliveries_with_a_bad_collector(endpoint: &str, max_queue: usize) -> (f64, f64) {
    let redis = TestRedis::start().await;
    let mut config = TestRelay::config(&redis);
    config.tracing.otlp_endpoint = endpoint.to_string();
    config.tracing.timeout_ms = 300;
    config.tracing.max_queue = max_queue;
    let relay = TestRelay::start_with(&redis, config).await;
    let rx = TestReceiver::start().await;
    relay.create_hook(&rx.url("/"), "").await;
    redis.publish_users(0..300).await;
    let got = rx.wait_delivered(300).await;
    let names: Vec<String> = got
        .iter()
        .map(|r| crate::support::user_name(&r.event()))
        .collect();
    let expected: Vec<String> = (0..300).map(|i| format!("n{i}")).collect();
    assert!(names == expected, "every event once, in order");
    let drops = until("spans dropped and counted", async || {
        let m = relay.metrics().await;
        let failed = metric_value(
            &m,
            "hookrelay_trace_spans_dropped_total{reason=\"export_failed\"}",
        );
        let full = metric_value(
            &m,
            "hookrelay_trace_spans_dropped_total{reason=\"queue_full\"}",
        );
        match failed + full > 0.0 {
            true => Ok((failed, full)),
            false => Err(m),
        }
    })
    .await;
    relay.stop().await;
    drops
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_refuses_or_hangs_costs_counted_drops_never_a_delivery() {
    let refusing = Collector::start("http", Answer::Refuse);
    let (failed, _) = deliveries_with_a_bad_collector(&refusing.endpoint(), 8192).await;
    assert!(failed > 0.0, "refused exports are counted");
    let hanging = Collector::start("http", Answer::Hang);
    let (failed, full) = deliveries_with_a_bad_collector(&hanging.endpoint(), 16).await;
    assert!(
        full > 0.0,
        "a hanging collector fills the queue: later spans are dropped"
    );
    assert!(failed >= 0.0);
    // Nothing listens there at all.
    let (failed, _) = deliveries_with_a_bad_collector(
        &format!("http://127.0.0.1:{}", crate::support::free_port()),
        8192,
    )
    .await;
    assert!(failed > 0.0);
}

#[test]
fn check_config_refuses_an_endpoint_that_is_not_a_url() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("hookrelay.toml");
    std::fs::write(
        &file,
        "[bbb]\nsecret = \"a-long-enough-secret-0123456789\"\n[tracing]\notlp_endpoint = \"collector:4318\"\n",
    )
    .expect("write");
    let out = std::process::Command::new(crate::support::process::binary())
        .args(["check-config", "-c"])
        .arg(&file)
        .output()
        .expect("check-config");
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("tracing.otlp_endpoint"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_receiver_joins_the_relays_trace_under_its_attempt() {
    let collector = Collector::start("http", Answer::Ok);
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/tracing.md");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/it/support/otlp_joining_receiver.py"
    );
    let mut receiver = std::process::Command::new("python3")
        .args([script, docs, &collector.endpoint()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the docs' receiver");
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(receiver.stdout.take().expect("stdout")),
        &mut first,
    )
    .expect("its port");
    let port: u16 = first
        .trim()
        .strip_prefix("listening ")
        .and_then(|p| p.parse().ok())
        .expect("listening <port>");
    let redis = TestRedis::start().await;
    let mut config = TestRelay::config(&redis);
    config.tracing.otlp_endpoint = collector.endpoint();
    config.delivery.traceparent = true;
    let relay = TestRelay::start_with(&redis, config).await;
    relay
        .create_hook(&format!("http://127.0.0.1:{port}/bbb"), "")
        .await;
    redis.publish(&user_joined(MEETING, "w_1", "Ada")).await;
    let spans = collector
        .wait("the receiver's span", |s| {
            s.iter().any(|x| x["name"] == "handle bbb event")
                && s.iter().any(|x| x["name"] == "POST")
        })
        .await;
    let _ = receiver.kill();
    let _ = receiver.wait();
    let mine = spans
        .iter()
        .find(|s| s["name"] == "handle bbb event")
        .expect("the receiver's span");
    let attempt = spans.iter().find(|s| s["name"] == "POST").expect("attempt");
    assert_eq!(mine["service"], "bbb-receiver");
    assert_eq!(mine["trace_id"], attempt["trace_id"], "one trace");
    assert_eq!(
        mine["parent_span_id"], attempt["span_id"],
        "under the attempt that reached it"
    );
    let r = root(&spans, "UserJoinedMeetingEvtMsg").expect("root");
    assert_eq!(r["trace_id"], mine["trace_id"]);
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xapi_statements_and_destination_messages_join_the_message_trace() {
    let collector = Collector::start("http", Answer::Ok);
    let redis = TestRedis::start().await;
    let lrs = TestReceiver::start().await;
    // The LRS fails the first try of the first statement: its retry shows in the trace.
    lrs.script([Reply::Status(503)]);
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("events.jsonl");
    let extra = format!(
        "[tracing]\notlp_endpoint = \"{}\"\n{}[[destinations]]\nname = \"archive\"\nurl = \"file://{}\"\n",
        collector.endpoint(),
        crate::xapi::config(&lrs.url("")),
        file.display()
    );
    let relay = RelayProcess::start(&redis, &extra).await;
    let lines = crate::xapi::meeting("traced", serde_json::json!({}));
    for line in lines.iter().take(2) {
        redis.publish(line).await;
    }
    let spans = collector
        .wait("the statements' and the file's spans", |s| {
            s.iter()
                .filter(|x| attr(x, "hookrelay.output") == "xapi")
                .count()
                >= 3
                && s.iter()
                    .filter(|x| {
                        x["name"]
                            .as_str()
                            .is_some_and(|n| n.starts_with("publish "))
                    })
                    .count()
                    >= 2
        })
        .await;
    for posted in spans
        .iter()
        .filter(|s| attr(s, "hookrelay.output") == "xapi")
    {
        let t = of_trace(&spans, posted["trace_id"].as_str().unwrap_or(""));
        let enqueue = t
            .iter()
            .find(|s| s["span_id"] == posted["parent_span_id"])
            .expect("the statement's enqueue span");
        assert_eq!(enqueue["name"], "enqueue");
        assert!(
            attr(enqueue, "hookrelay.output")
                .as_str()
                .is_some_and(|o| o.starts_with("xapi:")),
            "{enqueue}"
        );
        let r = t.iter().find(|s| s["parent_span_id"] == "").expect("root");
        assert_eq!(enqueue["parent_span_id"], r["span_id"]);
        assert_eq!(posted["kind"], 3);
        assert!(
            attr(posted, "url.full")
                .as_str()
                .is_some_and(|u| u.ends_with("/xAPI/statements"))
        );
    }
    let verdicts: Vec<&Value> = spans
        .iter()
        .filter(|s| attr(s, "hookrelay.output") == "xapi")
        .map(|s| attr(s, "hookrelay.verdict"))
        .collect();
    assert!(verdicts.contains(&&Value::from("retry")), "{verdicts:?}");
    for published in spans.iter().filter(|s| {
        s["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("publish "))
    }) {
        assert_eq!(attr(published, "messaging.system"), "file");
        assert_eq!(attr(published, "hookrelay.destination"), "archive");
        assert_eq!(attr(published, "hookrelay.verdict"), "published");
        let t = of_trace(&spans, published["trace_id"].as_str().unwrap_or(""));
        let enqueue = t
            .iter()
            .find(|s| s["span_id"] == published["parent_span_id"])
            .expect("the message's enqueue span");
        assert_eq!(attr(enqueue, "hookrelay.output"), "destination:archive");
        let r = t.iter().find(|s| s["parent_span_id"] == "").expect("root");
        let route = named(&t, "route");
        assert_eq!(attr(route[0], "hookrelay.destinations.matched"), 1);
        assert_eq!(enqueue["parent_span_id"], r["span_id"]);
    }
    relay.terminate().await;
}
