//! Each kind of destination gets what a hook gets, in order; the docs' consumers read it;
//! plugins, redeliver and check-config.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn each_kind_gets_a_thousand_events_once_in_order_as_the_hook_got_them() {
    const N: usize = 1000;
    let nats = OwnBroker::nats().await;
    let stream = nats_stream(&nats).await;
    let mosquitto = OwnBroker::mosquitto().await;
    let mut mqtt = mqtt_subscriber(mosquitto.port, "bbb/#").await;
    let exchange = unique_name("hookrelay-test");
    let (_channel, mut amqp) = amqp_queue(&exchange).await;
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("events.jsonl");
    let extra = [
        destination(
            "nats",
            &format!("nats://127.0.0.1:{}", nats.port),
            "bbb.{server}.{meeting}.{event}",
        ),
        destination(
            "mqtt",
            &format!("mqtt://127.0.0.1:{}", mosquitto.port),
            "bbb/{meeting}/{event}",
        ),
        destination("amqp", RABBITMQ, &format!("{exchange}/bbb.{{event}}")),
        destination("file", &format!("file://{}", file.display()), ""),
    ]
    .concat();
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, &extra).await;
    let receiver = hooked(&relay).await;
    let messages = three_meetings(N);
    redis.publish_all(&messages[..N / 2]).await;
    // logrotate in the middle: the file moved away, the next lines in a new one.
    wait::until("half the events in the file", async || {
        let lines = std::fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .count();
        if lines == N / 2 { Ok(()) } else { Err(lines) }
    })
    .await;
    std::fs::rename(&file, dir.path().join("events.jsonl.1")).expect("rotate");
    redis.publish_all(&messages[N / 2..]).await;

    let expected = hook_events(&receiver, N).await;
    assert_eq!(expected.len(), N);
    let expected = as_values(&expected);

    let got = nats_messages(&stream, N).await;
    assert_eq!(got.len(), N, "JetStream holds each event once");
    let bodies: Vec<String> = got.iter().map(|m| m.body.clone()).collect();
    assert_same(
        "NATS: the hook's events, in order",
        &as_values(&bodies),
        &expected,
    );
    let ids: HashSet<&String> = got.iter().map(|m| &m.id).collect();
    assert_eq!(ids.len(), N, "each message its own Nats-Msg-Id");
    assert_eq!(got[0].subject, "bbb.default.ext-0.meeting-created");
    assert_eq!(got[3].subject, "bbb.default.ext-0.user-joined");
    assert_eq!(
        (
            got[3].event.as_str(),
            got[3].meeting.as_str(),
            got[3].content_type.as_str()
        ),
        ("user-joined", "ext-0", "application/json")
    );

    let got = take(&mut mqtt, N).await;
    let bodies: Vec<String> = got.iter().map(|(_, b)| b.clone()).collect();
    assert_same(
        "MQTT: the hook's events, in order",
        &as_values(&bodies),
        &expected,
    );
    assert_eq!(
        got.iter().map(|(id, _)| id).collect::<HashSet<_>>().len(),
        N
    );

    let got = amqp_messages(&mut amqp, N).await;
    let bodies: Vec<String> = got.iter().map(|(_, _, _, b)| b.clone()).collect();
    assert_same(
        "AMQP: the hook's events, in order",
        &as_values(&bodies),
        &expected,
    );
    assert_eq!(got[3].1, "user-joined", "AMQP's type: the event id");
    assert_eq!(got[3].2, "bbb.user-joined");
    assert_eq!(
        got.iter().map(|(id, ..)| id).collect::<HashSet<_>>().len(),
        N
    );

    let mut lines: Vec<String> = std::fs::read_to_string(dir.path().join("events.jsonl.1"))
        .expect("rotated file")
        .lines()
        .map(String::from)
        .collect();
    let after = std::fs::read_to_string(&file).expect("new file");
    assert_eq!(lines.len(), N / 2, "the old file ends where it was moved");
    lines.extend(after.lines().map(String::from));
    assert_same(
        "the file: one event a line, in order",
        &as_values(&lines),
        &expected,
    );

    for name in ["nats", "mqtt", "amqp", "file"] {
        assert_eq!(published(&relay, name).await, N as f64, "{name}");
    }
    drop(relay);
}

fn doc_consumer(title: &str) -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/destinations.md"))
        .expect("docs/destinations.md");
    let section = doc
        .split(&format!("\n## {title}"))
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the section");
    let start = section.find("```python\n").expect("the consumer") + "```python\n".len();
    section[start..]
        .split("```")
        .next()
        .expect("its end")
        .to_string()
}

/// Runs a consumer of the docs with `env`; its lines, as they come.
fn run_consumer(
    code: &str,
    env: &[(&str, String)],
) -> (
    tokio::process::Child,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new("python3")
        .arg("-c")
        .arg(code)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 (scripts/ensure-brokers.sh installs the consumers' packages)");
    let stdout = child.stdout.take().expect("stdout");
    (child, tokio::io::BufReader::new(stdout).lines())
}

/// The next `n` lines: (event id, body).
async fn lines_of(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    n: usize,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    while out.len() < n {
        match tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await {
            Ok(Ok(Some(line))) => {
                let (event, body) = line.split_once(' ').unwrap_or((&line, ""));
                out.push((event.to_string(), body.to_string()));
            }
            other => panic!("the consumer stopped after {} lines: {other:?}", out.len()),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn the_consumers_in_the_docs_read_what_the_relay_published() {
    const N: usize = 12;
    let nats = OwnBroker::nats().await;
    let mosquitto = OwnBroker::mosquitto().await;
    let exchange = unique_name("hookrelay-docs");
    let queue = unique_name("hookrelay-docs-queue");
    // MQTT and AMQP consumers first: the broker drops what nobody subscribed to.
    let (_mqtt, mut mqtt_lines) = run_consumer(
        &doc_consumer("Consuming from MQTT"),
        &[
            ("MQTT_PORT", mosquitto.port.to_string()),
            ("COUNT", N.to_string()),
        ],
    );
    let subscribed = lines_of(&mut mqtt_lines, 1).await;
    assert_eq!(subscribed[0].0, "subscribed");
    let (_amqp, mut amqp_lines) = run_consumer(
        &doc_consumer("Consuming from RabbitMQ"),
        &[
            ("EXCHANGE", exchange.clone()),
            ("QUEUE", queue.clone()),
            ("COUNT", N.to_string()),
        ],
    );
    let connection = rabbitmq().await;
    let channel = connection.create_channel().await.expect("channel");
    wait::until("the consumer's queue is bound", async || {
        // A passive declare closes the channel when the queue is missing: a new one each try.
        let c = connection
            .create_channel()
            .await
            .map_err(|e| e.to_string())?;
        c.queue_declare(
            queue.as_str().into(),
            lapin::options::QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
    })
    .await;
    let extra = [
        destination(
            "nats",
            &format!("nats://127.0.0.1:{}", nats.port),
            "bbb.{event}",
        ),
        destination(
            "mqtt",
            &format!("mqtt://127.0.0.1:{}", mosquitto.port),
            "bbb/{meeting}/{event}",
        ),
        destination("amqp", RABBITMQ, &format!("{exchange}/bbb.{{event}}")),
    ]
    .concat();
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, &extra).await;
    let receiver = hooked(&relay).await;
    // The NATS consumer makes its stream; until then the destination fails and waits.
    let (_nats, mut nats_lines) = run_consumer(
        &doc_consumer("Consuming from NATS JetStream"),
        &[
            ("NATS_URL", format!("nats://127.0.0.1:{}", nats.port)),
            ("COUNT", N.to_string()),
        ],
    );
    redis.publish_all(&three_meetings(N)).await;
    let expected = as_values(&hook_events(&receiver, N).await);
    let events: Vec<String> = expected
        .iter()
        .map(|e| e["data"]["id"].as_str().unwrap_or_default().to_string())
        .collect();
    for (kind, lines) in [
        ("NATS", &mut nats_lines),
        ("MQTT", &mut mqtt_lines),
        ("AMQP", &mut amqp_lines),
    ] {
        let got = lines_of(lines, N).await;
        let bodies: Vec<String> = got.iter().map(|(_, b)| b.clone()).collect();
        assert_same(kind, &as_values(&bodies), &expected);
        let ids: Vec<String> = got.iter().map(|(e, _)| e.clone()).collect();
        assert_same(kind, &ids, &events);
    }
    let _ = channel
        .queue_delete(
            queue.as_str().into(),
            lapin::options::QueueDeleteOptions::default(),
        )
        .await;
    drop(relay);
}

#[test]
fn check_config_names_the_key_of_a_bad_destination() {
    let dir = tempfile::tempdir().expect("dir");
    let check = |toml: &str| {
        let file = dir.path().join("hookrelay.toml");
        std::fs::write(
            &file,
            format!("[bbb]\nsecret = \"{}\"\n{toml}", crate::support::SECRET),
        )
        .expect("config");
        let out = std::process::Command::new(crate::support::process::binary())
            .args(["check-config", "-c"])
            .arg(&file)
            .output()
            .expect("check-config");
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (ok, said) = check(&destination("k", "kafka://127.0.0.1:9092", "t"));
    assert!(!ok, "{said}");
    assert!(
        said.contains("destinations[0].url: the scheme must be"),
        "{said}"
    );
    let (ok, said) = check(&destination("n", "nats://127.0.0.1:4222", "bbb.{user}"));
    assert!(
        !ok && said.contains("destinations[0].target: unknown placeholder {user}"),
        "{said}"
    );
    let (ok, said) = check(&format!(
        "{}password_file = \"/nonexistent/pw\"\n",
        destination("n", "nats://127.0.0.1:4222", "bbb.{event}")
    ));
    assert!(
        !ok && said.contains("destinations[0].password_file: cannot read"),
        "{said}"
    );
    let (ok, said) = check(&destination(
        "n",
        "nats://u:hidden-pw@127.0.0.1:4222",
        "bbb.{event}",
    ));
    assert!(ok, "{said}");
    assert!(
        said.contains("destination n: nats nats://u:***@127.0.0.1:4222 bbb.{event}"),
        "{said}"
    );
    assert!(!said.contains("hidden-pw"), "never shown: {said}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rules_plugin_drops_an_event_type_for_one_destination() {
    // Scoped to no hook; named by both destinations; its rule drops joins for "a" only.
    const RULES: &str = r#"
[scope]
callback_prefixes = ["https://nothing.example/"]

[config]
default = "keep"

[[config.rules]]
name = "no-joins-for-a"
action = "drop"
pattern.data.id = ["user-joined"]
pattern.hook.callback-url = ["destination:a"]
"#;
    let plugins = PluginDir::new();
    plugins.add("30-rules", "rules", Some(RULES));
    let dir = tempfile::tempdir().expect("dir");
    let file = |n: &str| dir.path().join(format!("{n}.jsonl"));
    let with_plugins = |toml: String| format!("{toml}plugins = [\"30-rules\"]\n");
    let extra = format!(
        "{}{}[plugins]\ndir = \"{}\"\ncache_dir = \"{}\"\n",
        with_plugins(destination(
            "a",
            &format!("file://{}", file("a").display()),
            ""
        )),
        with_plugins(destination(
            "b",
            &format!("file://{}", file("b").display()),
            ""
        )),
        plugins.path().display(),
        plugins.path().join(".cache").display()
    );
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, &extra).await;
    let receiver = hooked(&relay).await;
    redis.publish_all(&three_meetings(9)).await;
    let expected = as_values(&hook_events(&receiver, 9).await);
    let lines = |n: &str| -> Vec<String> {
        std::fs::read_to_string(file(n))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    };
    wait::until("b has all nine", async || {
        let b = lines("b");
        if b.len() == 9 { Ok(()) } else { Err(b.len()) }
    })
    .await;
    assert_same("b: every event", &as_values(&lines("b")), &expected);
    wait::until("a's six joins dropped", async || {
        let m = relay.metrics().await;
        let n = crate::support::metric_value(
            &m,
            "hookrelay_destination_skipped_total{destination=\"a\",reason=\"plugin\"}",
        );
        if n == 6.0 { Ok(()) } else { Err(n) }
    })
    .await;
    let a = as_values(&lines("a"));
    assert_same("a: the meetings only", &a, &expected[..3]);
    drop(relay);
}

#[tokio::test(flavor = "multi_thread")]
async fn redeliver_queues_what_a_destination_published_again_in_order() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("events.jsonl");
    let extra = destination("archive", &format!("file://{}", file.display()), "");
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, &extra).await;
    let messages = three_meetings(9);
    redis.publish_all(&messages).await;
    let lines = || -> Vec<String> {
        std::fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    };
    wait::until("nine lines", async || {
        let n = lines().len();
        if n == 9 { Ok(()) } else { Err(n) }
    })
    .await;
    let config = relay.config.display().to_string();
    // The joins of meeting ext-1 only, then all of them.
    let (code, out, err) = cli(&[
        "redeliver",
        "--destination",
        "archive",
        "--since",
        "10m",
        "--meeting",
        "ext-1",
        "--event-id",
        "user-joined",
        "-c",
        &config,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("queued 2 messages again for destination archive"),
        "{out}"
    );
    let (code, out, _) = cli(&[
        "redeliver",
        "--destination",
        "archive",
        "--since",
        "10m",
        "-c",
        &config,
    ]);
    assert_eq!(code, 0);
    assert!(out.starts_with("queued 9 messages again"), "{out}");
    wait::until("twenty lines", async || {
        let n = lines().len();
        if n == 20 { Ok(()) } else { Err(n) }
    })
    .await;
    let all = as_values(&lines());
    let first = &all[..9];
    let ext1_joins: Vec<Value> = first
        .iter()
        .filter(|e| {
            e["data"]["id"] == "user-joined"
                && e["data"]["attributes"]["meeting"]["external-meeting-id"] == "ext-1"
        })
        .cloned()
        .collect();
    assert_same("the meeting's joins again", &all[9..11], &ext1_joins);
    assert_same("all of them again, in order", &all[11..], first);
    let (code, _, err) = cli(&[
        "redeliver",
        "--destination",
        "nope",
        "--since",
        "10m",
        "-c",
        &config,
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("no destination is named nope"), "{err}");
    drop(relay);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenants_meeting_names_its_tenant_in_the_subject_and_a_header() {
    let nats = OwnBroker::nats().await;
    let stream = nats_stream(&nats).await;
    let extra = destination(
        "nats",
        &format!("nats://127.0.0.1:{}", nats.port),
        "bbb.{tenant}.{meeting}.{event}",
    );
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, &extra).await;
    // Scalelite's meta_tenant-id and meta_tenant-name; and a meeting of no tenant.
    let tenant = serde_json::json!({ "tenant-id": "t-17", "tenant-name": "acme" });
    redis
        .publish_all(&[
            crate::support::meeting_created_with_metadata("int-a", "course.101", &tenant),
            user_joined("int-a", "u1", "Ann"),
            meeting_created("int-b", "ext-b"),
        ])
        .await;
    let got = nats_messages(&stream, 3).await;
    let seen: Vec<(&str, &str)> = got
        .iter()
        .map(|m| (m.subject.as_str(), m.tenant.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("bbb.acme.course_101.meeting-created", "acme"),
            ("bbb.acme.course_101.user-joined", "acme"),
            ("bbb._.ext-b.meeting-created", ""),
        ],
        "the tenant's name; a '.' of the meeting id made '_'; no tenant: '_' and no header"
    );
    drop(relay);
}
