//! Tenants (`docs/tenants.md`): a relay reading Scalelite's tenants from a second real
//! redis-server, written as Scalelite writes them; each tenant's hooks, events and signatures
//! kept apart, asserted at real receivers.

use std::collections::BTreeMap;

use hookrelay::{
    Config,
    base::digest::Algorithm,
    callback_checksum,
    config::{SecretUrl, tenants::ScaleliteConfig},
};
use serde_json::json;

use crate::support::{
    SECRET, TestReceiver, TestRedis, TestRelay, meeting_created_with_metadata,
    receiver::Received,
    relay::http_client,
    scalelite::{NS, call_at, destroy_tenant, hook_id, rotate, save_tenant, set_field},
    user_joined, wait,
};

const ACME: (&str, &str) = ("0b4e6c5e-acme", "acme");
const BETA: (&str, &str) = ("7f2d1a90-beta", "beta");
const ACME_SECRETS: [&str; 2] = ["acme-first-secret-0001", "acme-second-secret-002"];
const BETA_SECRET: &str = "beta-only-secret-00003";

/// The relay's configuration with `[scalelite]` on `scalelite`, read every 200 ms.
fn config(store: &TestRedis, scalelite: &TestRedis) -> Config {
    let mut config = TestRelay::config(store);
    config.scalelite = Some(ScaleliteConfig {
        redis_url: SecretUrl::new(scalelite.url()),
        namespace: NS.into(),
        refresh_ms: 200,
        ..Default::default()
    });
    config
}

/// A tenant's (or, without `host`, the operator's) API call, signed with `secret`.
async fn call(
    relay: &TestRelay,
    at: Option<&str>,
    call: &str,
    query: &str,
    secret: &str,
) -> String {
    call_at(relay.api, at, call, query, secret).await
}

/// Registers `url` as a hook of the tenant named `at` (the operator's without), signed with
/// `secret`; its id.
async fn create(relay: &TestRelay, at: Option<&str>, url: &str, secret: &str) -> u64 {
    hook_id(&call(relay, at, "create", &create_query(url), secret).await)
}

fn create_query(url: &str) -> String {
    format!("callbackURL={}", hookrelay::base::form::form_encode(url))
}

/// The callback's checksum parameter matches `secret` (sha1 of registered URL + body + it).
fn signed_with(r: &Received, registered: &str, secret: &str) -> bool {
    let sum = r.uri.rsplit_once("checksum=").map(|(_, s)| s);
    sum == Some(&callback_checksum(
        Algorithm::Sha1,
        registered,
        &r.body,
        secret,
    ))
}

/// Each delivered callback's (meeting external id, event id), in order.
fn events(received: &[Received]) -> Vec<(String, String)> {
    received
        .iter()
        .map(|r| {
            let v: serde_json::Value = serde_json::from_str(&r.event()).expect("event JSON");
            let data = &v["data"];
            (
                data["attributes"]["meeting"]["external-meeting-id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                data["id"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Publishes a meeting of each kind (Acme's by id, Beta's by name only, one of no tenant, one
/// of a tenant the relay does not know) with one join each.
async fn publish_meetings(store: &TestRedis, round: &str) {
    for (mid, metadata) in [
        ("ma", json!({"tenant-id": ACME.0, "tenant-name": "acme"})),
        ("mb", json!({"tenant-name": "beta"})),
        ("mc", json!({"bbb-origin": "lms"})),
        ("mx", json!({"tenant-id": "someone-else"})),
    ] {
        let ext = format!("{mid}-{round}");
        let mid = format!("{mid}-{round}");
        store
            .publish(&meeting_created_with_metadata(&mid, &ext, &metadata))
            .await;
        store.publish(&user_joined(&mid, "u1", "Ann")).await;
    }
}

#[tokio::test]
async fn each_tenant_gets_its_own_hooks_meetings_and_signatures() {
    let (store, scalelite) = (TestRedis::start().await, TestRedis::start().await);
    save_tenant(&scalelite, ACME.0, ACME.1, &ACME_SECRETS).await;
    save_tenant(&scalelite, BETA.0, BETA.1, &[BETA_SECRET]).await;
    let relay = TestRelay::start_with(&store, config(&store, &scalelite)).await;
    let rx = TestReceiver::start().await;
    let (acme_url, beta_url, op_url, shared) = (
        rx.url("/acme"),
        rx.url("/beta"),
        rx.url("/operator"),
        rx.url("/shared"),
    );

    // Any of a tenant's secrets signs its calls at its host; the operator's anywhere.
    let a = create(&relay, Some("acme"), &acme_url, ACME_SECRETS[1]).await;
    let b = create(&relay, Some("beta"), &beta_url, BETA_SECRET).await;
    let op = create(&relay, None, &op_url, SECRET).await;
    // One URL for two tenants: two hooks; again for one tenant: its own hook, a duplicate.
    let sa = create(&relay, Some("acme"), &shared, ACME_SECRETS[0]).await;
    let sb = create(&relay, Some("beta"), &shared, BETA_SECRET).await;
    assert_ne!(sa, sb);
    let again = call(
        &relay,
        Some("beta"),
        "create",
        &create_query(&shared),
        BETA_SECRET,
    )
    .await;
    assert!(
        again.contains("<messageKey>duplicateWarning</messageKey>") && hook_id(&again) == sb,
        "{again}"
    );

    // Another tenant's secret at Acme's host, and a tenant's secret at no tenant's host: the
    // usual checksum error, nothing created.
    for (at, secret) in [
        (Some("acme"), BETA_SECRET),
        (None, ACME_SECRETS[0]),
        (Some("gamma"), BETA_SECRET),
    ] {
        let refused = call(
            &relay,
            at,
            "create",
            &create_query(&rx.url("/nope")),
            secret,
        )
        .await;
        assert_eq!(
            refused,
            "<response><returncode>FAILED</returncode><messageKey>checksumError</messageKey><message>You did not pass the checksum security check.</message></response>"
        );
    }

    // A tenant lists its own hooks only; the operator every hook.
    let r = &relay;
    let list = |at, secret| async move {
        let xml = call(r, at, "list", "", secret).await;
        xml.split("<hookID>")
            .skip(1)
            .filter_map(|s| s.split("</hookID>").next()?.parse().ok())
            .collect::<Vec<u64>>()
    };
    assert_eq!(list(Some("acme"), ACME_SECRETS[0]).await, [a, sa]);
    assert_eq!(list(Some("beta"), BETA_SECRET).await, [b, sb]);
    assert_eq!(list(None, SECRET).await, [a, b, op, sa, sb]);
    // Another tenant's hook is destroyed as an unknown one would be: not at all.
    let missing = call(
        &relay,
        Some("acme"),
        "destroy",
        &format!("hookID={b}"),
        ACME_SECRETS[0],
    )
    .await;
    assert_eq!(
        missing,
        "<response><returncode>FAILED</returncode><messageKey>destroyMissingHook</messageKey><message>The hook informed was not found.</message></response>"
    );
    assert_eq!(list(Some("beta"), BETA_SECRET).await, [b, sb]);

    publish_meetings(&store, "1").await;
    // The operator's hook: all four meetings' two events; each tenant's: its own meeting's.
    let all = rx.wait_delivered(8 + 2 + 2 + 4).await;
    let at = |path: &str| -> Vec<Received> {
        all.iter()
            .filter(|r| r.uri.starts_with(path))
            .cloned()
            .collect()
    };
    let created_joined = |m: &str| {
        vec![
            (m.to_string(), "meeting-created".to_string()),
            (m.to_string(), "user-joined".to_string()),
        ]
    };
    assert_eq!(events(&at("/acme")), created_joined("ma-1"));
    assert_eq!(events(&at("/beta")), created_joined("mb-1"));
    assert_eq!(events(&at("/operator")).len(), 8);
    let mut shared_events = events(&at("/shared"));
    shared_events.sort();
    assert_eq!(
        shared_events,
        [created_joined("ma-1"), created_joined("mb-1")].concat()
    );
    // Each callback verifies with its own tenant's first secret, and with no other secret.
    let secrets = [ACME_SECRETS[0], ACME_SECRETS[1], BETA_SECRET, SECRET];
    for r in &all {
        let (registered, own) = match r.uri.split('?').next() {
            Some("/acme") => (&acme_url, ACME_SECRETS[0]),
            Some("/beta") => (&beta_url, BETA_SECRET),
            Some("/operator") => (&op_url, SECRET),
            _ if events(std::slice::from_ref(r))[0].0.starts_with("ma") => {
                (&shared, ACME_SECRETS[0])
            }
            _ => (&shared, BETA_SECRET),
        };
        let verifying: Vec<&str> = secrets
            .into_iter()
            .filter(|s| signed_with(r, registered, s))
            .collect();
        assert_eq!(verifying, [own], "{}", r.uri);
    }

    // A rotation in Scalelite (the new secret first) signs the next callbacks with it; a
    // tenant added there may create hooks; both without a restart.
    const ROTATED: &str = "acme-rotated-secret-09";
    rotate(&scalelite, ACME.0, &[ROTATED, ACME_SECRETS[0]]).await;
    save_tenant(&scalelite, "c3-gamma", "gamma", &["gamma-secret-000000004"]).await;
    let gamma = wait::until("gamma may create a hook", async || {
        let xml = call(
            &relay,
            Some("gamma"),
            "create",
            &create_query(&rx.url("/gamma")),
            "gamma-secret-000000004",
        )
        .await;
        if xml.contains("SUCCESS") {
            Ok(hook_id(&xml))
        } else {
            Err(xml)
        }
    })
    .await;
    // Gamma's read saw the rotation too (written before Gamma, read after it).
    assert!(relay.metrics().await.contains("hookrelay_tenants 3"));
    store.publish(&user_joined("ma-1", "u2", "Bob")).await;
    let all = rx.wait_delivered(16 + 3).await;
    let acme_last = all
        .iter()
        .rfind(|r| r.uri.starts_with("/acme?"))
        .expect("acme");
    assert!(
        signed_with(acme_last, &acme_url, ROTATED),
        "after the rotation"
    );
    assert!(!signed_with(acme_last, &acme_url, ACME_SECRETS[0]));
    assert!(
        all.iter().all(|r| !r.uri.starts_with("/gamma")),
        "gamma has no meeting yet"
    );
    assert!(gamma > sb);

    // A tenant removed from Scalelite: its calls fail and its hooks get nothing more.
    destroy_tenant(&scalelite, BETA.0, BETA.1).await;
    wait::until("beta is gone", async || {
        let xml = call(&relay, Some("beta"), "list", "", BETA_SECRET).await;
        if xml.contains("checksumError") {
            Ok(())
        } else {
            Err(xml)
        }
    })
    .await;
    let before = rx.delivered_count();
    publish_meetings(&store, "2").await;
    let all = rx.wait_delivered(before + 8 + 2 + 2).await;
    let late = &all[before..];
    assert!(
        late.iter().all(|r| !r.uri.starts_with("/beta")),
        "removed tenant"
    );
    // Every hook's whole run: Acme's hook got its meetings' events and nothing else (its last
    // ones are round 2's, so nothing of round 1 can still come).
    let acme_all: Vec<Received> = all
        .iter()
        .filter(|r| r.uri.starts_with("/acme?"))
        .cloned()
        .collect();
    assert_eq!(
        events(&acme_all),
        [
            created_joined("ma-1"),
            vec![("ma-1".to_string(), "user-joined".to_string())],
            created_joined("ma-2")
        ]
        .concat()
    );
    let metrics = relay.metrics().await;
    for secret in secrets.iter().chain([&ROTATED]) {
        assert!(!metrics.contains(secret));
    }
    relay.stop().await;
}

#[tokio::test]
async fn configured_tenants_and_a_meetings_tenant_survive_a_restart() {
    let store = TestRedis::start().await;
    let text = format!(
        "[bbb]\nsecret = '{SECRET}'\n[redis]\nurl = '{}'\n[delivery]\nretry_intervals_ms = [50]\n\
         [delivery.ssrf]\nallow_cidrs = ['127.0.0.1/32']\n\
         [[tenants]]\nname = 'acme'\nsecrets = ['{}']\n\
         [[tenants]]\nname = 'beta'\nid = 'b-1'\nsecrets = ['{BETA_SECRET}']\n",
        store.url(),
        ACME_SECRETS[0]
    );
    let config = Config::from_toml(&text).expect("config");
    let relay = TestRelay::start_with(&store, config.clone()).await;
    let rx = TestReceiver::start().await;
    let url = rx.url("/acme");
    call(
        &relay,
        Some("acme"),
        "create",
        &create_query(&url),
        ACME_SECRETS[0],
    )
    .await;
    call(
        &relay,
        Some("beta"),
        "create",
        &create_query(&rx.url("/beta")),
        BETA_SECRET,
    )
    .await;
    // A meeting of Acme's (the configured id defaults to the name), created before the restart.
    store
        .publish(&meeting_created_with_metadata(
            "m1",
            "e1",
            &json!({"tenant-id": "acme"}),
        ))
        .await;
    rx.wait_delivered(1).await;
    relay.stop().await;
    let relay = TestRelay::start_with(&store, config).await;
    store.publish(&user_joined("m1", "u1", "Ann")).await;
    let all = rx.wait_delivered(2).await;
    assert_eq!(
        events(&all),
        [
            ("e1".to_string(), "meeting-created".to_string()),
            ("e1".to_string(), "user-joined".to_string())
        ]
    );
    assert!(
        all.iter()
            .all(|r| r.uri.starts_with("/acme?") && signed_with(r, &url, ACME_SECRETS[0]))
    );
    relay.stop().await;
}

#[tokio::test]
async fn bad_tenant_data_keeps_the_last_good_view() {
    let (store, mut scalelite) = (TestRedis::start().await, TestRedis::start().await);
    save_tenant(&scalelite, ACME.0, ACME.1, &ACME_SECRETS).await;
    let relay = TestRelay::start_with(&store, config(&store, &scalelite)).await;
    let rx = TestReceiver::start().await;
    let listed =
        async |relay: &TestRelay| call(relay, Some("acme"), "list", "", ACME_SECRETS[0]).await;
    assert!(listed(&relay).await.contains("SUCCESS"));

    // Acme's secrets emptied, a tenant without a name, an index naming nobody.
    set_field(&scalelite, &format!("tenant:{}", ACME.0), "secrets", "").await;
    set_field(
        &scalelite,
        "tenant:n0-name",
        "secrets",
        "x-secret-0000000005",
    )
    .await;
    let mut conn = scalelite.conn().await.expect("conn");
    let _: () = redis::cmd("SADD")
        .arg(format!("{NS}:tenants"))
        .arg("n0-name")
        .query_async(&mut conn)
        .await
        .expect("sadd");
    set_field(&scalelite, "tenant_name:ghost", "id", "nowhere").await;
    let problems = |m: &str| -> BTreeMap<String, String> {
        m.lines()
            .filter(|l| l.starts_with("hookrelay_tenant_problems{"))
            .filter_map(|l| {
                let (k, v) = l.rsplit_once(' ')?;
                Some((k.to_string(), v.to_string()))
            })
            .collect()
    };
    let seen = wait::until("the problems are counted", async || {
        let m = relay.metrics().await;
        let p = problems(&m);
        if p.values().filter(|v| *v == "1").count() == 3 {
            Ok(p)
        } else {
            Err(p)
        }
    })
    .await;
    assert_eq!(
        seen.get(r#"hookrelay_tenant_problems{reason="no_secrets"}"#)
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(
        seen.get(r#"hookrelay_tenant_problems{reason="no_name"}"#)
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(
        seen.get(r#"hookrelay_tenant_problems{reason="name_index"}"#)
            .map(String::as_str),
        Some("1")
    );
    // Acme's last good record stays in force.
    assert!(listed(&relay).await.contains("SUCCESS"));
    let hook = hook_id(
        &call(
            &relay,
            Some("acme"),
            "create",
            &create_query(&rx.url("/acme")),
            ACME_SECRETS[1],
        )
        .await,
    );

    // Scalelite's Redis gone: reads fail, counted; the tenants stay; the relay goes on.
    scalelite.kill().await;
    wait::until("a failed read is counted", async || {
        let m = relay.metrics().await;
        let failed = m
            .lines()
            .find_map(|l| l.strip_prefix("hookrelay_tenant_read_failures_total "))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        if failed > 0 { Ok(()) } else { Err(failed) }
    })
    .await;
    assert!(
        listed(&relay)
            .await
            .contains(&format!("<hookID>{hook}</hookID>"))
    );
    store
        .publish(&meeting_created_with_metadata(
            "m1",
            "e1",
            &json!({"tenant-id": ACME.0}),
        ))
        .await;
    let got = rx.wait_delivered(1).await;
    assert!(signed_with(&got[0], &rx.url("/acme"), ACME_SECRETS[0]));
    let m = relay.metrics().await;
    for secret in ACME_SECRETS {
        assert!(!m.contains(secret));
    }
    relay.stop().await;
}

/// A fleet of two real binaries: the lease holder is killed (SIGKILL) in the middle of a
/// tenant's meeting; the other takes over with the meeting's tenant read from the store, so
/// the tenant's hook gets every join of its meeting, in order, signed with its secret, and
/// nothing of a meeting of no tenant.
#[tokio::test]
async fn a_fleet_takeover_in_the_middle_of_a_tenants_meeting_keeps_it_the_tenants() {
    use crate::fleet::{FLEET, all_of_at, publish_named, wait_until_holder};
    use crate::support::RelayProcess;
    const JOINS: usize = 1500;
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let config = format!(
        "{FLEET}[[tenants]]\nname = 'acme'\nid = '{}'\nsecrets = ['{}']\n",
        ACME.0, ACME_SECRETS[0]
    );
    let holder = RelayProcess::start(&redis, &config).await;
    wait_until_holder(&holder).await;
    let other = RelayProcess::start(&redis, &config).await;
    let url = rx.url("/acme");
    let at = async |api| {
        call_at(
            api,
            Some("acme"),
            "create",
            &create_query(&url),
            ACME_SECRETS[0],
        )
        .await
    };
    let acme_hook = hook_id(&at(other.api).await);
    let op_rx = TestReceiver::start().await;
    let op_hook =
        crate::support::relay::create_hook(&http_client(), other.api, &op_rx.url("/op"), "").await;
    wait::until("the holder sees the tenant's hook", async || {
        let list = holder.call("list", "").await;
        if list.contains("<tenant>acme</tenant>") {
            Ok(())
        } else {
            Err(list)
        }
    })
    .await;
    // The tenant's meeting (its joins published below, as int-1) and one of no tenant.
    redis
        .publish(&meeting_created_with_metadata(
            "int-1",
            "ext-1",
            &json!({"tenant-id": ACME.0}),
        ))
        .await;
    redis
        .publish(&meeting_created_with_metadata("int-2", "ext-2", &json!({})))
        .await;
    let publishing = publish_named(&redis, "n", JOINS);
    wait::until("a fifth delivered", async || {
        let n = rx.delivered_count();
        if n > JOINS / 5 { Ok(()) } else { Err(n) }
    })
    .await;
    holder.kill9().await;
    wait_until_holder(&other).await;
    for i in 0..5 {
        redis
            .publish(&user_joined("int-2", &format!("x{i}"), "Xena"))
            .await;
    }
    publishing.await.expect("publisher");
    let repeats = all_of_at(&rx, Some("/acme"), "n", JOINS).await;
    assert!(
        repeats <= 5,
        "only callbacks in flight or unmarked repeat: {repeats}"
    );
    let got = rx.delivered();
    assert!(got.iter().all(|r| signed_with(r, &url, ACME_SECRETS[0])));
    let meetings: std::collections::BTreeSet<String> =
        events(&got).into_iter().map(|(m, _)| m).collect();
    assert_eq!(
        meetings,
        ["ext-1".to_string()].into(),
        "nothing of the other meeting"
    );
    // A last join of the tenant's meeting after the takeover: it comes after every join of the
    // other meeting was routed, so none of those can still arrive.
    // (The kept callbacks are told apart by when they were kept: from before this one on.)
    let since = hookrelay::base::time::rfc3339(hookrelay::base::time::now_ms());
    redis.publish(&user_joined("int-1", "last", "last")).await;
    wait::until("the last join", async || {
        let names: Vec<String> = rx
            .delivered()
            .iter()
            .map(|r| crate::support::user_name(&r.event()))
            .collect();
        if names.iter().any(|n| n == "last") {
            Ok(())
        } else {
            Err(names.len())
        }
    })
    .await;
    assert!(rx.delivered().iter().all(|r| !r.event().contains("Xena")));

    // The operator sees whose hook is whose: `hooks list` (a tenant column, `--tenant`), the
    // admin API (`?tenant=`).
    let cfg = other.config.to_str().expect("path");
    let cli = |args: &[&str]| {
        let (code, out, err) = crate::support::process::cli(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        out
    };
    let all = cli(&["hooks", "list", "-c", cfg]);
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(
        lines[0],
        "    id  state    kind       tenant        meeting       events                callback URL"
    );
    assert!(
        lines[1].starts_with(&format!(
            "{acme_hook:>6}  ok       -          acme          (all)"
        )),
        "{all}"
    );
    assert!(
        lines[2].starts_with(&format!(
            "{op_hook:>6}  ok       -          (operator)    (all)"
        )),
        "{all}"
    );
    let acme_only = cli(&["hooks", "list", "-c", cfg, "--tenant", "acme", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&acme_only).expect("JSON");
    let hooks = listed["hooks"].as_array().expect("hooks");
    assert_eq!(hooks.len(), 1, "{listed}");
    assert_eq!(hooks[0]["id"], acme_hook);
    assert_eq!(hooks[0]["tenant"], "acme");
    let token = cli(&["admin-token", "-c", cfg]);
    let admin = |query: &'static str| {
        let token = token.trim().to_string();
        let admin = other.admin;
        async move {
            let text = http_client()
                .get(format!("http://{admin}/v1/hooks{query}"))
                .bearer_auth(token)
                .send()
                .await
                .expect("admin API")
                .text()
                .await
                .expect("body");
            let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
            v["hooks"]
                .as_array()
                .expect("hooks")
                .iter()
                .map(|h| (h["id"].as_u64().unwrap_or(0), h["tenant"].clone()))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(admin("?tenant=acme").await, [(acme_hook, json!("acme"))]);
    assert_eq!(
        admin("?tenant=0b4e6c5e-acme").await,
        [(acme_hook, json!("acme"))]
    );
    assert_eq!(
        admin("").await,
        [
            (acme_hook, json!("acme")),
            (op_hook, serde_json::Value::Null)
        ]
    );
    assert_eq!(admin("?tenant=beta").await, []);
    // The status page: a tenant's hook says whose it is, and `/?tenant=` lists its hooks only.
    let page = async |query: &str| {
        http_client()
            .get(format!("http://{}/{query}", other.admin))
            .bearer_auth(token.trim())
            .send()
            .await
            .expect("status page")
            .text()
            .await
            .expect("HTML")
    };
    let everyone = page("").await;
    assert!(
        everyone.contains(&format!("id=\"hook-{op_hook}\"")),
        "{everyone}"
    );
    assert!(
        everyone.contains("<dt>Tenant</dt><dd><a href=\"/?tenant=acme\">acme</a></dd>"),
        "{everyone}"
    );
    let acmes = page("?tenant=acme").await;
    assert!(
        acmes.contains(&format!("id=\"hook-{acme_hook}\"")),
        "{acmes}"
    );
    assert!(
        !acmes.contains(&format!("id=\"hook-{op_hook}\"")),
        "{acmes}"
    );
    assert!(acmes.contains("<p>Tenant acme's hooks."), "{acmes}");

    // A redelivery of the tenant's hook is signed with the tenant's secret too: its callbacks
    // kept since just before the last join (the last one among them, delivered and kept by
    // the instance that took over).
    // It is kept a moment after its receiver has it (with its round): wait until it is, then
    // ask once. (Asking until something was queued could queue earlier joins kept late, and
    // not the last.)
    wait::until("the last callback kept", async || {
        let kept = redis.kept_callbacks().await;
        match kept.iter().any(|k| k.contains(r#""name":"last""#)) {
            true => Ok(()),
            false => Err(kept.len()),
        }
    })
    .await;
    let out = cli(&[
        "redeliver",
        &acme_hook.to_string(),
        "--since",
        &since,
        "-c",
        cfg,
    ]);
    assert!(!out.starts_with("queued 0 "), "{out}");
    let again = wait::until("the last join again", async || {
        let again: Vec<Received> = rx
            .delivered()
            .into_iter()
            .filter(|r| r.headers.get("x-hookrelay-redelivery").is_some())
            .collect();
        match again
            .iter()
            .any(|r| crate::support::user_name(&r.event()) == "last")
        {
            true => Ok(again),
            false => Err(again.len()),
        }
    })
    .await;
    for again in &again {
        assert!(signed_with(again, &url, ACME_SECRETS[0]));
        assert!(!signed_with(again, &url, SECRET));
    }
}

/// Callbacks are kept for redelivery per registration: two tenants' hooks of one URL, and a
/// redelivery of one of them sends that tenant's callbacks only, signed with its secret.
#[tokio::test]
async fn a_redelivery_to_one_tenants_hook_of_a_shared_url_sends_its_own_callbacks_only() {
    use crate::support::RelayProcess;
    let redis = TestRedis::start().await;
    let rx = TestReceiver::start().await;
    let config = format!(
        "[[tenants]]\nname = 'acme'\nsecrets = ['{}']\n[[tenants]]\nname = 'beta'\nsecrets = ['{BETA_SECRET}']\n",
        ACME_SECRETS[0]
    );
    let relay = RelayProcess::start(&redis, &config).await;
    let url = rx.url("/shared");
    let query = create_query(&url);
    let a = hook_id(&call_at(relay.api, Some("acme"), "create", &query, ACME_SECRETS[0]).await);
    let b = hook_id(&call_at(relay.api, Some("beta"), "create", &query, BETA_SECRET).await);
    assert_ne!(a, b);
    for (mid, tenant) in [("ma", "acme"), ("mb", "beta")] {
        redis
            .publish(&meeting_created_with_metadata(
                mid,
                &format!("e-{mid}"),
                &json!({"tenant-id": tenant}),
            ))
            .await;
        redis.publish(&user_joined(mid, "u1", "Ann")).await;
    }
    rx.wait_delivered(4).await;
    let cfg = relay.config.to_str().expect("path");
    // Kept a moment after their receiver has them: wait until all four are, then ask once.
    wait::until("the four callbacks kept", async || {
        let kept = redis.kept_callbacks().await.len();
        if kept == 4 { Ok(()) } else { Err(kept) }
    })
    .await;
    let (code, queued, err) =
        crate::support::process::cli(&["redeliver", &b.to_string(), "--since", "10m", "-c", cfg]);
    assert_eq!(code, 0, "{err}");
    assert!(queued.starts_with("queued 2 callbacks again"), "{queued}");
    assert!(queued.contains(&format!("for hook {b}")), "{queued}");
    let all = rx.wait_delivered(6).await;
    let again: Vec<&Received> = all
        .iter()
        .filter(|r| r.headers.get("x-hookrelay-redelivery").is_some())
        .collect();
    assert_eq!(again.len(), 2);
    for r in again {
        assert_eq!(
            events(std::slice::from_ref(r))[0].0,
            "e-mb",
            "beta's meeting only"
        );
        assert!(signed_with(r, &url, BETA_SECRET) && !signed_with(r, &url, ACME_SECRETS[0]));
    }
}
