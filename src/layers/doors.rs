//! Each folder's front door: below a folder's `mod.rs` the submodules are private (`mod x;`)
//! and what other folders use is re-exported from the `mod.rs`. The submodules left open
//! (`pub mod`, `pub(crate) mod`) are the ones [`OPEN`] lists, each named in the codemap of
//! `lib.rs` with why.

use super::source;

/// The submodules open below their folder's `mod.rs`, as `folder::module`: the public
/// libraries of parts (`authoring`, `base`, `config`: each of their files is a door), the
/// modules the library's surface gives whole (the tests' and the binary's), and the modules
/// whose functions are called by their module's name.
const OPEN: &[&str] = &[
    "api::params",
    "authoring::cases",
    "authoring::deploy",
    "authoring::new",
    "authoring::project",
    "authoring::record",
    "authoring::toolchain",
    "base::binary_pages",
    "base::ca",
    "base::callback_url",
    "base::digest",
    "base::form",
    "base::forwarded",
    "base::ids",
    "base::redis_keys",
    "base::secret",
    "base::sources",
    "base::standard_webhooks",
    "base::time",
    "base::unix",
    "bus::stream",
    "conference::persist",
    "conference::seed",
    "config::admin",
    "config::bbb_web",
    "config::compat",
    "config::destinations",
    "config::edge",
    "config::reference",
    "config::reference_files",
    "config::tenancy",
    "config::tenants",
    "config::traces",
    "config::xapi",
    "delivery::journal",
    "delivery::records",
    "delivery::tidy",
    "event::persist",
    "event::schema",
    "fleet::cursor",
    "fleet::mark",
    "fleet::reach",
    "fleet::spread",
    "fleet::status",
    "hooks::import",
    "hooks::matcher",
    "hooks::takeover",
    "metrics::merge",
];

/// Every `mod.rs` under `src/`, as (its folder's path with `::`, its text).
fn folders() -> Vec<(String, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("folder").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|n| n == "mod.rs") {
                let folder = dir.strip_prefix(&root).expect("under src");
                let name = folder.to_string_lossy().replace('/', "::");
                let text = std::fs::read_to_string(&path).expect("mod.rs");
                out.push((name, text));
            }
        }
    }
    out
}

/// The submodules `text` declares open (`pub mod x;`, `pub(crate) mod x;`, `pub(super) ...`).
fn open_submodules(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("pub") && l.ends_with(';'))
        .filter_map(|l| {
            let rest = l.split_once("mod ")?.1;
            let vis = l.split_once("mod ")?.0.trim();
            matches!(vis, "pub" | "pub(crate)" | "pub(super)")
                .then(|| rest.trim_end_matches(';').trim().to_string())
        })
        .collect()
}

#[test]
fn below_each_folder_s_mod_rs_the_submodules_are_private_but_those_listed() {
    let mut open = Vec::new();
    for (folder, text) in folders() {
        // The binary's folder is its own crate, whose modules the binary alone sees.
        if folder == "admin" {
            continue;
        }
        for module in open_submodules(&text) {
            open.push(format!("{folder}::{module}"));
        }
    }
    open.sort();
    let listed: Vec<String> = OPEN.iter().map(|s| (*s).to_string()).collect();
    let unlisted: Vec<&String> = open.iter().filter(|m| !listed.contains(m)).collect();
    let closed: Vec<&String> = listed.iter().filter(|m| !open.contains(m)).collect();
    assert!(
        unlisted.is_empty(),
        "open submodules that are no front door (make them `mod` and re-export what others use from the folder's mod.rs, or list them in OPEN and in the codemap): {unlisted:#?}"
    );
    assert!(closed.is_empty(), "listed but private now: {closed:#?}");
}

#[test]
fn the_codemap_says_why_each_open_submodule_is_open() {
    let lib = source("lib.rs");
    let missing: Vec<&&str> = OPEN
        .iter()
        .filter(|m| {
            let (folder, _) = m.split_once("::").expect("folder::module");
            // The public libraries of parts are named as a whole.
            !matches!(folder, "authoring" | "base" | "config") && !lib.contains(&format!("`{m}`"))
        })
        .collect();
    assert!(missing.is_empty(), "not in lib.rs's codemap: {missing:#?}");
}

#[test]
fn open_submodules_are_read_from_declarations() {
    let text =
        "mod a;\npub mod b;\n    pub(crate) mod c;\npub use d::E;\n#[cfg(test)]\nmod tests;\n";
    assert_eq!(open_submodules(text), ["b", "c"]);
}
