//! The plugin authors' workflow, run as the real binary: `plugin new`, `build`, `test`,
//! `deploy` (into the folder of a running relay) and `record` (from a real Redis), in the three
//! languages, with the toolchains installed from the registries as an author's machine would.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use serde_json::Value;

use crate::{
    plugins::{parse, start},
    support::{
        PluginDir, TestReceiver, TestRedis, meeting_created, plugin_wasm, process::binary,
        user_joined,
    },
};

/// Runs the binary in `dir`; (success, stdout, stderr).
fn run_in(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(binary())
        .current_dir(dir)
        .args(args)
        .env_remove("RUST_LOG")
        // One target folder for every Rust project the tests make: built once, then reused.
        .env("CARGO_TARGET_DIR", shared_target())
        .output()
        .expect("run hookrelay");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn shared_target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/plugin-projects")
}

/// `plugin new` then `plugin build`; the project's folder.
fn new_and_build(parent: &Path, name: &str, lang: &str) -> PathBuf {
    let (ok, out, err) = run_in(parent, &["plugin", "new", name, "--lang", lang]);
    assert!(ok, "{out}{err}");
    let dir = parent.join(name);
    assert_eq!(out.trim(), format!("./{name}"));
    let (ok, out, err) = run_in(parent, &["plugin", "build", name]);
    assert!(ok, "plugin build {lang}: {out}{err}");
    let wasm = dir.join(format!("build/{name}.wasm"));
    assert_eq!(
        PathBuf::from(out.trim()),
        wasm.canonicalize().expect("built")
    );
    dir
}

/// A relay configuration on `redis`, in `dir`.
fn relay_config(dir: &Path, redis: &TestRedis) -> PathBuf {
    let config = dir.join("hookrelay.toml");
    let text = format!(
        "[bbb]\nsecret = \"s3cret-s3cret\"\n[redis]\nurl = \"{}\"\n",
        redis.url()
    );
    std::fs::write(&config, text).expect("write");
    config
}

/// Waits until `record` has made its file: it is subscribed then.
async fn subscribed(recording: &Path) {
    let deadline = tokio::time::Instant::now() + crate::support::PATIENCE;
    while !recording.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "record never subscribed"
        );
        // The loop's pace: it polls until the recording file exists.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).expect("read");
    assert!(text.contains(from), "{} lacks {from}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).expect("write");
}

/// The `sh` block of plugins/README.md that follows the marker `<!-- run by
/// tests/it/authoring.rs: NAME -->`.
fn guide_block(name: &str) -> String {
    let guide =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/README.md"))
            .expect("read the guide");
    let marker = format!("<!-- run by tests/it/authoring.rs: {name} -->\n```sh\n");
    let start = guide
        .find(&marker)
        .unwrap_or_else(|| panic!("no block {name} in the guide"))
        + marker.len();
    let len = guide[start..].find("```").expect("block end");
    guide[start..start + len].to_string()
}

/// Runs a block of the guide with bash (stopping at the first failing command), `hookrelay`
/// on the PATH, in `dir`.
fn guide_command(block: &str, dir: &Path, plugins: &Path) -> tokio::process::Command {
    let bin = binary().parent().expect("bin dir").to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = tokio::process::Command::new("bash");
    c.args(["-euo", "pipefail", "-c", block])
        .current_dir(dir)
        .env("PATH", path)
        .env("PLUGINS", plugins)
        .env("CARGO_TARGET_DIR", shared_target())
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    c
}

async fn output(c: tokio::process::Child, what: &str) -> String {
    let out = c.wait_with_output().await.expect("wait");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{what}:\n{stdout}\n{stderr}");
    stdout.into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guides_walkthrough_deploys_a_plugin_in_each_language_on_a_running_relay() {
    let redis = TestRedis::start().await;
    let plugins = PluginDir::new();
    let relay = start(&redis, &plugins).await;
    let r = TestReceiver::start().await;
    relay.create_hook(&r.url("/cb"), "").await;
    // Each language's component is new to the relay: compiled once when it is loaded.
    let compiled = r#"hookrelay_plugin_compiles_total{source="compiled"}"#;
    for (i, lang) in ["rust", "python", "js"].into_iter().enumerate() {
        let parent = tempfile::tempdir().expect("tempdir");
        let block = guide_block(&format!("walkthrough {lang}"));
        let child = guide_command(&block, parent.path(), plugins.path())
            .spawn()
            .expect("bash");
        let out = output(child, lang).await;
        // build printed the component, test the template's cases, deploy the files.
        let project = parent
            .path()
            .join("my-plugin")
            .canonicalize()
            .expect("project");
        assert!(
            out.contains(&format!("{}/build/my-plugin.wasm\n", project.display())),
            "{lang}: {out}"
        );
        assert!(
            out.contains("plugin test: 6 passed, 0 failed\n"),
            "{lang}: {out}"
        );
        assert!(
            out.ends_with(&format!(
                "{0}/10-my-plugin.wasm\n{0}/10-my-plugin.toml\n",
                plugins.path().display()
            )),
            "{lang}: {out}"
        );
        // Each deploy replaces the previous language's plugin in the running relay, which
        // compiles it first (a Python component takes seconds: more than PATIENCE on a busy
        // machine).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
        while crate::support::metric_value(&relay.metrics().await, compiled) < (i + 1) as f64 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{lang} never loaded"
            );
            // The loop's pace: it polls the metrics until this language's plugin is compiled.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mid = format!("m-{lang}");
        redis
            .publish(&meeting_created(&mid, &format!("ext-{lang}")))
            .await;
        redis.publish(&user_joined(&mid, "u1", "Ann")).await;
        let got = r.wait_delivered(2 * (i + 1)).await;
        let joined = parse(&got[2 * i + 1].event());
        assert_eq!(joined["data"]["id"], "user-joined", "{lang}");
        assert_eq!(
            joined["data"]["attributes"]["meeting"]["external-meeting-id"],
            format!("ext-{lang}")
        );
        assert_eq!(
            joined["data"]["attributes"]["site"], "bbb.example.org",
            "{lang}"
        );
    }
    let loaded = relay.metrics().await;
    assert_eq!(
        crate::support::metric_value(&loaded, "hookrelay_plugins_loaded"),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guides_record_loop_turns_a_meeting_into_test_cases() {
    let redis = TestRedis::start().await;
    let parent = tempfile::tempdir().expect("tempdir");
    let dir = new_and_build(parent.path(), "recorded", "rust");
    let config = relay_config(parent.path(), &redis);
    let block = guide_block("record");
    assert!(block.contains("--duration 30m"), "{block}");
    let block = block.replace("--duration 30m", "--duration 3s");
    // $PLUGINS for replay: the project's build folder is one (NAME.wasm and NAME.toml).
    let mut command = guide_command(&block, &dir, &dir.join("build"));
    let child = command
        .env("HOOKRELAY_CONFIG", &config)
        .spawn()
        .expect("bash");
    let recording = dir.join("tests/meeting.jsonl");
    subscribed(&recording).await;
    redis.publish(&meeting_created("m1", "ext-1")).await;
    redis.publish(&user_joined("m1", "u1", "Ann")).await;
    let out = output(child, "the record block").await;
    // replay printed the callbacks, update wrote the expectations, test ran them all.
    assert!(
        out.contains("# hook 1 http://localhost/ (processed): 2 callbacks, 0 dropped by plugins"),
        "{out}"
    );
    assert!(out.contains("\"site\":\"bbb.example.org\""), "{out}");
    assert!(out.contains("tests/meeting.jsonl: 2 cases\n"), "{out}");
    assert!(out.ends_with("plugin test: 8 passed, 0 failed\n"), "{out}");
    let cases: Vec<Value> = std::fs::read_to_string(&recording)
        .expect("read")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(cases[0]["expect"], serde_json::json!(["kept"]));
    assert_eq!(
        cases[1]["expect"][0]["replaced"]["data"]["attributes"]["site"],
        "bbb.example.org"
    );
}

#[test]
fn a_failing_case_shows_the_difference_and_settings_count_without_a_rebuild() {
    let parent = tempfile::tempdir().expect("tempdir");
    let dir = new_and_build(parent.path(), "greeter", "rust");
    let cases = dir.join("tests/cases.jsonl");
    edit(
        &cases,
        "\"site\":\"bbb.example.org\"",
        "\"site\":\"elsewhere\"",
    );
    let (ok, out, _) = run_in(&dir, &["plugin", "test"]);
    assert!(!ok);
    assert!(
        out.contains("tests/cases.jsonl line 2 (a user joins: the site is added)"),
        "{out}"
    );
    assert!(
        out.contains("event 1 (user-joined): expected replaced, got replaced"),
        "{out}"
    );
    let diff_line = |sign: &str, text: &str| {
        out.lines()
            .any(|l| l.trim_start().starts_with(sign) && l.ends_with(text))
    };
    assert!(diff_line("-", "\"site\": \"elsewhere\""), "{out}");
    assert!(diff_line("+", "\"site\": \"bbb.example.org\""), "{out}");
    assert!(out.ends_with("plugin test: 5 passed, 1 failed\n"), "{out}");

    // A plugin that fails its tests is not deployed.
    let other = tempfile::tempdir().expect("tempdir");
    let to = other.path().to_str().expect("path");
    let (ok, out, err) = run_in(&dir, &["plugin", "deploy", "--to", to]);
    assert!(!ok, "{out}");
    assert!(err.contains("not deployed: 1 test cases failed"), "{err}");
    assert_eq!(std::fs::read_dir(other.path()).expect("dir").count(), 0);

    // --update writes what comes out as the expectation: the cases pass again.
    let (ok, out, err) = run_in(&dir, &["plugin", "test", "--update"]);
    assert!(ok, "{out}{err}");
    let (ok, out, _) = run_in(&dir, &["plugin", "test", "tests/cases.jsonl"]);
    assert!(ok, "{out}");

    // The settings count without a rebuild: keep_chat keeps the chat message.
    edit(
        &dir.join("greeter.toml"),
        "keep_chat = false",
        "keep_chat = true",
    );
    let (ok, out, _) = run_in(&dir, &["plugin", "test"]);
    assert!(!ok);
    assert!(
        out.contains("line 4 (a chat message is dropped)")
            && out.contains("expected dropped, got kept"),
        "{out}"
    );
    // An edited source is noticed.
    std::thread::sleep(Duration::from_millis(20));
    edit(&dir.join("src/lib.rs"), "ready", "ready");
    let (_, _, err) = run_in(&dir, &["plugin", "test"]);
    assert!(
        err.contains("a source file is newer than the build"),
        "{err}"
    );
}

#[test]
fn bad_input_gets_a_clear_error() {
    let parent = tempfile::tempdir().expect("tempdir");
    let (ok, _, err) = run_in(parent.path(), &["plugin", "new", "x", "--lang", "go"]);
    assert!(!ok);
    assert!(
        err.contains("unknown language \"go\": rust, python or js"),
        "{err}"
    );
    let (ok, _, err) = run_in(
        parent.path(),
        &["plugin", "new", "Bad_Name", "--lang", "rust"],
    );
    assert!(!ok);
    assert!(err.contains("invalid plugin name \"Bad_Name\""), "{err}");
    let (ok, _, _) = run_in(
        parent.path(),
        &["plugin", "new", "twice", "--lang", "python"],
    );
    assert!(ok);
    let (ok, _, err) = run_in(parent.path(), &["plugin", "new", "twice", "--lang", "js"]);
    assert!(!ok);
    assert!(err.contains("twice already exists"), "{err}");
    // Not built yet.
    let (ok, _, err) = run_in(&parent.path().join("twice"), &["plugin", "test"]);
    assert!(!ok);
    assert!(
        err.contains("twice is not built yet: run `hookrelay plugin build"),
        "{err}"
    );
    // Not a project.
    let (ok, _, err) = run_in(parent.path(), &["plugin", "build"]);
    assert!(!ok);
    assert!(err.contains("is not a plugin project"), "{err}");

    // A case file with a bad line names it.
    let cases = parent.path().join("cases.jsonl");
    std::fs::write(
        &cases,
        "{\"message\":{},\"expect\":[]}\n{\"message\":{},\"expect\":[\"sent\"]}\n",
    )
    .expect("write");
    let keep = plugin_wasm("testing_keep_typed");
    let args = [
        "plugin",
        "test",
        "cases.jsonl",
        "--plugin",
        keep.to_str().expect("path"),
    ];
    let (ok, _, err) = run_in(parent.path(), &args);
    assert!(!ok);
    assert!(
        err.contains("cases.jsonl: line 2: an expected outcome is \"kept\", \"dropped\" or {\"replaced\": JSON}, not \"sent\""),
        "{err}"
    );
    // A file that is not a component.
    let junk = parent.path().join("junk.wasm");
    std::fs::write(&junk, b"\0asm\x01\0\0\0").expect("write");
    std::fs::write(&cases, "").expect("write");
    let args = [
        "plugin",
        "test",
        "cases.jsonl",
        "--plugin",
        junk.to_str().expect("path"),
    ];
    let (ok, _, err) = run_in(parent.path(), &args);
    assert!(!ok);
    assert!(err.contains("plugin junk: "), "{err}");

    // A component that imports what plugins do not get is refused, naming the import: a
    // JavaScript plugin built without `--disable http fetch-event`.
    let js = new_and_build(parent.path(), "js-http", "js");
    let status = Command::new(js.join("node_modules/.bin/jco"))
        .current_dir(&js)
        .args([
            "componentize",
            "plugin.js",
            "--wit",
            "wit",
            "--world-name",
            "plugin",
        ])
        .args(["--out", "build/js-http.wasm"])
        .output()
        .expect("jco");
    assert!(status.status.success(), "{status:?}");
    let (ok, _, err) = run_in(&js, &["plugin", "test"]);
    assert!(!ok);
    assert!(
        err.contains("does not fit the bbb:relay/plugin interface") && err.contains("wasi:http/"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_writes_the_bus_for_replay_and_plugin_test() {
    let redis = TestRedis::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = relay_config(dir.path(), &redis);
    let out = dir.path().join("meeting.jsonl");
    let mut child = tokio::process::Command::new(binary())
        .args(["record", "--count", "2", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("record");
    subscribed(&out).await;
    let created = meeting_created("m1", "ext-1");
    let joined = user_joined("m1", "u1", "Ann");
    redis.publish(&created).await;
    redis.publish("not json").await;
    redis.publish(&joined).await;
    let done = tokio::time::timeout(crate::support::PATIENCE, child.wait())
        .await
        .expect("record stops after 2 messages")
        .expect("wait");
    assert!(done.success());
    let text = std::fs::read_to_string(&out).expect("recorded");
    assert_eq!(text, format!("{created}\n{joined}\n"));
    // Bus messages carry passwords and chat: the recording is its user's alone.
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&out).expect("recorded").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let mut stdout = String::new();
    if let Some(mut s) = child.stdout.take() {
        use tokio::io::AsyncReadExt;
        s.read_to_string(&mut stdout).await.expect("stdout");
    }
    assert!(
        stdout.contains("recorded 2 messages to") && stdout.contains("(1 not JSON, skipped)"),
        "{stdout}"
    );

    // The recording is test cases once --update has written what came out.
    let tag = dir.path().join("tag.wasm");
    std::fs::copy(plugin_wasm("testing_tag"), &tag).expect("copy");
    std::fs::write(dir.path().join("tag.toml"), "[config]\ntag = \"seen\"\n").expect("write");
    let tag = tag.to_str().expect("path");
    let file = out.to_str().expect("path");
    let (ok, text, err) = run_in(dir.path(), &["plugin", "test", file, "--plugin", tag]);
    assert!(ok, "{err}");
    assert!(
        text.contains("0 cases, 0 passed, 0 failed (2 set-up lines)"),
        "{text}"
    );
    let (ok, _, err) = run_in(
        dir.path(),
        &["plugin", "test", file, "--plugin", tag, "--update"],
    );
    assert!(ok, "{err}");
    let lines: Vec<Value> = std::fs::read_to_string(&out)
        .expect("read")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[1]["message"],
        serde_json::from_str::<Value>(&joined).expect("json")
    );
    let replaced = &lines[1]["expect"][0]["replaced"];
    assert_eq!(replaced["data"]["id"], "user-joined");
    assert!(replaced["chain"].is_array(), "{replaced}");
    let (ok, text, _) = run_in(dir.path(), &["plugin", "test", file, "--plugin", tag]);
    assert!(ok && text.contains("2 cases, 2 passed, 0 failed"), "{text}");

    // --duration stops a quiet bus.
    let quiet = dir.path().join("quiet.jsonl");
    let (ok, text, err) = run_in(
        dir.path(),
        &[
            "record",
            "--duration",
            "300ms",
            "--config",
            config.to_str().expect("path"),
            "--out",
            quiet.to_str().expect("path"),
        ],
    );
    assert!(ok, "{err}");
    assert!(text.starts_with("recorded 0 messages"), "{text}");
}
