//! `hookrelay plugin build`: builds a project into `build/NAME.wasm` with pinned tools,
//! installing them from the registries when missing: cargo's `wasm32-wasip2` target (rustup),
//! componentize-py (PyPI, in a virtual environment of its own) and jco with componentize-js
//! (npm, into the project's `node_modules` from its lock file).

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use super::{AuthoringError, Lang, Project};

/// The componentize-py release Python projects are built with (JavaScript projects pin jco
/// and componentize-js in their package.json and package-lock.json).
pub const COMPONENTIZE_PY: &str = "0.25.1";

/// Builds `project` and returns the path of its component.
///
/// # Errors
/// A tool that is missing and cannot be installed, or a build that fails (its output has
/// been shown).
pub fn build(project: &Project) -> Result<PathBuf, AuthoringError> {
    let out = project.build_dir();
    std::fs::create_dir_all(&out).map_err(|e| AuthoringError::io(&out, e))?;
    match project.lang {
        Lang::Rust => build_rust(project)?,
        Lang::Python => build_python(project)?,
        Lang::Js => build_js(project)?,
    }
    project.staged()?;
    Ok(project.wasm())
}

fn build_rust(project: &Project) -> Result<(), AuthoringError> {
    ensure_wasip2_target()?;
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .current_dir(&project.dir)
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .arg("--message-format=json-render-diagnostics");
    if project.dir.join("Cargo.lock").is_file() {
        cargo.arg("--locked");
    }
    let output = cargo
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| missing("cargo", &e, "install Rust with rustup: https://rustup.rs"))?;
    if !output.status.success() {
        return Err(AuthoringError::Build(format!(
            "cargo build failed ({})",
            output.status
        )));
    }
    // The component is the artifact cargo names, wherever the target folder is.
    let wasm = String::from_utf8_lossy(&output.stdout)
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter_map(|m| {
            m["filenames"].as_array().and_then(|f| {
                f.iter()
                    .filter_map(|f| f.as_str())
                    .find(|f| f.ends_with(".wasm"))
                    .map(PathBuf::from)
            })
        })
        .next()
        .ok_or_else(|| {
            AuthoringError::Build(
                "cargo built no .wasm: is the crate a cdylib (crate-type = [\"cdylib\"])?".into(),
            )
        })?;
    copy(&wasm, &project.wasm())
}

fn ensure_wasip2_target() -> Result<(), AuthoringError> {
    let Ok(list) = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
    else {
        // No rustup: a toolchain installed otherwise may still have the target.
        return Ok(());
    };
    if String::from_utf8_lossy(&list.stdout)
        .lines()
        .any(|l| l.trim() == "wasm32-wasip2")
    {
        return Ok(());
    }
    eprintln!("hookrelay: installing the wasm32-wasip2 target (rustup target add wasm32-wasip2)");
    run(
        Command::new("rustup").args(["target", "add", "wasm32-wasip2"]),
        "rustup target add wasm32-wasip2",
    )
}

fn build_python(project: &Project) -> Result<(), AuthoringError> {
    let venv = toolchains()?.join(format!("componentize-py-{COMPONENTIZE_PY}"));
    installed_once(&venv, |dir| {
        eprintln!(
            "hookrelay: installing componentize-py {COMPONENTIZE_PY} from PyPI into {}",
            dir.display()
        );
        let python = std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into());
        Command::new(&python)
            .args(["-m", "venv"])
            .arg(dir)
            .status()
            .map_err(|e| missing("python3", &e, "Debian: apt install python3 python3-venv"))
            .and_then(|s| check_status(s, "python3 -m venv"))?;
        run(
            Command::new(dir.join("bin/pip")).args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                &format!("componentize-py=={COMPONENTIZE_PY}"),
            ]),
            "pip install componentize-py",
        )
    })?;
    run(
        Command::new(venv.join("bin/componentize-py"))
            .current_dir(&project.dir)
            .args([
                "--wit-path",
                "wit",
                "--world",
                "plugin",
                "componentize",
                "app",
                "-o",
            ])
            .arg(project.wasm()),
        "componentize-py",
    )
}

fn build_js(project: &Project) -> Result<(), AuthoringError> {
    let jco = project.dir.join("node_modules/.bin/jco");
    if !jco.exists() {
        let install = if project.dir.join("package-lock.json").is_file() {
            "ci"
        } else {
            "install"
        };
        eprintln!("hookrelay: installing the project's packages from npm (npm {install})");
        Command::new("npm")
            .current_dir(&project.dir)
            .args([install, "--no-audit", "--no-fund"])
            .stdout(stderr())
            .status()
            .map_err(|e| missing("npm", &e, "Debian: apt install nodejs npm"))
            .and_then(|s| check_status(s, &format!("npm {install}")))?;
    }
    run(
        Command::new(&jco)
            .current_dir(&project.dir)
            .args([
                "componentize",
                "plugin.js",
                "--wit",
                "wit",
                "--world-name",
                "plugin",
            ])
            // Without these the component imports wasi:http, which plugins do not get.
            .args(["--disable", "http", "fetch-event", "--out"])
            .arg(project.wasm()),
        "jco componentize",
    )
}

/// Where installed tools live: `$HOOKRELAY_TOOLCHAINS`, else `toolchains/` in the user's cache
/// folder (`$XDG_CACHE_HOME/hookrelay` or `~/.cache/hookrelay`).
fn toolchains() -> Result<PathBuf, AuthoringError> {
    if let Some(dir) = std::env::var_os("HOOKRELAY_TOOLCHAINS").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    crate::plugin_host::cache_folder(None)
        .map(|d| d.join("toolchains"))
        .ok_or_else(|| {
            AuthoringError::Build("no cache folder: set HOOKRELAY_TOOLCHAINS or HOME".into())
        })
}

/// Runs `install` into `dir` unless a complete install is there, one process at a time (a
/// lock beside it); a half-done install is removed and done again.
fn installed_once(
    dir: &Path,
    install: impl FnOnce(&Path) -> Result<(), AuthoringError>,
) -> Result<(), AuthoringError> {
    let done = dir.join(".hookrelay-complete");
    if done.is_file() {
        return Ok(());
    }
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| AuthoringError::io(parent, e))?;
    let lock_path = dir.with_extension("lock");
    let lock = std::fs::File::create(&lock_path).map_err(|e| AuthoringError::io(&lock_path, e))?;
    lock.lock().map_err(|e| AuthoringError::io(&lock_path, e))?;
    if done.is_file() {
        return Ok(());
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| AuthoringError::io(dir, e))?;
    }
    install(dir)?;
    std::fs::write(&done, "").map_err(|e| AuthoringError::io(&done, e))
}

fn copy(from: &Path, to: &Path) -> Result<(), AuthoringError> {
    std::fs::copy(from, to)
        .map(drop)
        .map_err(|e| AuthoringError::io(from, e))
}

/// The tools' output goes to stderr: stdout carries only the result.
fn stderr() -> Stdio {
    use std::os::fd::AsFd;
    std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_or_else(|_| Stdio::null(), Stdio::from)
}

fn run(command: &mut Command, what: &str) -> Result<(), AuthoringError> {
    let status = command
        .stdout(stderr())
        .status()
        .map_err(|e| AuthoringError::Build(format!("cannot run {what}: {e}")))?;
    check_status(status, what)
}

fn check_status(status: std::process::ExitStatus, what: &str) -> Result<(), AuthoringError> {
    if status.success() {
        Ok(())
    } else {
        Err(AuthoringError::Build(format!("{what} failed ({status})")))
    }
}

fn missing(tool: &str, e: &std::io::Error, hint: &str) -> AuthoringError {
    if e.kind() == std::io::ErrorKind::NotFound {
        AuthoringError::Build(format!("{tool} is not installed: {hint}"))
    } else {
        AuthoringError::Build(format!("cannot run {tool}: {e}"))
    }
}
