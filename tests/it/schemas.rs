//! The events' JSON Schemas as integrators use them: `hookrelay events list` and `events
//! schema` (the binary), and docs/integrators.md's "Types from the schemas" run as written,
//! with the code generators it names (`scripts/ensure-schema-tools.sh` installs them).

use std::{path::Path, process::Command};

use serde_json::Value;

use crate::{integrator::doc_snippet, support::process::cli};

const SCHEMAS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/schemas");

#[test]
fn the_binary_lists_the_ids_and_prints_their_schemas() {
    let (code, out, err) = cli(&["events", "list"]);
    assert_eq!(code, 0, "{err}");
    let ids: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let want: Vec<&str> = hookrelay::event_schema::ids().collect();
    assert_eq!(ids, want);
    let role = out
        .lines()
        .find(|l| l.starts_with("user-role-changed "))
        .expect("listed");
    assert!(role.contains("hooks naming it"), "{role}");
    let joined = out
        .lines()
        .find(|l| l.starts_with("user-joined "))
        .expect("listed");
    assert!(joined.ends_with("every matching hook"), "{joined}");

    for id in [
        "user-role-changed",
        "Meeting-Ending",
        "rap-post-events-ended",
        "hook-failing",
    ] {
        let (code, out, err) = cli(&["events", "schema", id]);
        assert_eq!(code, 0, "{err}");
        let printed: Value = serde_json::from_str(&out).expect("JSON");
        let file = format!("{SCHEMAS}/{}.schema.json", id.to_ascii_lowercase());
        let kept: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).expect("file")).expect("JSON");
        assert_eq!(printed, kept, "{id}");
    }
    let (code, out, _) = cli(&["events", "schema"]);
    assert_eq!(code, 0);
    assert_eq!(out.matches("\"$ref\"").count(), want.len());
    let (code, _, err) = cli(&["events", "schema", "meeting-exploded"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no event is called \"meeting-exploded\""),
        "{err}"
    );

    // --out writes what docs/schemas holds.
    let dir = tempfile::tempdir().expect("dir");
    let (code, out, err) = cli(&["events", "schema", "--out", &dir.path().to_string_lossy()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("wrote {} schemas", want.len() + 1)),
        "{out}"
    );
    for entry in std::fs::read_dir(SCHEMAS).expect("docs/schemas") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name");
        assert_eq!(
            std::fs::read_to_string(&path).expect("kept"),
            std::fs::read_to_string(dir.path().join(name)).expect("written"),
            "{name:?}"
        );
    }
}

/// The catalogue's example of `id` (docs/events.md, made by the relay's own mapping).
fn catalogue_example(id: &str) -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/events.md"))
        .expect("docs/events.md");
    let section = doc
        .split(&format!("\n## {id}\n"))
        .nth(1)
        .expect("the example");
    let json = section
        .split("```json\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("its block");
    let v: Value = serde_json::from_str(json).expect("JSON");
    v.to_string()
}

/// A command of the npm packages scripts/ensure-schema-tools.sh installs.
fn npm_tool(name: &str) -> String {
    let dir = crate::support::tool_dir("SCHEMA_TOOLS_NPM", "npm-schema-tools");
    format!("{}/node_modules/.bin/{name}", dir.display())
}

/// The sh block of the section, run in `dir` with the schemas where the package puts them
/// replaced by docs/schemas, and npx's json2ts by the one scripts/ensure-schema-tools.sh
/// installed. `false` when a tool is missing (then the test says so, or fails under CI).
fn generate(dir: &Path) -> bool {
    let json2ts = npm_tool("json2ts");
    let have = Command::new("datamodel-codegen")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
        && Path::new(&json2ts).exists();
    if !have {
        assert!(
            std::env::var_os("TEST_REQUIRE_SCHEMA_TOOLS").is_none(),
            "datamodel-codegen or json2ts missing: run scripts/ensure-schema-tools.sh"
        );
        eprintln!(
            "datamodel-codegen or json2ts missing: docs/integrators.md's types are not generated here"
        );
        return false;
    }
    let script = doc_snippet("Types from the schemas", "sh")
        .replace("/usr/share/hookrelay/schemas", SCHEMAS)
        .replace("npx json2ts", &json2ts);
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(dir)
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

#[test]
fn types_generated_as_the_integrators_guide_says_read_the_events() {
    let dir = tempfile::tempdir().expect("dir");
    if !generate(dir.path()) {
        return;
    }
    let example = catalogue_example("user-role-changed");

    // Python: the snippet reads the example; a role of another type is refused.
    let snippet = doc_snippet("Types from the schemas", "python");
    let run = |event: &str| {
        let code = format!(
            "form = {{\"event\": {}}}\n{snippet}",
            serde_json::to_string(event).expect("text")
        );
        std::fs::write(dir.path().join("snippet.py"), code).expect("write");
        Command::new("python3")
            .arg("snippet.py")
            .current_dir(dir.path())
            .output()
            .expect("python3")
    };
    let out = run(&example);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "w_uxw0dzhtvk0l MODERATOR"
    );
    let mut bad: Value = serde_json::from_str(&example).expect("JSON");
    bad["data"]["attributes"]["user"]["role"] = 5.into();
    let out = run(&bad.to_string());
    assert!(!out.status.success(), "a numeric role was taken");
    assert!(String::from_utf8_lossy(&out.stderr).contains("ValidationError"));

    // TypeScript: the snippet type-checks against the generated types; an event of another
    // id, assigned to the type, does not.
    let tsc = npm_tool("tsc");
    let snippet = doc_snippet("Types from the schemas", "typescript");
    let check = |code: &str| {
        let declared = format!("declare const form: {{ get(name: string): string }};\n{code}");
        std::fs::write(dir.path().join("snippet.ts"), declared).expect("write");
        Command::new(&tsc)
            .args([
                "--noEmit",
                "--strict",
                "--target",
                "es2022",
                "--module",
                "nodenext",
                "snippet.ts",
            ])
            .current_dir(dir.path())
            .output()
            .expect("tsc")
    };
    let out = check(&snippet);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut other: Value = serde_json::from_str(&example).expect("JSON");
    other["data"]["id"] = "user-joined".into();
    let wrong = format!(
        "import type {{ UserRoleChanged }} from \"./user-role-changed\";\nconst event: UserRoleChanged = {other};\nconsole.log(event);\n"
    );
    let out = check(&wrong);
    assert!(!out.status.success(), "an event of another id type-checked");
}
