//! Links the release relay with the functions a running relay executes placed together at the
//! start of its code (`link/hot-symbols.txt`, made by `scripts/symbol-order.sh`).
//!
//! The release binary's code is about 30 MB, and the kernel maps 64 KiB of it around every page
//! it faults in; with the code that runs spread over all of it, an idle relay had 13 to 16 MiB
//! of it resident, and these pages count in its RSS. Placed together, about 6 MiB
//! (BENCHMARKS.md). Only lld reads the file: this applies where Rust links with it by default
//! (`x86_64-unknown-linux-gnu`, Rust 1.90 and later); elsewhere, or with
//! `HOOKRELAY_SYMBOL_ORDER=0` (another linker), the binary is linked as before. Functions the
//! file names that a build lacks (a dependency updated since) are skipped without a warning.

#[path = "link/order.rs"]
mod order;

use std::{
    env,
    path::{Path, PathBuf},
    process::Command,
};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=link/hot-symbols.txt");
    println!("cargo:rerun-if-changed=link/order.rs");
    println!("cargo:rerun-if-env-changed=HOOKRELAY_SYMBOL_ORDER");
    let var = |name: &str| env::var(name).unwrap_or_default();
    if var("HOOKRELAY_SYMBOL_ORDER") == "0"
        || var("PROFILE") != "release"
        || var("TARGET") != "x86_64-unknown-linux-gnu"
        || !links_with_lld(&var("RUSTC"))
        || chooses_its_linker(&var("CARGO_ENCODED_RUSTFLAGS"))
    {
        return;
    }
    let list = Path::new(&var("CARGO_MANIFEST_DIR")).join("link/hot-symbols.txt");
    let Ok(names) = std::fs::read_to_string(&list) else {
        return;
    };
    let out = PathBuf::from(var("OUT_DIR"));
    let (exact, script) = order::split(&names);
    let (exact_path, script_path) = (out.join("hot-symbols.txt"), out.join("hot-text.ld"));
    if std::fs::write(&exact_path, exact).is_err() || std::fs::write(&script_path, script).is_err()
    {
        return;
    }
    for arg in [
        format!("--symbol-ordering-file={}", exact_path.display()),
        "--no-warn-symbol-ordering".to_string(),
        format!("--script={}", script_path.display()),
    ] {
        println!("cargo:rustc-link-arg-bin=hookrelay=-Wl,{arg}");
    }
}

/// Whether the build's flags choose a linker or its flavour (then lld may not be the one).
fn chooses_its_linker(flags: &str) -> bool {
    ["linker", "link-self-contained", "fuse-ld"]
        .iter()
        .any(|word| flags.contains(word))
}

/// Whether this rustc links `x86_64-unknown-linux-gnu` with its own lld by default (1.90 on).
fn links_with_lld(rustc: &str) -> bool {
    let Ok(out) = Command::new(rustc).arg("-V").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut version = text
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .split(['.', '-'])
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let (major, minor) = (version.next().unwrap_or(0), version.next().unwrap_or(0));
    (major, minor) >= (1, 90)
}
