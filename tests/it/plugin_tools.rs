//! The plugin authors' commands, run as the real binary: `plugin check` and `replay`.

use std::process::Command;

use serde_json::Value;

use crate::support::{PluginDir, TestReceiver, plugin_wasm, process::binary};

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(binary())
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run hookrelay");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn fixture_path() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/bbb-webhooks/raw-events.json"
    )
    .to_string()
}

#[test]
fn plugin_check_accepts_a_plugin_and_says_why_it_refuses_others() {
    let good = plugin_wasm("slack_format");
    let (ok, out, err) = run(&["plugin", "check", good.to_str().expect("path")]);
    assert!(ok, "{out}{err}");
    assert!(
        out.starts_with("ok: slack_format is a bbb:relay/plugin@0.1.0 component"),
        "{out}"
    );
    assert!(
        out.contains("sees meeting-created, meeting-ended,"),
        "{out}"
    );
    // Timed on the recorded meeting: its four meeting events (the only events of the fixtures
    // it asks for) become chat messages.
    assert!(
        out.contains("on a recorded meeting: 4 calls, ")
            && out.contains("kept 0, replaced 4, dropped 0"),
        "{out}"
    );
    let keep = plugin_wasm("testing_keep_typed");
    let (ok, out, err) = run(&["plugin", "check", keep.to_str().expect("path")]);
    assert!(ok, "{out}{err}");
    let calls: usize = out
        .split("on a recorded meeting: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no call count in {out}"));
    assert!(calls > 10, "every event of the meeting: {out}");
    assert!(
        out.contains(&format!("kept {calls}, replaced 0, dropped 0")),
        "{out}"
    );
    assert!(out.contains(" us per call (slowest "), "{out}");
    let mib: f64 = out
        .split("one instance: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no instance memory in {out}"));
    assert!(mib > 0.0 && mib < 32.0, "{out}");

    let refusing = plugin_wasm("testing_init_error");
    let (ok, _, err) = run(&["plugin", "check", refusing.to_str().expect("path")]);
    assert!(!ok);
    assert!(
        err.contains("init refused: init-error plugin always refuses to start"),
        "{err}"
    );

    let dir = PluginDir::new();
    dir.write("junk.wasm", b"\0asm\x01\0\0\0");
    let junk = dir.path().join("junk.wasm");
    let (ok, _, err) = run(&["plugin", "check", junk.to_str().expect("path")]);
    assert!(!ok);
    assert!(
        err.contains("does not fit the bbb:relay/plugin interface")
            || err.contains("not a valid WebAssembly component"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

/// Making an instance has its own deadline, longer than a call's: an `init` that works well
/// past `timeout_ms` loads (it failed the load before, whenever a busy machine paused it for a
/// few milliseconds), and one past `init_timeout_ms` is interrupted, with the reason.
#[test]
fn init_has_a_deadline_of_its_own_longer_than_a_calls() {
    // 35,000,000 counts in init: about 50 ms, ten times the calls' 5 ms.
    let slow_start = "timeout_ms = 5\n[config]\nspins = 0\ninit_spins = 35000000\n";
    let dir = PluginDir::new();
    dir.add("slow-start", "testing_spin", Some(slow_start));
    let path = dir.path().join("slow-start.wasm");
    let (ok, out, err) = run(&["plugin", "check", path.to_str().expect("path")]);
    assert!(ok, "{out}{err}");
    assert!(
        out.starts_with("ok: slow-start is a bbb:relay/plugin@"),
        "{out}"
    );

    dir.add(
        "too-slow",
        "testing_spin",
        Some(&format!("init_timeout_ms = 5\n{slow_start}")),
    );
    let path = dir.path().join("too-slow.wasm");
    let (ok, out, err) = run(&["plugin", "check", path.to_str().expect("path")]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("init failed: it ran past its deadline (init_timeout_ms = 5)"),
        "{err}"
    );
}

#[test]
fn replay_prints_what_each_hook_would_get_through_the_chain() {
    let dir = PluginDir::new();
    dir.add(
        "10-filter",
        "event_filter",
        Some("[scope]\nhooks = [1]\n[config]\nallow = [\"meeting-created\", \"user-joined\"]\n"),
    );
    dir.add("20-tag", "testing_tag", Some("[config]\ntag = \"seen\"\n"));
    let (ok, out, err) = run(&[
        "replay",
        &fixture_path(),
        "--plugins",
        dir.path().to_str().expect("path"),
        "--hook",
        "http://lms.example/cb",
        "--raw-hook",
        "http://raw.example/cb",
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains("plugins, in order: 10-filter, 20-tag"),
        "{err}"
    );
    assert!(err.contains("replayed 24 messages: 24 events"), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "# hook 1 http://lms.example/cb (processed): 3 callbacks, 21 dropped by plugins"
    );
    let kept: Vec<Value> = lines[1..4]
        .iter()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    let ids: Vec<&str> = kept
        .iter()
        .filter_map(|e| e["data"]["id"].as_str())
        .collect();
    assert_eq!(ids, ["meeting-created", "user-joined", "user-joined"]);
    assert!(
        kept.iter()
            .all(|e| e["chain"] == serde_json::json!(["seen"]))
    );
    assert_eq!(
        lines[4],
        "# hook 2 http://raw.example/cb (raw): 24 callbacks, 0 dropped by plugins"
    );
    let raw: Value = serde_json::from_str(lines[5]).expect("JSON");
    assert_eq!(raw["envelope"]["name"], "MeetingCreatedEvtMsg");
    assert_eq!(raw["chain"], serde_json::json!(["seen"]));
    assert_eq!(lines.len(), 5 + 24);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_send_posts_signed_callbacks() {
    let receiver = TestReceiver::start().await;
    let url = receiver.url("/cb");
    let config = tempfile::NamedTempFile::new().expect("temp");
    std::fs::write(
        config.path(),
        format!(
            "[bbb]\nsecret = \"{}\"\n[delivery.ssrf]\nallow_cidrs = [\"127.0.0.1/32\"]\n",
            crate::support::SECRET
        ),
    )
    .expect("config");
    let args = [
        "replay".to_string(),
        fixture_path(),
        "--hook".into(),
        url.clone(),
        "--send".into(),
        "--config".into(),
        config.path().display().to_string(),
    ];
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&args)
    })
    .await
    .expect("replay");
    assert!(ok, "{err}");
    assert_eq!(
        out.lines().filter(|l| l.ends_with(": 200")).count(),
        24,
        "{out}"
    );
    let got = receiver.wait_delivered(24).await;
    for r in &got {
        r.assert_signed(&url);
    }
    let first: Value = serde_json::from_str(&got[0].event()).expect("JSON");
    assert_eq!(first["data"]["id"], "meeting-created");
}

#[test]
fn check_config_loads_the_plugin_folder_and_names_a_broken_plugin() {
    let dir = PluginDir::new();
    dir.add("10-tag", "testing_tag", Some("[config]\ntag = \"t\"\n"));
    dir.add("20-slack", "slack_format", None);
    let config = tempfile::NamedTempFile::new().expect("temp");
    std::fs::write(
        config.path(),
        format!(
            "[bbb]\nsecret = \"long-test-secret\"\n[redis]\nurl = \"redis://127.0.0.1:1\"\n[plugins]\ndir = \"{}\"\n",
            dir.path().display()
        ),
    )
    .expect("config");
    let path = config.path().to_str().expect("path");
    let (ok, out, err) = run(&["check-config", "--config", path]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.trim().lines().collect();
    assert!(
        lines[0].starts_with("callbacks are sent in the plain form"),
        "{out}"
    );
    assert!(lines[1].starts_with("BBB API: none"), "{out}");
    assert_eq!(
        lines.last(),
        Some(&"configuration ok; plugins, in order: 10-tag, 20-slack")
    );

    dir.write("15-bad.toml", b"on_error = \"sometimes\"\n");
    dir.add("15-bad", "testing_tag", None);
    let (ok, _, err) = run(&["check-config", "--config", path]);
    assert!(!ok);
    assert!(
        err.starts_with("hookrelay: plugin 15-bad: invalid plugin settings:"),
        "{err}"
    );
}

#[test]
fn replay_keeps_the_deadline_of_a_plugin_that_loops() {
    let dir = PluginDir::new();
    dir.add(
        "10-loop",
        "testing_loop",
        Some("[config]\non = \"user-joined\"\n"),
    );
    let (ok, out, err) = run(&[
        "replay",
        &fixture_path(),
        "--plugins",
        dir.path().to_str().expect("path"),
    ]);
    assert!(ok, "{err}");
    // The two joins hit the deadline and get the default policy (drop); the rest go through.
    assert!(
        out.starts_with(
            "# hook 1 http://localhost/ (processed): 22 callbacks, 2 dropped by plugins"
        ),
        "{out}"
    );
}
