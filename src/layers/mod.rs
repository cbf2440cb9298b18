//! The modules whose files import only from the layers below their own (the order their
//! `mod.rs` doc comment gives): a new upward import fails here. The codemap at the top of
//! `lib.rs` stays true ([`codemap`]), each folder has a front door ([`doors`]) and no field is
//! wider than its struct ([`fields`]).

mod codemap;
mod doors;
mod fields;

/// Each delivery file's layer, bottom first.
const DELIVERY: &[&[&str]] = &[
    &["retry", "sign", "ssrf", "budget", "incident", "circuit"],
    &["client"],
    &["lanes", "judge"],
    &["journal", "inbox"],
    &["retain", "notices"],
    &["ack", "insight", "migrate", "tidy"],
    &["hook_queue", "records"],
    &["payloads", "plan"],
    &["context"],
    &["attempt", "abandon"],
    &["worker", "pager"],
    &["held"],
    &["dispatch"],
];

/// Each hooks file's layer, bottom first.
const HOOKS: &[&[&str]] = &[
    &["model"],
    &["record", "registry"],
    &["matcher", "announce", "import", "takeover"],
    &["store"],
    &["sync", "orphans"],
];

fn layer(layers: &[&[&str]], name: &str) -> Option<usize> {
    layers.iter().position(|l| l.contains(&name))
}

/// The sibling modules a file names through `super::` (its code, not its tests).
fn siblings(code: &str) -> Vec<String> {
    named(code, "super::")
}

/// The modules `code` names right after `prefix` (`super::`, `crate::`), braced groups read
/// whole.
fn named(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices(prefix) {
        let rest = &code[i + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `use super::{a::X, b, c::{Y, Z}}`: the first name of each top-level item.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(std::mem::take(&mut item));
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    item.push(c);
                }
            }
            out.push(item);
        } else {
            out.push(rest.to_string());
        }
    }
    out.iter()
        .map(|s| {
            s.trim()
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

#[test]
fn delivery_imports_only_downwards() {
    check("delivery", DELIVERY);
}

#[test]
fn hooks_import_only_downwards() {
    check("hooks", HOOKS);
}

/// Every file of `src/<module>` is in a layer of `layers` and names through `super::` only
/// files of the layers below.
fn check(module: &str, layers: &[&[&str]]) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(module);
    let (mut seen, mut upward) = (0, Vec::new());
    for entry in std::fs::read_dir(&dir).expect("src/delivery") {
        let path = entry.expect("entry").path();
        let Some(name) = path.file_stem().and_then(|n| n.to_str()) else {
            continue;
        };
        // A folder module (`journal/`) is its `mod.rs`: its files' `super::` is the folder.
        let file = if path.is_dir() {
            path.join("mod.rs")
        } else {
            path.clone()
        };
        if name == "mod" || !file.is_file() {
            continue;
        }
        let own = layer(layers, name)
            .unwrap_or_else(|| panic!("{module}/{name}.rs is in no layer of the list"));
        let code = code_of(&file);
        for used in siblings(&code) {
            let Some(theirs) = layer(layers, &used) else {
                continue;
            };
            if theirs >= own {
                upward.push(format!(
                    "{name}.rs (layer {own}) uses {used} (layer {theirs})"
                ));
            }
        }
        seen += 1;
    }
    assert!(
        upward.is_empty(),
        "{module} imports only downwards: {upward:#?}"
    );
    assert_eq!(seen, layers.iter().map(|l| l.len()).sum::<usize>());
}

/// A file's code without its tests and comments (a doc link is no import).
fn code_of(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).expect("source");
    text.split("#[cfg(test)]")
        .next()
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The crate's modules, bottom first: each imports only from the layers before its own (the
/// codemap in `lib.rs` says the same).
const CRATE: &[&[&str]] = &[
    &["base"],
    &["redis_conn", "shutdown", "systemd"],
    &["config"],
    &["store_conn"],
    &["redis_index", "metrics", "audit"],
    &["traces"],
    &["bus", "tenants"],
    &["fleet"],
    &["event"],
    &["hooks"],
    &["conference", "plugin_host"],
    &["route"],
    &["delivery"],
    &["destinations"],
    &["admin_api", "api", "replay", "authoring", "xapi"],
    &["pipeline"],
    &["edge"],
];

/// Every `.rs` file under `dir`.
fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_crate_imports_only_downwards() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut upward = Vec::new();
    for (own, layer) in CRATE.iter().enumerate() {
        for module in *layer {
            let mut paths = Vec::new();
            let dir = src.join(module);
            if dir.is_dir() {
                files(&dir, &mut paths);
            } else {
                paths.push(src.join(format!("{module}.rs")));
            }
            for path in paths {
                for used in named(&code_of(&path), "crate::") {
                    let Some(theirs) = layer_of(&used) else {
                        continue;
                    };
                    if used != *module && theirs >= own {
                        upward.push(format!("{} uses {used}", path.display()));
                    }
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "the crate imports only downwards: {upward:#?}"
    );
    // Every module of lib.rs is in a layer, but those compiled only for tests (this one, and
    // the release link's list of hot functions, `link_order`).
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let mut previous = "";
    for line in lib.lines() {
        if let Some(m) = ["pub mod ", "pub(crate) mod ", "mod "]
            .iter()
            .find_map(|p| line.strip_prefix(p))
            .and_then(|m| m.strip_suffix(';'))
            .filter(|_| previous.trim() != "#[cfg(test)]")
        {
            assert!(layer_of(m).is_some(), "{m} is in no layer of CRATE");
        }
        previous = line;
    }
}

fn layer_of(module: &str) -> Option<usize> {
    layer(CRATE, module)
}

#[test]
fn imports_are_read_whole() {
    let code = "use super::{a::X, b, c::{Y, Z}};\nfn f() { super::d::g(); }";
    assert_eq!(siblings(code), ["a", "b", "c", "d"]);
}

/// A file of `src/`.
fn source(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
