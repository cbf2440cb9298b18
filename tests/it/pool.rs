//! A pool (docs/pool.md): BBB servers (each a `redis-server` of its own) with an edge each (the
//! real binary, `[edge]`), a pool's store reached by TLS alone, and two pool relays as a fleet
//! (the real binary, `[pool] local_bus = false`) that take every edge with no list of servers,
//! delivering to a real receiver. The store is stopped for 10 s in the middle of meetings, an
//! edge and a pool relay are killed -9, a server is added while everything runs.

use std::{collections::HashMap, time::Duration};

use crate::support::{
    RelayProcess, TestReceiver, TestRedis,
    edge::TestEdge,
    meeting_created, metric_value,
    receiver::Received,
    relay::{create_hook, http_client},
    tls::TestCa,
    user_joined, user_name,
    wait::until_within,
};

/// The pool relays' configuration beyond the test's defaults: bbb-webhooks' callback form (its
/// `domain` field names the server), a fleet, and the store.
/// `lease_ms` is the fleet lease's: a holder that cannot renew it for that long stops (for its
/// service manager to start it again). The messages kept cover two leases, as they must.
fn pool_config(store_url: &str, ca_file: Option<&str>, lease_ms: u64) -> String {
    let ca = ca_file.map_or(String::new(), |f| format!("ca_file = \"{f}\"\n"));
    let buffer_s = (lease_ms * 2 / 1000).max(60);
    format!(
        "compat = \"reference\"\nmax_unacked = 4\n[fleet]\nenabled = true\nlease_ms = {lease_ms}\nbuffer_s = {buffer_s}\n[store]\nurl = \"{store_url}\"\n{ca}"
    )
}

/// Two pool relays, the first holding the fleet lease, and a hook for every event registered
/// on the second.
async fn two_pool_relays(
    store: &TestRedis,
    config: &str,
    rx: &TestReceiver,
) -> (RelayProcess, RelayProcess) {
    let first = RelayProcess::start_pool(store, config).await;
    crate::fleet::wait_until_holder(&first).await;
    let second = RelayProcess::start_pool(store, config).await;
    create_hook(&http_client(), second.api, &rx.url("/all"), "").await;
    until_within(
        "the holder sees the hook",
        Duration::from_secs(10),
        async || {
            let list = first.call("list", "").await;
            if list.contains("/all") {
                Ok(())
            } else {
                Err(list)
            }
        },
    )
    .await;
    (first, second)
}

/// One callback as the test reads it: the server (`domain`), the event, the external meeting
/// id and the user's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Seen {
    server: String,
    event: String,
    meeting: String,
    user: String,
}

fn seen(r: &Received) -> Seen {
    let events: serde_json::Value = serde_json::from_str(&r.event()).expect("event JSON");
    let event = &events[0];
    Seen {
        server: r.field("domain").unwrap_or_default(),
        event: event["data"]["id"].as_str().unwrap_or_default().to_string(),
        meeting: event["data"]["attributes"]["meeting"]["external-meeting-id"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        user: user_name(&event.to_string()),
    }
}

/// Publishes on `bbb` the joins of users `range` to meeting `m1`, named `<server>-<i>`.
async fn joins(bbb: &TestRedis, server: &str, range: std::ops::Range<usize>) {
    for i in range {
        let name = format!("{server}-{i:03}");
        bbb.publish(&user_joined("m1", &format!("u{i}"), &name))
            .await;
    }
}

/// Waits until `rx` has `n` callbacks; returns them in order of arrival.
async fn callbacks(rx: &TestReceiver, n: usize) -> Vec<Seen> {
    until_within(
        &format!("{n} callbacks"),
        Duration::from_secs(60),
        async || {
            let got: Vec<Seen> = rx.delivered().iter().map(seen).collect();
            if got.len() >= n {
                Ok(got)
            } else {
                Err(got.len())
            }
        },
    )
    .await
}

/// Each server's callbacks in order: its meeting's creation, then its users' joins in bus
/// order, each once (beyond `repeats_allowed` repeats of one callback, none).
fn assert_per_server(got: &[Seen], servers: &[&str], users: usize, repeats_allowed: usize) {
    let mut by_server: HashMap<&str, Vec<&Seen>> = HashMap::new();
    for s in got {
        by_server.entry(s.server.as_str()).or_default().push(s);
    }
    for server in servers {
        let mine = by_server.remove(server).unwrap_or_default();
        // Each callback's first arrival, in order.
        let mut once = std::collections::HashSet::new();
        let dedup: Vec<&Seen> = mine.iter().copied().filter(|s| once.insert(*s)).collect();
        assert!(
            mine.len() - dedup.len() <= repeats_allowed,
            "{server}: {} repeats",
            mine.len() - dedup.len()
        );
        assert_eq!(dedup.len(), users + 1, "{server}: {dedup:?}");
        assert_eq!(dedup[0].event, "meeting-created", "{server}");
        assert_eq!(dedup[0].meeting, format!("ext-{server}"));
        let names: Vec<&str> = dedup[1..].iter().map(|s| s.user.as_str()).collect();
        let want: Vec<String> = (0..users).map(|i| format!("{server}-{i:03}")).collect();
        assert_eq!(names, want, "{server}: every join once, in bus order");
        // Mappings stay per server: the same internal id is each server's own meeting.
        assert!(
            dedup[1..]
                .iter()
                .all(|s| s.meeting == format!("ext-{server}")),
            "{server}: {dedup:?}"
        );
    }
    assert!(
        by_server.is_empty(),
        "callbacks of no server: {by_server:?}"
    );
}

#[tokio::test]
async fn three_edges_through_a_tls_store_stopped_10_s_mid_meeting_lose_nothing() {
    let ca = TestCa::new("pool-ca");
    let mut store = TestRedis::start_tls_appendonly(&ca).await;
    let rx = TestReceiver::start().await;
    // A lease that outlasts the outage by the holder's own clock: it holds a lease for half
    // its length from the last renewal it sent and renews every quarter, so at any moment it
    // has at least a quarter left (20 s here, against the 10 s outage and the time around it;
    // with 30 s it had 7.5 s, and on a loaded machine the holder stopped, as it must).
    let config = pool_config(&store.tls_url(), Some(&ca.ca_file()), 80_000);
    let (holder, other) = two_pool_relays(&store, &config, &rx).await;
    let servers = ["bbb1", "bbb2", "bbb3"];
    let mut buses = Vec::new();
    let mut edges = Vec::new();
    let edge_ca = format!("ca_file = \"{}\"", ca.ca_file());
    for server in servers {
        let bbb = TestRedis::start().await;
        edges.push(TestEdge::start(&bbb, server, &store.tls_url(), &edge_ca).await);
        buses.push(bbb);
    }
    // The same internal meeting id on every server, each its own external id.
    for (bbb, server) in buses.iter().zip(servers) {
        bbb.publish(&meeting_created("m1", &format!("ext-{server}")))
            .await;
        joins(bbb, server, 0..10).await;
    }
    callbacks(&rx, 3 * 11).await;

    // The store goes away for 10 s in the middle of the meetings: the edges keep what their
    // buses say, and the relays go on once it is back.
    store.stop().await;
    for (bbb, server) in buses.iter().zip(servers) {
        joins(bbb, server, 10..20).await;
    }
    for edge in &edges {
        edge.metric_reaches("hookrelay_edge_buffered_messages", 10.0)
            .await;
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    store.start_again().await;
    for (bbb, server) in buses.iter().zip(servers) {
        joins(bbb, server, 20..30).await;
    }
    callbacks(&rx, 3 * 31).await;
    // Nothing more comes: every event once.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got: Vec<Seen> = rx.delivered().iter().map(seen).collect();
    assert_eq!(got.len(), 3 * 31, "{got:?}");
    assert_per_server(&got, &servers, 30, 0);

    // The conference is counted per server, by the relay that processes the bus; the holder
    // rode the outage out (its lease is longer).
    let mut holder = holder;
    if holder.has_exited() {
        let log = std::fs::read_to_string(&holder.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(30)..].join("\n");
        panic!("the holder stopped; its log ends:\n{tail}");
    }
    let m = holder.metrics().await;
    for server in servers {
        for (series, want) in [
            ("bbb_meetings", 1.0),
            ("bbb_meetings_participants", 30.0),
            ("bbb_api_up", 1.0),
            ("hookrelay_redis_connected", 1.0),
        ] {
            let label = if series.starts_with("bbb") {
                "server"
            } else {
                "source"
            };
            let series = format!("{series}{{{label}=\"{server}\"}}");
            assert_eq!(metric_value(&m, &series), want, "{series}\n{m}");
        }
    }
    assert!(!m.contains("\nbbb_meetings "), "no sum over servers: {m}");
    // `hookrelay servers` and the status page list the servers, none behind.
    let config = holder.config.display().to_string();
    let (code, out, err) = crate::support::process::cli(&["servers", "--json", "-c", &config]);
    assert_eq!(code, 0, "{err}");
    let listed: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let names: Vec<&str> = (listed["servers"].as_array().expect("servers").iter())
        .map(|s| s["server"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(names, servers, "{listed}");
    for s in listed["servers"].as_array().expect("servers") {
        assert_eq!(s["running"], true, "{s}");
        assert_eq!(s["lag_s"], 0.0, "{s}");
        assert_eq!(s["forwarded"], 31, "{s}");
    }
    let (_, token, _) = crate::support::process::cli(&["admin-token", "-c", &config]);
    let page = http_client()
        .get(format!("http://{}/servers", holder.admin))
        .bearer_auth(token.trim())
        .send()
        .await
        .expect("status page");
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("page");
    for server in servers {
        assert!(html.contains(&format!("id=\"server-{server}\"")), "{html}");
    }
    assert_eq!(html.matches(">running<").count(), 3, "{html}");
    // What was taken is trimmed from the store's streams.
    until_within("the streams trimmed", Duration::from_secs(10), async || {
        let mut lengths = Vec::new();
        for server in servers {
            lengths.push(
                store
                    .xlen(&format!("hookrelay:edge:{{{server}}}:bus"))
                    .await,
            );
        }
        if lengths.iter().all(|n| *n <= 1) {
            Ok(())
        } else {
            Err(lengths)
        }
    })
    .await;
    for edge in edges {
        edge.terminate().await;
    }
    other.terminate().await;
    holder.terminate().await;
}

#[tokio::test]
async fn a_new_server_is_served_within_5_s_and_kill_9s_of_an_edge_and_a_pool_relay_lose_nothing() {
    let store = TestRedis::start_appendonly().await;
    let rx = TestReceiver::start().await;
    let config = pool_config(&store.url(), None, 1000);
    let (holder, other) = two_pool_relays(&store, &config, &rx).await;
    let bbb1 = TestRedis::start().await;
    let edge1 = TestEdge::start(&bbb1, "bbb1", &store.url(), "").await;
    bbb1.publish(&meeting_created("m1", "ext-bbb1")).await;
    joins(&bbb1, "bbb1", 0..20).await;
    callbacks(&rx, 21).await;

    // A fourth server comes with no change to the relays: its first events arrive within 5 s.
    let bbb4 = TestRedis::start().await;
    let edge4 = TestEdge::start(&bbb4, "bbb4", &store.url(), "").await;
    let published = std::time::Instant::now();
    bbb4.publish(&meeting_created("m1", "ext-bbb4")).await;
    until_within(
        "the new server's first event",
        Duration::from_secs(5),
        async || {
            let got: Vec<Seen> = rx.delivered().iter().map(seen).collect();
            match got.iter().any(|s| s.server == "bbb4") {
                true => Ok(()),
                false => Err(got.len()),
            }
        },
    )
    .await;
    eprintln!("a new server served after {:?}", published.elapsed());

    // The edge of bbb1 is killed -9 mid-meeting and started again at once.
    joins(&bbb1, "bbb1", 20..40).await;
    edge1
        .metric_reaches("hookrelay_edge_messages_read_total", 41.0)
        .await;
    let edge1 = edge1.kill9_and_restart(&bbb1).await;
    joins(&bbb1, "bbb1", 40..60).await;

    joins(&bbb4, "bbb4", 0..60).await;

    // The pool relay that processes the bus is killed -9 while both servers talk.
    let talking = {
        let (b1, b4) = (bbb1.url(), bbb4.url());
        tokio::spawn(async move {
            let (c1, c4) = (
                redis::Client::open(b1).expect("url"),
                redis::Client::open(b4).expect("url"),
            );
            let mut c1 = c1.get_multiplexed_async_connection().await.expect("bbb1");
            let mut c4 = c4.get_multiplexed_async_connection().await.expect("bbb4");
            for i in 60..260 {
                for (c, server) in [(&mut c1, "bbb1"), (&mut c4, "bbb4")] {
                    let msg = user_joined("m1", &format!("u{i}"), &format!("{server}-{i:03}"));
                    let _: i64 = redis::cmd("PUBLISH")
                        .arg("from-akka-apps-redis-channel")
                        .arg(msg)
                        .query_async(c)
                        .await
                        .expect("publish");
                }
                // Paced, so that the kill falls in the middle.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    holder.kill9().await;
    crate::fleet::wait_until_holder(&other).await;
    talking.await.expect("publisher");
    let got = callbacks(&rx, 2 * 261).await;
    // Only callbacks in flight or not yet marked delivered may come twice.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got_now: Vec<Seen> = rx.delivered().iter().map(seen).collect();
    assert!(got_now.len() >= got.len());
    assert_per_server(&got_now, &["bbb1", "bbb4"], 260, 5);
    let m = other.metrics().await;
    assert_eq!(
        metric_value(&m, r#"bbb_meetings{server="bbb4"}"#),
        1.0,
        "{m}"
    );
    for edge in [edge1, edge4] {
        edge.terminate().await;
    }
    other.terminate().await;
}

/// A relay alone (no fleet) takes an edge too; entries of its stream that are no bus message
/// (written there by something else) are skipped and counted, and the rest delivered.
#[tokio::test]
async fn stream_entries_that_are_no_bus_message_are_skipped_counted_and_the_rest_delivered() {
    let store = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let relay = RelayProcess::start_pool(&store, "compat = \"reference\"\n").await;
    create_hook(&http_client(), relay.api, &rx.url("/all"), "").await;
    let bbb = TestRedis::start().await;
    let edge = TestEdge::start(&bbb, "bbb1", &store.url(), "").await;
    bbb.publish(&meeting_created("m1", "ext-bbb1")).await;
    callbacks(&rx, 1).await;
    let mut c = store.conn().await.expect("store");
    for fields in [&["x", "no payload"][..], &["c", "ch", "p", "{not json"][..]] {
        let _: String = redis::cmd("XADD")
            .arg("hookrelay:edge:{bbb1}:bus")
            .arg("*")
            .arg(fields)
            .query_async(&mut c)
            .await
            .expect("xadd");
    }
    joins(&bbb, "bbb1", 0..3).await;
    let got = callbacks(&rx, 4).await;
    assert_per_server(&got, &["bbb1"], 3, 0);
    let m = relay.metrics().await;
    // Neither the entry without a payload nor the broken one reads as JSON.
    let series = r#"hookrelay_bus_skipped_total{source="bbb1",reason="not_json"}"#;
    assert_eq!(metric_value(&m, series), 2.0, "{series}\n{m}");
    edge.terminate().await;
    relay.terminate().await;
}
