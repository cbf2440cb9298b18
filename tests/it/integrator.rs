//! What integrators verify on their side: Standard Webhooks headers beside the BBB checksum.

use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, KeyInit, Mac};
use hookrelay::config::Secret;

use crate::support::{Reply, TestReceiver, TestRedis, TestRelay, user_joined, user_name};

/// The new secret and the one being retired.
const NEW: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OLD: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

/// A Standard Webhooks signature, computed here as the specification says (not with the
/// relay's code).
fn expected(secret: &str, id: &str, ts: &str, body: &str) -> String {
    let key = STANDARD
        .decode(secret.trim_start_matches("whsec_"))
        .expect("base64");
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).expect("key");
    mac.update(format!("{id}.{ts}.{body}").as_bytes());
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[tokio::test]
async fn standard_webhooks_headers_verify_with_each_secret_and_keep_their_id_across_retries() {
    let redis = TestRedis::start().await;
    let mut config = TestRelay::config(&redis);
    config.delivery.standard_webhooks.secrets = vec![Secret::new(NEW), Secret::new(OLD)];
    let relay = TestRelay::start_with(&redis, config).await;
    let rx = TestReceiver::start().await;
    rx.script([Reply::Status(500)]);
    let url = rx.url("/std?app=1");
    relay.create_hook(&url, "").await;
    redis.publish(&user_joined("int-1", "u1", "first")).await;
    redis.publish(&user_joined("int-1", "u2", "second")).await;
    rx.wait_delivered(2).await;
    let all = rx.received();
    assert_eq!(
        all.iter().map(|r| r.status).collect::<Vec<_>>(),
        [500, 200, 200]
    );
    let header = |i: usize, name: &str| -> String {
        all[i]
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("{name} on request {i}"))
            .to_string()
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for (i, request) in all.iter().enumerate() {
        let (id, ts) = (header(i, "webhook-id"), header(i, "webhook-timestamp"));
        let sent: u64 = ts.parse().expect("seconds");
        assert!(sent.abs_diff(now) < 60, "timestamp {sent} is now ({now})");
        assert_eq!(
            header(i, "webhook-signature"),
            format!(
                "{} {}",
                expected(NEW, &id, &ts, &request.body),
                expected(OLD, &id, &ts, &request.body)
            )
        );
        // The BBB checksum is still there.
        request.assert_signed(&url);
    }
    assert_eq!(
        header(0, "webhook-id"),
        header(1, "webhook-id"),
        "a retry keeps its id"
    );
    assert_ne!(header(1, "webhook-id"), header(2, "webhook-id"));
    assert_eq!(
        header(1, "webhook-id"),
        format!("msg_1_{}", all[1].timestamp())
    );
    assert_eq!(user_name(&all[2].event()), "second");
    relay.stop().await;
}

#[tokio::test]
async fn without_a_secret_no_standard_headers_are_sent() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let rx = TestReceiver::start().await;
    relay.create_hook(&rx.url("/"), "").await;
    redis.publish(&user_joined("int-1", "u1", "first")).await;
    let got = rx.wait_delivered(1).await;
    for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        assert!(got[0].headers.get(name).is_none(), "{name}");
    }
}

/// A callback as a receiver got it: the URL as registered, the body, the checksum.
struct Got {
    registered: String,
    body: String,
    checksum: String,
}

async fn one_real_callback(redis: &TestRedis) -> Got {
    let relay = TestRelay::start(redis).await;
    let rx = TestReceiver::start().await;
    let registered = rx.url("/bbb?tenant=a%20b");
    relay.create_hook(&registered, "").await;
    redis.publish(&user_joined("int-1", "u1", "Zoë")).await;
    let got = rx.wait_delivered(1).await;
    relay.stop().await;
    let checksum = got[0]
        .uri
        .rsplit_once("checksum=")
        .map(|(_, c)| c.to_string())
        .expect("checksum");
    Got {
        registered,
        body: got[0].body.clone(),
        checksum,
    }
}

/// The code block of docs/integrators.md that starts with ```` ```lang ```` in its "Verifying
/// callbacks" section.
fn readme_snippet(lang: &str) -> String {
    doc_snippet("Verifying callbacks", lang)
}

/// The first code block that starts with ```` ```lang ```` in section `title` of
/// docs/integrators.md.
pub(crate) fn doc_snippet(title: &str, lang: &str) -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/integrators.md"))
            .expect("docs/integrators.md");
    let section = readme
        .split(&format!("\n## {title}"))
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the section");
    let fence = format!("```{lang}\n");
    let start = section.find(&fence).expect("the snippet") + fence.len();
    section[start..]
        .split("```")
        .next()
        .expect("its end")
        .to_string()
}

/// Runs a snippet with a harness that reads the callback from the environment and prints
/// `genuine` or `forged`. `None` when the language is not on this machine.
fn run_snippet(program: &str, ext: &str, code: &str, got: &Got, body: &str) -> Option<String> {
    if std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("{program} is not installed: its snippet in docs/integrators.md is not run");
        return None;
    }
    let dir = tempfile::tempdir().expect("dir");
    let body_file = dir.path().join("body");
    std::fs::write(&body_file, body).expect("body");
    let file = dir.path().join(format!("snippet.{ext}"));
    std::fs::write(&file, code).expect("snippet");
    let out = std::process::Command::new(program)
        .arg(&file)
        .env("CB_URL", &got.registered)
        .env("CB_BODY_FILE", &body_file)
        .env("CB_CHECKSUM", &got.checksum)
        .env("CB_SECRET", crate::support::SECRET)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[tokio::test]
async fn the_readme_snippets_verify_a_real_callback_and_refuse_a_forged_one() {
    let redis = TestRedis::start().await;
    let got = one_real_callback(&redis).await;
    let forged = got.body.replace("Zo", "Jo");
    assert_ne!(forged, got.body);
    let python = format!(
        "{}\nimport os\nbody = open(os.environ['CB_BODY_FILE'], 'rb').read()\n\
         ok = bbb_callback_is_genuine(os.environ['CB_URL'], body, os.environ['CB_CHECKSUM'], os.environ['CB_SECRET'])\n\
         print('genuine' if ok else 'forged')\n",
        readme_snippet("python")
    );
    let node = format!(
        "{}\nconst e = process.env;\nconst body = require('node:fs').readFileSync(e.CB_BODY_FILE);\n\
         console.log(bbbCallbackIsGenuine(e.CB_URL, body, e.CB_CHECKSUM, e.CB_SECRET) ? 'genuine' : 'forged');\n",
        readme_snippet("js")
    );
    let php = format!(
        "<?php\n{}\n$body = file_get_contents(getenv('CB_BODY_FILE'));\n\
         echo bbb_callback_is_genuine(getenv('CB_URL'), $body, getenv('CB_CHECKSUM'), getenv('CB_SECRET')) ? \"genuine\\n\" : \"forged\\n\";\n",
        readme_snippet("php")
    );
    let mut ran = 0;
    for (program, ext, code) in [
        ("python3", "py", &python),
        ("node", "js", &node),
        ("php", "php", &php),
    ] {
        if let Some(out) = run_snippet(program, ext, code, &got, &got.body) {
            assert_eq!(out, "genuine", "{program}");
            let out = run_snippet(program, ext, code, &got, &forged);
            assert_eq!(out.as_deref(), Some("forged"), "{program}");
            ran += 1;
        }
    }
    assert!(
        ran >= 2,
        "Python and Node are on every machine that runs this suite"
    );
}

#[tokio::test]
async fn the_receiver_example_verifies_callbacks_and_refuses_forged_ones() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let port = crate::support::free_port();
    let callback_url = format!("http://127.0.0.1:{port}/bbb");
    let example = crate::support::process::example("receiver");
    let mut child = tokio::process::Command::new(&example)
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--callback-url",
            &callback_url,
        ])
        .env("BBB_SECRET", crate::support::SECRET)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", example.display()));
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
        child.stdout.take().expect("stdout"),
    ));
    let mut next = async || {
        tokio::time::timeout(crate::support::PATIENCE, lines.next_line())
            .await
            .expect("a line in time")
            .expect("read")
            .expect("a line")
    };
    assert!(next().await.starts_with("listening on"));
    relay.create_hook(&callback_url, "").await;
    redis
        .publish(&crate::support::meeting_created("int-1", "ext-1"))
        .await;
    redis.publish(&user_joined("int-1", "u1", "first")).await;
    let first = next().await;
    assert!(
        first.starts_with("verified event meeting-created meeting ext-1 timestamp "),
        "{first}"
    );
    let second = next().await;
    assert!(
        second.starts_with("verified event user-joined meeting ext-1 timestamp "),
        "{second}"
    );
    let forged = reqwest::Client::new()
        .post(format!("{callback_url}?checksum={}", "0".repeat(40)))
        .body("event=%7B%7D&timestamp=1")
        .send()
        .await
        .expect("post");
    assert_eq!(forged.status().as_u16(), 401);
    assert_eq!(next().await, "refused: bad checksum");
    relay.stop().await;
}
