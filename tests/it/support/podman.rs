//! Containers for the tests (docs/containers.md): podman with the project's settings
//! (scripts/podman.conf), the images scripts/image.sh built from the tests' own build
//! (scripts/test.sh tags them `hookrelay-test`), containers and compose projects removed when
//! dropped.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::atomic::{AtomicU32, Ordering},
};

/// The amd64 image the tests run (scripts/test.sh: `scripts/image.sh --profile dev --tag
/// hookrelay-test`).
pub(crate) const IMAGE: &str = "localhost/hookrelay-test:latest";
/// The arm64 image (`--arch arm64`).
pub(crate) const IMAGE_ARM64: &str = "localhost/hookrelay-test:latest-arm64";

/// The repository's root.
pub(crate) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `podman` with the project's settings.
pub(crate) fn podman() -> Command {
    let mut c = Command::new("podman");
    c.env("CONTAINERS_CONF", repo().join("scripts/podman.conf"));
    c
}

/// Runs `command`; its output.
pub(crate) fn output(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"))
}

/// Runs podman with `args`, which must succeed; its standard output.
pub(crate) fn podman_ok(args: &[&str]) -> String {
    let out = output(podman().args(args));
    assert!(
        out.status.success(),
        "podman {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether `image` was built; when it was not, a test skips (says so) unless
/// `TEST_REQUIRE_PODMAN` is set (scripts/test.sh sets it), where it fails.
pub(crate) fn image_built(image: &str) -> bool {
    let there = podman()
        .args(["image", "exists", image])
        .status()
        .is_ok_and(|s| s.success());
    if !there {
        assert!(
            std::env::var_os("TEST_REQUIRE_PODMAN").is_none(),
            "{image} is not built: scripts/test.sh builds it with scripts/image.sh"
        );
        eprintln!(
            "skipped: {image} is not built (scripts/image.sh --profile dev --tag hookrelay-test)"
        );
    }
    there
}

/// A name no other test's container or project has.
pub(crate) fn unique(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A container started in the background, removed when dropped.
pub(crate) struct Container {
    pub name: String,
}

impl Container {
    /// `podman run -d --network host <options> IMAGE <args>`.
    pub(crate) fn start(options: &[&str], image: &str, args: &[&str]) -> Container {
        let name = unique("hookrelay-it");
        let mut all = vec!["run", "-d", "--name", &name, "--network", "host"];
        all.extend_from_slice(options);
        all.push(image);
        all.extend_from_slice(args);
        podman_ok(&all);
        Container { name }
    }

    /// What the container wrote on stdout and stderr so far.
    pub(crate) fn logs(&self) -> String {
        let out = output(podman().args(["logs", &self.name]));
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    }

    /// A field of `podman inspect` (a Go template, e.g. `{{.State.ExitCode}}`).
    pub(crate) fn inspect(&self, format: &str) -> String {
        podman_ok(&["inspect", "--format", format, &self.name])
            .trim()
            .to_string()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman().args(["rm", "-f", "-t", "0", &self.name]).output();
    }
}

/// A compose project (podman-compose) started from `files` in `dir`, taken down with its
/// volumes when dropped.
pub(crate) struct Compose {
    pub project: String,
    dir: PathBuf,
    files: Vec<PathBuf>,
    env: Vec<(String, String)>,
}

impl Compose {
    /// `podman-compose -p <unique> -f FILE... up -d`, in `dir`, with `env`.
    pub(crate) fn up(dir: &Path, files: &[PathBuf], env: &[(&str, String)]) -> Compose {
        let compose = Compose {
            project: unique("hookrelay-it"),
            dir: dir.to_path_buf(),
            files: files.to_vec(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        };
        let out = output(&mut compose.command(&["up", "-d"]));
        assert!(
            out.status.success(),
            "podman-compose up: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        compose
    }

    fn command(&self, args: &[&str]) -> Command {
        // scripts/ensure-podman.sh installs it from PyPI (Debian 12's cannot do host networking).
        let mut c = Command::new(
            super::tool_dir("HOOKRELAY_COMPOSE_VENV", "podman-compose").join("bin/podman-compose"),
        );
        c.current_dir(&self.dir)
            .env("CONTAINERS_CONF", repo().join("scripts/podman.conf"))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(["-p", &self.project]);
        for f in &self.files {
            c.arg("-f").arg(f);
        }
        c.args(args);
        c
    }

    /// The container of `service` (podman-compose names it `<project>_<service>_1`).
    pub(crate) fn container(&self, service: &str) -> String {
        format!("{}_{service}_1", self.project)
    }

    /// What `service`'s container logged.
    pub(crate) fn logs(&self, service: &str) -> String {
        let out = output(podman().args(["logs", &self.container(service)]));
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    }
}

impl Drop for Compose {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // A failed test says what its containers were doing: which ran, which exited, and
            // the end of what each logged.
            if let Ok(ps) = self.command(&["ps"]).output() {
                eprintln!(
                    "podman-compose ps:\n{}",
                    String::from_utf8_lossy(&ps.stdout)
                );
            }
            let listed = podman()
                .args(["ps", "-a", "--format", "{{.Names}}"])
                .args([
                    "--filter",
                    &format!("label=io.podman.compose.project={}", self.project),
                ])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            for name in listed.lines() {
                if let Ok(out) = podman().args(["logs", "--tail", "30", name]).output() {
                    eprintln!(
                        "{name}, its last lines:\n{}{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            }
        }
        let _ = self.command(&["down", "-v", "-t", "0"]).output();
    }
}

/// The files of `image` (exported from a container made of it, never started) under `dir`.
pub(crate) fn export_image(image: &str, dir: &Path) {
    let name = unique("hookrelay-export");
    podman_ok(&["create", "--name", &name, image]);
    let tar = dir.join("image.tar");
    let exported = output(podman().args(["export", "-o"]).arg(&tar).arg(&name));
    let _ = podman().args(["rm", "-f", &name]).output();
    assert!(exported.status.success(), "podman export");
    let untar = output(
        Command::new("tar")
            .args(["-x", "--no-same-owner", "-f"])
            .arg(&tar)
            .arg("-C")
            .arg(dir),
    );
    assert!(
        untar.status.success(),
        "tar: {}",
        String::from_utf8_lossy(&untar.stderr)
    );
    let _ = std::fs::remove_file(tar);
}
