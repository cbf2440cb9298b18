//! `destinations`: what each kind of destination costs beside a hook. One relay with a NATS
//! JetStream, an MQTT, an AMQP and a file destination and one HTTP hook to the lean receiver;
//! `events` user-joined messages published at once (`--rate 0`) or at `rate` a second. For each
//! output: messages/s from the first publish to its last arrival, and the p50 / p99 from a
//! message's publish on the bus to its arrival at a consumer of the broker (the file: a
//! reader polling it every millisecond). The relay's CPU per event (every output included) and
//! per output message.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures_util::StreamExt;

use crate::{
    launch::{Relay, Setup},
    procstat,
    scenario::{Figures, percentile},
    sink::Sink,
    support::{
        TestRedis,
        brokers::{OwnBroker, RABBITMQ, amqp_queue},
        user_joined,
    },
};

/// Arrivals at one consumer: when, and the number of the user the event names.
type Arrivals = Arc<Mutex<Vec<(Instant, usize)>>>;

/// The `i` of a user named `user {i}` in an event's JSON.
fn user_number(body: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(body).ok()?;
    let at = text.find("\"name\":\"user ")? + "\"name\":\"user ".len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn record(arrivals: &Arrivals, body: &[u8]) {
    if let Some(n) = user_number(body) {
        arrivals.lock().expect("arrivals").push((Instant::now(), n));
    }
}

async fn consume_nats(port: u16, arrivals: Arrivals) {
    use async_nats::jetstream::{self, consumer::pull, stream};
    let client = async_nats::connect(format!("127.0.0.1:{port}"))
        .await
        .expect("NATS");
    let js = jetstream::new(client);
    let s = js
        .get_or_create_stream(stream::Config {
            name: "BBB".into(),
            subjects: vec!["bbb.>".into()],
            ..Default::default()
        })
        .await
        .expect("stream");
    let consumer = s
        .create_consumer(pull::Config {
            ack_policy: async_nats::jetstream::consumer::AckPolicy::None,
            ..Default::default()
        })
        .await
        .expect("consumer");
    tokio::spawn(async move {
        let mut messages = consumer.messages().await.expect("messages");
        while let Some(Ok(m)) = messages.next().await {
            record(&arrivals, &m.payload);
        }
    });
}

async fn consume_mqtt(port: u16, arrivals: Arrivals) {
    use rumqttc::v5::{AsyncClient, Event, MqttOptions, mqttbytes::QoS, mqttbytes::v5::Packet};
    let mut options = MqttOptions::new("load-consumer", "127.0.0.1", port);
    options.set_max_packet_size(Some(1 << 20));
    let (client, mut events) = AsyncClient::new(options, 1000);
    client
        .subscribe("bbb/#", QoS::AtLeastOnce)
        .await
        .expect("subscribe");
    let (ready_tx, ready) = tokio::sync::oneshot::channel();
    let mut ready_tx = Some(ready_tx);
    tokio::spawn(async move {
        let _client = client;
        loop {
            match events.poll().await {
                Ok(Event::Incoming(Packet::SubAck(_))) => {
                    if let Some(tx) = ready_tx.take() {
                        let _ = tx.send(());
                    }
                }
                Ok(Event::Incoming(Packet::Publish(p))) => record(&arrivals, &p.payload),
                Ok(_) => {}
                Err(_) => return,
            }
        }
    });
    let _ = ready.await;
}

async fn consume_amqp(exchange: &str, arrivals: Arrivals) {
    let (channel, mut consumer) = amqp_queue(exchange).await;
    tokio::spawn(async move {
        let _channel = channel;
        while let Some(Ok(d)) = consumer.next().await {
            record(&arrivals, &d.data);
        }
    });
}

/// Reads the lines appended to `path` every millisecond.
fn consume_file(path: std::path::PathBuf, arrivals: Arrivals) {
    tokio::spawn(async move {
        let mut read = 0usize;
        loop {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let Ok(text) = tokio::fs::read(&path).await else {
                continue;
            };
            if text.len() > read {
                for line in text[read..].split(|b| *b == b'\n') {
                    record(&arrivals, line);
                }
                read = text.len()
                    - text[read..]
                        .iter()
                        .rev()
                        .take_while(|b| **b != b'\n')
                        .count();
            }
        }
    });
}

pub(crate) async fn run(setup: &Setup, events: usize, rate: u64) -> Figures {
    let redis = TestRedis::start().await;
    let nats = OwnBroker::nats().await;
    let mosquitto = OwnBroker::mosquitto().await;
    let exchange = format!("hookrelay-load-{}", std::process::id());
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("events.jsonl");
    let kinds = ["nats", "mqtt", "amqp", "file"];
    let arrivals: Vec<Arrivals> = kinds.iter().map(|_| Arrivals::default()).collect();
    consume_nats(nats.port, arrivals[0].clone()).await;
    consume_mqtt(mosquitto.port, arrivals[1].clone()).await;
    consume_amqp(&exchange, arrivals[2].clone()).await;
    consume_file(file.clone(), arrivals[3].clone());
    let sink = Sink::start(Duration::ZERO).await;
    let destination = |name: &str, url: String, target: &str| {
        format!("[[destinations]]\nname = \"{name}\"\nurl = \"{url}\"\ntarget = \"{target}\"\n")
    };
    let extra = [
        destination(
            "nats",
            format!("nats://127.0.0.1:{}", nats.port),
            "bbb.{event}",
        ),
        destination(
            "mqtt",
            format!("mqtt://127.0.0.1:{}", mosquitto.port),
            "bbb/{event}",
        ),
        destination(
            "amqp",
            RABBITMQ.to_string(),
            &format!("{exchange}/bbb.{{event}}"),
        ),
        destination("file", format!("file://{}", file.display()), ""),
    ]
    .concat();
    let (relay, _) = Relay::start(setup, &redis, &extra).await;
    relay.create_hook(&sink.url("/hook")).await;
    let messages: Vec<String> = (0..events)
        .map(|i| user_joined("int-load", &format!("w_{i}"), &format!("user {i}")))
        .collect();
    let cpu_before = procstat::cpu_seconds(relay.pid()).unwrap_or(0.0);
    let start = Instant::now();
    let mut published = Vec::with_capacity(events);
    if rate == 0 {
        redis.publish_all(&messages).await;
        published.resize(events, start);
    } else {
        // In steps of 10 ms, each publishing what the rate owes by then.
        let mut sent = 0;
        while sent < events {
            let due = ((start.elapsed().as_secs_f64() * rate as f64) as usize + 1).min(events);
            if due > sent {
                redis.publish_all(&messages[sent..due]).await;
                let now = Instant::now();
                published.resize(due, now);
                sent = due;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    let done = |a: &Arrivals| a.lock().expect("arrivals").len() >= events;
    while Instant::now() < deadline && !(arrivals.iter().all(done) && sink.count() >= events) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let cpu = procstat::cpu_seconds(relay.pid()).unwrap_or(0.0) - cpu_before;
    relay.kill9().await;
    let mut f = Figures {
        ok: arrivals.iter().all(done) && sink.count() >= events,
        ..Figures::default()
    };
    let names: [(&str, &str, &str, &str); 4] = [
        ("nats_per_s", "nats_p50_ms", "nats_p99_ms", "nats"),
        ("mqtt_per_s", "mqtt_p50_ms", "mqtt_p99_ms", "mqtt"),
        ("amqp_per_s", "amqp_p50_ms", "amqp_p99_ms", "amqp"),
        ("file_per_s", "file_p50_ms", "file_p99_ms", "file"),
    ];
    for ((per_s, p50, p99, _), a) in names.iter().zip(&arrivals) {
        let got = a.lock().expect("arrivals").clone();
        let last = got.iter().map(|(t, _)| *t).max().unwrap_or(start);
        f.push(
            per_s,
            got.len() as f64 / last.duration_since(start).as_secs_f64().max(1e-9),
        );
        let mut ms: Vec<f64> = got
            .iter()
            .filter_map(|(t, n)| Some(t.duration_since(*published.get(*n)?).as_secs_f64() * 1e3))
            .collect();
        ms.sort_by(f64::total_cmp);
        f.push(p50, percentile(&ms, 50.0));
        f.push(p99, percentile(&ms, 99.0));
    }
    let hook_last = sink.last_arrival().unwrap_or(start);
    f.push(
        "hook_per_s",
        sink.count() as f64 / hook_last.duration_since(start).as_secs_f64().max(1e-9),
    );
    let mut ms: Vec<f64> = sink
        .arrivals()
        .iter()
        .filter_map(|(t, n)| Some(t.duration_since(*published.get((*n)?)?).as_secs_f64() * 1e3))
        .collect();
    ms.sort_by(f64::total_cmp);
    f.push("hook_p50_ms", percentile(&ms, 50.0));
    f.push("hook_p99_ms", percentile(&ms, 99.0));
    f.push("relay_cpu_us_per_event", cpu * 1e6 / events.max(1) as f64);
    f.push(
        "relay_cpu_us_per_message",
        cpu * 1e6 / (events.max(1) * (kinds.len() + 1)) as f64,
    );
    f
}
