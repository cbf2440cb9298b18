//! Tenants as a hosting provider runs them (`docs/tenants.md`, "A tenant's life"): with the
//! real binary (or `hookrelay::run`), a real store, a second real redis-server holding
//! Scalelite's tenants as Scalelite writes them, and real receivers: refused secrets, the view
//! kept across a restart while Scalelite's Redis is down, a removed tenant's hooks waiting for
//! it, rotations in the middle of a retry, limits, the `tenant` label and the audit.

use hookrelay::{base::digest::Algorithm, base::form::form_encode, callback_checksum};
use serde_json::{Value, json};

use crate::support::{
    Reply, SECRET, TestReceiver, TestRedis, TestRelay, meeting_created_with_metadata,
    process::{RelayProcess, cli},
    receiver::Received,
    relay::http_client,
    scalelite::{NS, call_at, destroy_tenant, hook_id, host, rotate, save_tenant},
    user_joined, user_name, wait,
};

const ACME: (&str, &str) = ("0b4e6c5e-acme", "acme");
const ACME_SECRET: &str = "acme-first-secret-0001";
const ACME_NEW: &str = "acme-second-secret-002";

/// `[scalelite]` on `scalelite`, read every 200 ms, and `more` TOML after it.
fn scalelite_toml(scalelite: &TestRedis, more: &str) -> String {
    format!(
        "[scalelite]\nredis_url = \"{}\"\nnamespace = \"{NS}\"\nrefresh_ms = 200\n{more}\n",
        scalelite.url()
    )
}

/// `[scalelite]` on `scalelite`, read every 200 ms, as the library's configuration.
fn scalelite_config(scalelite: &TestRedis) -> hookrelay::config::tenants::ScaleliteConfig {
    hookrelay::config::tenants::ScaleliteConfig {
        redis_url: hookrelay::config::SecretUrl::new(scalelite.url()),
        namespace: NS.into(),
        refresh_ms: 200,
        ..Default::default()
    }
}

/// `[[tenants]]` named `names`, each with the secret `<name>-secret-000001`.
fn configured(names: &[&str]) -> Vec<hookrelay::config::tenants::TenantConfig> {
    names
        .iter()
        .map(|n| hookrelay::config::tenants::TenantConfig {
            name: (*n).into(),
            secrets: vec![hookrelay::config::Secret::new(format!("{n}-secret-000001"))],
            id: None,
        })
        .collect()
}

fn create_query(url: &str) -> String {
    format!("callbackURL={}", form_encode(url))
}

/// `hookrelay audit ARGS --json -c CONFIG`'s records once there are `n` (records are written
/// a moment after the change, by the relay's writer).
async fn audit_lines(config: &str, args: &[&str], n: usize) -> (String, Vec<Value>) {
    wait::until(&format!("{n} audit records"), async || {
        let mut all = vec!["audit"];
        all.extend(args);
        all.extend(["--json", "-c", config]);
        let (code, out, err) = cli(&all);
        assert_eq!(code, 0, "{err}");
        let records: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        match records.len() >= n {
            true => Ok((out, records)),
            false => Err(out),
        }
    })
    .await
}

/// `hookrelay ARGS -c CONFIG --json`, parsed.
fn cli_json(config: &std::path::Path, args: &[&str]) -> Value {
    let config = config.to_string_lossy();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-c", &config, "--json"]);
    let (code, out, err) = cli(&all);
    assert_eq!(code, 0, "hookrelay {args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("hookrelay {args:?} printed {out}: {e}"))
}

/// Publishes meeting `mid` of tenant `tenant_id` (its external id `mid` too).
async fn tenant_meeting(bus: &TestRedis, mid: &str, tenant_id: &str) {
    bus.publish(&meeting_created_with_metadata(
        mid,
        mid,
        &json!({ "tenant-id": tenant_id }),
    ))
    .await;
}

/// Whether the callback's checksum is the sha1 of the registered URL, its body and `secret`.
fn signed_with(r: &Received, registered: &str, secret: &str) -> bool {
    let sum = r.uri.rsplit_once("checksum=").map(|(_, s)| s);
    sum == Some(&callback_checksum(
        Algorithm::Sha1,
        registered,
        &r.body,
        secret,
    ))
}

/// The sum of every series of family `name` whose labels include all of `labels`.
fn metric_sum(metrics: &str, name: &str, labels: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (family, rest) = series.split_once('{').unwrap_or((series, ""));
            (family == name && labels.iter().all(|want| rest.contains(want)))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

#[tokio::test]
async fn scalelite_tenants_with_the_operators_or_a_weak_secret_are_refused_while_the_others_work() {
    let (store, scalelite) = (TestRedis::start().await, TestRedis::start().await);
    save_tenant(&scalelite, ACME.0, ACME.1, &[ACME_SECRET]).await;
    // One tenant given the operator's secret (among others), one a 9-character secret.
    save_tenant(&scalelite, "e-1", "evil", &["evil-own-secret-0001", SECRET]).await;
    save_tenant(&scalelite, "w-1", "weak", &["short-123"]).await;
    let relay = RelayProcess::start(&store, &scalelite_toml(&scalelite, "")).await;
    let rx = TestReceiver::start().await;

    // Acme works; the refused tenants' calls fail the checksum at their hosts, as an unknown
    // tenant's.
    let a = hook_id(
        &call_at(
            relay.api,
            Some("acme"),
            "create",
            &create_query(&rx.url("/acme")),
            ACME_SECRET,
        )
        .await,
    );
    let checksum_error = "<messageKey>checksumError</messageKey>";
    for (at, secret) in [("weak", "short-123"), ("evil", "evil-own-secret-0001")] {
        let refused = call_at(
            relay.api,
            Some(at),
            "create",
            &create_query(&rx.url("/x")),
            secret,
        )
        .await;
        assert!(refused.contains(checksum_error), "{at}: {refused}");
    }

    // `hookrelay tenants`: Acme in force, the two refused with their reasons, no secret.
    let answer = cli_json(&relay.config, &["tenants"]);
    let names: Vec<&str> = answer["tenants"]
        .as_array()
        .expect("tenants")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["acme"], "{answer}");
    assert_eq!(answer["tenants"][0]["hooks"], 1);
    let problems = &answer["problems"];
    assert_eq!(
        *problems,
        json!([
            {"tenant": "e-1", "reason": "operator_secret", "refused": true},
            {"tenant": "w-1", "reason": "weak_secret", "refused": true},
        ])
    );
    let text = answer.to_string();
    for secret in [SECRET, "short-123", "evil-own-secret-0001", ACME_SECRET] {
        assert!(
            !text.contains(secret),
            "a secret in hookrelay tenants: {text}"
        );
    }
    let (code, out, _) = cli(&["tenants", "-c", &relay.config.to_string_lossy()]);
    assert_eq!(code, 0);
    assert!(
        out.contains("refused: tenant e-1 (operator_secret)")
            && out.contains("refused: tenant w-1 (weak_secret)"),
        "{out}"
    );

    // The metric, and one log line each however many reads went by.
    let m = relay.metrics().await;
    assert!(
        m.contains(r#"hookrelay_tenant_problems{reason="operator_secret"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(r#"hookrelay_tenant_problems{reason="weak_secret"} 1"#),
        "{m}"
    );
    relay
        .wait_log("the refusals said", "a tenant of Scalelite's is refused")
        .await;
    // Several reads of Scalelite's (every 200 ms) go by: a condition that must not change.
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    let log = std::fs::read_to_string(&relay.log).expect("log");
    assert_eq!(
        log.matches("a tenant of Scalelite's is refused").count(),
        2,
        "{log}"
    );
    for secret in [SECRET, "short-123", "evil-own-secret-0001", ACME_SECRET] {
        assert!(!log.contains(secret), "a secret in the log");
    }

    // The evil tenant given a secret of its own: in force within the refresh, its calls its own.
    rotate(&scalelite, "e-1", &["evil-own-secret-0001"]).await;
    let e = wait::until("the evil tenant in force", async || {
        let xml = call_at(
            relay.api,
            Some("evil"),
            "create",
            &create_query(&rx.url("/evil")),
            "evil-own-secret-0001",
        )
        .await;
        crate::support::relay::hook_id_of(&xml).ok_or(xml)
    })
    .await;
    let listed = call_at(relay.api, Some("evil"), "list", "", "evil-own-secret-0001").await;
    assert!(
        listed.contains(&format!("<hookID>{e}</hookID>"))
            && !listed.contains(&format!("<hookID>{a}</hookID>")),
        "{listed}"
    );
    relay.terminate().await;
}

#[tokio::test]
async fn a_restart_while_scalelites_redis_is_down_keeps_every_tenant() {
    let (store, mut scalelite) = (TestRedis::start().await, TestRedis::start().await);
    save_tenant(&scalelite, ACME.0, ACME.1, &[ACME_SECRET]).await;
    save_tenant(&scalelite, "b-2", "beta", &["beta-only-secret-0003"]).await;
    let toml = scalelite_toml(&scalelite, "");
    let relay = RelayProcess::start(&store, &toml).await;
    let rx = TestReceiver::start().await;
    let url = rx.url("/acme");
    let a = hook_id(
        &call_at(
            relay.api,
            Some("acme"),
            "create",
            &create_query(&url),
            ACME_SECRET,
        )
        .await,
    );
    // The view is kept in the store once read.
    wait::until("the tenants kept in the store", async || {
        let mut conn = store.conn().await.ok_or("no store")?;
        let kept: Option<String> = redis::cmd("GET")
            .arg("hookrelay:tenants:scalelite")
            .query_async(&mut conn)
            .await
            .map_err(|_| "GET")?;
        kept.filter(|k| k.contains("beta"))
            .map(|_| ())
            .ok_or("not yet")
    })
    .await;
    relay.terminate().await;

    // Scalelite's Redis down, then the relay started again.
    scalelite.kill().await;
    let relay = RelayProcess::start(&store, &toml).await;
    let listed = call_at(relay.api, Some("acme"), "list", "", ACME_SECRET).await;
    assert!(
        listed.contains(&format!("<hookID>{a}</hookID>")),
        "{listed}"
    );
    let beta = call_at(relay.api, Some("beta"), "list", "", "beta-only-secret-0003").await;
    assert!(beta.contains("<returncode>SUCCESS</returncode>"), "{beta}");
    // Acme's meeting still its own: the callback signed with its secret.
    tenant_meeting(&store, "ma", ACME.0).await;
    store.publish(&user_joined("ma", "u1", "Ann")).await;
    let got = rx.wait_delivered(2).await;
    assert!(got.iter().all(|r| signed_with(r, &url, ACME_SECRET)));
    let m = relay.metrics().await;
    assert!(m.contains("hookrelay_tenants_from_store 1"), "{m}");
    assert!(m.contains("hookrelay_tenants 2"), "{m}");
    let answer = cli_json(&relay.config, &["tenants"]);
    assert!(answer["scalelite"]["from_store"].is_string(), "{answer}");
    assert!(answer["scalelite"]["failing_since"].is_string(), "{answer}");
    let shown = cli_json(&relay.config, &["hooks", "show", &a.to_string()]);
    assert_eq!(shown["state"], "ok", "{shown}");
    relay
        .wait_log(
            "the kept view said",
            "the view kept in the store stays in force",
        )
        .await;
    let log = std::fs::read_to_string(&relay.log).expect("log");
    for secret in [ACME_SECRET, "beta-only-secret-0003"] {
        assert!(!log.contains(secret), "a secret in the log");
    }
    // Scalelite back: read again, the kept view no longer the one in force.
    scalelite.start_again().await;
    save_tenant(&scalelite, ACME.0, ACME.1, &[ACME_SECRET]).await;
    wait::until("Scalelite read again", async || {
        let m = relay.metrics().await;
        m.contains("hookrelay_tenants_from_store 0")
            .then_some(())
            .ok_or(m)
    })
    .await;
    relay.terminate().await;
}

#[tokio::test]
async fn a_removed_tenants_hooks_wait_disabled_and_send_their_kept_callbacks_in_order_when_it_is_back()
 {
    let (store, scalelite) = (TestRedis::start().await, TestRedis::start().await);
    save_tenant(&scalelite, ACME.0, ACME.1, &[ACME_SECRET]).await;
    let relay = RelayProcess::start(&store, &scalelite_toml(&scalelite, "")).await;
    let cfg = relay.config.to_string_lossy().into_owned();
    let rx = TestReceiver::start().await;
    let url = rx.url("/acme");
    let a = hook_id(
        &call_at(
            relay.api,
            Some("acme"),
            "create",
            &create_query(&url),
            ACME_SECRET,
        )
        .await,
    );
    // The receiver busy (Retry-After: 1, never a reason to give the hook up): callbacks queue.
    rx.set_default(Reply::Busy(503, "1".into()));
    tenant_meeting(&store, "ma", ACME.0).await;
    for i in 0..4 {
        store
            .publish(&user_joined("ma", &format!("u{i}"), &format!("n{i}")))
            .await;
    }
    wait::until("a first attempt", async || match rx.received().len() {
        0 => Err(0),
        n => Ok(n),
    })
    .await;

    // Acme deleted in Scalelite: its hook disabled, said everywhere.
    destroy_tenant(&scalelite, ACME.0, ACME.1).await;
    let shown =
        crate::support::process::show_until(&cfg, a, |h| h["disabled_reason"] == "tenant_unknown")
            .await;
    assert_eq!(shown["state"], "disabled");
    assert!(
        shown["removal_due"].is_string() && shown["disabled_since"].is_string(),
        "{shown}"
    );
    let (_, list, _) = cli(&["hooks", "list", "-c", &cfg]);
    assert!(list.contains("disabled (tenant_unknown)"), "{list}");
    let (_, text, _) = cli(&["hooks", "show", &a.to_string(), "-c", &cfg]);
    assert!(
        text.contains("its tenant is not known")
            && text.contains("if its tenant does not come back"),
        "{text}"
    );
    let page = http_client()
        .get(format!("http://{}/hooks/{a}", relay.admin))
        .bearer_auth(
            hookrelay::Config::load(Some(&relay.config))
                .expect("config")
                .admin
                .token(&hookrelay::config::Secret::new(SECRET))
                .expose(),
        )
        .send()
        .await
        .expect("status page")
        .text()
        .await
        .expect("page");
    assert!(page.contains("its tenant is not known"), "{page}");
    // Enabling it by hand is refused while the tenant is gone.
    let (code, _, err) = cli(&["hooks", "enable", &a.to_string(), "-c", &cfg]);
    assert_ne!(code, 0);
    assert!(err.contains("tenant is not known"), "{err}");
    // Nothing is tried while it waits (a condition that must not change for 2 s: two retry
    // periods of the busy receiver).
    let tried = rx.received().len();
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(
        rx.received().len(),
        tried,
        "an attempt while its tenant is gone"
    );

    // Acme back under the same id: the hook enabled, its kept callbacks sent once, in order.
    rx.set_default(Reply::Status(200));
    save_tenant(&scalelite, ACME.0, ACME.1, &[ACME_SECRET]).await;
    let delivered = rx.wait_delivered(5).await;
    let events: Vec<String> = delivered.iter().map(|r| r.event()).collect();
    assert!(events[0].contains("meeting-created"), "{events:?}");
    let names: Vec<String> = delivered[1..]
        .iter()
        .map(|r| user_name(&r.event()))
        .collect();
    assert_eq!(names, ["n0", "n1", "n2", "n3"]);
    assert!(delivered.iter().all(|r| signed_with(r, &url, ACME_SECRET)));
    crate::support::process::show_until(&cfg, a, |h| h["state"] == "ok").await;

    // The audit says who did what.
    let (out, records) = audit_lines(&cfg, &["--tenant", "acme"], 3).await;
    let actions: Vec<(&str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["action"].as_str().unwrap_or(""),
                r["caller"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("create", "127.0.0.1"),
            ("disable", "hookrelay"),
            ("enable", "hookrelay")
        ],
        "{out}"
    );
    assert_eq!(records[1]["detail"], "tenant_unknown");
    let m = relay.metrics().await;
    assert!(
        m.contains(&format!(
            r#"hookrelay_hooks_disabled_total{{tenant="{}",reason="tenant_unknown"}} 1"#,
            ACME.0
        )),
        "{m}"
    );
    relay.terminate().await;
}

#[tokio::test]
async fn a_tenant_gone_past_the_grace_period_loses_its_hooks() {
    let (store, scalelite) = (TestRedis::start().await, TestRedis::start().await);
    save_tenant(&scalelite, ACME.0, ACME.1, &[ACME_SECRET]).await;
    let mut config = TestRelay::config(&store);
    config.scalelite = Some(scalelite_config(&scalelite));
    config.tenancy.removed_grace_s = 2;
    let relay = TestRelay::start_with(&store, config).await;
    let rx = TestReceiver::start().await;
    let a = hook_id(
        &call_at(
            relay.api,
            Some("acme"),
            "create",
            &create_query(&rx.url("/acme")),
            ACME_SECRET,
        )
        .await,
    );
    let op = relay.create_hook(&rx.url("/operator"), "").await;
    destroy_tenant(&scalelite, ACME.0, ACME.1).await;
    wait::until("the hook disabled", async || {
        let h = relay.admin_get(&format!("/v1/hooks/{a}")).await;
        (h["disabled_reason"] == "tenant_unknown")
            .then_some(())
            .ok_or(h)
    })
    .await;
    wait::until("the hook removed after the grace period", async || {
        let list = relay.admin_get("/v1/hooks").await;
        let ids: Vec<u64> = list["hooks"]
            .as_array()
            .expect("hooks")
            .iter()
            .filter_map(|h| h["id"].as_u64())
            .collect();
        (ids == [op]).then_some(()).ok_or(ids)
    })
    .await;
    assert!(
        !store
            .smembers("bigbluebutton:webhooks:out:hooks")
            .await
            .contains(&a.to_string())
    );
    let m = relay.metrics().await;
    assert!(
        m.contains(&format!(
            r#"hookrelay_hooks_removed_total{{tenant="{}",reason="tenant_unknown"}} 1"#,
            ACME.0
        )),
        "{m}"
    );
    let audit = wait::until("three audit records", async || {
        let audit = relay.admin_get("/v1/audit?tenant=acme").await;
        match audit["records"].as_array().map_or(0, Vec::len) {
            3 => Ok(audit),
            _ => Err(audit),
        }
    })
    .await;
    let actions: Vec<&str> = audit["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter_map(|r| r["action"].as_str())
        .collect();
    assert_eq!(actions, ["create", "disable", "remove"], "{audit}");
    relay.stop().await;
}

#[tokio::test]
async fn a_rotation_in_the_middle_of_a_retry_signs_the_next_attempt_with_the_new_secret() {
    let (store, scalelite) = (TestRedis::start().await, TestRedis::start().await);
    save_tenant(&scalelite, ACME.0, ACME.1, &[ACME_SECRET]).await;
    let mut config = TestRelay::config(&store);
    config.scalelite = Some(scalelite_config(&scalelite));
    // Standard Webhooks signatures on: a tenant's carry one per secret of its first two.
    config.delivery.standard_webhooks.secrets = vec![hookrelay::config::Secret::new(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    )];
    let relay = TestRelay::start_with(&store, config).await;
    let rx = TestReceiver::start().await;
    let url = rx.url("/acme");
    call_at(
        relay.api,
        Some("acme"),
        "create",
        &create_query(&url),
        ACME_SECRET,
    )
    .await;
    rx.set_default(Reply::Busy(503, "1".into()));
    tenant_meeting(&store, "ma", ACME.0).await;
    let first = wait::until("a first attempt", async || {
        rx.received().first().cloned().ok_or(0)
    })
    .await;
    assert!(signed_with(&first, &url, ACME_SECRET));
    assert_eq!(signatures(&first).len(), 1);

    // Rotated in Scalelite (the new secret first) while the callback waits for its retry.
    rotate(&scalelite, ACME.0, &[ACME_NEW, ACME_SECRET]).await;
    wait::until("the rotation in force", async || {
        let xml = call_at(relay.api, Some("acme"), "list", "", ACME_NEW).await;
        xml.contains("SUCCESS").then_some(()).ok_or(xml)
    })
    .await;
    rx.set_default(Reply::Status(200));
    let delivered = rx.wait_delivered(1).await;
    let last = &delivered[0];
    assert_eq!(last.event(), first.event(), "the same callback");
    assert!(
        signed_with(last, &url, ACME_NEW),
        "the attempt after the rotation"
    );
    // Two signatures: the new secret's and the old one's, each the secret's bytes as the key.
    let sigs = signatures(last);
    assert_eq!(sigs.len(), 2, "{sigs:?}");
    for (sig, secret) in sigs.iter().zip([ACME_NEW, ACME_SECRET]) {
        let id = header(last, "webhook-id");
        let ts: u64 = header(last, "webhook-timestamp")
            .parse()
            .expect("timestamp");
        assert!(
            hookrelay::base::standard_webhooks::verify(
                secret.as_bytes(),
                &id,
                ts,
                last.body.as_bytes(),
                sig
            ),
            "{sig} is not {secret}'s"
        );
    }
    relay.stop().await;
}

fn header(r: &Received, name: &str) -> String {
    r.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no {name}"))
        .to_string()
}

/// The `webhook-signature` header's signatures.
fn signatures(r: &Received) -> Vec<String> {
    header(r, "webhook-signature")
        .split(' ')
        .map(String::from)
        .collect()
}

#[tokio::test]
async fn a_hooks_own_secret_is_verified_by_the_official_libraries_across_a_rotation() {
    let Some(verifiers) = crate::standard_webhooks::verifiers() else {
        return;
    };
    let store = TestRedis::start().await;
    let mut config = TestRelay::config(&store);
    config.delivery.hook_secrets = true;
    config.delivery.hook_secret_overlap_s = 3;
    config.delivery.standard_webhooks.body = hookrelay::config::CallbackBody::Json;
    let relay = TestRelay::start_with(&store, config).await;
    let rx = TestReceiver::start().await;
    let url = rx.url("/own");
    let created = relay.call("create", &create_query(&url)).await;
    let secret = tag(&created, "signingSecret");
    assert!(
        secret.starts_with("whsec_") && secret.len() > 40,
        "{created}"
    );
    // The same caller asking again gets the same secret; other callers never see it.
    let again = relay.call("create", &create_query(&url)).await;
    assert_eq!(tag(&again, "signingSecret"), secret, "{again}");
    let listed = relay.call("list", "").await;
    assert!(!listed.contains(&secret), "{listed}");
    let id = hook_id(&created);
    let shown = relay.admin_get(&format!("/v1/hooks/{id}")).await;
    assert_eq!(shown["own_secret"], true);
    assert!(!shown.to_string().contains(&secret));

    store.publish(&user_joined("m1", "u1", "Ann")).await;
    let got = rx.wait_delivered(1).await;
    for (program, script) in &verifiers {
        let checked = crate::standard_webhooks::verify(
            program,
            script,
            &secret,
            &crate::standard_webhooks::headers(&got[0]),
            &got[0].body,
        );
        assert_eq!(checked["ok"], true, "{program}: {checked}");
    }
    // The BBB checksum is still there, for receivers that check it.
    assert!(signed_with(&got[0], &url, SECRET));

    // Rotated: the new secret and, while the overlap lasts, the old one verify.
    let rotated = relay
        .admin_post(&format!("/v1/hooks/{id}/rotate-secret"))
        .await;
    let new = rotated["signing_secret"]
        .as_str()
        .expect("new secret")
        .to_string();
    assert_ne!(new, secret);
    store.publish(&user_joined("m1", "u2", "Bob")).await;
    let got = rx.wait_delivered(2).await;
    for (program, script) in &verifiers {
        for key in [&new, &secret] {
            let checked = crate::standard_webhooks::verify(
                program,
                script,
                key,
                &crate::standard_webhooks::headers(&got[1]),
                &got[1].body,
            );
            assert_eq!(checked["ok"], true, "{program} with {key}: {checked}");
        }
    }
    // Once the overlap is over, the old one no longer does.
    let until = rotated["previous_secret_until"]
        .as_str()
        .expect("until")
        .to_string();
    wait::until("the overlap over", async || {
        let shown = relay.admin_get(&format!("/v1/hooks/{id}")).await;
        shown["previous_secret_until"]
            .is_null()
            .then_some(())
            .ok_or(until.clone())
    })
    .await;
    store.publish(&user_joined("m1", "u3", "Cid")).await;
    let got = rx.wait_delivered(3).await;
    for (program, script) in &verifiers {
        let new_ok = crate::standard_webhooks::verify(
            program,
            script,
            &new,
            &crate::standard_webhooks::headers(&got[2]),
            &got[2].body,
        );
        let old_ok = crate::standard_webhooks::verify(
            program,
            script,
            &secret,
            &crate::standard_webhooks::headers(&got[2]),
            &got[2].body,
        );
        assert_eq!(
            (new_ok["ok"].clone(), old_ok["ok"].clone()),
            (json!(true), json!(false)),
            "{program}"
        );
    }
    relay.stop().await;
}

/// The text of `<name>` in `xml`.
fn tag(xml: &str, name: &str) -> String {
    xml.split(&format!("<{name}>"))
        .nth(1)
        .and_then(|s| s.split(&format!("</{name}>")).next())
        .unwrap_or_else(|| panic!("no {name}: {xml}"))
        .to_string()
}

#[tokio::test]
async fn a_tenant_is_held_to_its_hooks_and_its_rate_the_operator_to_neither() {
    let store = TestRedis::start().await;
    let mut config = TestRelay::config(&store);
    config.tenants = configured(&["acme", "beta"]);
    config.tenancy.max_hooks = 2;
    config.tenancy.api_rate_per_s = 1;
    config.tenancy.api_burst = 8;
    let relay = TestRelay::start_with(&store, config).await;
    let rx = TestReceiver::start().await;
    let beta = "beta-secret-000001";

    // Beta: two hooks, then quotaExceeded and nothing created; a duplicate still answers.
    for i in 0..2 {
        hook_id(
            &call_at(
                relay.api,
                Some("beta"),
                "create",
                &create_query(&rx.url(&format!("/b{i}"))),
                beta,
            )
            .await,
        );
    }
    let over = call_at(
        relay.api,
        Some("beta"),
        "create",
        &create_query(&rx.url("/b2")),
        beta,
    )
    .await;
    assert_eq!(
        over,
        "<response><returncode>FAILED</returncode><messageKey>quotaExceeded</messageKey><message>You have 2 hooks, the most you may have: destroy one first.</message></response>"
    );
    let dup = call_at(
        relay.api,
        Some("beta"),
        "create",
        &create_query(&rx.url("/b0")),
        beta,
    )
    .await;
    assert!(dup.contains("duplicateWarning"), "{dup}");
    let listed = call_at(relay.api, Some("beta"), "list", "", beta).await;
    assert_eq!(listed.matches("<hookID>").count(), 2, "{listed}");
    assert_eq!(
        store
            .smembers("bigbluebutton:webhooks:out:hooks")
            .await
            .len(),
        2
    );
    // The operator has no limit.
    for i in 0..5 {
        relay.create_hook(&rx.url(&format!("/op{i}")), "").await;
    }

    // Acme: its burst, then 429 with Retry-After and the BBB answer; Beta's bucket is its own.
    let acme = "acme-secret-000001";
    let http = http_client();
    let mut statuses = Vec::new();
    // Until the first 429 (the bucket refills at 1 a second: at most a call or two more).
    while statuses
        .last()
        .is_none_or(|(s, _, _): &(u16, Option<String>, String)| *s != 429)
    {
        assert!(statuses.len() < 12, "no 429 after {} calls", statuses.len());
        let checksum = Algorithm::Sha1.hex_digest(&[b"hooks/list", b"", acme.as_bytes()]);
        let r = http
            .get(format!(
                "http://{}/bigbluebutton/api/hooks/list?checksum={checksum}",
                relay.api
            ))
            .header("host", host("acme"))
            .send()
            .await
            .expect("answer");
        let retry_after = r
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap_or("").to_string());
        statuses.push((
            r.status().as_u16(),
            retry_after,
            r.text().await.expect("body"),
        ));
    }
    let (last, before) = statuses.split_last().expect("calls");
    assert!(before.len() >= 8, "the burst of 8: {statuses:?}");
    assert!(
        before.iter().all(|(s, ra, _)| *s == 200 && ra.is_none()),
        "{statuses:?}"
    );
    let (status, retry_after, body) = last;
    assert_eq!(*status, 429);
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert_eq!(
        body,
        "<response><returncode>FAILED</returncode><messageKey>tooManyRequests</messageKey><message>Too many calls: call again in 1 s.</message></response>"
    );
    assert!(
        call_at(relay.api, Some("beta"), "list", "", beta)
            .await
            .contains("SUCCESS")
    );
    for _ in 0..20 {
        assert!(relay.call("list", "").await.contains("SUCCESS"));
    }
    let m = relay.metrics().await;
    assert_eq!(
        metric_sum(
            &m,
            "hookrelay_api_requests_total",
            &[r#"message_key="tooManyRequests""#, r#"tenant="acme""#]
        ),
        1.0,
        "{m}"
    );
    assert_eq!(
        metric_sum(
            &m,
            "hookrelay_api_requests_total",
            &[r#"message_key="quotaExceeded""#, r#"tenant="beta""#]
        ),
        1.0
    );
    relay.stop().await;
}

#[tokio::test]
async fn the_queue_budget_is_shared_by_tenant_first_then_by_hook() {
    let store = TestRedis::start().await;
    let mut config = TestRelay::config(&store);
    config.tenants = configured(&["many", "one"]);
    config.delivery.queue_budget_mb = Some(1);
    // Busy receivers ask for 10 minutes: nothing is sent and no hook is given up.
    config.delivery.max_retry_after_s = 600;
    let relay = TestRelay::start_with(&store, config).await;
    let rx = TestReceiver::start().await;
    rx.set_default(Reply::Busy(503, "600".into()));
    // Each hook bound to a meeting of its own, so that no two share a stored payload: twenty
    // hooks of one tenant, one hook of the other, the same events' sizes.
    let mut many = Vec::new();
    for i in 0..20 {
        let mid = format!("m-many{i:02}");
        let q = format!(
            "{}&meetingID={mid}",
            create_query(&rx.url(&format!("/many{i}")))
        );
        many.push(hook_id(
            &call_at(relay.api, Some("many"), "create", &q, "many-secret-000001").await,
        ));
        tenant_meeting(&store, &mid, "many").await;
    }
    let q = format!("{}&meetingID=m-one-000", create_query(&rx.url("/one")));
    let one = hook_id(&call_at(relay.api, Some("one"), "create", &q, "one-secret-000001").await);
    tenant_meeting(&store, "m-one-000", "one").await;
    // Interleaved, so that every queue pushes (and gives up its excess) as the budget fills:
    // 1,500 joins for the one hook, 75 for each of the twenty.
    let mut messages = Vec::new();
    for i in 0..1500 {
        messages.push(user_joined(
            "m-one-000",
            &format!("u{i:04}"),
            &format!("n{i:04}"),
        ));
        messages.push(user_joined(
            &format!("m-many{:02}", i % 20),
            &format!("u{i:04}"),
            &format!("n{i:04}"),
        ));
    }
    store.publish_all(&messages).await;
    // Each hook's first callback (a meeting-created) is in flight, waiting for its receiver.
    let all = 3000.0;
    wait::until("every callback queued or dropped", async || {
        let m = relay.metrics().await;
        let queued = crate::support::metric_value(&m, "hookrelay_queued_callbacks");
        let dropped = crate::support::metric_value(&m, "hookrelay_queue_dropped_total");
        (queued + dropped >= all)
            .then_some(())
            .ok_or((queued, dropped))
    })
    .await;
    let hooks = relay.admin_get("/v1/hooks").await;
    let queued = |id: u64| {
        hooks["hooks"]
            .as_array()
            .expect("hooks")
            .iter()
            .find(|h| h["id"] == id)
            .and_then(|h| h["queued"].as_u64())
            .unwrap_or(0)
    };
    let (of_one, of_many): (u64, u64) = (queued(one), many.iter().map(|id| queued(*id)).sum());
    // Both busy: each tenant about half of the budget, whatever its number of hooks (a share
    // per hook would leave the one hook a twenty-first of it, about 70 callbacks).
    let ratio = of_one as f64 / of_many.max(1) as f64;
    assert!(
        (0.7..=1.45).contains(&ratio),
        "one: {of_one}, many: {of_many}"
    );
    assert!(
        of_one + of_many < 3000,
        "the budget dropped nothing: {of_one} + {of_many}"
    );
    relay.stop().await;
}

#[tokio::test]
async fn deliveries_failures_and_calls_are_counted_per_tenant() {
    let store = TestRedis::start().await;
    let mut config = TestRelay::config(&store);
    config.tenants = vec![hookrelay::config::tenants::TenantConfig {
        name: "acme".into(),
        secrets: vec![hookrelay::config::Secret::new(ACME_SECRET)],
        id: Some(ACME.0.into()),
    }];
    let relay = TestRelay::start_with(&store, config).await;
    let rx = TestReceiver::start().await;
    call_at(
        relay.api,
        Some("acme"),
        "create",
        &create_query(&rx.url("/acme")),
        ACME_SECRET,
    )
    .await;
    relay.create_hook(&rx.url("/operator"), "").await;
    rx.script([Reply::Status(500)]);
    tenant_meeting(&store, "ma", ACME.0).await;
    rx.wait_delivered(2).await;
    // A delivery is counted once its answer is read, after the receiver has it.
    let m = wait::until("both deliveries counted", async || {
        let m = relay.metrics().await;
        match metric_sum(&m, "hookrelay_callbacks_delivered_total", &[]) >= 2.0 {
            true => Ok(m),
            false => Err(m),
        }
    })
    .await;
    let t = format!(r#"tenant="{}""#, ACME.0);
    // Acme's meeting-created to both hooks, one of them after a 500.
    assert_eq!(
        metric_sum(&m, "hookrelay_callbacks_delivered_total", &[&t]),
        1.0,
        "{m}"
    );
    assert_eq!(
        metric_sum(&m, "hookrelay_callbacks_delivered_total", &[r#"tenant="""#]),
        1.0
    );
    assert_eq!(
        metric_sum(
            &m,
            "hookrelay_callback_failures_total",
            &[r#"reason="500""#]
        ),
        1.0
    );
    assert_eq!(
        metric_sum(
            &m,
            "hookrelay_api_requests_total",
            &[&t, r#"call="create""#]
        ),
        1.0
    );
    assert_eq!(
        metric_sum(
            &m,
            "hookrelay_api_requests_total",
            &[r#"tenant="""#, r#"call="create""#]
        ),
        1.0
    );
    relay.stop().await;
}

#[tokio::test]
async fn the_audit_says_who_did_what_and_never_a_secret() {
    let (store, scalelite) = (TestRedis::start().await, TestRedis::start().await);
    save_tenant(&scalelite, ACME.0, ACME.1, &[ACME_SECRET]).await;
    let relay = RelayProcess::start(
        &store,
        &format!(
            "hook_secrets = true\n{}",
            scalelite_toml(&scalelite, "[audit]\nkeep_days = 7")
        ),
    )
    .await;
    let cfg = relay.config.to_string_lossy().into_owned();
    let rx = TestReceiver::start().await;
    let with_token = rx.url("/in?token=abc-secret-query");
    let a = hook_id(
        &call_at(
            relay.api,
            Some("acme"),
            "create",
            &create_query(&with_token),
            ACME_SECRET,
        )
        .await,
    );
    call_at(
        relay.api,
        Some("acme"),
        "create",
        &create_query(&with_token),
        ACME_SECRET,
    )
    .await;
    let op = hook_id(&relay.call("create", &create_query(&rx.url("/op"))).await);
    let (code, out, err) = cli(&["hooks", "rotate-secret", &a.to_string(), "-c", &cfg]);
    assert_eq!(code, 0, "{err}");
    let rotated = out.trim().to_string();
    assert!(rotated.starts_with("whsec_"), "{out}");
    store.publish(&user_joined("m1", "u1", "Ann")).await;
    rx.wait_delivered(1).await;
    wait::until("the callback kept", async || {
        match store.kept_callbacks().await.len() {
            0 => Err(0),
            n => Ok(n),
        }
    })
    .await;
    let (code, _, err) = cli(&["redeliver", &op.to_string(), "--since", "1h", "-c", &cfg]);
    assert_eq!(code, 0, "{err}");
    assert!(
        relay
            .call("destroy", &format!("hookID={op}"))
            .await
            .contains("SUCCESS")
    );

    let (out, records) = audit_lines(&cfg, &[], 6).await;
    let seen: Vec<(String, Option<String>, Option<u64>)> = records
        .iter()
        .map(|r| {
            (
                r["action"].as_str().unwrap_or("").into(),
                r["tenant"].as_str().map(String::from),
                r["hook"].as_u64(),
            )
        })
        .collect();
    let acme = Some("acme".to_string());
    assert_eq!(
        seen,
        [
            ("create".into(), acme.clone(), Some(a)),
            ("create".into(), acme.clone(), Some(a)),
            ("create".into(), None, Some(op)),
            ("rotate-secret".into(), acme.clone(), Some(a)),
            ("redeliver".into(), None, Some(op)),
            ("destroy".into(), None, Some(op)),
        ],
        "{out}"
    );
    for r in &records {
        let keys: Vec<&str> = r
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        for key in ["time", "tenant", "caller", "action", "hook", "url"] {
            assert!(keys.contains(&key), "{key} missing: {r}");
        }
    }
    assert_eq!(records[0]["url"], rx.url("/in"));
    assert_eq!(records[1]["detail"], "duplicate");
    assert_eq!(records[0]["caller"], "127.0.0.1");
    assert_eq!(records[3]["caller"], "unix-socket");
    // Filters: one tenant's, and none since a time to come.
    let (_, acme_only, _) = cli(&["audit", "--tenant", "ACME", "--json", "-c", &cfg]);
    assert_eq!(acme_only.lines().count(), 3, "{acme_only}");
    let (_, none, _) = cli(&["audit", "--since", "2999-01-01T00:00:00Z", "-c", &cfg]);
    assert_eq!(none.trim(), "no records");
    let (_, recent, _) = cli(&["audit", "--since", "1h", "-c", &cfg]);
    assert_eq!(recent.lines().count(), 6, "{recent}");
    // Nothing secret anywhere: not in the answers, not in the store's records.
    let mut conn = store.conn().await.expect("store");
    let raw: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg("hookrelay:audit")
        .arg("-")
        .arg("+")
        .query_async(&mut conn)
        .await
        .expect("stream");
    let raw = format!("{raw:?}");
    for text in [&out, &raw] {
        for secret in [
            ACME_SECRET,
            SECRET,
            "abc-secret-query",
            "checksum",
            &rotated,
        ] {
            assert!(!text.contains(secret), "{secret} in the audit: {text}");
        }
    }
    relay.terminate().await;
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_audit_names_the_forwarded_caller() {
    let store = TestRedis::start().await;
    let send = async |relay: &TestRelay, forwarded: &str, path: &str| {
        let query = create_query(&format!("http://127.0.0.1:9/{path}"));
        let checksum =
            Algorithm::Sha1.hex_digest(&[b"hooks/create", query.as_bytes(), SECRET.as_bytes()]);
        http_client()
            .get(format!(
                "http://{}/bigbluebutton/api/hooks/create?{query}&checksum={checksum}",
                relay.api
            ))
            .header("x-forwarded-for", forwarded)
            .send()
            .await
            .expect("answer")
            .text()
            .await
            .expect("body")
    };
    // Not trusted: the peer, whatever the header says.
    let relay = TestRelay::start(&store).await;
    send(&relay, "203.0.113.7", "a").await;
    let audit = records_once(&relay, 1).await;
    assert_eq!(audit["records"][0]["caller"], "127.0.0.1", "{audit}");
    relay.stop().await;
    // Trusted: the address the proxy names (the rightmost that is not a proxy of ours).
    let mut config = TestRelay::config(&store);
    config.api.trusted_proxies = vec!["127.0.0.1/32".parse().expect("net")];
    let relay = TestRelay::start_with(&store, config).await;
    send(&relay, "198.51.100.1, 203.0.113.7", "b").await;
    let audit = records_once(&relay, 2).await;
    assert_eq!(audit["records"][1]["caller"], "203.0.113.7", "{audit}");
    relay.stop().await;
}

/// The admin API's audit once it holds `n` records.
async fn records_once(relay: &TestRelay, n: usize) -> Value {
    wait::until(&format!("{n} audit records"), async || {
        let audit = relay.admin_get("/v1/audit").await;
        match audit["records"].as_array().map_or(0, Vec::len) >= n {
            true => Ok(audit),
            false => Err(audit),
        }
    })
    .await
}
