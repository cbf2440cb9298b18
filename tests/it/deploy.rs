//! The files of deploy/ run as their users run them (docs/containers.md): each compose file
//! with podman-compose, its public images pointed by an override at stand-ins built here from
//! Debian's packages (scripts/stand_in_images.py; no registry is reachable), and the
//! Kubernetes manifests with `podman play kube`; a callback received through each.

use std::path::{Path, PathBuf};

use crate::containers::{event_id, probe, readyz_is};
use crate::support::{
    SECRET, TestReceiver, TestRedis,
    edge::TestEdge,
    free_port, meeting_created,
    podman::{Compose, IMAGE, image_built, output, podman, podman_ok, repo, unique},
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

/// The keys of deploy/kubernetes/secret.yaml (its `stringData`).
fn secret_keys() -> Vec<String> {
    let text =
        std::fs::read_to_string(repo().join("deploy/kubernetes/secret.yaml")).expect("secret.yaml");
    let secret: serde_json::Value = serde_saphyr::from_str(&text).expect("YAML");
    secret["stringData"]
        .as_object()
        .expect("stringData")
        .keys()
        .cloned()
        .collect()
}

/// The podman secret `name` with secret.yaml's keys and this test's values. Made with `podman
/// secret create` rather than played from secret.yaml: podman 4.3 (Debian 12's) writes a
/// played Secret's `data` into a secret volume still base64-encoded, and its `stringData` not
/// at all (fixed in podman 4.4); it reads a secret it did not make as it should.
fn create_secret(dir: &Path, name: &str, values: &[(&str, String)]) {
    let mut yaml = format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\ndata:\n");
    for key in secret_keys() {
        let value = values
            .iter()
            .find(|(k, _)| *k == key)
            .unwrap_or_else(|| panic!("secret.yaml's key {key} has no value in the test"));
        yaml.push_str(&format!("  {key}: '{}'\n", value.1));
    }
    let file = dir.join("secret.yaml");
    std::fs::write(&file, yaml).expect("secret");
    let out = output(podman().args(["secret", "create", name]).arg(&file));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// deploy/kubernetes's Deployment and Service, as one file for `podman play kube` with host
/// networking: one instance per Deployment (two Deployments make the fleet: two instances on
/// one host cannot share a port), this test's names, secret and ports; the declared container
/// ports go (podman maps none with host networking) and the probes name the port by number.
fn kube_file(dir: &Path, instance: &str, api: &str, secret: &str) -> PathBuf {
    let read = |f: &str| {
        std::fs::read_to_string(repo().join("deploy/kubernetes").join(f)).expect("manifest")
    };
    let port = api.rsplit(':').next().expect("port");
    let volume_suffix = unique("v");
    let mut deployment = read("deployment.yaml")
        .replace("  name: hookrelay\n", &format!("  name: {instance}\n"))
        .replace("replicas: 2", "replicas: 1")
        .replace("secretName: hookrelay", &format!("secretName: {secret}"))
        .replace("image: hookrelay:0.1.0", &format!("image: {IMAGE}"))
        .replace("value: 0.0.0.0:3005", &format!("value: {api}"))
        .replace(
            "value: 0.0.0.0:3004",
            &format!("value: 127.0.0.1:{}", free_port()),
        )
        .replace("port: api", &format!("port: {port}"))
        .replace("name: cache", &format!("name: cache-{volume_suffix}"))
        .replace("name: tmp", &format!("name: tmp-{volume_suffix}"));
    let ports_start = deployment.find("          ports:\n").expect("ports");
    let ports_end = deployment[ports_start..]
        .find("          livenessProbe")
        .expect("probe")
        + ports_start;
    deployment.replace_range(ports_start..ports_end, "");
    // The receivers of this test are on loopback.
    deployment = deployment.replace(
        "          env:\n",
        "          env:\n            - name: HOOKRELAY_DELIVERY__SSRF__ALLOW_CIDRS\n              value: '[\"127.0.0.1/32\"]'\n",
    );
    let all = format!("{deployment}---\n{}", read("service.yaml"));
    let path = dir.join(format!("{instance}.yaml"));
    std::fs::write(&path, all).expect("manifest");
    path
}

/// Pods, volumes and secret of `files`, removed when dropped.
struct Played(Vec<PathBuf>, String);

impl Drop for Played {
    fn drop(&mut self) {
        for f in &self.0 {
            let _ = podman().args(["play", "kube", "--down"]).arg(f).output();
            if let Ok(text) = std::fs::read_to_string(f) {
                for name in text
                    .split("name: ")
                    .skip(1)
                    .filter_map(|s| s.lines().next())
                {
                    if name.starts_with("cache-") || name.starts_with("tmp-") {
                        let _ = podman().args(["volume", "rm", "-f", name]).output();
                    }
                }
            }
        }
        // The secret, and the volume podman made of it.
        let _ = podman().args(["secret", "rm", &self.1]).output();
        let _ = podman().args(["volume", "rm", "-f", &self.1]).output();
    }
}

#[tokio::test]
async fn the_kubernetes_manifests_run_a_fleet_of_two_that_relays_a_pools_events() {
    if !images_built(false) {
        return;
    }
    let store = TestRedis::start().await;
    let bbb = TestRedis::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let secret = unique("hookrelay-it-secret");
    let apis = [free_port(), free_port()].map(|p| format!("127.0.0.1:{p}"));
    let names = ["a", "b"].map(|i| unique(&format!("hookrelay-it-{i}")));
    let files: Vec<PathBuf> = names
        .iter()
        .zip(&apis)
        .map(|(name, api)| kube_file(dir.path(), name, api, &secret))
        .collect();
    create_secret(
        dir.path(),
        &secret,
        &[("bbb_secret", SECRET.into()), ("store_url", store.url())],
    );
    let played = Played(files.clone(), secret);
    for f in &played.0 {
        let out = output(podman().args(["play", "kube", "--network", "host"]).arg(f));
        assert!(
            out.status.success(),
            "play kube: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (api, name) in apis.iter().zip(&names) {
        // The Deployment's pod and container, as podman names them.
        let container = format!("{name}-pod-0-hookrelay");
        let ready = until("the instance ready", async || {
            match probe(api, "/readyz").await {
                Some((200, v)) => Ok(v),
                _ => {
                    let logs = output(podman().args(["logs", &container]));
                    Err(String::from_utf8_lossy(&logs.stdout).into_owned()
                        + &String::from_utf8_lossy(&logs.stderr))
                }
            }
        })
        .await;
        assert_eq!(ready["bus"], "edges", "{ready}");
    }
    let edge = TestEdge::start(&bbb, "bbb-k8s", &store.url(), "").await;
    let receiver = TestReceiver::start().await;
    let url = receiver.url("/k8s");
    create_hook(&http_client(), apis[1].parse().expect("addr"), &url, "").await;
    bbb.publish(&meeting_created("k8s-meeting", "ext-k")).await;
    let got = receiver.wait_delivered(1).await;
    got[0].assert_signed(&url);
    assert_eq!(got[0].headers["x-hookrelay-domain"], "bbb-k8s");
    edge.terminate().await;
}
