//! The codemap at the top of `lib.rs` stays true: it names every module of the crate and of
//! the binary, the public ones in its sentence about the interface, and the crate's layers as
//! `CRATE` has them.

use super::{CRATE, source};

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
