//! What a security review asked of the relay, tried from outside with the real binary: no API
//! checksum in the log, no connection to an address a meeting chose past the SSRF guard, no
//! answer for a foreign `Host`, no digest from `verify`.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use serde_json::json;

use crate::{
    support::{
        RelayProcess, SECRET, TestReceiver, TestRedis, free_port, metric_value, wait::until,
    },
    xapi::{config as xapi_config, encrypt, meeting},
};

/// A listener that counts the connections made to it (and answers none).
async fn counting_listener() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            drop(socket);
        }
    });
    (url, count)
}

#[tokio::test]
async fn an_unreachable_bbb_api_with_debug_logging_leaves_no_checksum_in_the_log() {
    let redis = TestRedis::start().await;
    // One address that refuses connections, one that takes them and never answers.
    let refused = format!("http://127.0.0.1:{}/bigbluebutton/api", free_port());
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let hang = format!(
        "http://{}/bigbluebutton/api",
        silent.local_addr().expect("addr")
    );
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    for api in [refused, hang] {
        let env = [
            ("HOOKRELAY_BBB__API_URL", api.as_str()),
            ("HOOKRELAY_BBB__RECONCILE_INTERVAL_S", "1"),
        ];
        let relay = RelayProcess::start_env(&redis, "", "debug", &env).await;
        relay
            .wait_log(
                "the API's failure is logged",
                "cannot read the conference state from BBB's API",
            )
            .await;
        let log = relay.terminate().await;
        assert!(
            !log.contains("checksum="),
            "{api}: the log carries a checksum"
        );
        assert!(
            !log.contains(&get_meetings_checksum()),
            "{api}: the log carries getMeetings' checksum"
        );
    }
}

/// The checksum of `getMeetings` with the test secret: the same in every call.
fn get_meetings_checksum() -> String {
    hookrelay::base::digest::Algorithm::Sha1.hex_digest(&[
        b"getMeetings".as_slice(),
        b"".as_slice(),
        SECRET.as_bytes(),
    ])
}

#[tokio::test]
async fn at_trace_level_neither_api_calls_nor_callbacks_log_their_urls() {
    let redis = TestRedis::start().await;
    let api = crate::support::bbb_api::FakeBbbApi::start(
        "<response><returncode>SUCCESS</returncode><meetings/></response>".into(),
    )
    .await;
    let env = [("HOOKRELAY_BBB__API_URL", api.url.as_str())];
    let relay = RelayProcess::start_env(&redis, "", "trace", &env).await;
    let rx = TestReceiver::start().await;
    crate::support::relay::create_hook(
        &crate::support::relay::http_client(),
        relay.api,
        &rx.url("/cb?token=integrator-credential-99"),
        "",
    )
    .await;
    redis
        .publish(&crate::support::user_joined("int-1", "u1", "Ann"))
        .await;
    rx.wait_delivered(1).await;
    until("getMeetings answered", async || {
        let log = std::fs::read_to_string(&relay.log).unwrap_or_default();
        match log.contains("conference state seeded from getMeetings") {
            true => Ok(()),
            false => Err(log.lines().count()),
        }
    })
    .await;
    let log = relay.terminate().await;
    for secret in [
        "checksum=",
        "integrator-credential-99",
        get_meetings_checksum().as_str(),
        SECRET,
    ] {
        assert!(!log.contains(secret), "the trace log carries {secret}");
    }
}

#[tokio::test]
async fn a_meeting_cannot_point_the_xapi_output_at_a_loopback_lrs_unless_the_operator_allows_it() {
    let operators = TestReceiver::start().await;
    let (chosen, connections) = counting_listener().await;
    let payload = json!({"lrs_endpoint": chosen, "lrs_token": "meeting-chosen-token"}).to_string();
    let encrypted = encrypt(&payload, SECRET);
    let lines = |name: &str| meeting(name, json!({"secret-lrs-payload": encrypted}));
    let operator_endpoint = operators.url("/lrs");

    // The default guard: loopback is refused for the address a meeting chose; the operator's
    // own endpoint (on loopback too) is theirs to choose.
    let redis = TestRedis::start().await;
    let env = [("HOOKRELAY_DELIVERY__SSRF__ALLOW_CIDRS", "[]")];
    let relay =
        RelayProcess::start_env(&redis, &xapi_config(&operator_endpoint), "info", &env).await;
    for l in lines("chosen") {
        redis.publish(&l).await;
    }
    for l in meeting("plain", json!({})) {
        redis.publish(&l).await;
    }
    // The plain meeting's statements reach the operator's LRS: the chosen one was decided on.
    operators.wait_delivered(19).await;
    until("the refused endpoint counted", async || {
        let text = relay.metrics().await;
        match metric_value(
            &text,
            "hookrelay_xapi_events_skipped_total{reason=\"bad_payload\"}",
        ) >= 19.0
        {
            true => Ok(()),
            false => Err(text),
        }
    })
    .await;
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "a connection to the chosen LRS"
    );
    let log = relay.terminate().await;
    assert!(
        !log.contains("meeting-chosen-token"),
        "the log shows the payload's token"
    );

    // Where the operator allows loopback, the meeting's LRS gets its statements.
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, &xapi_config(&operator_endpoint)).await;
    for l in lines("allowed") {
        redis.publish(&l).await;
    }
    until(
        "connections to the chosen LRS",
        async || match connections.load(Ordering::SeqCst) {
            0 => Err(0),
            n => Ok(n),
        },
    )
    .await;
    drop(relay);
}

#[tokio::test]
async fn a_foreign_host_gets_421_and_no_data_from_every_listener_without_credentials() {
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, "").await;
    let rx = TestReceiver::start().await;
    crate::support::relay::create_hook(
        &crate::support::relay::http_client(),
        relay.api,
        &rx.url("/cb?token=integrator-credential-88"),
        "",
    )
    .await;
    let ask = |target: String, host: &'static str| async move {
        let url = format!("http://{target}");
        let http = reqwest::Client::builder().build().expect("client");
        let answer = http
            .get(url)
            .header("host", host)
            .send()
            .await
            .expect("answer");
        let status = answer.status().as_u16();
        (status, answer.text().await.unwrap_or_default())
    };
    // The metrics listener: its own address answers, a rebound name does not.
    let (status, body) = ask(format!("{}/metrics", relay.metrics), "rebound.example:3004").await;
    assert_eq!(status, 421);
    assert!(!body.contains("hookrelay_"), "{body}");
    let (status, _) = ask(format!("{}/metrics", relay.metrics), "localhost").await;
    assert_eq!(status, 200);
    // The admin API's socket (no credentials: its file mode): the same through a tunnel.
    let socket = relay.config.parent().expect("dir").join("admin.sock");
    let over_socket = |host: &'static str| {
        let socket = socket.clone();
        async move {
            let http = reqwest::Client::builder()
                .unix_socket(socket.as_path())
                .build()
                .expect("client");
            let answer = http
                .get("http://localhost/v1/hooks")
                .header("host", host)
                .send()
                .await
                .expect("answer");
            (
                answer.status().as_u16(),
                answer.text().await.unwrap_or_default(),
            )
        }
    };
    let (status, body) = over_socket("rebound.example:9095").await;
    assert_eq!(status, 421);
    assert!(!body.contains("integrator-credential"), "{body}");
    let (status, body) = over_socket("localhost:9095").await;
    assert_eq!(status, 200);
    assert!(body.contains("integrator-credential"), "{body}");
}
