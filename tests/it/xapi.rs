//! The xAPI output against a real LRS (Ralph): a scripted meeting's statements read back field
//! by field; an LRS that answers 500, then refuses connections; a kill -9 of the relay
//! mid-meeting while the LRS is down; two tenants and their own LRSs.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    PATIENCE, RelayProcess, SECRET, TestRedis,
    lrs::{Gate, PASSWORD, Ralph, USER},
    metric_value,
};

const NAMESPACE: &str = "01234567-89ab-cdef-0123-456789abcdef";

/// The verbs of the fixture meeting's statements, in order (the last part of each verb id).
const VERBS: [&str; 19] = [
    "initialized",
    "join",
    "join",
    "start",
    "stopped",
    "start",
    "stopped",
    "start",
    "stopped",
    "share",
    "unshare",
    "posted",
    "reacted",
    "unreacted",
    "asked",
    "answered",
    "leave",
    "leave",
    "terminated",
];

/// The fixtures' meeting as meeting `name` (its own internal and external ids), its
/// `meeting-created` with `metadata`.
pub(crate) fn meeting(name: &str, metadata: Value) -> Vec<String> {
    let raw = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/bbb-webhooks/raw-events.json"
    ))
    .expect("fixture");
    raw.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let l = l
                .replace(
                    "8043c8452ae9830aac14c517adff3839dbd9228f-1698771157700",
                    &format!("{name}-int"),
                )
                .replace("random-9019868", &format!("{name}-ext"));
            let mut v: Value = serde_json::from_str(&l).expect("JSON");
            if let Some(m) = v.pointer_mut("/core/body/props/metadataProp") {
                m["metadata"] = metadata.clone();
            }
            v.to_string()
        })
        .collect()
}

pub(crate) fn config(endpoint: &str) -> String {
    format!(
        "[xapi]\nenabled = true\nlrs_endpoint = \"{endpoint}\"\nlrs_username = \"{USER}\"\nlrs_password = \"{PASSWORD}\"\nuuid_namespace = \"{NAMESPACE}\"\nserver_domain = \"myserver.com\"\nretry_intervals_ms = [100, 200, 400]\nrequest_timeout_ms = 2000\n"
    )
}

fn verbs(statements: &[Value]) -> Vec<String> {
    statements
        .iter()
        .map(|s| {
            s["verb"]["id"]
                .as_str()
                .unwrap_or_default()
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Every statement once, in the meeting's order.
fn assert_whole(statements: &[Value]) {
    assert_eq!(verbs(statements), VERBS, "{statements:#?}");
    let ids: std::collections::HashSet<&str> =
        statements.iter().filter_map(|s| s["id"].as_str()).collect();
    assert_eq!(ids.len(), VERBS.len(), "duplicated ids");
}

async fn publish(redis: &TestRedis, lines: &[String]) {
    for l in lines {
        redis.publish(l).await;
    }
}

/// Waits until the series reaches `at_least`.
async fn metric_reaches(relay: &RelayProcess, series: &str, at_least: f64) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while metric_value(&relay.metrics().await, series) < at_least {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{series} stayed below {at_least}"
        );
        // The loop's pace: it polls the metrics until the series reaches its value.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_meeting_reads_back_from_a_real_lrs_field_by_field() {
    let Some(ralph) = Ralph::start().await else {
        return;
    };
    let redis = TestRedis::start().await;
    // The reference's endpoint form: `/xapi/statements` is cut and `/xAPI/statements` added.
    // The webhooks' event filter is the webhooks' own: the xAPI output sees every event.
    let extra = format!(
        "exclude_events = [\"user-joined\", \"chat-group-message-sent\"]\n{}",
        config(&format!("{}/xapi/statements", ralph.url()))
    );
    let relay = RelayProcess::start(&redis, &extra).await;
    publish(
        &redis,
        &meeting("m1", json!({"xapi-create-end-actor-name": "Moodle"})),
    )
    .await;
    let got = ralph.wait_for(VERBS.len()).await;
    assert_whole(&got);
    let ids = |name: &str| {
        uuid::Uuid::new_v5(&uuid::Uuid::parse_str(NAMESPACE).unwrap(), name.as_bytes()).to_string()
    };
    let activity = |name: &str| format!("https://myserver.com/xapi/activities/{}", ids(name));
    // What Ralph stored is what was sent (it adds `stored` and `authority`).
    let audio = &got[3];
    assert_eq!(
        audio["actor"],
        json!({"account": {"name": "John Doe", "homePage": "https://myserver.com"}})
    );
    assert_eq!(audio["object"]["id"], activity("w_xfsb9gxtlfom_micro"));
    assert_eq!(
        audio["object"]["definition"]["name"]["en"],
        "John Doe's micro"
    );
    assert_eq!(
        audio["context"]["contextActivities"]["parent"][0]["id"],
        activity("m1-ext")
    );
    assert!(
        audio["timestamp"]
            .as_str()
            .unwrap()
            .starts_with("2023-10-31T"),
        "BBB's envelope time"
    );
    for s in &got {
        assert_eq!(s["context"]["registration"], ids("m1-ext_20231031"), "{s}");
        assert_eq!(
            s["context"]["extensions"]["https://w3id.org/xapi/cmi5/context/extensions/sessionid"],
            ids("m1-int")
        );
        assert_eq!(s["authority"]["mbox"], "mailto:relay@example.com");
    }
    assert_eq!(got[0]["actor"]["account"]["name"], "Moodle");
    assert_eq!(got[0]["object"]["id"], activity("m1-ext"));
    assert_eq!(
        got[0]["context"]["extensions"]["http://id.tincanapi.com/extension/planned-duration"],
        "PT0S"
    );
    assert_eq!(
        got[15]["actor"]["account"]["name"], "Mary Sue",
        "the answer is the respondent's"
    );
    assert_eq!(got[15]["result"]["response"], "0");
    assert_eq!(got[11]["object"]["id"], activity("1698771232706-9idm9pxf"));
    assert_eq!(got[18]["actor"]["account"]["name"], "Moodle");
    assert!(
        got[18]["result"]["duration"]
            .as_str()
            .unwrap()
            .starts_with("PT")
    );
    let host = format!("127.0.0.1:{}", ralph.port);
    let metrics = relay.metrics().await;
    assert!(
        metrics.contains("hookrelay_events_mapped_total{source=\"default\",event=\"user-left\"} 2"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("event=\"user-joined\""),
        "filtered events are not counted as mapped"
    );
    assert_eq!(
        metric_value(
            &metrics,
            &format!("hookrelay_xapi_statements_sent_total{{lrs=\"{host}\"}}")
        ),
        19.0
    );
    assert_eq!(
        metric_value(
            &metrics,
            &format!("hookrelay_xapi_statements_queued{{lrs=\"{host}\"}}")
        ),
        0.0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_lrs_that_fails_then_refuses_connections_loses_nothing_and_gets_nothing_twice() {
    let Some(ralph) = Ralph::start().await else {
        return;
    };
    let mut gate = Gate::start(&ralph.url()).await;
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, &config(&gate.url())).await;
    let lines = meeting("m2", json!({}));
    let host = gate.addr.to_string();
    // A 500 window over the meeting's first ten messages (seven statements).
    gate.fail(true);
    publish(&redis, &lines[..10]).await;
    metric_reaches(
        &relay,
        &format!("hookrelay_xapi_statement_failures_total{{lrs=\"{host}\",reason=\"status_5xx\"}}"),
        3.0,
    )
    .await;
    gate.fail(false);
    assert_eq!(ralph.wait_for(7).await.len(), 7);
    // Connections refused over the rest.
    gate.close().await;
    publish(&redis, &lines[10..]).await;
    metric_reaches(
        &relay,
        &format!("hookrelay_xapi_statement_failures_total{{lrs=\"{host}\",reason=\"connect\"}}"),
        3.0,
    )
    .await;
    assert!(
        metric_value(
            &relay.metrics().await,
            &format!("hookrelay_xapi_statements_queued{{lrs=\"{host}\"}}")
        ) >= 1.0
    );
    gate.open().await;
    let got = ralph.wait_for(VERBS.len()).await;
    assert_whole(&got);
    // Proves that nothing happens: no statement is sent a second time once all have arrived.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(ralph.statements().await.len(), VERBS.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kill_9_mid_meeting_while_the_lrs_is_down_loses_nothing() {
    let Some(mut ralph) = Ralph::start().await else {
        return;
    };
    let redis = TestRedis::start().await;
    let extra = config(&ralph.url());
    let relay = RelayProcess::start(&redis, &extra).await;
    let lines = meeting("m3", json!({}));
    publish(&redis, &lines[..10]).await;
    assert_eq!(ralph.wait_for(7).await.len(), 7);
    ralph.stop().await;
    // Cam, screen share, chat and hands: queued while the LRS is down.
    publish(&redis, &lines[10..19]).await;
    let host = format!("127.0.0.1:{}", ralph.port);
    metric_reaches(
        &relay,
        &format!("hookrelay_xapi_statements_queued{{lrs=\"{host}\"}}"),
        7.0,
    )
    .await;
    // The meeting's state is in the store, with an expiry.
    let state = "hookrelay:xapi:state:default:m3-int";
    let mut conn = redis.conn().await.expect("redis");
    let ttl: i64 = redis::cmd("TTL")
        .arg(state)
        .query_async(&mut conn)
        .await
        .expect("TTL");
    assert!(ttl > 80_000 && ttl <= 86_400, "{ttl}");
    assert_eq!(
        redis
            .hgetall(state)
            .await
            .get("u:w_uxw0dzhtvk0l")
            .map(String::as_str),
        Some("Mary Sue")
    );
    relay.kill9().await;
    let relay = RelayProcess::start(&redis, &extra).await;
    ralph.start_again().await;
    // The rest needs what the first relay learnt: the users' names, the poll.
    publish(&redis, &lines[19..]).await;
    let got = ralph.wait_for(VERBS.len()).await;
    assert_whole(&got);
    assert_eq!(got[17]["actor"]["account"]["name"], "John Doe");
    // Gone with the meeting's end.
    assert!(redis.hgetall(state).await.is_empty());
    drop(relay);
}

/// `meta_secret-lrs-payload` as `openssl aes-256-cbc -pbkdf2 -a -A -pass pass:SECRET` makes it.
pub(crate) fn encrypt(plain: &str, secret: &str) -> String {
    use aes::cipher::{BlockModeEncrypt, KeyIvInit, block_padding::Pkcs7};
    use base64::Engine as _;
    let salt = *b"8bytesal";
    let mut key_iv = [0u8; 48];
    pbkdf2::pbkdf2_hmac::<sha2::Sha256>(secret.as_bytes(), &salt, 10_000, &mut key_iv);
    let mut buf = plain.as_bytes().to_vec();
    let len = buf.len();
    buf.resize(len + 16, 0);
    let cipher = cbc::Encryptor::<aes::Aes256>::new_from_slices(&key_iv[..32], &key_iv[32..])
        .expect("key")
        .encrypt_padded::<Pkcs7>(&mut buf, len)
        .expect("room")
        .to_vec();
    let mut out = b"Salted__".to_vec();
    out.extend_from_slice(&salt);
    out.extend(cipher);
    base64::engine::general_purpose::STANDARD.encode(out)
}

#[tokio::test(flavor = "multi_thread")]
async fn each_tenant_gets_its_own_lrs_and_a_bad_payload_sends_nothing() {
    let Some(default) = Ralph::start().await else {
        return;
    };
    let Some(tenant) = Ralph::start().await else {
        return;
    };
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, &config(&default.url())).await;
    let payload = json!({"lrs_endpoint": format!("{}/xAPI", tenant.url()), "lrs_username": USER, "lrs_password": PASSWORD}).to_string();
    let encrypted = encrypt(&payload, SECRET);
    publish(
        &redis,
        &meeting("tenant", json!({"secret-lrs-payload": encrypted})),
    )
    .await;
    publish(&redis, &meeting("plain", json!({}))).await;
    publish(
        &redis,
        &meeting(
            "broken",
            json!({"secret-lrs-payload": encrypt(&payload, "not-the-secret")}),
        ),
    )
    .await;
    publish(&redis, &meeting("off", json!({"xapi-enabled": "false"}))).await;
    let to_tenant = tenant.wait_for(VERBS.len()).await;
    let to_default = default.wait_for(VERBS.len()).await;
    assert_whole(&to_tenant);
    assert_whole(&to_default);
    let session = |s: &Value| {
        s["context"]["extensions"]["https://w3id.org/xapi/cmi5/context/extensions/sessionid"]
            .clone()
    };
    let id = |name: &str| {
        json!(
            uuid::Uuid::new_v5(&uuid::Uuid::parse_str(NAMESPACE).unwrap(), name.as_bytes())
                .to_string()
        )
    };
    assert!(to_tenant.iter().all(|s| session(s) == id("tenant-int")));
    assert!(to_default.iter().all(|s| session(s) == id("plain-int")));
    let metrics = relay.metrics().await;
    assert!(
        metric_value(
            &metrics,
            "hookrelay_xapi_events_skipped_total{reason=\"bad_payload\"}"
        ) >= 19.0
    );
    assert!(
        metric_value(
            &metrics,
            "hookrelay_xapi_events_skipped_total{reason=\"disabled\"}"
        ) >= 1.0
    );
    let log = relay.terminate().await;
    assert!(log.contains("no usable LRS"), "{log}");
    for secret in [SECRET, PASSWORD, encrypted.as_str()] {
        assert!(!log.contains(secret), "the log shows a secret");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_takeover_mid_meeting_loses_nothing_and_sends_nothing_twice() {
    let Some(ralph) = Ralph::start().await else {
        return;
    };
    let mut gate = Gate::start(&ralph.url()).await;
    let redis = TestRedis::start().await;
    let extra = format!("{}{}", crate::fleet::FLEET, config(&gate.url()));
    let first = RelayProcess::start(&redis, &extra).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !crate::fleet::holds_lease(&first).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never took the lease"
        );
        // The loop's pace: it polls until the first instance holds the lease.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = RelayProcess::start(&redis, &extra).await;
    let lines = meeting("m5", json!({}));
    publish(&redis, &lines[..10]).await;
    assert_eq!(ralph.wait_for(7).await.len(), 7);
    // The LRS goes away; what the holder makes waits in its queue, then the holder dies.
    gate.close().await;
    publish(&redis, &lines[10..19]).await;
    let host = gate.addr.to_string();
    metric_reaches(
        &first,
        &format!("hookrelay_xapi_statements_queued{{lrs=\"{host}\"}}"),
        7.0,
    )
    .await;
    first.kill9().await;
    // Published while the other instance takes over: it kept them.
    publish(&redis, &lines[19..]).await;
    gate.open().await;
    let got = ralph.wait_for(VERBS.len()).await;
    assert_whole(&got);
    assert!(crate::fleet::holds_lease(&second).await);
    // Proves that nothing happens: neither instance sends a statement a second time.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(ralph.statements().await.len(), VERBS.len());
}
