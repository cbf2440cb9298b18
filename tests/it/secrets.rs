//! The shared secret and checksums never appear in logs or metrics: a full run of the real binary
//! at debug level, with API calls (good and bad checksums), deliveries, failures and retries.

use crate::support::bad_receiver::{BadReceiver, Misbehaviour};
use crate::support::{
    RelayProcess, Reply, SECRET, TestReceiver, TestRedis,
    relay::{create_hook, http_client, signed_call},
    user_joined,
    wait::{until, until_within},
};
use hookrelay::base::digest::Algorithm;

#[tokio::test]
async fn no_secret_or_checksum_in_logs_or_metrics() {
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    rx.script([Reply::Status(500), Reply::Status(302)]);
    let relay = RelayProcess::start_logging(&redis, "", "debug").await;
    let http = http_client();
    create_hook(&http, relay.api, &rx.url("/s?token=bearer-abc"), "").await;
    // A receiver that resets the connection: transport errors carry URLs in reqwest's messages.
    let reset = BadReceiver::start(Misbehaviour::Reset).await;
    create_hook(
        &http,
        relay.api,
        &format!("{}?token=bearer-abc", reset.url()),
        "",
    )
    .await;
    let bad = signed_call(
        &http,
        relay.api,
        "list",
        "",
        Algorithm::Sha256,
        "not-the-secret",
    )
    .await;
    assert!(bad.contains("checksumError"));
    let mut api_checksums = Vec::new();
    for alg in Algorithm::ALL {
        let sum = alg.hex_digest(&[b"hooks/list", b"", SECRET.as_bytes()]);
        signed_call(&http, relay.api, "list", "", alg, SECRET).await;
        api_checksums.push(sum);
    }
    for i in 0..5 {
        redis
            .publish(&user_joined("int-1", &format!("u{i}"), &format!("n{i}")))
            .await;
    }
    rx.wait_delivered(5).await;
    // The resetting hook fails four times and is removed.
    let four = std::time::Duration::from_secs(4);
    until_within("four connections to the resetting hook", four, async || {
        let connections = reset.connections.load(std::sync::atomic::Ordering::SeqCst);
        match connections >= 4 {
            true => Ok(()),
            false => Err(connections),
        }
    })
    .await;
    until("the resetting hook removed", async || {
        let log = std::fs::read_to_string(&relay.log).unwrap_or_default();
        let last_line = log.lines().next_back().unwrap_or_default().to_string();
        match log.contains("removing the hook") {
            true => Ok(()),
            false => Err(last_line),
        }
    })
    .await;
    let metrics = relay.metrics().await;
    let log = relay.terminate().await;
    assert!(log.contains("DEBUG"), "the run logged at debug level");
    assert!(log.contains("callback failed"), "failures were logged");
    assert!(
        log.contains("removing the hook"),
        "the resetting hook's errors were logged"
    );
    let callback_checksums: Vec<String> = rx
        .received()
        .iter()
        .map(|r| r.uri.rsplit_once("checksum=").unwrap().1.to_string())
        .collect();
    for (what, text) in [("log", &log), ("metrics", &metrics)] {
        assert!(!text.contains(SECRET), "the secret is in the {what}");
        for sum in api_checksums.iter().chain(&callback_checksums) {
            assert!(!text.contains(sum.as_str()), "a checksum is in the {what}");
        }
        assert!(
            !text.contains("bearer-abc"),
            "a callback URL's token is in the {what}"
        );
    }
}

/// Tenants' secrets (`docs/tenants.md`), Scalelite's and configured ones, never appear in logs
/// or metrics either: a run at debug level with their API calls (good and bad checksums),
/// their callbacks, a bad record of Scalelite's and Scalelite's Redis gone.
#[tokio::test]
async fn no_tenant_secret_in_logs_or_metrics() {
    use crate::support::{
        meeting_created_with_metadata,
        relay::signed_call_at,
        scalelite::{save_tenant, set_field},
    };
    const SL_SECRETS: [&str; 2] = ["scalelite-tenant-secret-1", "scalelite-tenant-secret-2"];
    const TOML_SECRET: &str = "configured-tenant-secret";
    let (redis, mut scalelite) = (TestRedis::start().await, TestRedis::start().await);
    save_tenant(&scalelite, "u-1", "acme", &SL_SECRETS).await;
    save_tenant(&scalelite, "u-2", "beta", &["beta-tenant-secret-000"]).await;
    let config = format!(
        "[scalelite]\nredis_url = '{}'\nrefresh_ms = 200\n[[tenants]]\nname = 'gamma'\nsecrets = ['{TOML_SECRET}']\n",
        scalelite.url()
    );
    let relay = RelayProcess::start_logging(&redis, &config, "debug").await;
    let rx = TestReceiver::start().await;
    let http = http_client();
    let q = format!(
        "callbackURL={}",
        hookrelay::base::form::form_encode(&rx.url("/t"))
    );
    for (host, secret, ok) in [
        ("acme.sl.example.com", SL_SECRETS[1], true),
        ("gamma.sl.example.com", TOML_SECRET, true),
        ("acme.sl.example.com", TOML_SECRET, false),
    ] {
        let answer = until("the tenant is known", async || {
            let a = signed_call_at(
                &http,
                relay.api,
                Some(host),
                "create",
                &q,
                (Algorithm::Sha256, secret),
            )
            .await;
            match a.contains("SUCCESS") == ok {
                true => Ok(a),
                false => Err(a),
            }
        })
        .await;
        assert!(answer.contains("SUCCESS") == ok, "{answer}");
    }
    redis
        .publish(&meeting_created_with_metadata(
            "m1",
            "e1",
            &serde_json::json!({"tenant-id": "u-1"}),
        ))
        .await;
    rx.wait_delivered(1).await;
    // Beta's secrets emptied (a bad record), then Scalelite's Redis gone.
    set_field(&scalelite, "tenant:u-2", "secrets", "").await;
    relay.wait_log("the bad record is told", "no_secrets").await;
    scalelite.kill().await;
    relay
        .wait_log("the failed read is told", "cannot read Scalelite's tenants")
        .await;
    let metrics = relay.metrics().await;
    let log = relay.terminate().await;
    let checksums: Vec<String> = rx
        .received()
        .iter()
        .map(|r| {
            r.uri
                .rsplit_once("checksum=")
                .map_or(String::new(), |(_, s)| s.to_string())
        })
        .collect();
    for (what, text) in [("log", &log), ("metrics", &metrics)] {
        for secret in SL_SECRETS
            .iter()
            .chain(&[TOML_SECRET, "beta-tenant-secret-000"])
        {
            assert!(!text.contains(secret), "a tenant's secret is in the {what}");
        }
        for sum in &checksums {
            assert!(!text.contains(sum.as_str()), "a checksum is in the {what}");
        }
    }
}
