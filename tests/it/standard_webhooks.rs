//! Callbacks with `[delivery.standard_webhooks] body = "json"`, checked by the official Standard
//! Webhooks libraries (PyPI and npm `standardwebhooks`, installed by
//! `scripts/ensure-standard-webhooks.sh`) as an integrator who follows docs/integrators.md runs
//! them: `verify()` returns the event, with either secret of a rotation, and refuses a tampered
//! body.

use std::{io::Write, process::Stdio};

use hookrelay::config::{CallbackBody, Secret};
use serde_json::{Value, json};

use crate::support::{TestReceiver, TestRedis, TestRelay, receiver::Received, user_joined};

/// The new secret and the one being retired.
const NEW: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OLD: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
/// A secret the relay does not sign with.
const OTHER: &str = "whsec_dGhpcyBpcyBub3QgYSBrZXkgb2YgdGhlIHJlbGF5";

/// The official libraries' verifiers: the program and its script.
pub(crate) fn verifiers() -> Option<[(&'static str, String); 2]> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/support");
    let python = ("python3", format!("{dir}/standard_webhooks_verify.py"));
    let node = ("node", format!("{dir}/standard_webhooks_verify.mjs"));
    let missing = [&python, &node].into_iter().any(|(program, script)| {
        verify(program, script, NEW, &json!({}), "{}")
            .get("error")
            .and_then(Value::as_str)
            .is_some_and(|e| e.starts_with("not installed"))
    });
    if missing {
        assert!(
            std::env::var_os("TEST_REQUIRE_STANDARD_WEBHOOKS").is_none(),
            "the Standard Webhooks libraries are not installed (scripts/ensure-standard-webhooks.sh)"
        );
        eprintln!("the Standard Webhooks libraries are not installed: not tried");
        return None;
    }
    Some([python, node])
}

/// What one library's `verify()` made of a callback: `{"ok": true, "event": ...}` or
/// `{"ok": false, "error": ...}`.
pub(crate) fn verify(
    program: &str,
    script: &str,
    secret: &str,
    headers: &Value,
    body: &str,
) -> Value {
    let mut child = std::process::Command::new(program)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let input = json!({ "secret": secret, "headers": headers, "body": body });
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.to_string().as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("run");
    if !out.status.success() {
        // The library itself cannot be loaded.
        return json!({ "ok": false, "error": format!("not installed: {}", String::from_utf8_lossy(&out.stderr)) });
    }
    serde_json::from_slice(&out.stdout).expect("one JSON line")
}

/// The Standard Webhooks headers of a callback, as the libraries take them.
pub(crate) fn headers(r: &Received) -> Value {
    let get = |name: &str| {
        r.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("{name}"))
            .to_string()
    };
    json!({
        "webhook-id": get("webhook-id"),
        "webhook-timestamp": get("webhook-timestamp"),
        "webhook-signature": get("webhook-signature"),
    })
}

#[tokio::test]
async fn the_official_libraries_verify_json_callbacks_with_either_secret_and_refuse_a_tampered_one()
{
    let Some(verifiers) = verifiers() else {
        return;
    };
    let redis = TestRedis::start().await;
    let mut config = TestRelay::config(&redis);
    config.delivery.standard_webhooks.secrets = vec![Secret::new(NEW), Secret::new(OLD)];
    config.delivery.standard_webhooks.body = CallbackBody::Json;
    let relay = TestRelay::start_with(&redis, config).await;
    let (rx, raw) = (TestReceiver::start().await, TestReceiver::start().await);
    relay.create_hook(&rx.url("/sw"), "").await;
    relay.create_hook(&raw.url("/raw"), "&getRaw=true").await;
    let joined = user_joined("int-1", "u1", "Zoë");
    redis.publish(&joined).await;
    let processed = rx.wait_delivered(1).await.remove(0);
    let raw_got = raw.wait_delivered(1).await.remove(0);

    for got in [&processed, &raw_got] {
        assert_eq!(got.headers["content-type"], "application/json");
        // The BBB checksum still signs the URL as registered, the body as sent and the secret.
        let path = if std::ptr::eq(got, &processed) {
            rx.url("/sw")
        } else {
            raw.url("/raw")
        };
        got.assert_signed(&path);
        let sent: Value = serde_json::from_str(&got.body).expect("the body is JSON");
        let h = headers(got);
        for (program, script) in &verifiers {
            for secret in [NEW, OLD] {
                let verified = verify(program, script, secret, &h, &got.body);
                assert_eq!(
                    verified,
                    json!({ "ok": true, "event": sent }),
                    "{program} with {secret}"
                );
            }
            let foreign = verify(program, script, OTHER, &h, &got.body);
            assert_eq!(foreign["ok"], false, "{program}: {foreign}");
            let tampered = got.body.replace("u1", "u2");
            assert_ne!(tampered, got.body);
            let refused = verify(program, script, NEW, &h, &tampered);
            assert_eq!(refused["ok"], false, "{program}: {refused}");
            assert!(
                refused["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("No matching signature")),
                "{program}: {refused}"
            );
        }
    }
    // The processed hook gets the event itself, its timestamp in a header of its own; the raw
    // hook gets the bus message exactly as published.
    let event: Value = serde_json::from_str(&processed.body).expect("JSON");
    assert_eq!(event["data"]["id"], "user-joined");
    assert_eq!(event["data"]["attributes"]["user"]["name"], "Zoë");
    let ts: u64 = processed.headers["x-hookrelay-timestamp"]
        .to_str()
        .expect("text")
        .parse()
        .expect("ms");
    assert_eq!(
        processed.headers["webhook-id"],
        format!("msg_1_{ts}").as_str()
    );
    assert_eq!(raw_got.body, joined);
    relay.stop().await;
}

#[tokio::test]
async fn the_official_libraries_refuse_the_form_body_which_is_why_json_exists() {
    let Some(verifiers) = verifiers() else {
        return;
    };
    let redis = TestRedis::start().await;
    let mut config = TestRelay::config(&redis);
    config.delivery.standard_webhooks.secrets = vec![Secret::new(NEW)];
    let relay = TestRelay::start_with(&redis, config).await;
    let rx = TestReceiver::start().await;
    relay.create_hook(&rx.url("/form"), "").await;
    redis.publish(&user_joined("int-1", "u1", "Ann")).await;
    let got = rx.wait_delivered(1).await.remove(0);
    assert!(got.body.starts_with("event="), "{}", got.body);
    for (program, script) in &verifiers {
        let verified = verify(program, script, NEW, &headers(&got), &got.body);
        // The signature checks out; parsing the form as JSON throws.
        assert_eq!(verified["ok"], false, "{program}: {verified}");
        assert!(
            !verified["error"]
                .as_str()
                .is_some_and(|e| e.contains("No matching signature")),
            "{program}: {verified}"
        );
    }
    relay.stop().await;
}

/// A tenant's hook (`docs/tenants.md`) is signed with the tenant's own secret: its Standard
/// Webhooks secret is `whsec_` and its API secret in base64, which the official libraries
/// verify; the operator's keys do not.
#[tokio::test]
async fn a_tenants_callbacks_verify_with_its_own_secret_in_the_official_libraries() {
    use base64::Engine;
    let Some(verifiers) = verifiers() else {
        return;
    };
    const TENANT_SECRET: &str = "acme-api-secret-0123456";
    let redis = TestRedis::start().await;
    let mut config = TestRelay::config(&redis);
    config.delivery.standard_webhooks.secrets = vec![Secret::new(NEW)];
    config.delivery.standard_webhooks.body = CallbackBody::Json;
    config.tenants = vec![hookrelay::config::tenants::TenantConfig {
        name: "acme".into(),
        secrets: vec![Secret::new(TENANT_SECRET)],
        id: None,
    }];
    let relay = TestRelay::start_with(&redis, config).await;
    let rx = TestReceiver::start().await;
    let url = rx.url("/acme");
    let created = crate::support::relay::signed_call_at(
        &crate::support::relay::http_client(),
        relay.api,
        Some("acme.bbb.example.com"),
        "create",
        &format!("callbackURL={}", hookrelay::base::form::form_encode(&url)),
        (hookrelay::base::digest::Algorithm::Sha256, TENANT_SECRET),
    )
    .await;
    assert!(created.contains("SUCCESS"), "{created}");
    redis
        .publish(&crate::support::meeting_created_with_metadata(
            "int-1",
            "ext-1",
            &json!({"tenant-id": "acme"}),
        ))
        .await;
    let got = rx.wait_delivered(1).await.remove(0);
    let tenant_key = format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(TENANT_SECRET)
    );
    let sent: Value = serde_json::from_str(&got.body).expect("JSON");
    let h = headers(&got);
    for (program, script) in &verifiers {
        let verified = verify(program, script, &tenant_key, &h, &got.body);
        assert_eq!(verified, json!({ "ok": true, "event": sent }), "{program}");
        let operators = verify(program, script, NEW, &h, &got.body);
        assert_eq!(operators["ok"], false, "{program}: {operators}");
    }
    // The BBB checksum too is the tenant's.
    let checksum = got.uri.rsplit_once("checksum=").map(|(_, s)| s.to_string());
    assert_eq!(
        checksum,
        Some(hookrelay::callback_checksum(
            hookrelay::base::digest::Algorithm::Sha1,
            &url,
            &got.body,
            TENANT_SECRET
        ))
    );
    relay.stop().await;
}
