//! The edge role (`[edge]`, docs/pool.md): the real binary on a "BBB server" (a redis-server
//! of its own) appending its bus, in order, to the pool's store (another redis-server, reached
//! by TLS alone); the store stopped and started again; the edge killed -9 and started again
//! within a second; an outbox that fills up; a name another edge holds.

use std::time::Duration;

use crate::support::{
    TestRedis,
    edge::{API_PORT, TestEdge as Edge},
    process::binary,
    tls::TestCa,
    wait,
};

/// Waits until the edge's outbox on `bbb` is empty (it is trimmed of what was forwarded with
/// the next append, or when the forwarder finds nothing more to send).
async fn outbox_empties(bbb: &TestRedis) {
    wait::until("the outbox trimmed", async || {
        match bbb.xlen("hookrelay:edge:outbox").await {
            0 => Ok(()),
            n => Err(n),
        }
    })
    .await;
}

/// The payloads of the server's stream in `store`, in order, each with its channel.
async fn stream(store: &TestRedis, server: &str) -> Vec<(String, String)> {
    let mut c = store.conn().await.expect("store");
    let raw: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg(format!("hookrelay:edge:{{{server}}}:bus"))
        .arg("-")
        .arg("+")
        .query_async(&mut c)
        .await
        .expect("XRANGE");
    raw.into_iter()
        .map(|(_, f)| {
            let get = |k: &str| {
                f.chunks(2)
                    .find(|p| p[0] == k)
                    .map(|p| p[1].clone())
                    .unwrap_or_default()
            };
            (get("c"), get("p"))
        })
        .collect()
}

fn message(i: usize) -> String {
    format!(r#"{{"envelope":{{"name":"Probe"}},"core":{{"body":{{"n":{i}}}}}}}"#)
}

async fn publish(bbb: &TestRedis, range: std::ops::Range<usize>) {
    for i in range {
        bbb.publish(&message(i)).await;
    }
}

/// Waits until the server's stream holds `n` messages; asserts they are `0..n` in order,
/// each once, on BBB's main channel.
async fn assert_stream(store: &TestRedis, server: &str, want: impl Iterator<Item = usize>) {
    let want: Vec<(String, String)> = want
        .map(|i| ("from-akka-apps-redis-channel".to_string(), message(i)))
        .collect();
    let n = want.len();
    let got = wait::until(&format!("{n} messages in the pool's stream"), async || {
        let got = stream(store, server).await;
        if got.len() >= n {
            Ok(got)
        } else {
            Err(got.len())
        }
    })
    .await;
    assert_eq!(got, want);
}

#[tokio::test]
async fn an_edge_appends_its_bus_in_order_to_a_store_it_reaches_by_tls_alone() {
    let ca = TestCa::new("pool-ca");
    let store = TestRedis::start_tls(&ca).await;
    let bbb = TestRedis::start().await;
    let more = format!("ca_file = \"{}\"", ca.ca_file());
    let edge = Edge::start(&bbb, "bbb1", &store.tls_url(), &more).await;
    publish(&bbb, 0..50).await;
    assert_stream(&store, "bbb1", 0..50).await;
    edge.metric_reaches("hookrelay_edge_messages_forwarded_total", 50.0)
        .await;
    assert_eq!(
        edge.metric("hookrelay_edge_messages_read_total").await,
        50.0
    );
    assert_eq!(edge.metric("hookrelay_edge_store_up").await, 1.0);
    assert_eq!(edge.metric("hookrelay_edge_buffered_messages").await, 0.0);
    // The outbox on the server is empty; the pool knows the edge.
    outbox_empties(&bbb).await;
    assert_eq!(store.smembers("hookrelay:edges").await, ["bbb1"]);
    let info = store.hgetall("hookrelay:edge:{bbb1}:info").await;
    assert_eq!(
        info.get("forwarded").map(String::as_str),
        Some("50"),
        "{info:?}"
    );
    edge.terminate().await;
}

#[tokio::test]
async fn a_stopped_store_loses_nothing_and_a_kill_9_with_a_restart_repeats_nothing() {
    let mut store = TestRedis::start_appendonly().await;
    let bbb = TestRedis::start().await;
    let edge = Edge::start(&bbb, "bbb1", &store.url(), "").await;
    publish(&bbb, 0..20).await;
    assert_stream(&store, "bbb1", 0..20).await;

    // The store goes away: the edge keeps what it reads, says so, and sends it once back.
    store.stop().await;
    publish(&bbb, 20..50).await;
    edge.metric_reaches("hookrelay_edge_buffered_messages", 30.0)
        .await;
    assert_eq!(edge.metric("hookrelay_edge_store_up").await, 0.0);
    assert_eq!(bbb.xlen("hookrelay:edge:outbox").await, 30);
    store.start_again().await;
    assert_stream(&store, "bbb1", 0..50).await;
    edge.metric_reaches("hookrelay_edge_store_up", 1.0).await;

    // kill -9 and a start at once: what it had read is in the outbox or the store, and the
    // cursor keeps it from going twice.
    publish(&bbb, 50..60).await;
    // Once in the outbox (read counts them there), a message survives the kill; one still
    // in the socket would not, as with any subscriber.
    edge.metric_reaches("hookrelay_edge_messages_read_total", 60.0)
        .await;
    let edge = edge.kill9_and_restart(&bbb).await;
    publish(&bbb, 60..80).await;
    assert_stream(&store, "bbb1", 0..80).await;
    edge.metric_reaches("hookrelay_edge_messages_forwarded_total", 1.0)
        .await;
    let log = edge.terminate().await;
    assert!(!log.contains("taken by another"), "{log}");
}

/// A store that answers but refuses writes (out of memory here): the edge keeps the messages,
/// says why, and sends them once the store takes writes again.
#[tokio::test]
async fn a_store_that_refuses_writes_gets_the_messages_once_it_takes_them_again() {
    let store = TestRedis::start().await;
    let bbb = TestRedis::start().await;
    let edge = Edge::start(&bbb, "bbb1", &store.url(), "").await;
    publish(&bbb, 0..5).await;
    assert_stream(&store, "bbb1", 0..5).await;
    let mut c = store.conn().await.expect("store");
    let set = |k: &str, v: &str| redis::cmd("CONFIG").arg("SET").arg(k).arg(v).clone();
    let _: () = set("maxmemory-policy", "noeviction")
        .query_async(&mut c)
        .await
        .expect("policy");
    let _: () = set("maxmemory", "1")
        .query_async(&mut c)
        .await
        .expect("limit");
    publish(&bbb, 5..25).await;
    edge.metric_reaches("hookrelay_edge_buffered_messages", 20.0)
        .await;
    assert_eq!(edge.metric("hookrelay_edge_store_up").await, 0.0);
    wait::until("the edge says why", async || {
        let log = edge.log_text();
        if log.contains("cannot write to the pool's store") && log.contains("OOM") {
            Ok(())
        } else {
            Err(log)
        }
    })
    .await;
    let _: () = set("maxmemory", "0")
        .query_async(&mut c)
        .await
        .expect("no limit");
    assert_stream(&store, "bbb1", 0..25).await;
    edge.metric_reaches("hookrelay_edge_store_up", 1.0).await;
    edge.terminate().await;
}

#[tokio::test]
async fn a_full_outbox_lets_the_oldest_go_counted_and_said_once() {
    let mut store = TestRedis::start().await;
    let bbb = TestRedis::start().await;
    let edge = Edge::start(&bbb, "bbb1", &store.url(), "buffer_mib = 1").await;
    store.kill().await;
    // 40 messages of 50 kB: twice what the outbox holds.
    let big = "x".repeat(50_000);
    for i in 0..40 {
        bbb.publish(&format!(r#"{{"n":{i},"pad":"{big}"}}"#)).await;
    }
    edge.metric_reaches("hookrelay_edge_messages_read_total", 40.0)
        .await;
    let dropped = edge.metric("hookrelay_edge_messages_dropped_total").await;
    assert!(dropped >= 19.0, "{dropped}");
    assert!(edge.metric("hookrelay_edge_buffered_bytes").await <= 1024.0 * 1024.0);
    store.start_again().await;
    // The newest went on, in order.
    let kept = 40 - dropped as usize;
    let got = wait::until("the rest in the pool's stream", async || {
        let got = stream(&store, "bbb1").await;
        if got.len() >= kept {
            Ok(got)
        } else {
            Err(got.len())
        }
    })
    .await;
    let ns: Vec<usize> = got
        .iter()
        .map(|(_, p)| {
            let v: serde_json::Value = serde_json::from_str(p).expect("JSON");
            v["n"].as_u64().unwrap_or(u64::MAX) as usize
        })
        .collect();
    assert_eq!(ns, (40 - kept..40).collect::<Vec<_>>());
    let log = edge.terminate().await;
    assert_eq!(log.matches("the edge's outbox is full").count(), 1, "{log}");
}

#[tokio::test]
async fn a_name_another_running_edge_holds_is_refused_at_start() {
    let store = TestRedis::start().await;
    let (bbb1, bbb2) = (TestRedis::start().await, TestRedis::start().await);
    let first = Edge::start(&bbb1, "bbb1", &store.url(), "").await;
    first.metric_reaches("hookrelay_edge_store_up", 1.0).await;
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("edge.toml");
    std::fs::write(
        &config,
        format!(
            "[redis]\nurl = \"{}\"\n[metrics]\nenabled = false\n[edge]\nstore_url = \"{}\"\nserver = \"bbb1\"\n",
            bbb2.url(),
            store.url()
        ),
    )
    .expect("config");
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        tokio::process::Command::new(binary())
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .output(),
    )
    .await
    .expect("stops by itself")
    .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("hookrelay: edge.server \"bbb1\" is taken by another running edge (host "),
        "{err}"
    );
    assert!(err.contains("; this edge is host "), "{err}");
    first.terminate().await;
}

/// An edge that died between its write to the pool's store and the outbox's delete: the
/// cursor written with the batch says those entries went, so the next start deletes them
/// rather than sending them twice, and sends the rest.
#[tokio::test]
async fn entries_the_store_has_already_are_not_sent_twice_after_a_crash() {
    let store = TestRedis::start().await;
    let bbb = TestRedis::start().await;
    let mut b = bbb.conn().await.expect("bbb");
    let mut s = store.conn().await.expect("store");
    let () = redis::cmd("SET")
        .arg("hookrelay:edge:epoch")
        .arg("e1")
        .query_async(&mut b)
        .await
        .expect("SET");
    for (id, i) in [("1-0", 0), ("2-0", 1), ("3-0", 2)] {
        let _: String = redis::cmd("XADD")
            .arg("hookrelay:edge:outbox")
            .arg(id)
            .arg("c")
            .arg("from-akka-apps-redis-channel")
            .arg("p")
            .arg(message(i))
            .query_async(&mut b)
            .await
            .expect("XADD outbox");
    }
    // The first two reached the pool's stream, with the cursor, before the crash.
    for i in 0..2 {
        let _: String = redis::cmd("XADD")
            .arg("hookrelay:edge:{bbb1}:bus")
            .arg("*")
            .arg("c")
            .arg("from-akka-apps-redis-channel")
            .arg("p")
            .arg(message(i))
            .query_async(&mut s)
            .await
            .expect("XADD stream");
    }
    let () = redis::cmd("SET")
        .arg("hookrelay:edge:{bbb1}:cursor")
        .arg("e1 2-0")
        .query_async(&mut s)
        .await
        .expect("SET cursor");
    let edge = Edge::start(&bbb, "bbb1", &store.url(), "").await;
    publish(&bbb, 3..5).await;
    assert_stream(&store, "bbb1", 0..5).await;
    outbox_empties(&bbb).await;
    edge.terminate().await;
}

/// `hookrelay servers` on a relay whose store the edges write to: each server, whether its
/// edge runs, and its counts.
#[tokio::test]
async fn hookrelay_servers_lists_the_edges_of_the_store() {
    let store = TestRedis::start().await;
    let bbb = TestRedis::start().await;
    let edge = Edge::start(&bbb, "bbb1", &store.url(), "").await;
    publish(&bbb, 0..7).await;
    assert_stream(&store, "bbb1", 0..7).await;
    // The store's info is written with each batch and each idle round. This relay takes no
    // edges: the messages wait in the store, and the lag says how long.
    let relay = crate::support::RelayProcess::start(&store, "\n[pool]\nedges = false\n").await;
    let config = relay.config.display().to_string();
    let listed = wait::until("the edge's counts in the store", async || {
        let (code, out, err) = crate::support::process::cli(&["servers", "--json", "-c", &config]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        if v["servers"][0]["forwarded"] == 7 {
            Ok(v)
        } else {
            Err(v)
        }
    })
    .await;
    let s = &listed["servers"][0];
    assert_eq!(s["server"], "bbb1");
    assert_eq!(s["running"], true);
    assert_eq!(s["read"], 7);
    assert_eq!(s["stream_length"], 7);
    assert!(s["lag_s"].as_f64().is_some_and(|v| v > 0.0), "{s}");
    assert!(
        s["seconds_since_seen"].as_u64().is_some_and(|v| v < 10),
        "{s}"
    );
    let (code, text, _) = crate::support::process::cli(&["servers", "-c", &config]);
    assert_eq!(code, 0);
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("bbb1") && l.contains("running")),
        "{text}"
    );
    // A running edge's server is not forgotten; a stopped one is, with what waited.
    let forget = ["servers", "--forget", "bbb1", "--json", "-c", &config];
    let (code, _, err) = crate::support::process::cli(&forget);
    assert_ne!(code, 0);
    assert!(err.contains("bbb1's edge is running"), "{err}");
    edge.terminate().await;
    let (code, out, err) = crate::support::process::cli(&forget);
    assert_eq!(code, 0, "{err}");
    let forgotten: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(forgotten["messages_dropped"], 7, "{forgotten}");
    assert!(store.smembers("hookrelay:edges").await.is_empty());
    assert_eq!(store.xlen("hookrelay:edge:{bbb1}:bus").await, 0);
    let (_, out, _) = crate::support::process::cli(&["servers", "-c", &config]);
    assert!(out.contains("no edges write to this store"), "{out}");
    let (_, out, _) = crate::support::process::cli(&["audit", "--json", "-c", &config]);
    assert!(
        out.contains("forget-server") && out.contains("bbb1"),
        "{out}"
    );
    relay.terminate().await;
}

/// An edge opens its metrics listener alone (not the hooks API it was given a port for), and
/// never shows the password of its store, even in the lines that say it cannot reach it.
#[tokio::test]
async fn an_edge_listens_for_its_metrics_alone_and_never_shows_the_stores_password() {
    let bbb = TestRedis::start().await;
    // Port 1: nothing answers, so the edge keeps what it reads and says why.
    let edge = Edge::start(&bbb, "bbb1", "redis://:hunter2-not-shown@127.0.0.1:1", "").await;
    publish(&bbb, 0..3).await;
    edge.metric_reaches("hookrelay_edge_buffered_messages", 3.0)
        .await;
    assert_eq!(edge.metric("hookrelay_edge_store_up").await, 0.0);
    let api = API_PORT.with(|p| *p);
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", api)).is_err(),
        "an edge opened the hooks API's port"
    );
    let log = edge.terminate().await;
    assert!(log.contains("cannot write to the pool's store"), "{log}");
    assert!(!log.contains("hunter2-not-shown"), "{log}");
}
