//! What the container image holds (scripts/image.sh, scripts/image_rootfs.py): its settings
//! (user, entry point, port, JSON logs), its files with their owners and modes, its bill of
//! materials against Cargo.lock, and the same archive from the same inputs.

use std::process::Command;

use crate::support::podman::{IMAGE, export_image, image_built, output, podman, podman_ok};

/// `tar -tv`'s line for `path` in the image's archive, as "mode owner/group".
fn listed(listing: &str, path: &str) -> String {
    let line = listing
        .lines()
        .find(|l| l.ends_with(&format!(" {path}")))
        .unwrap_or_else(|| panic!("{path} not in the image"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    format!("{} {}", fields[0], fields[1])
}

#[tokio::test]
async fn the_image_holds_the_relay_its_libraries_roots_plugins_schemas_and_bill_of_materials() {
    if !image_built(IMAGE) {
        return;
    }
    let config: serde_json::Value = serde_json::from_str(&podman_ok(&[
        "image",
        "inspect",
        "--format",
        "{{json .Config}}",
        IMAGE,
    ]))
    .expect("JSON");
    assert_eq!(config["User"], "65532:65532");
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/bin/hookrelay"])
    );
    assert_eq!(config["Cmd"], serde_json::json!(["serve"]));
    assert!(config["ExposedPorts"].get("3005/tcp").is_some(), "{config}");
    let env = config["Env"].to_string();
    assert!(env.contains("HOOKRELAY_LOG_FORMAT=json"), "{env}");

    // Its files, with owners and modes, from the image's own archive.
    let name = crate::support::podman::unique("hookrelay-list");
    podman_ok(&["create", "--name", &name, IMAGE]);
    let dir = tempfile::tempdir().expect("dir");
    let tar = dir.path().join("image.tar");
    let exported = output(podman().args(["export", "-o"]).arg(&tar).arg(&name));
    let _ = podman().args(["rm", "-f", &name]).output();
    assert!(exported.status.success());
    let listing = output(
        Command::new("tar")
            .args(["--numeric-owner", "-tvf"])
            .arg(&tar),
    );
    let listing = String::from_utf8_lossy(&listing.stdout).into_owned();
    assert_eq!(listed(&listing, "usr/bin/hookrelay"), "-rwxr-xr-x 0/0");
    assert_eq!(
        listed(&listing, "etc/hookrelay/hookrelay.toml"),
        "-rw-r----- 0/65532"
    );
    assert_eq!(listed(&listing, "etc/hookrelay/"), "drwxr-x--- 0/65532");
    assert_eq!(
        listed(&listing, "var/cache/hookrelay/"),
        "drwx------ 65532/65532"
    );
    for path in [
        "etc/ssl/certs/ca-certificates.crt",
        "usr/share/hookrelay/plugins/rules.wasm",
        "usr/share/hookrelay/plugins/event-filter.wasm",
        "usr/share/hookrelay/schemas/meeting-created.schema.json",
        "usr/share/hookrelay/wit/relay.wit",
        "lib/x86_64-linux-gnu/libc.so.6",
        "lib64/ld-linux-x86-64.so.2",
        "usr/share/doc/hookrelay/sbom.cdx.json",
    ] {
        assert!(listed(&listing, path).starts_with('-'), "{path}");
    }
    // Beside the relay, little: the release binary is what BENCHMARKS.md's image size is made
    // of (scripts/image.sh refuses a release image over 40 MiB). The bill of materials grows
    // with the crates compiled in (the OTLP exporter's took it past 4.5 MiB in all).
    let beside: u64 = listing
        .lines()
        .filter(|l| !l.ends_with(" usr/bin/hookrelay"))
        .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok())
        .sum();
    assert!(
        beside < 5 << 20,
        "{beside} bytes beside the relay, over 5 MiB"
    );
    // Nothing of systemd's or BBB's nginx's (the host's, not the container's).
    assert!(
        !listing.contains("systemd") && !listing.contains("etc/bigbluebutton"),
        "{listing}"
    );

    // The bill of materials: CycloneDX, the crates compiled in at Cargo.lock's versions, and
    // the Debian packages whose files the image carries.
    export_image(IMAGE, dir.path());
    let sbom: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("usr/share/doc/hookrelay/sbom.cdx.json")).expect("sbom"),
    )
    .expect("JSON");
    assert_eq!(sbom["bomFormat"], "CycloneDX");
    let components = sbom["components"].as_array().expect("components");
    let version_of = |name: &str| {
        components
            .iter()
            .find(|c| c["name"] == name)
            .and_then(|c| c["version"].as_str())
            .unwrap_or_else(|| panic!("{name} not in the bill of materials"))
            .to_string()
    };
    let lock =
        std::fs::read_to_string(crate::support::podman::repo().join("Cargo.lock")).expect("lock");
    for krate in ["wasmtime", "tokio", "rustls", "redis"] {
        let locked = lock
            .split("[[package]]")
            .find(|p| p.contains(&format!("name = \"{krate}\"\n")))
            .and_then(|p| p.split("version = \"").nth(1))
            .and_then(|v| v.split('"').next())
            .expect("locked");
        assert_eq!(version_of(krate), locked, "{krate}");
    }
    assert!(!version_of("libc6").is_empty());
    assert!(!version_of("ca-certificates").is_empty());
    assert!(components.len() > 100, "{} components", components.len());
}

#[test]
fn the_images_file_system_is_the_same_archive_from_the_same_inputs() {
    // Owners, modes and times are set by the script, not taken from the machine: two runs
    // (with the files' own times changed between them) give the same bytes.
    let dir = tempfile::tempdir().expect("dir");
    let sbom = dir.path().join("sbom.json");
    std::fs::write(&sbom, "{}").expect("sbom");
    let archive = |name: &str| {
        let out = dir.path().join(name);
        let made = output(
            Command::new("python3")
                .current_dir(crate::support::podman::repo())
                .arg("scripts/image_rootfs.py")
                .arg("--binary")
                .arg(crate::support::process::binary())
                .args([
                    "--libdir",
                    "/lib/x86_64-linux-gnu",
                    "--multiarch",
                    "x86_64-linux-gnu",
                ])
                .args(["--strip", "strip", "--mtime", "1700000000", "--sbom"])
                .arg(&sbom)
                .arg("--out")
                .arg(&out),
        );
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
        std::fs::read(out).expect("archive")
    };
    let first = archive("a.tar");
    let touched = output(Command::new("touch").arg(&sbom));
    assert!(touched.status.success());
    assert!(first == archive("b.tar"), "two builds differ");
}
