//! The rules plugin (plugins/rules): the README's five examples are its files and their cases
//! pass through `hookrelay plugin test`; a live edit on a running relay while events stream
//! (every event through exactly one version, per-rule counts); a broken edit kept out; rules
//! on the meeting's metadata across a restart of the relay and a fleet takeover.

use std::{path::Path, time::Duration};

use serde_json::json;

use crate::{
    fleet::{FLEET, holds_lease},
    plugins::{start, wait_metric},
    support::{
        PluginDir, RelayProcess, TestReceiver, TestRedis, meeting_created,
        meeting_created_with_metadata, metric_value, plugin_wasm, process::binary, user_joined,
        user_name, wait::until,
    },
};

/// Keeps the joins of Acme's meetings only, none of a breakout room's.
const ACME_RULES: &str = "[config]\ndefault = \"drop\"\n\n[[config.rules]]\nname = \"no-breakouts\"\naction = \"drop\"\npattern.meeting.is-breakout = [true]\n\n[[config.rules]]\nname = \"acme\"\naction = \"keep\"\npattern.meeting.metadata.bbb-origin-server-name = [\"lms.acme.example\"]\n";

/// Acme's and Globex's meetings created (with their metadata), and Acme's breakout room.
async fn create_tenant_meetings(redis: &TestRedis) {
    let acme = json!({"bbb-origin-server-name": "lms.acme.example"});
    let globex = json!({"bbb-origin-server-name": "lms.globex.example"});
    redis
        .publish(&meeting_created_with_metadata("int-a", "ext-a", &acme))
        .await;
    redis
        .publish(&meeting_created_with_metadata("int-g", "ext-g", &globex))
        .await;
    let breakout = meeting_created_with_metadata("int-b", "ext-b", &acme)
        .replace(r#""isBreakout":false"#, r#""isBreakout":true"#);
    assert!(breakout.contains(r#""isBreakout":true"#));
    redis.publish(&breakout).await;
}

/// One join in each of the three meetings, Acme's last (its name ends with `n`).
async fn join_each(redis: &TestRedis, n: usize) {
    redis
        .publish(&user_joined(
            "int-g",
            &format!("g{n}"),
            &format!("globex-{n}"),
        ))
        .await;
    redis
        .publish(&user_joined(
            "int-b",
            &format!("b{n}"),
            &format!("breakout-{n}"),
        ))
        .await;
    redis
        .publish(&user_joined(
            "int-a",
            &format!("a{n}"),
            &format!("acme-{n}"),
        ))
        .await;
}

/// The user names `r` got, once it got `n` callbacks.
async fn names_once(r: &TestReceiver, n: usize) -> Vec<String> {
    until(&format!("{n} callbacks"), async || {
        let names: Vec<String> = r
            .delivered()
            .iter()
            .map(|d| user_name(&d.event()))
            .collect();
        match names.len() >= n {
            true => Ok(names),
            false => Err(names),
        }
    })
    .await
}

const EXAMPLES: [&str; 5] = [
    "attendance",
    "no-audio-chatter",
    "one-tenant",
    "no-breakouts",
    "moderators-only",
];

fn rules_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/plugins/rules"))
}

/// The ```toml block under `<!-- examples/NAME/rules.toml -->` in the plugin's README.
fn readme_block(readme: &str, name: &str) -> String {
    let marker = format!("<!-- examples/{name}/rules.toml -->\n```toml\n");
    let start = readme
        .find(&marker)
        .unwrap_or_else(|| panic!("README has no block for {name}"))
        + marker.len();
    let len = readme[start..].find("```").expect("block ends");
    readme[start..start + len].to_string()
}

#[test]
fn readme_examples_are_the_files_and_their_cases_pass() {
    let readme = std::fs::read_to_string(rules_dir().join("README.md")).expect("README");
    let wasm = plugin_wasm("rules");
    for name in EXAMPLES {
        let example = rules_dir().join("examples").join(name);
        let toml = std::fs::read_to_string(example.join("rules.toml")).expect("rules.toml");
        assert_eq!(readme_block(&readme, name), toml, "README block of {name}");
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::copy(&wasm, dir.path().join("30-rules.wasm")).expect("copy wasm");
        std::fs::write(dir.path().join("30-rules.toml"), &toml).expect("write toml");
        let cases = example.join("cases.jsonl");
        let n = std::fs::read_to_string(&cases)
            .expect("cases")
            .lines()
            .count();
        let out = std::process::Command::new(binary())
            .args(["plugin", "test"])
            .arg(&cases)
            .arg("--plugins")
            .arg(dir.path())
            .output()
            .expect("run plugin test");
        let said = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {said}");
        assert!(
            said.contains(&format!("{n} passed, 0 failed")),
            "{name}: {said}"
        );
    }
}

/// Rules that drop the users whose number is odd (`v1`) or even (`v2`), each rule named.
fn parity_rules(drop: &str) -> String {
    let digits = if drop == "odd" { "13579" } else { "02468" };
    let suffixes: Vec<String> = digits
        .chars()
        .map(|d| format!("{{ suffix = \"{d}\" }}"))
        .collect();
    format!(
        "[config]\ndefault = \"keep\"\n\n[[config.rules]]\nname = \"{drop}\"\naction = \"drop\"\npattern.data.id = [\"user-joined\"]\npattern.data.attributes.user.name = [{}]\n",
        suffixes.join(", ")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_edit_applies_to_every_event_exactly_once_and_a_broken_one_is_kept_out() {
    let redis = TestRedis::start().await;
    let dir = PluginDir::new();
    dir.add("30-rules", "rules", Some(&parity_rules("odd")));
    let relay = start(&redis, &dir).await;
    let r = TestReceiver::start().await;
    relay
        .create_hook(&r.url("/cb"), "eventID=user-joined")
        .await;
    redis.publish(&meeting_created("m1", "ext-1")).await;

    const N: usize = 600;
    let publisher = redis
        .spawn_paced_joins("m1", 0..N, Duration::from_millis(3))
        .await;
    // Part of the scenario: the edit comes mid-stream, some 100 events in.
    tokio::time::sleep(Duration::from_millis(300)).await;
    dir.write("30-rules.toml", parity_rules("even").as_bytes());
    wait_metric(
        &relay,
        r#"hookrelay_plugin_reloads_total{result="ok"}"#,
        2.0,
    )
    .await;
    // A broken edit: an unknown operator. The even rule stays in force.
    dir.write(
        "30-rules.toml",
        b"[config]\n[[config.rules]]\nname = \"bad\"\naction = \"drop\"\npattern.data.id = [{ prefx = \"user-\" }]\n",
    );
    wait_metric(
        &relay,
        r#"hookrelay_plugin_reloads_total{result="error"}"#,
        1.0,
    )
    .await;
    publisher.await.expect("published");

    // Every number once, in order: even ones while v1 was in force, then odd ones.
    let numbers = until("the last event", async || {
        let numbers = r
            .delivered()
            .iter()
            .map(|d| {
                user_name(&d.event())
                    .trim_start_matches("user-")
                    .parse::<usize>()
                    .expect("numbered user")
            })
            .collect::<Vec<_>>();
        // The last user is odd (N is even): under v2 it arrives last.
        match numbers.last() == Some(&(N - 1)) {
            true => Ok(numbers),
            false => Err(numbers),
        }
    })
    .await;
    // The switch to v2 at event k: the even ones before it, the odd ones from it on. k is the
    // first odd number delivered, or the even number before it (dropped by v2).
    let under = |k: usize| -> Vec<usize> {
        (0..N)
            .filter(|i| if *i < k { i % 2 == 0 } else { i % 2 == 1 })
            .collect()
    };
    let first_odd = *numbers
        .iter()
        .find(|n| *n % 2 == 1)
        .expect("v2 took effect");
    let switch = [first_odd, first_odd - 1]
        .into_iter()
        .find(|k| under(*k) == numbers);
    let Some(switch) = switch else {
        panic!("not one version per event, or lost or repeated: {numbers:?}");
    };
    assert!(
        switch > 1 && switch < N - 100,
        "the edit came mid-stream: {switch}"
    );

    // Per-rule counts: the odd users before the switch, the even ones after it.
    let metrics = relay.metrics().await;
    let odd_dropped = (0..switch).filter(|i| i % 2 == 1).count();
    let even_dropped = (switch..N).filter(|i| i % 2 == 0).count();
    let count = |rule: &str| {
        metric_value(
            &metrics,
            &format!(r#"hookrelay_plugin_rule_matches_total{{plugin="30-rules",rule="{rule}"}}"#),
        )
    };
    assert_eq!(count("odd"), odd_dropped as f64, "{metrics}");
    assert_eq!(count("even"), even_dropped as f64, "{metrics}");
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_on_the_meetings_metadata_hold_across_a_restart() {
    let redis = TestRedis::start().await;
    let dir = PluginDir::new();
    dir.add("30-rules", "rules", Some(ACME_RULES));
    let relay = start(&redis, &dir).await;
    let r = TestReceiver::start().await;
    relay
        .create_hook(&r.url("/cb"), "eventID=user-joined")
        .await;
    create_tenant_meetings(&redis).await;
    join_each(&redis, 1).await;
    assert_eq!(names_once(&r, 1).await, ["acme-1"]);
    relay.stop().await;

    // A new relay on the same store: the meetings' facts come back from it.
    let relay = start(&redis, &dir).await;
    join_each(&redis, 2).await;
    // Anything of Globex or the breakout room would have come before acme-2.
    assert_eq!(names_once(&r, 2).await, ["acme-1", "acme-2"]);
    let metrics = relay.metrics().await;
    for rule in ["acme", "no-breakouts"] {
        let series =
            format!(r#"hookrelay_plugin_rule_matches_total{{plugin="30-rules",rule="{rule}"}}"#);
        assert_eq!(metric_value(&metrics, &series), 1.0, "{series}: {metrics}");
    }
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_on_the_meetings_metadata_hold_after_a_fleet_takeover() {
    let redis = TestRedis::start().await;
    let dir = PluginDir::new();
    dir.add("30-rules", "rules", Some(ACME_RULES));
    let extra = format!(
        "{FLEET}[plugins]\ndir = \"{}\"\ncache_dir = \"{}\"\n",
        dir.path().display(),
        dir.path().join(".cache").display()
    );
    let holder = RelayProcess::start(&redis, &extra).await;
    until("a holder", async || match holds_lease(&holder).await {
        true => Ok(()),
        false => Err("the lease not held"),
    })
    .await;
    let standby = RelayProcess::start(&redis, &extra).await;
    let r = TestReceiver::start().await;
    let http = crate::support::relay::http_client();
    crate::support::relay::create_hook(&http, standby.api, &r.url("/cb"), "eventID=user-joined")
        .await;
    until("the holder sees the hook", async || {
        let list = holder.call("list", "").await;
        match list.contains("/cb") {
            true => Ok(()),
            false => Err(list),
        }
    })
    .await;
    create_tenant_meetings(&redis).await;
    join_each(&redis, 1).await;
    assert_eq!(names_once(&r, 1).await, ["acme-1"]);

    holder.kill9().await;
    until("a takeover", async || match holds_lease(&standby).await {
        true => Ok(()),
        false => Err("the lease not held"),
    })
    .await;
    join_each(&redis, 2).await;
    // A takeover may send acme-1 again (it may not have been marked delivered); nothing else.
    until("acme-2 last", async || {
        let names: Vec<String> = r
            .delivered()
            .iter()
            .map(|d| user_name(&d.event()))
            .collect();
        assert!(
            names.iter().all(|n| n == "acme-1" || n == "acme-2"),
            "{names:?}"
        );
        match names.last().map(String::as_str) == Some("acme-2") {
            true => Ok(()),
            false => Err(names),
        }
    })
    .await;
    standby.kill9().await;
}

#[test]
fn plugin_check_names_the_rule_and_the_key_of_a_mistake() {
    let dir = tempfile::tempdir().expect("temp dir");
    let wasm = dir.path().join("30-rules.wasm");
    std::fs::copy(plugin_wasm("rules"), &wasm).expect("copy wasm");
    let check = |toml: &str| {
        std::fs::write(dir.path().join("30-rules.toml"), toml).expect("write toml");
        let out = std::process::Command::new(binary())
            .args(["plugin", "check"])
            .arg(&wasm)
            .output()
            .expect("run plugin check");
        let said = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), said)
    };
    let (ok, said) = check(
        "[config]\n[[config.rules]]\nname = \"fine\"\naction = \"drop\"\npattern.data.id = [\"user-left\"]\n\n[[config.rules]]\nname = \"acme-only\"\naction = \"keep\"\npattern.meeting.metadata.bbb-origin-server-name = [{ prefx = \"lms.\" }]\n",
    );
    assert!(!ok, "{said}");
    assert!(
        said.contains(
            "rule 2 (\"acme-only\"): `pattern.meeting.metadata.bbb-origin-server-name[0]"
        ),
        "{said}"
    );
    assert!(said.contains("prefx"), "{said}");
    let (ok, said) = check("[config]\ndefault = \"maybe\"\n");
    assert!(!ok && said.contains("`default`"), "{said}");
    let (ok, said) =
        check("[config]\n[[config.rules]]\naction = \"drop\"\npattern.data.id = [\"user-left\"]\n");
    assert!(ok, "{said}");
}

/// Rules see a meeting's tenant (`docs/tenants.md`) as `meeting.tenant`: `{"id", "name"}` as its
/// metadata said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_see_the_meetings_tenant() {
    let redis = TestRedis::start().await;
    let dir = PluginDir::new();
    let rules = "[config]\ndefault = \"drop\"\n\n[[config.rules]]\nname = \"acme\"\naction = \"keep\"\npattern.meeting.tenant.name = [\"acme\"]\n\n[[config.rules]]\nname = \"by-id\"\naction = \"keep\"\npattern.meeting.tenant.id = [\"u-9\"]\n";
    dir.add("30-rules", "rules", Some(rules));
    let relay = start(&redis, &dir).await;
    let r = TestReceiver::start().await;
    relay
        .create_hook(&r.url("/cb"), "eventID=user-joined")
        .await;
    for (mid, metadata) in [
        (
            "int-g",
            json!({"bbb-origin-server-name": "lms.globex.example"}),
        ),
        (
            "int-n",
            json!({"tenant-name": "globex", "tenant-id": "u-1"}),
        ),
        ("int-i", json!({"tenant-id": "u-9"})),
        ("int-a", json!({"tenant-name": "acme", "tenant-id": "u-2"})),
    ] {
        redis
            .publish(&meeting_created_with_metadata(
                mid,
                &format!("e-{mid}"),
                &metadata,
            ))
            .await;
        redis
            .publish(&user_joined(mid, "u", &format!("in-{mid}")))
            .await;
    }
    // Anything of the other meetings would have come before the last one's join.
    assert_eq!(names_once(&r, 2).await, ["in-int-i", "in-int-a"]);
    relay.stop().await;
}
