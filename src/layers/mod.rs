//! The modules whose files import only from the layers below their own (the order their
//! `mod.rs` doc comment gives): a new upward import fails here. And the codemap at the top of
//! `lib.rs` stays true: it names every module of the crate and of the binary, the public ones
//! in its sentence about the interface, and the crate's layers as `CRATE` has them.

mod doors;

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
    &["bus", "tenants"],
    &["fleet"],
    &["event"],
    &["hooks"],
    &["conference", "plugin_host"],
    &["route"],
    &["delivery"],
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
    // Every module of lib.rs is in a layer.
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    for line in lib.lines() {
        if let Some(m) = ["pub mod ", "pub(crate) mod ", "mod "]
            .iter()
            .find_map(|p| line.strip_prefix(p))
            .and_then(|m| m.strip_suffix(';'))
            .filter(|m| *m != "layers")
        {
            assert!(layer_of(m).is_some(), "{m} is in no layer of CRATE");
        }
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

/// The doc comment at the top of a crate root (its leading `//!` lines), one string per
/// paragraph, each paragraph's lines trimmed and joined by spaces.
fn paragraphs(root: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    for line in root.lines().map_while(|l| l.strip_prefix("//!")) {
        let line = line.trim();
        if line.is_empty() {
            out.push(String::new());
            continue;
        }
        let last = out.last_mut().expect("a paragraph");
        if !last.is_empty() {
            last.push(' ');
        }
        last.push_str(line);
    }
    out.retain(|p| !p.is_empty());
    out
}

/// The paragraph of `doc` that contains `marker`.
fn paragraph<'a>(doc: &'a [String], marker: &str) -> &'a str {
    doc.iter()
        .find(|p| p.contains(marker))
        .unwrap_or_else(|| panic!("the codemap in src/lib.rs has no paragraph with {marker:?}"))
}

/// The modules a crate root declares at its top level with `mod NAME;` (any visibility), each
/// with whether it is `pub`; a test-only module (`#[cfg(test)]` on the line before) is left
/// out, and so is an inline one (`mod NAME { .. }`).
fn declared(root: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut previous = "";
    for line in root.lines() {
        if let Some((vis, name)) = line.strip_suffix(';').and_then(|l| l.split_once("mod ")) {
            let top =
                vis.is_empty() || vis == "pub " || (vis.starts_with("pub(") && vis.ends_with(") "));
            let ident = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
            if top && ident && previous.trim() != "#[cfg(test)]" {
                out.push((name.to_string(), vis == "pub "));
            }
        }
        previous = line;
    }
    out
}

/// The number `text` states, in words up to twenty or in digits, right before `what`
/// ("Four modules are public").
fn stated(text: &str, what: &str) -> Option<usize> {
    const WORDS: &str = "no one two three four five six seven eight nine ten eleven twelve \
                         thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty";
    let word = text[..text.find(what)?]
        .split_whitespace()
        .last()?
        .to_lowercase();
    word.parse()
        .ok()
        .or_else(|| WORDS.split_whitespace().position(|w| w == word))
}

#[test]
fn the_codemap_names_every_module() {
    let lib = source("lib.rs");
    let codemap = paragraphs(&lib).join(" ");
    let modules = declared(&lib);
    assert!(
        modules.len() > 1,
        "src/lib.rs declares modules: {modules:?}"
    );
    let missing: Vec<&str> = modules
        .iter()
        .map(|(m, _)| m.as_str())
        .filter(|m| !codemap.contains(&format!("[`{m}`]")))
        .collect();
    assert!(
        missing.is_empty(),
        "the codemap at the top of src/lib.rs names (as [`name`], with its job) no module \
         {missing:?}"
    );
}

#[test]
fn the_codemap_names_the_public_modules() {
    let lib = source("lib.rs");
    let doc = paragraphs(&lib);
    let what = "modules are public";
    let interface = paragraph(&doc, what);
    let modules = declared(&lib);
    let public: Vec<&str> = modules
        .iter()
        .filter(|(_, public)| *public)
        .map(|(m, _)| m.as_str())
        .collect();
    let missing: Vec<&str> = public
        .iter()
        .copied()
        .filter(|m| !interface.contains(&format!("[`{m}`]")))
        .collect();
    assert!(
        missing.is_empty(),
        "the codemap's sentence about the interface (\"{what}\") does not name the public \
         module(s) {missing:?}"
    );
    let private: Vec<&str> = modules
        .iter()
        .filter(|(m, public)| !public && interface.contains(&format!("[`{m}`]")))
        .map(|(m, _)| m.as_str())
        .collect();
    assert!(
        private.is_empty(),
        "the codemap's sentence about the interface names module(s) {private:?}, which are not \
         `pub mod`"
    );
    assert_eq!(
        stated(interface, what),
        Some(public.len()),
        "the codemap says how many modules are public; src/lib.rs has {} `pub mod`: {public:?}",
        public.len()
    );
}

#[test]
fn the_codemap_names_the_binary_s_files() {
    let doc = paragraphs(&source("lib.rs"));
    let binary = paragraph(&doc, "The binary's commands");
    assert!(
        binary.contains("`src/main.rs`"),
        "the codemap's line about the binary's commands does not name `src/main.rs`"
    );
    let modules = declared(&source("main.rs"));
    assert!(!modules.is_empty(), "src/main.rs declares modules");
    let missing: Vec<&str> = modules
        .iter()
        .map(|(m, _)| m.as_str())
        .filter(|m| {
            !binary.contains(&format!("`src/{m}.rs`")) && !binary.contains(&format!("`src/{m}/`"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "the codemap's line about the binary's commands names (as `src/name.rs` or \
         `src/name/`) no file for the binary's module(s) {missing:?}"
    );
}

#[test]
fn the_codemap_gives_the_layers_of_crate() {
    let doc = paragraphs(&source("lib.rs"));
    let text = paragraph(&doc, "Layers, bottom first");
    // "Layers, bottom first, ... (`src/layers/` tests it): `a`, `b`; `c`; ... `z`. Where ..."
    let list = text
        .split_once("): ")
        .and_then(|(_, rest)| rest.split_once(". "))
        .map(|(list, _)| list)
        .expect("the codemap's layers: a list after \"): \" that ends with \". \"");
    let given: Vec<Vec<&str>> = list
        .split(';')
        .map(|layer| {
            let mut names: Vec<&str> = layer
                .split(',')
                .map(|m| m.trim().trim_matches('`'))
                .collect();
            names.sort_unstable();
            names
        })
        .collect();
    let kept: Vec<Vec<&str>> = CRATE
        .iter()
        .map(|layer| {
            let mut names = layer.to_vec();
            names.sort_unstable();
            names
        })
        .collect();
    assert_eq!(
        given, kept,
        "the codemap's layers in src/lib.rs (left) are not CRATE's (right)"
    );
}

#[test]
fn declarations_are_read_at_the_top_level() {
    let root = [
        "pub mod a;",
        "pub(crate) mod b;",
        "mod c;",
        "#[cfg(test)]",
        "mod d;",
        "mod e {",
        "    mod f;",
        "}",
        "// mod g;",
    ]
    .join("\n");
    assert_eq!(
        declared(&root),
        [
            ("a".to_string(), true),
            ("b".to_string(), false),
            ("c".to_string(), false)
        ]
    );
    assert_eq!(
        stated(
            "The interface. Four modules are public",
            "modules are public"
        ),
        Some(4)
    );
    assert_eq!(
        stated("12 modules are public", "modules are public"),
        Some(12)
    );
}
