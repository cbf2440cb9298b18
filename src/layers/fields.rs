//! Fields are no wider than their struct: a struct the crate keeps (`pub(crate)`, `pub(super)`
//! or private) has no `pub` field, so a field's visibility says who reads it (private: its
//! module; `pub(super)`: its folder; `pub(crate)`: other folders) and rustc's dead-code lint
//! sees a field nothing reads.

/// The `pub` fields of the structs `text` declares without `pub`, as `Struct.field`.
fn wide_fields(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some((vis, rest)) = line.trim().split_once("struct ") else {
            continue;
        };
        let is_decl = vis.is_empty() || vis.trim_end().starts_with("pub");
        if !is_decl || !line.trim_end().ends_with('{') || vis.trim() == "pub" {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let mut depth = 1i32;
        for field in lines.by_ref() {
            if depth == 1
                && let Some(after) = field.trim().strip_prefix("pub ")
                && let Some((ident, _)) = after.split_once(':')
            {
                out.push(format!("{name}.{}", ident.trim()));
            }
            depth += field.matches('{').count() as i32 - field.matches('}').count() as i32;
            if depth <= 0 {
                break;
            }
        }
    }
    out
}

#[test]
fn a_kept_struct_has_no_public_field() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    super::files(&root, &mut paths);
    let mut wide = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("source");
        let file = path
            .strip_prefix(&root)
            .expect("under src")
            .display()
            .to_string();
        wide.extend(
            wide_fields(&text)
                .into_iter()
                .map(|f| format!("{file}: {f}")),
        );
    }
    assert!(
        wide.is_empty(),
        "fields wider than their struct (make them private, `pub(super)` or `pub(crate)`): {wide:#?}"
    );
}

#[test]
fn wide_fields_are_read_from_declarations() {
    let text = "pub(crate) struct A {\n    pub x: u8,\n    pub(crate) y: Vec<u8>,\n    z: u8,\n}\n\
                pub struct B {\n    pub x: u8,\n}\n\
                struct C {\n    inner: Inner { },\n    pub w: u8,\n}\n\
                struct D(pub u8);\n";
    assert_eq!(wide_fields(text), ["A.x", "C.w"]);
}
