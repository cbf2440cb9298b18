//! The modules whose files import only from the layers below their own (the order their
//! `mod.rs` doc comment gives): a new upward import fails here.

/// Each delivery file's layer, bottom first.
const DELIVERY: &[&[&str]] = &[
    &["retry", "sign", "ssrf", "budget", "incident"],
    &["client"],
    &["journal"],
    &["ack", "migrate", "tidy"],
    &["hook_queue"],
    &["payloads", "plan"],
    &["context"],
    &["worker", "pager"],
    &["held"],
    &["dispatch"],
];

/// Each hooks file's layer, bottom first.
const HOOKS: &[&[&str]] = &[
    &["model"],
    &["record", "registry"],
    &["matcher", "fleet", "import"],
    &["store"],
    &["sync"],
];

fn layer(layers: &[&[&str]], name: &str) -> Option<usize> {
    layers.iter().position(|l| l.contains(&name))
}

/// The sibling modules a file names through `super::` (its code, not its tests).
fn siblings(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("super::") {
        let rest = &code[i + "super::".len()..];
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
        if name == "mod" || path.is_dir() {
            continue;
        }
        let own = layer(layers, name)
            .unwrap_or_else(|| panic!("{module}/{name}.rs is in no layer of the list"));
        let text = std::fs::read_to_string(&path).expect("source");
        // Its code without tests and comments (a doc link is no import).
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
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

#[test]
fn imports_are_read_whole() {
    let code = "use super::{a::X, b, c::{Y, Z}};\nfn f() { super::d::g(); }";
    assert_eq!(siblings(code), ["a", "b", "c", "d"]);
}
