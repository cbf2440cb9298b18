//! The compose files of deploy/compose run as their users run them (docs/containers.md), with
//! podman-compose, their public images pointed by an override at stand-ins built here from
//! Debian's packages (scripts/stand_in_images.py; no registry is reachable); a callback
//! received through each.

use std::path::{Path, PathBuf};

use crate::containers::{event_id, probe, readyz_is};
use crate::support::{
    SECRET, TestReceiver, TestRedis, free_port, meeting_created,
    podman::{Compose, IMAGE, image_built, podman_ok, repo},
    relay::{create_hook, http_client},
    tls::TestCa,
    wait::until,
};

/// The stand-ins of the public images (scripts/test.sh builds them).
const STAND_INS: &str = "localhost/hookrelay-test";

/// Copies deploy/`from` (a folder of files and folders of files) to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("dir");
    for entry in std::fs::read_dir(from).expect("read").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Writes `text` at `path`, readable by the containers' users.
fn write_readable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
}

/// deploy/compose/`name` copied into a fresh folder (so that the test's secrets and
/// certificates stay out of the repository); the folder and its compose file.
fn compose_copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("dir");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    copy_tree(&repo().join("deploy/compose").join(name), dir.path());
    let file = dir.path().join("compose.yaml");
    (dir, file)
}

/// Only a test run with the images built: the relay's, and, for `stand_ins`, the stand-ins.
fn images_built(stand_ins: bool) -> bool {
    image_built(IMAGE) && (!stand_ins || image_built(&format!("{STAND_INS}/redis:latest")))
}

const ALLOW_LOOPBACK: &str = "HOOKRELAY_DELIVERY__SSRF__ALLOW_CIDRS: '[\"127.0.0.1/32\"]'";

#[tokio::test]
async fn the_bbb_server_compose_file_relays_with_the_secret_of_bbbs_own_configuration() {
    if !images_built(false) {
        return;
    }
    let bbb = TestRedis::start().await;
    let receiver = TestReceiver::start().await;
    let (dir, file) = compose_copy("bbb-server");
    // BBB's configuration, as /etc/bigbluebutton holds it: the secret is its securitySalt.
    let salt = "bbbSalt0123456789abcdefABCDEF";
    let bbb_config = dir.path().join("etc-bigbluebutton");
    write_readable(
        &bbb_config.join("bbb-web.properties"),
        &format!("securitySalt={salt}\n"),
    );
    let overrides = dir.path().join("test.yaml");
    std::fs::write(
        &overrides,
        format!(
            "services:\n  hookrelay:\n    image: {IMAGE}\n    environment:\n      {ALLOW_LOOPBACK}\n    volumes:\n      - {}:/etc/bigbluebutton:ro\n",
            bbb_config.display()
        ),
    )
    .expect("override");
    let api = format!("127.0.0.1:{}", free_port());
    let env = [
        ("HOOKRELAY_API_BIND", api.clone()),
        (
            "HOOKRELAY_METRICS_BIND",
            format!("127.0.0.1:{}", free_port()),
        ),
        ("HOOKRELAY_REDIS_URL", bbb.url()),
    ];
    let compose = Compose::up(dir.path(), &[file, overrides], &env);
    readyz_is(&api, 200).await;

    let url = receiver.url("/bbb-server");
    let query = format!("callbackURL={}", hookrelay::base::form::form_encode(&url));
    let checksum = hookrelay::base::digest::Algorithm::Sha1.hex_digest(&[
        b"hooks/create",
        query.as_bytes(),
        salt.as_bytes(),
    ]);
    let created = http_client()
        .get(format!(
            "http://{api}/bigbluebutton/api/hooks/create?{query}&checksum={checksum}"
        ))
        .send()
        .await
        .expect("answers")
        .text()
        .await
        .expect("body");
    assert!(
        created.contains("<returncode>SUCCESS</returncode>"),
        "{created}"
    );
    bbb.publish(&meeting_created("compose-meeting", "ext-c"))
        .await;
    let got = receiver.wait_delivered(1).await;
    let expected = hookrelay::callback_checksum(
        hookrelay::base::digest::Algorithm::Sha1,
        &url,
        &got[0].body,
        salt,
    );
    assert!(
        got[0].uri.ends_with(&format!("checksum={expected}")),
        "{}",
        got[0].uri
    );
    assert_eq!(event_id(&got[0]), "meeting-created");
    let logs = compose.logs("hookrelay");
    assert!(!logs.contains(salt), "the secret is never logged");
}

/// `the pool's files` with this test's ports, certificates and secret; returns the compose
/// files and the environment to run them with.
struct Pool {
    dir: tempfile::TempDir,
    files: Vec<PathBuf>,
    env: Vec<(&'static str, String)>,
    nginx: String,
    relays: [String; 2],
    store_port: u16,
    password: &'static str,
}

fn pool_files(ca: &TestCa) -> Pool {
    let (dir, file) = compose_copy("pool");
    let tls = dir.path().join("tls");
    for (from, to) in [
        (ca.ca_file(), "ca.crt"),
        (ca.server_cert(), "store.crt"),
        (ca.server_key(), "store.key"),
    ] {
        write_readable(&tls.join(to), &std::fs::read_to_string(from).expect("pem"));
    }
    write_readable(&dir.path().join("secrets/scalelite_secret"), SECRET);
    let relays = [free_port(), free_port()].map(|p| format!("127.0.0.1:{p}"));
    let nginx = format!("127.0.0.1:{}", free_port());
    // nginx's file with this test's ports for the relays and for itself.
    let conf_path = dir.path().join("nginx/hookrelay.conf");
    let conf = std::fs::read_to_string(&conf_path)
        .expect("nginx conf")
        .replace("127.0.0.1:3005", &relays[0])
        .replace("127.0.0.1:3006", &relays[1])
        .replace("listen 127.0.0.1:8093", &format!("listen {nginx}"));
    write_readable(&conf_path, &conf);
    let overrides = dir.path().join("test.yaml");
    std::fs::write(
        &overrides,
        format!(
            "services:\n  store:\n    image: {STAND_INS}/redis:latest\n  nginx:\n    image: {STAND_INS}/nginx:latest\n  relay-a:\n    image: {IMAGE}\n    environment:\n      {ALLOW_LOOPBACK}\n      HOOKRELAY_FLEET__LEASE_MS: '1000'\n  relay-b:\n    image: {IMAGE}\n    environment:\n      {ALLOW_LOOPBACK}\n      HOOKRELAY_FLEET__LEASE_MS: '1000'\n"
        ),
    )
    .expect("override");
    let store_port = free_port();
    let password = "a-password-of-the-test-pool";
    let env = vec![
        ("STORE_PASSWORD", password.to_string()),
        ("STORE_PORT", store_port.to_string()),
        ("RELAY_A_BIND", relays[0].clone()),
        ("RELAY_B_BIND", relays[1].clone()),
        ("RELAY_A_METRICS", format!("127.0.0.1:{}", free_port())),
        ("RELAY_B_METRICS", format!("127.0.0.1:{}", free_port())),
    ];
    Pool {
        dir,
        files: vec![file, overrides],
        env,
        nginx,
        relays,
        store_port,
        password,
    }
}

#[tokio::test]
async fn the_pool_and_edge_compose_files_relay_through_nginx_and_survive_a_relay_killed() {
    if !images_built(true) {
        return;
    }
    let ca = TestCa::new("compose-pool");
    let pool = pool_files(&ca);
    let _pool = Compose::up(pool.dir.path(), &pool.files, &pool.env);
    for relay in &pool.relays {
        let ready = readyz_is(relay, 200).await;
        assert_eq!(ready["bus"], "edges", "{ready}");
    }

    // The edge of one BBB server, from its own compose file.
    let bbb = TestRedis::start().await;
    let (edge_dir, edge_file) = compose_copy("edge");
    write_readable(
        &edge_dir.path().join("secrets/store_url"),
        &format!("rediss://:{}@localhost:{}", pool.password, pool.store_port),
    );
    write_readable(
        &edge_dir.path().join("pool-ca.pem"),
        &std::fs::read_to_string(ca.ca_file()).expect("ca"),
    );
    let edge_override = edge_dir.path().join("test.yaml");
    std::fs::write(
        &edge_override,
        format!("services:\n  edge:\n    image: {IMAGE}\n"),
    )
    .expect("override");
    let edge_env = [
        ("EDGE_SERVER", "bbb-compose".to_string()),
        ("HOOKRELAY_REDIS_URL", bbb.url()),
        (
            "HOOKRELAY_METRICS_BIND",
            format!("127.0.0.1:{}", free_port()),
        ),
    ];
    let edge = Compose::up(edge_dir.path(), &[edge_file, edge_override], &edge_env);
    until("the edge subscribed", async || {
        match bbb.has_subscriber().await {
            true => Ok(()),
            false => Err(edge.logs("edge")),
        }
    })
    .await;

    // A hook through nginx (Scalelite's address for the hooks API), then a bus message.
    let receiver = TestReceiver::start().await;
    let url = receiver.url("/pool");
    let nginx = pool.nginx.parse().expect("addr");
    until("nginx passes the hooks API", async || {
        match http_client()
            .get(format!(
                "http://{}/bigbluebutton/api/hooks/ping",
                pool.nginx
            ))
            .send()
            .await
        {
            Ok(r) if r.status() == 200 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    create_hook(&http_client(), nginx, &url, "").await;
    bbb.publish(&meeting_created("pool-meeting-1", "ext-p1"))
        .await;
    let got = receiver.wait_delivered(1).await;
    got[0].assert_signed(&url);
    assert_eq!(got[0].headers["x-hookrelay-domain"], "bbb-compose");

    // One relay killed: the other goes on (the fleet), and nginx sends the API there.
    podman_ok(&["kill", &_pool.container("relay-a")]);
    bbb.publish(&meeting_created("pool-meeting-2", "ext-p2"))
        .await;
    let got = receiver.wait_delivered(2).await;
    assert_eq!(
        got.iter()
            .filter(|r| r.body.contains("pool-meeting-2"))
            .count(),
        1
    );
    let listed = crate::support::relay::signed_call(
        &http_client(),
        nginx,
        "list",
        "",
        hookrelay::base::digest::Algorithm::Sha1,
        SECRET,
    )
    .await;
    assert!(listed.contains(&url), "{listed}");
    assert!(
        probe(&pool.relays[0], "/healthz").await.is_none(),
        "relay-a is gone"
    );
}
