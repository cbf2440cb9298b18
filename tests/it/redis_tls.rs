//! TLS to every Redis (`docs/security.md`, "Redis across the network"): a store and a bus
//! reached by `rediss://` alone, a conference server's bus and Scalelite's Redis too, each
//! verified against the CA file its section names; a server whose certificate comes from
//! another CA stops the start in one line; a password in clear text to another machine is
//! warned of, never shown.

use std::time::Duration;

use crate::support::{
    SECRET, TestReceiver, TestRedis, TestRelay, free_port, meeting_created,
    process::binary,
    scalelite::{NS, call_at, hook_id, save_tenant},
    tls::TestCa,
    user_joined,
};

/// `hookrelay serve` with `config` (TOML) that must stop by itself: its exit code and stderr.
fn serve_refused(config: &str) -> (i32, String) {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("hookrelay.toml");
    let (api, metrics, admin) = (free_port(), free_port(), free_port());
    std::fs::write(
        &path,
        format!(
            "[bbb]\nsecret = \"{SECRET}\"\n[api]\nbind = \"127.0.0.1:{api}\"\n[metrics]\nbind = \"127.0.0.1:{metrics}\"\n[admin]\nbind = \"127.0.0.1:{admin}\"\nsocket = \"{}\"\n{config}",
            dir.path().join("admin.sock").display()
        ),
    )
    .expect("config");
    let mut child = std::process::Command::new(binary())
        .arg("serve")
        .arg("--config")
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the hookrelay binary");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the relay did not stop by itself");
        }
        // The loop's pace: it polls until the relay exits.
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    use std::io::Read;
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err);
    (status.code().unwrap_or(-1), err)
}

#[tokio::test]
async fn a_store_and_bus_reached_by_tls_alone_deliver_and_a_stranger_certificate_stops_the_start() {
    let ca = TestCa::new("pool-ca");
    let redis = TestRedis::start_tls(&ca).await;
    let mut config = TestRelay::config(&redis);
    config.redis.url = hookrelay::config::SecretUrl::new(redis.tls_url());
    config.redis.ca_file = Some(ca.ca_file().into());
    let relay = TestRelay::start_with(&redis, config).await;
    let rx = TestReceiver::start().await;
    let url = rx.url("/tls");
    relay.create_hook(&url, "").await;
    redis.publish(&meeting_created("int-1", "ext-1")).await;
    redis.publish(&user_joined("int-1", "u1", "Ann")).await;
    let got = rx.wait_delivered(2).await;
    let ids: Vec<String> = got
        .iter()
        .map(|r| {
            r.assert_signed(&url);
            let v: serde_json::Value = serde_json::from_str(&r.event()).expect("JSON");
            v["data"]["id"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    assert_eq!(ids, ["meeting-created", "user-joined"]);
    // The hook lives in the store, which only TLS reached.
    assert_eq!(
        redis
            .smembers("bigbluebutton:webhooks:out:hooks")
            .await
            .len(),
        1
    );
    relay.stop().await;

    // A CA file of another CA: the start stops, in one line naming the key and the address.
    let stranger = TestCa::new("another-ca");
    let (code, err) = serve_refused(&format!(
        "[redis]\nurl = \"{}\"\nca_file = \"{}\"\n",
        redis.tls_url(),
        stranger.ca_file()
    ));
    assert_eq!(code, 1, "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    let want = format!(
        "hookrelay: redis.url (127.0.0.1:{}): the server's certificate does not verify against redis.ca_file ({}): ",
        redis.tls_port,
        stranger.ca_file()
    );
    assert!(lines[0].starts_with(&want), "{err}");
    // Without a CA file, the system's roots do not know the test's CA either.
    let (code, err) = serve_refused(&format!("[redis]\nurl = \"{}\"\n", redis.tls_url()));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("does not verify against the system's roots"),
        "{err}"
    );
}

#[tokio::test]
async fn a_conference_servers_bus_and_scalelites_redis_over_tls() {
    let ca = TestCa::new("pool-ca");
    let store = TestRedis::start().await;
    let bbb = TestRedis::start_tls(&ca).await;
    let scalelite = TestRedis::start_tls(&ca).await;
    save_tenant(&scalelite, "t-acme", "acme", &["acme-secret-0000001"]).await;
    let mut config = TestRelay::config(&store);
    config.sources = vec![hookrelay::config::SourceConfig {
        name: "bbb1".into(),
        url: hookrelay::config::SecretUrl::new(bbb.tls_url()),
        channels: Vec::new(),
        secret: Default::default(),
        server_domain: "bbb1.example.com".into(),
        api_url: String::new(),
        ca_file: Some(ca.ca_file().into()),
    }];
    config.scalelite = Some(hookrelay::config::tenants::ScaleliteConfig {
        redis_url: hookrelay::config::SecretUrl::new(scalelite.tls_url()),
        namespace: NS.into(),
        refresh_ms: 200,
        ca_file: Some(ca.ca_file().into()),
    });
    let relay = TestRelay::start_with(&bbb, config).await;
    let rx = TestReceiver::start().await;
    let url = rx.url("/acme");
    // The tenant was read from Scalelite's Redis over TLS: its secret works at its host.
    let create = format!("callbackURL={}", hookrelay::base::form::form_encode(&url));
    let wait = crate::support::wait::until("the tenant is read", async || {
        let xml = call_at(
            relay.api,
            Some("acme"),
            "create",
            &create,
            "acme-secret-0000001",
        )
        .await;
        if xml.contains("SUCCESS") {
            Ok(xml)
        } else {
            Err(xml)
        }
    });
    hook_id(&wait.await);
    let metadata = serde_json::json!({"tenant-id": "t-acme", "tenant-name": "acme"});
    bbb.publish(&crate::support::meeting_created_with_metadata(
        "int-a", "ext-a", &metadata,
    ))
    .await;
    let got = rx.wait_delivered(1).await;
    assert!(
        got[0].event().contains("\"external-meeting-id\":\"ext-a\""),
        "{}",
        got[0].event()
    );
    relay.stop().await;
}

#[tokio::test]
async fn a_password_in_clear_text_to_another_machine_is_warned_of_and_never_shown() {
    let redis = TestRedis::start().await;
    let extra = format!(
        "[[sources]]\nname = \"here\"\nurl = \"{}\"\n[[sources]]\nname = \"far\"\nurl = \"redis://:hunter2-not-shown@192.0.2.1:6379\"\n",
        redis.url()
    );
    let relay = crate::support::RelayProcess::start(&redis, &extra).await;
    let log = relay.terminate().await;
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("a Redis password goes in clear text to another machine"))
        .collect();
    assert_eq!(warned.len(), 1, "{log}");
    assert!(
        warned[0].contains("sources[1].url") && warned[0].contains("192.0.2.1"),
        "{log}"
    );
    assert!(!log.contains("hunter2-not-shown"), "{log}");
}

#[tokio::test]
async fn a_store_behind_sentinels_reached_by_tls() {
    use crate::support::sentinel::{MASTER, TestSentinel};
    let ca = TestCa::new("pool-ca");
    let master = TestRedis::start_tls(&ca).await;
    let (_sentinel, sentinel_tls) = TestSentinel::start_tls(&master, &ca).await;
    let mut config = TestRelay::config(&master);
    config.store.sentinels = vec![hookrelay::config::SecretUrl::new(format!(
        "rediss://127.0.0.1:{sentinel_tls}"
    ))];
    config.store.sentinel_master = MASTER.into();
    // Only its scheme (TLS to the master) and its database are used with sentinels.
    config.store.url = Some(hookrelay::config::SecretUrl::new("rediss://127.0.0.1/0"));
    config.store.ca_file = Some(ca.ca_file().into());
    let relay = TestRelay::start_with(&master, config).await;
    let rx = TestReceiver::start().await;
    relay.create_hook(&rx.url("/s"), "").await;
    master.publish(&meeting_created("int-1", "ext-1")).await;
    rx.wait_delivered(1).await;
    assert_eq!(
        master
            .smembers("bigbluebutton:webhooks:out:hooks")
            .await
            .len(),
        1
    );
    relay.stop().await;
}

#[tokio::test]
async fn a_store_on_a_cluster_reached_by_tls() {
    use crate::support::{cluster::TestCluster, relay::create_hook, relay::http_client};
    let ca = TestCa::new("pool-ca");
    let cluster = TestCluster::start_tls(&ca).await;
    let bus = TestRedis::start().await;
    let relay = crate::support::RelayProcess::start(&bus, &cluster.tls_store_config(&ca)).await;
    let rx = TestReceiver::start().await;
    let http = http_client();
    for i in 0..3 {
        create_hook(&http, relay.api, &rx.url(&format!("/c{i}")), "").await;
    }
    // The hooks went to the nodes' shards, reached by TLS alone.
    let per_node = cluster.keys_per_node().await;
    assert!(per_node.iter().sum::<usize>() >= 3, "{per_node:?}");
    bus.publish(&meeting_created("int-1", "ext-1")).await;
    let got = rx.wait_delivered(3).await;
    assert!(got.iter().all(|r| r.event().contains("meeting-created")));
    relay.terminate().await;
}

/// An edge whose pool store shows a certificate of another CA than `edge.ca_file`'s stops at
/// its start, in one line naming the key and the address.
#[tokio::test]
async fn an_edge_refuses_a_pool_store_whose_certificate_is_another_cas() {
    let ca = TestCa::new("pool-ca");
    let store = TestRedis::start_tls(&ca).await;
    let bbb = TestRedis::start().await;
    let stranger = TestCa::new("another-ca");
    let (code, err) = serve_refused(&format!(
        "[redis]\nurl = \"{}\"\n[edge]\nstore_url = \"{}\"\nserver = \"bbb1\"\nca_file = \"{}\"\n",
        bbb.url(),
        store.tls_url(),
        stranger.ca_file()
    ));
    assert_eq!(code, 1, "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    let want = format!(
        "hookrelay: edge.store_url (127.0.0.1:{}): the server's certificate does not verify against edge.ca_file ({}): ",
        store.tls_port,
        stranger.ca_file()
    );
    assert!(lines[0].starts_with(&want), "{err}");
}
