//! The commands for people, run as the real binary: `hooks list|create|destroy` against a
//! running relay, `sign` and `verify` of a real callback; every mistake is one line and a
//! non-zero exit.

use std::{io::Write, path::Path, process::Stdio};

use crate::support::{RelayProcess, TestReceiver, TestRedis, process::binary, user_joined};

/// Runs the binary: (exit code, stdout, stderr).
pub(crate) fn run(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    run_env(args, stdin, &[])
}

/// [`run`] with variables `env` set.
pub(crate) fn run_env(
    args: &[&str],
    stdin: Option<&str>,
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let mut child = std::process::Command::new(binary())
        .args(args)
        .env_remove("HOOKRELAY_CONFIG")
        .env_remove("HOOKRELAY_BBB__SECRET")
        .env_remove("HOOKRELAY_SIGN_SECRET")
        .env_remove("HOOKRELAY_STANDARD_SECRETS")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hookrelay");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write");
    }
    let out = child.wait_with_output().expect("output");
    let text = |b: Vec<u8>| String::from_utf8(b).expect("utf-8");
    (
        out.status.code().unwrap_or(-1),
        text(out.stdout),
        text(out.stderr),
    )
}

/// A failure: the exit code, and one line on stderr that contains `what`, never a panic.
fn assert_one_line(result: &(i32, String, String), code: i32, what: &str) {
    let (got, out, err) = result;
    assert_eq!(*got, code, "stdout {out} stderr {err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(what), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

fn with_secret(config: &Path, secret: &str) -> tempfile::NamedTempFile {
    let text = std::fs::read_to_string(config).expect("config");
    let text = text.replace(crate::support::SECRET, secret);
    let mut f = tempfile::NamedTempFile::new().expect("temp");
    f.write_all(text.as_bytes()).expect("write");
    f
}

#[tokio::test]
async fn hooks_commands_manage_a_running_relay() {
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, "").await;
    let cfg = relay.config.to_str().expect("path");
    let created = run(
        &[
            "hooks",
            "--config",
            cfg,
            "create",
            "http://127.0.0.1:9/a?x=1",
            "--meeting-id",
            "m 1",
            "--event-id",
            "user-joined,meeting-ended",
        ],
        None,
    );
    assert_eq!(created, (0, "created hook 1\n".into(), String::new()));
    let raw = run(
        &[
            "hooks",
            "create",
            "http://127.0.0.1:9/b",
            "--get-raw",
            "-c",
            cfg,
        ],
        None,
    );
    assert_eq!(raw, (0, "created hook 2\n".into(), String::new()));
    let again = run(
        &["hooks", "-c", cfg, "create", "http://127.0.0.1:9/b"],
        None,
    );
    assert_eq!(
        again,
        (
            0,
            "a hook for this URL exists already: 2\n".into(),
            String::new()
        )
    );
    let (code, out, _) = run(&["hooks", "-c", cfg, "list"], None);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "    id  state    kind       meeting       events                callback URL\n     \
         1  ok       -          m 1           user-joined,meeting-ended  http://127.0.0.1:9/a?x=1\n     \
         2  ok       raw        (all)         (all)                 http://127.0.0.1:9/b\n"
    );
    let (_, out, _) = run(&["hooks", "-c", cfg, "list", "--meeting-id", "other"], None);
    assert_eq!(out.lines().count(), 2, "the global hook only: {out}");
    assert_eq!(
        run(&["hooks", "-c", cfg, "destroy", "1"], None),
        (0, "removed hook 1\n".into(), String::new())
    );
    assert_one_line(
        &run(&["hooks", "-c", cfg, "destroy", "1"], None),
        1,
        "destroy refused: destroyMissingHook: The hook informed was not found.",
    );

    // A wrong secret, an unreachable relay, a wrong argument, no configuration.
    let wrong = with_secret(&relay.config, "not-the-secret");
    assert_one_line(
        &run(
            &["hooks", "-c", wrong.path().to_str().unwrap(), "list"],
            None,
        ),
        1,
        "checksumError",
    );
    let port = crate::support::free_port();
    let nowhere = format!("http://127.0.0.1:{port}/bigbluebutton/api");
    assert_one_line(
        &run(&["hooks", "-c", cfg, "--api-url", &nowhere, "list"], None),
        3,
        "cannot reach the relay",
    );
    assert_one_line(
        &run(&["hooks", "-c", cfg, "destroy", "one"], None),
        2,
        "invalid value 'one' for '<HOOK_ID>'",
    );
    assert_one_line(
        &run(&["hooks", "--nonsense", "list"], None),
        2,
        "'--nonsense'",
    );
    assert_one_line(
        &run(&["hooks", "-c", "/nonexistent.toml", "list"], None),
        2,
        "/nonexistent.toml not found",
    );
    relay.terminate().await;
}

#[tokio::test]
async fn sign_and_verify_agree_with_a_real_callback() {
    let redis = TestRedis::start().await;
    let standard = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let relay = RelayProcess::start(
        &redis,
        &format!("[delivery.standard_webhooks]\nsecrets = [\"{standard}\"]"),
    )
    .await;
    let cfg = relay.config.to_str().expect("path").to_string();
    let rx = TestReceiver::start().await;
    let registered = rx.url("/cb?app=7");
    let (code, _, err) = run(&["hooks", "-c", &cfg, "create", &registered], None);
    assert_eq!(code, 0, "{err}");
    redis.publish(&user_joined("int-1", "u1", "first")).await;
    let got = rx.wait_delivered(1).await;
    let received_url = format!("http://{}{}", rx.addr, got[0].uri);
    let body = got[0].body.clone();

    let (code, out, err) = run(
        &["verify", "-c", &cfg, "--url", &received_url, "--body", "-"],
        Some(&body),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!("ok: Sha1 checksum of {registered} and the body\n")
    );
    let tampered = body.replace("first", "frst");
    assert_one_line(
        &run(
            &[
                "verify",
                "-c",
                &cfg,
                "--url",
                &received_url,
                "--body",
                &tampered,
            ],
            None,
        ),
        1,
        "checksum mismatch",
    );
    // Another secret, from the environment or a file: a mismatch, and nothing of the digest
    // that would have matched (the command is no signing oracle).
    let verify_other = ["verify", "--url", &received_url, "--body", &body];
    let other = [(
        "HOOKRELAY_SIGN_SECRET",
        "another-secret-of-the-wrong-server",
    )];
    let mismatch = run_env(&verify_other, None, &other);
    assert_one_line(&mismatch, 1, "checksum mismatch");
    let (_, signed, _) = run_env(
        &["sign", "--url", &registered, "--body", &body],
        None,
        &other,
    );
    let digest = signed
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("checksum: "))
        .expect("sign's checksum");
    assert_eq!(digest.len(), 40);
    assert!(!mismatch.2.contains(digest), "{}", mismatch.2);
    let file = tempfile::NamedTempFile::new().expect("file");
    std::fs::write(file.path(), "another-secret-of-the-wrong-server\n").expect("write");
    let from_file = [
        "verify",
        "--secret-file",
        file.path().to_str().unwrap(),
        "--url",
        &received_url,
        "--body",
        &body,
    ];
    assert_one_line(&run(&from_file, None), 1, "checksum mismatch");
    // On the command line it still works, with a warning that others see it.
    let (code, _, err) = run(
        &[
            "verify",
            "--secret",
            "another-secret-of-the-wrong-server",
            "--url",
            &received_url,
            "--body",
            &body,
        ],
        None,
    );
    assert_eq!(code, 1);
    assert!(err.contains("visible to every user"), "{err}");
    assert!(
        err.contains("checksum mismatch") && !err.contains(digest),
        "{err}"
    );
    let (code, out, _) = run(
        &["sign", "-c", &cfg, "--url", &registered, "--body", &body],
        None,
    );
    assert_eq!(code, 0);
    assert!(
        out.ends_with(&format!("POST {received_url}\n")),
        "sign gives the URL the relay posted to: {out}"
    );
    assert_one_line(
        &run_env(
            &["verify", "--url", &registered, "--body", &body],
            None,
            &[("HOOKRELAY_SIGN_SECRET", "some-long-secret")],
        ),
        2,
        "no checksum parameter",
    );
    relay.terminate().await;
}

/// Writes hook records the way bbb-webhooks 2.x and 3.x write them, and one of the relay's own.
async fn reference_records(redis: &TestRedis) {
    let mut c = redis.conn().await.expect("redis");
    let v3 = "bigbluebutton:webhooks:out:hook:";
    let v2 = "bigbluebutton:webhooks:hook:";
    let () = redis::pipe()
        // The relay's own hook 1.
        .hset_multiple(
            format!("{v3}1"),
            &[
                ("id", "1"),
                ("callbackURL", "http://127.0.0.1:9/own"),
                ("permanent", "false"),
                ("getRaw", "false"),
            ],
        )
        .sadd("bigbluebutton:webhooks:out:hooks", "1")
        .set("bigbluebutton:webhooks:out:hookId", 1)
        // 3.x: a bound, filtered hook; one whose URL the SSRF guard refuses; one unreadable.
        .hset_multiple(
            format!("{v3}0b7a9f9e-3c1d-4c55-9a51-1f3f2d2a7e10"),
            &[
                ("id", "0b7a9f9e-3c1d-4c55-9a51-1f3f2d2a7e10"),
                ("callbackURL", "http://127.0.0.1:9/v3"),
                ("externalMeetingID", "ext-1"),
                ("eventID", r#"["user-joined","meeting-ended"]"#),
                ("permanent", "false"),
                ("getRaw", "false"),
            ],
        )
        .hset_multiple(
            format!("{v3}5d0f9a7e-0000-4000-8000-000000000001"),
            &[
                ("id", "5d0f9a7e-0000-4000-8000-000000000001"),
                ("callbackURL", "http://10.1.2.3/private"),
            ],
        )
        .hset_multiple(
            format!("{v3}5d0f9a7e-0000-4000-8000-000000000002"),
            &[("permanent", "false")],
        )
        .sadd(
            "bigbluebutton:webhooks:out:hooks",
            &[
                "0b7a9f9e-3c1d-4c55-9a51-1f3f2d2a7e10",
                "5d0f9a7e-0000-4000-8000-000000000001",
                "5d0f9a7e-0000-4000-8000-000000000002",
            ],
        )
        // 2.x: a raw hook with pending events, and one for the relay's own URL.
        .hset_multiple(
            format!("{v2}3"),
            &[
                ("hookID", "3"),
                ("callbackURL", "http://127.0.0.1:9/v2"),
                ("eventID", "user-left"),
                ("permanent", "false"),
                ("getRaw", "true"),
            ],
        )
        .rpush("bigbluebutton:webhooks:events:3", "{}")
        .hset_multiple(
            format!("{v2}4"),
            &[("hookID", "4"), ("callbackURL", "http://127.0.0.1:9/own")],
        )
        .sadd("bigbluebutton:webhooks:hooks", &["3", "4"])
        .query_async(&mut c)
        .await
        .expect("records");
}

fn sorted_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines
}

#[tokio::test]
async fn import_reference_plans_imports_and_is_idempotent() {
    let redis = TestRedis::start().await;
    reference_records(&redis).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("hookrelay.toml");
    let config = |api: std::net::SocketAddr| {
        format!(
            "[bbb]\nsecret = \"{}\"\n[api]\nbind = \"{api}\"\n[redis]\nurl = \"{}\"\n[delivery.ssrf]\nallow_cidrs = [\"127.0.0.1/32\"]\n",
            crate::support::SECRET,
            redis.url()
        )
    };
    // No relay answers there.
    let nobody = std::net::SocketAddr::from(([127, 0, 0, 1], crate::support::free_port()));
    std::fs::write(&cfg, config(nobody)).unwrap();
    let cfg = cfg.to_str().unwrap();
    let (code, dry, err) = run(&["import-reference", "--dry-run", "-c", cfg], None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        sorted_lines(&dry),
        [
            "2 to import, 2 skipped, 1 refused",
            "2.x hook 3: http://127.0.0.1:9/v2: would import (1 event it had queued is not sent again)",
            "2.x hook 4: http://127.0.0.1:9/own: skip (a hook with this callback URL exists)",
            "3.x hook 0b7a9f9e-3c1d-4c55-9a51-1f3f2d2a7e10: http://127.0.0.1:9/v3: would import",
            "3.x hook 5d0f9a7e-0000-4000-8000-000000000001: http://10.1.2.3/private: refuse (not allowed: 10.1.2.3 is a loopback, private, link-local or reserved address)",
            "3.x hook 5d0f9a7e-0000-4000-8000-000000000002: (no callback URL): skip (unreadable)",
        ]
    );
    assert_eq!(
        redis.smembers("bigbluebutton:webhooks:hooks").await.len(),
        2,
        "a dry run changes nothing"
    );

    let (code, out, _) = run(&["import-reference", "-c", cfg], None);
    assert_eq!(code, 0);
    assert!(out.contains("3.x hook 0b7a9f9e-3c1d-4c55-9a51-1f3f2d2a7e10: http://127.0.0.1:9/v3: imported as hook 2\n"), "{out}");
    assert!(
        out.contains("2.x hook 3: http://127.0.0.1:9/v2: imported as hook 3 (1 event it had queued is not sent again)\n"),
        "{out}"
    );
    assert!(out.contains("2 imported, 2 skipped, 1 refused\n"), "{out}");
    let v2 = redis.hgetall("bigbluebutton:webhooks:out:hook:3").await;
    assert_eq!(
        (
            v2["callbackURL"].as_str(),
            v2["eventID"].as_str(),
            v2["getRaw"].as_str()
        ),
        ("http://127.0.0.1:9/v2", "user-left", "true")
    );
    let v3 = redis.hgetall("bigbluebutton:webhooks:out:hook:2").await;
    assert_eq!(v3["eventID"], "user-joined,meeting-ended");
    assert_eq!(v3["externalMeetingID"], "ext-1");
    // bbb-webhooks' own records stay as they were, for a way back: a 2.x hook with its queued
    // event, the 3.x records beside the relay's.
    assert_eq!(redis.llen("bigbluebutton:webhooks:events:3").await, 1);
    let mut v2_left = redis.smembers("bigbluebutton:webhooks:hooks").await;
    v2_left.sort();
    assert_eq!(v2_left, ["3", "4"]);
    assert_eq!(
        redis.hgetall("bigbluebutton:webhooks:hook:4").await["callbackURL"],
        "http://127.0.0.1:9/own"
    );
    let mut left = redis.smembers("bigbluebutton:webhooks:out:hooks").await;
    left.sort();
    assert_eq!(
        left,
        [
            "0b7a9f9e-3c1d-4c55-9a51-1f3f2d2a7e10",
            "1",
            "2",
            "3",
            "5d0f9a7e-0000-4000-8000-000000000001",
            "5d0f9a7e-0000-4000-8000-000000000002"
        ],
    );

    // Each record is imported once: a second run (or start) looks at none of them again.
    let (_, again, _) = run(&["import-reference", "-c", cfg], None);
    assert!(
        again.ends_with("0 imported, 1 skipped, 1 refused\n"),
        "{again}"
    );
    assert!(
        again.contains("3.x hook 0b7a9f9e-3c1d-4c55-9a51-1f3f2d2a7e10: http://127.0.0.1:9/v3: looked at before (imported as hook 2)"),
        "{again}"
    );
    // The switch made final: what was looked at goes; refused and unreadable records stay.
    let (code, done, err) = run(&["import-reference", "--finish", "-c", cfg], None);
    assert_eq!(code, 0, "{err}");
    assert!(done.contains(": 3 of its records removed"), "{done}");
    assert!(
        redis
            .smembers("bigbluebutton:webhooks:hooks")
            .await
            .is_empty()
    );
    assert_eq!(redis.llen("bigbluebutton:webhooks:events:3").await, 0);
    let mut left = redis.smembers("bigbluebutton:webhooks:out:hooks").await;
    left.sort();
    assert_eq!(
        left,
        [
            "1",
            "2",
            "3",
            "5d0f9a7e-0000-4000-8000-000000000001",
            "5d0f9a7e-0000-4000-8000-000000000002"
        ],
        "refused and unreadable records stay"
    );
    // A relay started now serves them.
    let relay = crate::support::TestRelay::start(&redis).await;
    let list = relay.call("list", "").await;
    assert_eq!(list.matches("<hook>").count(), 3, "{list}");
    // Not while a relay runs: it would not see what is imported.
    let running = dir.path().join("running.toml");
    std::fs::write(&running, config(relay.api)).unwrap();
    assert_one_line(
        &run(&["import-reference", "-c", running.to_str().unwrap()], None),
        2,
        "stop bbb-webhooks",
    );
    relay.stop().await;
    assert_one_line(
        &run(&["import-reference", "-c", "/nonexistent.toml"], None),
        2,
        "not found",
    );
}

#[tokio::test]
async fn import_reference_keeps_the_permanent_hooks_the_reference_config_names() {
    let mut redis = TestRedis::start().await;
    let mut c = redis.conn().await.expect("redis");
    let id = "3416336b-8c9e-5362-a2be-e2dd12b8523c";
    let () = redis::pipe()
        .hset_multiple(
            format!("bigbluebutton:webhooks:out:hook:{id}"),
            &[
                ("id", id),
                ("callbackURL", "http://127.0.0.1:9/perm"),
                ("permanent", "true"),
                ("getRaw", "false"),
            ],
        )
        .sadd("bigbluebutton:webhooks:out:hooks", id)
        .query_async(&mut c)
        .await
        .expect("records");
    let dir = tempfile::tempdir().unwrap();
    let nobody = std::net::SocketAddr::from(([127, 0, 0, 1], crate::support::free_port()));
    let cfg = dir.path().join("hookrelay.toml");
    std::fs::write(
        &cfg,
        format!(
            "[bbb]\nsecret = \"{}\"\n[api]\nbind = \"{nobody}\"\n[redis]\nurl = \"{}\"\n[delivery.ssrf]\nallow_cidrs = [\"127.0.0.1/32\"]\n",
            crate::support::SECRET,
            redis.url()
        ),
    )
    .unwrap();
    let yml = dir.path().join("default.yml");
    std::fs::write(
        &yml,
        "modules:\n  \"../out/webhooks/index.js\":\n    config:\n      permanentURLs:\n        - url: http://127.0.0.1:9/perm\n",
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let (code, out, err) = run(&["import-reference", "--dry-run", "-c", cfg], None);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("3.x hook {id}: http://127.0.0.1:9/perm: skip (a permanent hook the configuration does not name)\n")),
        "{out}"
    );
    let (code, out, err) = run(
        &[
            "import-reference",
            "-c",
            cfg,
            "--reference-config",
            yml.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "3.x hook {id}: http://127.0.0.1:9/perm: imported as hook 1\n"
        )),
        "{out}"
    );
    let stored = redis.hgetall("bigbluebutton:webhooks:out:hook:1").await;
    assert_eq!(
        (stored["callbackURL"].as_str(), stored["permanent"].as_str()),
        ("http://127.0.0.1:9/perm", "true")
    );
    // Redis gone: one line, exit 3.
    drop(c);
    redis.stop().await;
    assert_one_line(
        &run(&["import-reference", "--dry-run", "-c", cfg], None),
        3,
        "Redis",
    );
}

#[test]
fn verify_checks_a_standard_webhooks_signature() {
    // The Standard Webhooks specification's test vector.
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let body = r#"{"test": 2432232314}"#;
    let args = |body: &'static str, secret: Option<&'static str>| {
        let mut a = vec![
            "verify",
            "--url",
            "https://app.example/bbb",
            "--body",
            body,
            "--webhook-id",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "--webhook-timestamp",
            "1614265330",
            "--webhook-signature",
            "v1,bm90IGl0 v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        ];
        if let Some(s) = secret {
            a.extend(["--standard-secret", s]);
        }
        a
    };
    let (code, out, err) = run(&args(body, Some(secret)), None);
    assert_eq!(
        (code, out.as_str()),
        (0, "ok: webhook-signature by secret 1\n"),
        "{err}"
    );
    assert!(err.contains("visible to every user"), "{err}");
    let env = [("HOOKRELAY_STANDARD_SECRETS", secret)];
    let (code, out, err) = run_env(&args(body, None), None, &env);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "ok: webhook-signature by secret 1\n", "")
    );
    assert_one_line(
        &run_env(&args(r#"{"test": 2432232315}"#, None), None, &env),
        1,
        "webhook-signature mismatch",
    );
    assert_one_line(
        &run(&args(body, None), None),
        2,
        "give HOOKRELAY_STANDARD_SECRETS",
    );
    assert_one_line(
        &run_env(
            &args(body, None),
            None,
            &[("HOOKRELAY_STANDARD_SECRETS", "whsec_%%%")],
        ),
        2,
        "secret",
    );
}
