//! Destinations against real brokers (`[[destinations]]`, docs/destinations.md): 1,000 events
//! of three meetings consumed back from NATS JetStream, RabbitMQ, Mosquitto and a file, each
//! once, in order, each body the event a hook got; each broker stopped for 5 s and the relay
//! killed -9; TLS; refused credentials and a missing exchange; a message over the broker's
//! limit; the rules plugin; a fleet's takeover; the docs' consumers.

use std::{collections::HashSet, time::Duration};

use futures_util::StreamExt;
use serde_json::Value;

use crate::support::{
    PluginDir, RelayProcess, TestReceiver, TestRedis,
    brokers::{OwnBroker, RABBITMQ, amqp_queue, rabbitmq},
    meeting_created,
    process::cli,
    tls::TestCa,
    user_joined, wait,
};

/// The three meetings' messages: each created, then `n - 3` joins in turn.
fn three_meetings(n: usize) -> Vec<String> {
    let mut out: Vec<String> = (0..3)
        .map(|m| meeting_created(&format!("int-{m}"), &format!("ext-{m}")))
        .collect();
    out.extend((3..n).map(|i| {
        let m = i % 3;
        user_joined(&format!("int-{m}"), &format!("u{i}"), &format!("n{i}"))
    }));
    out
}

/// A destination's TOML.
fn destination(name: &str, url: &str, target: &str) -> String {
    format!(
        "[[destinations]]\nname = \"{name}\"\nurl = \"{url}\"\ntarget = \"{target}\"\nretry_intervals_ms = [100, 200, 400]\npublish_timeout_ms = 3000\n"
    )
}

/// A hook of every event on `relay`, to a receiver of its own.
async fn hooked(relay: &RelayProcess) -> TestReceiver {
    let receiver = TestReceiver::start().await;
    crate::support::relay::create_hook(
        &crate::support::relay::http_client(),
        relay.api,
        &receiver.url("/hook"),
        "",
    )
    .await;
    receiver
}

/// A NATS destination `bbb.{event}` and an MQTT one `bbb/{event}` to these brokers.
fn nats_and_mqtt(nats: &OwnBroker, mosquitto: &OwnBroker) -> String {
    [
        destination(
            "nats",
            &format!("nats://127.0.0.1:{}", nats.port),
            "bbb.{event}",
        ),
        destination(
            "mqtt",
            &format!("mqtt://127.0.0.1:{}", mosquitto.port),
            "bbb/{event}",
        ),
    ]
    .concat()
}

/// How many messages destination `name` of `relay` published.
async fn published(relay: &RelayProcess, name: &str) -> f64 {
    crate::support::metric_value(
        &relay.metrics().await,
        &format!("hookrelay_destination_published_total{{destination=\"{name}\"}}"),
    )
}

/// The event of each callback a hook got, in order (its `event` field holds one).
async fn hook_events(receiver: &TestReceiver, n: usize) -> Vec<String> {
    receiver
        .wait_delivered(n)
        .await
        .iter()
        .map(|r| {
            let v: Value = serde_json::from_str(&r.event()).expect("event JSON");
            match v {
                Value::Array(mut a) if !a.is_empty() => a.swap_remove(0).to_string(),
                one => one.to_string(),
            }
        })
        .collect()
}

/// JSON texts compared as values.
fn as_values(texts: &[String]) -> Vec<Value> {
    texts
        .iter()
        .map(|t| serde_json::from_str(t).expect("JSON"))
        .collect()
}

/// Asserts that `got` is `expected`, saying where they first differ (not the whole lists).
fn assert_same<T: PartialEq + std::fmt::Debug>(what: &str, got: &[T], expected: &[T]) {
    if let Some(i) = (0..got.len().min(expected.len())).find(|&i| got[i] != expected[i]) {
        panic!(
            "{what}: item {i} differs: {:?} where {:?} was expected",
            got[i], expected[i]
        );
    }
    assert_eq!(got.len(), expected.len(), "{what}: how many");
}

/// A JetStream stream taking `bbb.>` on `nats`.
async fn nats_stream(nats: &OwnBroker) -> async_nats::jetstream::stream::Stream {
    let client = async_nats::connect(format!("127.0.0.1:{}", nats.port))
        .await
        .expect("NATS");
    stream_of(client).await
}

/// The stream `BBB` taking `bbb.>`, made through `client`.
async fn stream_of(client: async_nats::Client) -> async_nats::jetstream::stream::Stream {
    async_nats::jetstream::new(client)
        .get_or_create_stream(async_nats::jetstream::stream::Config {
            name: "BBB".into(),
            subjects: vec!["bbb.>".into()],
            ..Default::default()
        })
        .await
        .expect("stream")
}

/// A message read back from JetStream.
struct NatsMessage {
    subject: String,
    /// `Nats-Msg-Id`.
    id: String,
    /// `BBB-Event`, `BBB-Meeting`, `Content-Type`.
    event: String,
    meeting: String,
    content_type: String,
    body: String,
}

/// Every message of a stream, in order, up to `n`.
async fn nats_messages(
    stream: &async_nats::jetstream::stream::Stream,
    n: usize,
) -> Vec<NatsMessage> {
    let consumer = stream
        .create_consumer(async_nats::jetstream::consumer::pull::Config {
            ..Default::default()
        })
        .await
        .expect("consumer");
    let mut out = Vec::new();
    let mut batch = consumer
        .stream()
        .max_messages_per_batch(500)
        .messages()
        .await
        .expect("messages");
    while out.len() < n {
        let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(20), batch.next()).await else {
            break;
        };
        let m = m.expect("message");
        let header = |k: &str| {
            m.headers
                .as_ref()
                .and_then(|h| h.get(k))
                .map(|v| v.to_string())
                .unwrap_or_default()
        };
        out.push(NatsMessage {
            subject: m.subject.to_string(),
            id: header("Nats-Msg-Id"),
            event: header("BBB-Event"),
            meeting: header("BBB-Meeting"),
            content_type: header("Content-Type"),
            body: String::from_utf8_lossy(&m.payload).into_owned(),
        });
        m.ack().await.expect("ack");
    }
    out
}

/// A subscriber of `topic` at QoS 1 on `port`, with a session the broker keeps for it; what it
/// gets: (message-id, body).
async fn mqtt_subscriber(
    port: u16,
    topic: &str,
) -> tokio::sync::mpsc::UnboundedReceiver<(String, String)> {
    mqtt_subscriber_with(port, topic, None).await
}

/// [`mqtt_subscriber`], over TLS when `ca` is given.
async fn mqtt_subscriber_with(
    port: u16,
    topic: &str,
    ca: Option<&TestCa>,
) -> tokio::sync::mpsc::UnboundedReceiver<(String, String)> {
    use rumqttc::v5::{AsyncClient, Event, MqttOptions, mqttbytes::QoS, mqttbytes::v5::Packet};
    let mut options = MqttOptions::new(format!("sub-{port}"), "127.0.0.1", port);
    if let Some(ca) = ca {
        options.set_transport(rumqttc::Transport::tls_with_config(
            rumqttc::TlsConfiguration::Simple {
                ca: std::fs::read(ca.ca_file()).expect("CA"),
                alpn: None,
                client_auth: None,
            },
        ));
    }
    options
        .set_clean_start(false)
        .set_session_expiry_interval(Some(3600))
        .set_max_packet_size(Some(1024 * 1024));
    let (client, mut events) = AsyncClient::new(options, 1000);
    client
        .subscribe(topic, QoS::AtLeastOnce)
        .await
        .expect("subscribe");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let (subscribed_tx, subscribed) = tokio::sync::oneshot::channel();
    let mut subscribed_tx = Some(subscribed_tx);
    tokio::spawn(async move {
        let _client = client;
        loop {
            match events.poll().await {
                Ok(Event::Incoming(Packet::SubAck(_))) => {
                    if let Some(s) = subscribed_tx.take() {
                        let _ = s.send(());
                    }
                }
                Ok(Event::Incoming(Packet::Publish(p))) => {
                    let id = p
                        .properties
                        .as_ref()
                        .and_then(|pr| pr.user_properties.iter().find(|(k, _)| k == "message-id"))
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default();
                    if tx
                        .send((id, String::from_utf8_lossy(&p.payload).into_owned()))
                        .is_err()
                    {
                        return;
                    }
                }
                Ok(_) => {}
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(20), subscribed)
        .await
        .expect("subscribed in time")
        .expect("subscribed");
    rx
}

/// Takes `n` messages from `rx` (within the tests' patience for each).
async fn take(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
    n: usize,
) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match tokio::time::timeout(Duration::from_secs(20), rx.recv()).await {
            Ok(Some(m)) => out.push(m),
            _ => break,
        }
    }
    out
}

/// `n` deliveries of `consumer`: (message_id, type, routing key, body).
async fn amqp_messages(
    consumer: &mut lapin::Consumer,
    n: usize,
) -> Vec<(String, String, String, String)> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let Ok(Some(Ok(d))) = tokio::time::timeout(Duration::from_secs(20), consumer.next()).await
        else {
            break;
        };
        let p = &d.properties;
        out.push((
            p.message_id()
                .as_ref()
                .map(|s| s.to_string())
                .unwrap_or_default(),
            p.kind().as_ref().map(|s| s.to_string()).unwrap_or_default(),
            d.routing_key.to_string(),
            String::from_utf8_lossy(&d.data).into_owned(),
        ));
    }
    out
}

fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    )
}

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

#[tokio::test(flavor = "multi_thread")]
async fn brokers_stopped_for_five_seconds_and_a_kill_9_lose_nothing() {
    const N: usize = 600;
    let mut nats = OwnBroker::nats().await;
    let stream = nats_stream(&nats).await;
    let mut mosquitto = OwnBroker::mosquitto().await;
    let mut mqtt = mqtt_subscriber(mosquitto.port, "bbb/#").await;
    // A file too, through the kill -9.
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("events.jsonl");
    let extra = format!(
        "{}{}",
        nats_and_mqtt(&nats, &mosquitto),
        destination("file", &format!("file://{}", file.display()), "")
    );
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, &extra).await;
    let messages = three_meetings(N);
    redis.publish_all(&messages[..200]).await;
    wait::until("the first 200 published", async || {
        let n = (
            published(&relay, "nats").await,
            published(&relay, "mqtt").await,
        );
        if n.0 >= 200.0 && n.1 >= 200.0 {
            Ok(())
        } else {
            Err(n)
        }
    })
    .await;
    nats.stop().await;
    mosquitto.stop().await;
    redis.publish_all(&messages[200..400]).await;
    wait::until("both destinations failing", async || {
        let (_, out, _) = cli(&[
            "destinations",
            "--json",
            "-c",
            &relay.config.display().to_string(),
        ]);
        let v: Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
        let failing = v["destinations"]
            .as_array()
            .map_or(0, |a| a.iter().filter(|d| d["state"] == "failing").count());
        if failing == 2 { Ok(()) } else { Err(out) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    nats.start_again().await;
    mosquitto.start_again().await;
    // The relay killed -9 while it publishes what waited, and started again within a second.
    wait::until("some of what waited published", async || {
        let n = published(&relay, "nats").await;
        if n > 210.0 { Ok(()) } else { Err(n) }
    })
    .await;
    relay.kill9().await;
    let relay = RelayProcess::start(&redis, &extra).await;
    redis.publish_all(&messages[400..]).await;

    // JetStream recognises a repeat by its Nats-Msg-Id: each event is in the stream once.
    let got = nats_messages(&stream, N).await;
    assert_eq!(got.len(), N, "NATS: how many");
    let names: Vec<String> = got
        .iter()
        .map(|m| crate::support::user_name(&m.body))
        .collect();
    let expected: Vec<String> = (0..N)
        .map(|i| {
            if i < 3 {
                String::new()
            } else {
                format!("n{i}")
            }
        })
        .collect();
    assert_same("NATS: every event, once, in order", &names, &expected);

    // MQTT at QoS 1: every event; a repeat only with an id seen before, and in order.
    let mut seen = HashSet::new();
    let mut firsts = Vec::new();
    let mut got = take(&mut mqtt, N).await;
    while seen.len() < N {
        for (id, body) in got.drain(..) {
            if seen.insert(id) {
                firsts.push(crate::support::user_name(&body));
            }
        }
        if seen.len() < N {
            got = take(&mut mqtt, 1).await;
            if got.is_empty() {
                let missing: Vec<&String> = expected
                    .iter()
                    .filter(|n| !firsts.contains(n))
                    .take(10)
                    .collect();
                let m = relay.metrics().await;
                let mqtt_lines: Vec<&str> = m
                    .lines()
                    .filter(|l| l.contains("\"mqtt\"") && !l.contains("bucket"))
                    .collect();
                let log = std::fs::read_to_string(&relay.log).unwrap_or_default();
                let log_lines: Vec<&str> = log.lines().filter(|l| l.contains("mqtt")).collect();
                panic!(
                    "MQTT: {} of {N} events; missing {missing:?}; {mqtt_lines:#?} {log_lines:#?}",
                    seen.len()
                );
            }
        }
    }
    assert_same("MQTT: every event, in order", &firsts, &expected);

    // The file: every event in order; a line written again is the same line.
    let lines = wait::until("every event in the file", async || {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let mut seen = HashSet::new();
        let firsts: Vec<String> = text
            .lines()
            .filter(|l| seen.insert(l.to_string()))
            .map(crate::support::user_name)
            .collect();
        if firsts.len() >= N {
            Ok(firsts)
        } else {
            Err(firsts.len())
        }
    })
    .await;
    assert_same("the file: every event, in order", &lines, &expected);
    drop(relay);
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_credentials_and_a_missing_exchange_keep_the_messages_and_say_why() {
    let exchange = unique_name("hookrelay-missing");
    let dir = tempfile::tempdir().expect("dir");
    let password = dir.path().join("password");
    std::fs::write(&password, "guest\n").expect("password file");
    let extra = [
        destination(
            "wrong-password",
            "amqp://guest:not-the-password@127.0.0.1:5672/%2f",
            "amq.topic/bbb.{event}",
        ),
        destination(
            "no-exchange",
            RABBITMQ,
            &format!("{exchange}/bbb.{{event}}"),
        ),
    ]
    .concat();
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, &extra).await;
    let messages = three_meetings(10);
    redis.publish_all(&messages).await;
    let config = relay.config.display().to_string();
    let shown = wait::until("both failing, each saying why", async || {
        let (_, out, _) = cli(&["destinations", "-c", &config]);
        if out.contains("ACCESS_REFUSED") && out.contains("NOT_FOUND") {
            Ok(out)
        } else {
            Err(out)
        }
    })
    .await;
    assert!(shown.contains("wrong-password"), "{shown}");
    assert!(
        !shown.contains("not-the-password"),
        "never the password: {shown}"
    );
    let (_, json, _) = cli(&["destinations", "--json", "-c", &config]);
    let v: Value = serde_json::from_str(&json).expect("JSON");
    for d in v["destinations"].as_array().expect("list") {
        assert_eq!(d["state"], "failing", "{d}");
        assert_eq!(d["queued"], 10, "kept: {d}");
    }
    let log = std::fs::read_to_string(&relay.log).unwrap_or_default();
    assert!(
        log.lines()
            .any(|l| l.contains("wrong-password") && l.contains("credentials")),
        "one line with its name: {log}"
    );
    // The exchange made: what waited is published, in order.
    let (_channel, mut consumer) = amqp_queue(&exchange).await;
    let got = amqp_messages(&mut consumer, 10).await;
    assert_eq!(got.len(), 10);
    assert_eq!(got[0].1, "meeting-created");
    assert_eq!(crate::support::user_name(&got[9].3), "n9");
    drop(relay);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_over_the_brokers_limit_is_skipped_and_counted_once() {
    let nats = OwnBroker::nats_with_max_payload(1500).await;
    let stream = nats_stream(&nats).await;
    let mosquitto = OwnBroker::mosquitto_with_max_packet(1500).await;
    let mut mqtt = mqtt_subscriber(mosquitto.port, "bbb/#").await;
    let extra = nats_and_mqtt(&nats, &mosquitto);
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, &extra).await;
    // The meetings are created with 2 KB of metadata: larger than the brokers take; the joins
    // are not.
    let mut messages = three_meetings(6);
    let metadata = serde_json::json!({ "bbb-context": "x".repeat(2000) });
    for (m, message) in messages.iter_mut().take(3).enumerate() {
        *message = crate::support::meeting_created_with_metadata(
            &format!("int-{m}"),
            &format!("ext-{m}"),
            &metadata,
        );
    }
    redis.publish_all(&messages).await;
    let got = nats_messages(&stream, 3).await;
    let events: Vec<&str> = got.iter().map(|m| m.event.as_str()).collect();
    assert_eq!(events, ["user-joined"; 3]);
    let got = take(&mut mqtt, 3).await;
    let names: Vec<String> = got
        .iter()
        .map(|(_, b)| crate::support::user_name(b))
        .collect();
    assert_eq!(
        names,
        ["n3", "n4", "n5"],
        "MQTT: the joins, the meetings skipped"
    );
    let metrics = relay.metrics().await;
    for d in ["nats", "mqtt"] {
        let series = format!(
            "hookrelay_destination_skipped_total{{destination=\"{d}\",reason=\"too_large\"}}"
        );
        assert_eq!(
            crate::support::metric_value(&metrics, &series),
            3.0,
            "{series}"
        );
    }
    let log = std::fs::read_to_string(&relay.log).unwrap_or_default();
    let lines = log
        .lines()
        .filter(|l| l.contains("cannot take a message this large"))
        .count();
    assert_eq!(lines, 6, "once each, with its event: {log}");
    assert!(log.contains("meeting-created"));
    drop(relay);
}

/// The code block of docs/destinations.md's section `title` (its first ```` ```python ````).
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

#[tokio::test(flavor = "multi_thread")]
async fn tls_brokers_are_trusted_through_ca_file_only() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new("hookrelay destinations test CA");
    let nats = OwnBroker::nats_tls(&ca).await;
    let mosquitto = OwnBroker::mosquitto_tls(&ca).await;
    let client = async_nats::ConnectOptions::new()
        .add_root_certificates(ca.ca_file().into())
        .require_tls(true)
        .connect(format!("tls://127.0.0.1:{}", nats.port))
        .await
        .expect("NATS over TLS");
    let stream = stream_of(client).await;
    let mut mqtt = mqtt_subscriber_with(mosquitto.port, "bbb/#", Some(&ca)).await;
    let with_ca = |toml: String| format!("{toml}ca_file = \"{}\"\n", ca.ca_file());
    let extra = [
        with_ca(destination(
            "nats",
            &format!("tls://127.0.0.1:{}", nats.port),
            "bbb.{event}",
        )),
        with_ca(destination(
            "mqtt",
            &format!("mqtts://127.0.0.1:{}", mosquitto.port),
            "bbb/{event}",
        )),
        // The system's roots do not hold the test's CA: refused, and kept.
        destination(
            "untrusted",
            &format!("tls://127.0.0.1:{}", nats.port),
            "bbb.{event}",
        ),
    ]
    .concat();
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, &extra).await;
    redis.publish_all(&three_meetings(10)).await;
    let got = nats_messages(&stream, 10).await;
    assert_eq!(got.len(), 10, "over TLS, verified with ca_file");
    assert_eq!(take(&mut mqtt, 10).await.len(), 10, "MQTT over TLS");
    let config = relay.config.display().to_string();
    let untrusted = wait::until("the untrusted one fails", async || {
        let (_, out, _) = cli(&["destinations", "--json", "-c", &config]);
        let v: Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
        let d = v["destinations"][2].clone();
        if d["state"] == "failing" {
            Ok(d)
        } else {
            Err(out)
        }
    })
    .await;
    assert_eq!(untrusted["queued"], 10, "{untrusted}");
    assert!(
        untrusted["last_error"]
            .as_str()
            .is_some_and(|e| e.to_lowercase().contains("certificate") || e.contains("tls")),
        "{untrusted}"
    );
    // Nothing more reached the stream than the trusted destination's ten.
    let info = stream.get_info().await.expect("stream info");
    assert_eq!(info.state.messages, 10);
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
async fn a_fleet_whose_lease_holder_is_killed_publishes_every_event_once() {
    use crate::fleet::{FLEET, publish_named, wait_until_holder};
    const N: usize = 1500;
    let nats = OwnBroker::nats().await;
    let stream = nats_stream(&nats).await;
    let config = format!(
        "{FLEET}{}",
        destination(
            "nats",
            &format!("nats://127.0.0.1:{}", nats.port),
            "bbb.{event}"
        )
    );
    let redis = TestRedis::start().await;
    let holder = RelayProcess::start(&redis, &config).await;
    wait_until_holder(&holder).await;
    let other = RelayProcess::start(&redis, &config).await;
    let publishing = publish_named(&redis, "n", N);
    wait::until("a fifth published", async || {
        let n = published(&holder, "nats").await;
        if n >= (N / 5) as f64 { Ok(()) } else { Err(n) }
    })
    .await;
    holder.kill9().await;
    wait_until_holder(&other).await;
    publishing.await.expect("publisher");
    let got = nats_messages(&stream, N).await;
    let names: Vec<String> = got
        .iter()
        .map(|m| crate::support::user_name(&m.body))
        .collect();
    let expected: Vec<String> = (0..N).map(|i| format!("n{i}")).collect();
    assert_same(
        "every event once, in order, across the takeover",
        &names,
        &expected,
    );
    drop(other);
}

/// A connection to `rabbit` (TLS with `ca`), its exchange `bbb` and durable queue `kept`
/// bound to all of it made.
async fn own_rabbitmq(rabbit: &OwnBroker, ca: &TestCa) -> lapin::Channel {
    use lapin::{options::*, types::FieldTable};
    let tls = lapin::tcp::OwnedTLSConfig {
        identity: None,
        cert_chain: Some(std::fs::read_to_string(ca.ca_file()).expect("CA")),
    };
    let url = format!("amqps://guest:guest@127.0.0.1:{}/%2f", rabbit.port);
    let connection = lapin::Connection::connect_with_config(
        &url,
        lapin::ConnectionProperties::default(),
        tls,
        lapin::runtime::default_runtime().expect("runtime"),
    )
    .await
    .expect("RabbitMQ over TLS");
    let channel = connection.create_channel().await.expect("channel");
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    channel
        .exchange_declare(
            "bbb".into(),
            lapin::ExchangeKind::Topic,
            durable,
            FieldTable::default(),
        )
        .await
        .expect("exchange");
    let queue = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    channel
        .queue_declare("kept".into(), queue, FieldTable::default())
        .await
        .expect("queue");
    channel
        .queue_bind(
            "kept".into(),
            "bbb".into(),
            "#".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("bind");
    std::mem::forget(connection);
    channel
}

#[tokio::test(flavor = "multi_thread")]
async fn rabbitmq_over_tls_stopped_for_five_seconds_and_a_kill_9_lose_nothing() {
    use lapin::options::BasicGetOptions;
    const N: usize = 450;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new("hookrelay rabbitmq test CA");
    let mut rabbit = OwnBroker::rabbitmq(Some(&ca)).await;
    drop(own_rabbitmq(&rabbit, &ca).await);
    let extra = format!(
        "{}ca_file = \"{}\"\n",
        destination(
            "amqp",
            &format!("amqps://guest:guest@127.0.0.1:{}/%2f", rabbit.port),
            "bbb/bbb.{event}"
        ),
        ca.ca_file()
    );
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, &extra).await;
    let messages = three_meetings(N);
    redis.publish_all(&messages[..150]).await;
    wait::until("150 published", async || {
        let n = published(&relay, "amqp").await;
        if n >= 150.0 { Ok(()) } else { Err(n) }
    })
    .await;
    rabbit.stop().await;
    redis.publish_all(&messages[150..300]).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    rabbit.start_again().await;
    wait::until("publishing again", async || {
        let n = published(&relay, "amqp").await;
        if n > 150.0 { Ok(()) } else { Err(n) }
    })
    .await;
    relay.kill9().await;
    let relay = RelayProcess::start(&redis, &extra).await;
    redis.publish_all(&messages[300..]).await;

    // Read back from the durable queue: every event, in order; a repeat only with an id
    // seen before.
    let channel = own_rabbitmq(&rabbit, &ca).await;
    let mut seen = HashSet::new();
    let mut names = Vec::new();
    wait::until("every event in the queue", async || {
        while let Ok(Some(m)) = channel
            .basic_get("kept".into(), BasicGetOptions { no_ack: true })
            .await
        {
            let id = m
                .properties
                .message_id()
                .as_ref()
                .map(|s| s.to_string())
                .unwrap_or_default();
            if seen.insert(id) {
                names.push(crate::support::user_name(&String::from_utf8_lossy(&m.data)));
            }
        }
        if names.len() >= N {
            Ok(())
        } else {
            Err(names.len())
        }
    })
    .await;
    let expected: Vec<String> = (0..N)
        .map(|i| {
            if i < 3 {
                String::new()
            } else {
                format!("n{i}")
            }
        })
        .collect();
    assert_same("AMQP: every event, in order", &names, &expected);
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
async fn a_message_over_rabbitmqs_limit_is_skipped_and_the_channel_opened_again() {
    use lapin::options::BasicGetOptions;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new("hookrelay rabbitmq limit test CA");
    let rabbit = OwnBroker::rabbitmq_with(Some(&ca), "max_message_size = 1500\n".into()).await;
    drop(own_rabbitmq(&rabbit, &ca).await);
    let extra = format!(
        "{}ca_file = \"{}\"\n",
        destination(
            "amqp",
            &format!("amqps://guest:guest@127.0.0.1:{}/%2f", rabbit.port),
            "bbb/bbb.{event}"
        ),
        ca.ca_file()
    );
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, &extra).await;
    // A meeting created with 2 KB of metadata, then three joins.
    let mut messages = vec![crate::support::meeting_created_with_metadata(
        "int-0",
        "ext-0",
        &serde_json::json!({ "bbb-context": "x".repeat(2000) }),
    )];
    messages.extend((1..4).map(|i| user_joined("int-0", &format!("u{i}"), &format!("n{i}"))));
    redis.publish_all(&messages).await;
    let channel = own_rabbitmq(&rabbit, &ca).await;
    let mut names = Vec::new();
    wait::until("the three joins in the queue", async || {
        while let Ok(Some(m)) = channel
            .basic_get("kept".into(), BasicGetOptions { no_ack: true })
            .await
        {
            names.push(crate::support::user_name(&String::from_utf8_lossy(&m.data)));
        }
        if names.len() >= 3 {
            Ok(())
        } else {
            Err(names.len())
        }
    })
    .await;
    assert_eq!(names, ["n1", "n2", "n3"]);
    let metrics = relay.metrics().await;
    let series = r#"hookrelay_destination_skipped_total{destination="amqp",reason="too_large"}"#;
    assert_eq!(crate::support::metric_value(&metrics, series), 1.0);
    drop(relay);
}
