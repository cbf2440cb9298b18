//! Destinations against real brokers (`[[destinations]]`, docs/destinations.md): 1,000 events
//! of three meetings consumed back from NATS JetStream, RabbitMQ, Mosquitto and a file, each
//! once, in order, each body the event a hook got; each broker stopped for 5 s and the relay
//! killed -9; TLS; refused credentials and a missing exchange; a message over the broker's
//! limit; the rules plugin; a fleet's takeover; the docs' consumers.

use std::{collections::HashSet, time::Duration};

use futures_util::StreamExt;
use serde_json::Value;

mod faults;
mod kinds;

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
    /// `BBB-Event`, `BBB-Meeting`, `BBB-Tenant`, `Content-Type`.
    event: String,
    meeting: String,
    tenant: String,
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
            tenant: header("BBB-Tenant"),
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
