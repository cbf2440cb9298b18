//! Brokers stopped and started, the relay killed -9, a fleet's holder killed, TLS, refused
//! credentials, a missing exchange and messages over a broker's limit.

use super::*;

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

/// An `amqps://` destination `amqp` to `rabbit`, trusting `ca`, publishing to `bbb/bbb.{event}`.
fn amqps_destination(rabbit: &OwnBroker, ca: &TestCa) -> String {
    format!(
        "{}ca_file = \"{}\"\n",
        destination(
            "amqp",
            &format!("amqps://guest:guest@127.0.0.1:{}/%2f", rabbit.port),
            "bbb/bbb.{event}"
        ),
        ca.ca_file()
    )
}

/// What queue `kept` holds now, taken off it: (message_id, body).
async fn drain_kept(channel: &lapin::Channel) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let take = lapin::options::BasicGetOptions { no_ack: true };
    while let Ok(Some(m)) = channel.basic_get("kept".into(), take).await {
        let id = m.properties.message_id().as_ref().map(|s| s.to_string());
        out.push((
            id.unwrap_or_default(),
            String::from_utf8_lossy(&m.data).into_owned(),
        ));
    }
    out
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
    const N: usize = 450;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new("hookrelay rabbitmq test CA");
    let mut rabbit = OwnBroker::rabbitmq(Some(&ca)).await;
    drop(own_rabbitmq(&rabbit, &ca).await);
    let extra = amqps_destination(&rabbit, &ca);
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
        for (id, body) in drain_kept(&channel).await {
            if seen.insert(id) {
                names.push(crate::support::user_name(&body));
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
async fn a_message_over_rabbitmqs_limit_is_skipped_and_the_channel_opened_again() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new("hookrelay rabbitmq limit test CA");
    let rabbit = OwnBroker::rabbitmq_with(Some(&ca), "max_message_size = 1500\n".into()).await;
    drop(own_rabbitmq(&rabbit, &ca).await);
    let extra = amqps_destination(&rabbit, &ca);
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
        for (_, body) in drain_kept(&channel).await {
            names.push(crate::support::user_name(&body));
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
