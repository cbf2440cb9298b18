//! The container image (scripts/image.sh, Containerfile), run with podman as docs/containers.md
//! says: a hook registered through it and a signed callback from a BBB bus message, the health
//! endpoints before and after the store goes away, a clean stop on SIGTERM, an unprivileged
//! user, JSON log lines, secrets from files, and bad secrets refused in one line; the arm64
//! build's binary under qemu. What the image holds: image.rs.

use std::{path::Path, process::Command, time::Duration};

use crate::support::{
    SECRET, TestReceiver, TestRedis, free_port, meeting_created,
    podman::{Container, IMAGE, IMAGE_ARM64, export_image, image_built, output, podman, podman_ok},
    relay::{create_hook, http_client},
    wait::until,
};

/// `GET http://{api}{path}`: the status and the one line of JSON.
pub(crate) async fn probe(api: &str, path: &str) -> Option<(u16, serde_json::Value)> {
    let r = http_client()
        .get(format!("http://{api}{path}"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .ok()?;
    let status = r.status().as_u16();
    let text = r.text().await.ok()?;
    assert_eq!(text.lines().count(), 1, "one line: {text}");
    Some((status, serde_json::from_str(&text).expect("JSON")))
}

/// Waits until `/readyz` at `api` answers `status`; its JSON.
pub(crate) async fn readyz_is(api: &str, status: u16) -> serde_json::Value {
    until(
        &format!("/readyz answers {status}"),
        async || match probe(api, "/readyz").await {
            Some((s, v)) if s == status => Ok(v),
            other => Err(other),
        },
    )
    .await
}

/// The event id (`data.id`) of a callback in BBB's form.
pub(crate) fn event_id(callback: &crate::support::receiver::Received) -> String {
    let event: serde_json::Value = serde_json::from_str(&callback.event()).expect("event JSON");
    event["data"]["id"].as_str().unwrap_or_default().to_string()
}

/// A file holding `text`, readable by the container's user, under `dir`.
fn readable_file(dir: &Path, name: &str, text: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    path.display().to_string()
}

#[tokio::test]
async fn the_image_relays_a_signed_callback_reports_health_and_stops_cleanly_on_sigterm() {
    if !image_built(IMAGE) {
        return;
    }
    let mut redis = TestRedis::start_appendonly().await;
    let receiver = TestReceiver::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let secret = readable_file(dir.path(), "bbb_secret", &format!("{SECRET}\n"));
    let api = format!("127.0.0.1:{}", free_port());
    let env = [
        format!("HOOKRELAY_REDIS__URL={}", redis.url()),
        format!("HOOKRELAY_API__BIND={api}"),
        format!("HOOKRELAY_METRICS__BIND=127.0.0.1:{}", free_port()),
        "HOOKRELAY_BBB__SECRET_FILE=/run/secrets/bbb_secret".into(),
        "HOOKRELAY_DELIVERY__SSRF__ALLOW_CIDRS=[\"127.0.0.1/32\"]".into(),
    ];
    let mount = format!("{secret}:/run/secrets/bbb_secret:ro");
    let mut options = vec!["-v", &mount];
    for e in &env {
        options.extend(["-e", e]);
    }
    let relay = Container::start(&options, IMAGE, &[]);

    let ready = readyz_is(&api, 200).await;
    assert_eq!(
        ready,
        serde_json::json!({"ready": true, "bus": "subscribed", "store": "reachable", "hooks": "loaded"})
    );
    let http = http_client();
    let url = receiver.url("/hooks");
    create_hook(&http, api.parse().expect("addr"), &url, "").await;
    redis
        .publish(&meeting_created("meeting-in-a-box", "ext-1"))
        .await;
    let got = receiver.wait_delivered(1).await;
    got[0].assert_signed(&url);
    assert_eq!(event_id(&got[0]), "meeting-created");

    // Not root: the process runs as the image's user, 65532 (its status, read on the host).
    let pid = relay.inspect("{{.State.Pid}}");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let ids = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert_eq!(ids("Uid:"), ["65532"; 4], "{status}");
    assert_eq!(ids("Gid:"), ["65532"; 4], "{status}");
    assert_eq!(
        podman_ok(&["top", &relay.name, "user"])
            .lines()
            .nth(1)
            .map(str::trim),
        Some("hookrelay")
    );

    // The store (here also the bus) goes away: not ready, still alive; back, ready again.
    redis.stop().await;
    let down = readyz_is(&api, 503).await;
    assert_eq!(down["store"], "unreachable", "{down}");
    let (status, alive) = probe(&api, "/healthz").await.expect("healthz");
    assert_eq!((status, &alive["alive"]), (200, &true.into()), "{alive}");
    let health = |ready: bool| {
        let mut args = vec!["exec", relay.name.as_str(), "/usr/bin/hookrelay", "health"];
        if ready {
            args.push("--ready");
        }
        output(podman().args(&args))
    };
    let not_ready = health(true);
    assert_eq!(
        not_ready.status.code(),
        Some(1),
        "the health check fails while not ready"
    );
    assert!(String::from_utf8_lossy(&not_ready.stdout).contains("\"ready\":false"));
    assert!(health(false).status.success(), "alive all along");
    redis.start_again().await;
    readyz_is(&api, 200).await;
    let out = output(podman().args([
        "exec",
        &relay.name,
        "/usr/bin/hookrelay",
        "health",
        "--ready",
    ]));
    assert!(
        out.status.success(),
        "hookrelay health --ready in the container"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"ready\":true"));

    // SIGTERM (podman stop): the relay stops by itself, well before the 30 s of SIGKILL.
    podman_ok(&["stop", "-t", "30", &relay.name]);
    assert_eq!(
        relay.inspect("{{.State.ExitCode}}"),
        "0",
        "{}",
        relay.logs()
    );
    // Its log: JSON lines on stdout, the last saying it stopped; never the secret.
    let logs = relay.logs();
    let lines: Vec<serde_json::Value> = logs
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect();
    assert!(lines.len() > 2, "{logs}");
    assert_eq!(
        lines.last().expect("a line")["fields"]["message"],
        "stopped",
        "{logs}"
    );
    assert!(!logs.contains(SECRET));
}

#[tokio::test]
async fn the_image_without_a_secret_with_the_examples_or_an_unreadable_file_exits_in_one_line() {
    if !image_built(IMAGE) {
        return;
    }
    let run = |env: &[&str]| {
        let mut args = vec!["run", "--rm", "--network", "host"];
        for e in env {
            args.extend(["-e", e]);
        }
        args.push(IMAGE);
        let out = output(podman().args(&args));
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        (out.status.code(), err)
    };
    // The image's configuration is the example's: its placeholder is refused.
    let (code, err) = run(&[]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("bbb.secret") && err.contains("placeholder"),
        "{err}"
    );
    let (code, err) = run(&["HOOKRELAY_BBB__SECRET="]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("bbb.secret") && err.contains("must be set"),
        "{err}"
    );
    let (code, err) = run(&["HOOKRELAY_BBB__SECRET_FILE=/run/secrets/absent"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("bbb.secret")
            && err.contains("HOOKRELAY_BBB__SECRET_FILE")
            && err.contains("/run/secrets/absent"),
        "{err}"
    );
}

#[tokio::test]
async fn the_image_takes_bbbs_secret_from_its_configuration_mounted_read_only() {
    if !image_built(IMAGE) {
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let salt = "0a1b2c3d4e5f60718293a4b5c6d7e8f9aabbccdd";
    readable_file(
        dir.path(),
        "bbb-web.properties",
        &format!("securitySalt={salt}\nbigbluebutton.web.serverURL=https://bbb.example.org\n"),
    );
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let mount = format!("{}:/etc/bigbluebutton:ro", dir.path().display());
    let out = output(podman().args([
        "run",
        "--rm",
        "--network",
        "host",
        "-v",
        &mount,
        IMAGE,
        "check-config",
    ]));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("bbb-web's /etc/bigbluebutton/bbb-web.properties (securitySalt)"),
        "{text}"
    );
    assert!(
        text.contains("https://bbb.example.org/bigbluebutton/api"),
        "{text}"
    );
    assert!(!text.contains(salt), "the secret is never shown: {text}");
}

#[tokio::test]
async fn the_arm64_images_relay_runs_under_qemu() {
    if !image_built(IMAGE_ARM64) {
        return;
    }
    let arch = podman_ok(&[
        "image",
        "inspect",
        "--format",
        "{{.Architecture}}",
        IMAGE_ARM64,
    ]);
    assert_eq!(arch.trim(), "arm64");
    let dir = tempfile::tempdir().expect("dir");
    export_image(IMAGE_ARM64, dir.path());
    let binary = dir.path().join("usr/bin/hookrelay");
    let header = output(Command::new("readelf").arg("-h").arg(&binary));
    assert!(String::from_utf8_lossy(&header.stdout).contains("AArch64"));
    // The image's own loader and libraries, under Debian's qemu-user-static.
    let out = output(
        Command::new("qemu-aarch64-static")
            .arg("-L")
            .arg(dir.path())
            .arg(&binary)
            .arg("--version"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("hookrelay {}", env!("CARGO_PKG_VERSION"))
    );
}
