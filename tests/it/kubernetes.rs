//! The Kubernetes manifests of deploy/kubernetes run with `podman play kube` (docs/containers.md):
//! two instances as a fleet, a pool's relays reading an edge's bus from their store, a callback
//! received through them.

use std::path::{Path, PathBuf};

use crate::containers::probe;
use crate::support::{
    SECRET, TestReceiver, TestRedis,
    edge::TestEdge,
    free_port, meeting_created,
    podman::{IMAGE, image_built, output, podman, repo, unique},
    relay::{create_hook, http_client},
    wait::until,
};

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
        // A block scalar: a PEM's lines stay lines (the file's last line end is dropped on read).
        yaml.push_str(&format!("  {key}: |\n"));
        for line in value.1.lines() {
            yaml.push_str(&format!("    {line}\n"));
        }
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
    // The container's `ports:` list, and nothing else.
    let lines: Vec<&str> = deployment.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "          ports:")
        .expect("ports");
    let end = (at + 1..lines.len())
        .find(|&i| !lines[i].starts_with("            "))
        .expect("after the ports");
    let mut kept = lines[..at].to_vec();
    kept.extend_from_slice(&lines[end..]);
    deployment = kept.join("\n") + "\n";
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
    if !image_built(IMAGE) {
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
    let ca = crate::support::tls::TestCa::new("k8s-store");
    let ca_pem = std::fs::read_to_string(ca.ca_file()).expect("ca");
    create_secret(
        dir.path(),
        &secret,
        &[
            ("bbb_secret", SECRET.into()),
            ("store_url", store.url()),
            ("store_ca", ca_pem),
        ],
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
