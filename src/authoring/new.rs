//! `hookrelay plugin new NAME --lang L`: writes a ready project from the templates compiled
//! into the binary: the interface, a first plugin that does something useful, its settings, a
//! first test case file and a README.

use std::path::{Path, PathBuf};

use super::{AuthoringError, Lang, project::check_name};

/// The interface every project gets a copy of.
const WIT: &str = include_str!("../../wit/relay.wit");

/// The files of a language's template: a path in the project and its text, `{{name}}` standing
/// for the plugin's name.
fn template(lang: Lang) -> &'static [(&'static str, &'static str)] {
    match lang {
        Lang::Rust => &[
            ("Cargo.toml", include_str!("templates/rust/Cargo.toml.in")),
            ("Cargo.lock", include_str!("templates/rust/Cargo.lock.in")),
            ("src/lib.rs", include_str!("templates/rust/src/lib.rs")),
            ("{{name}}.toml", include_str!("templates/rust/plugin.toml")),
            ("README.md", include_str!("templates/rust/README.md")),
            (".gitignore", "/build/\n/target/\n"),
        ],
        Lang::Python => &[
            ("app.py", include_str!("templates/python/app.py")),
            (
                "{{name}}.toml",
                include_str!("templates/python/plugin.toml"),
            ),
            ("README.md", include_str!("templates/python/README.md")),
            (".gitignore", "/build/\n__pycache__/\n"),
        ],
        Lang::Js => &[
            ("plugin.js", include_str!("templates/js/plugin.js")),
            ("package.json", include_str!("templates/js/package.json")),
            (
                "package-lock.json",
                include_str!("templates/js/package-lock.json"),
            ),
            (
                "patches/@bytecodealliance+componentize-js+0.23.0.patch",
                include_str!("templates/js/patches/@bytecodealliance+componentize-js+0.23.0.patch"),
            ),
            ("{{name}}.toml", include_str!("templates/js/plugin.toml")),
            ("README.md", include_str!("templates/js/README.md")),
            (".gitignore", "/build/\n/node_modules/\n"),
        ],
    }
}

/// The test cases every template passes (the three first plugins do the same).
const CASES: &str = include_str!("templates/common/cases.jsonl");

/// Writes the project `parent/NAME` and returns its folder.
///
/// # Errors
/// An invalid name, a folder that already exists, or a file that cannot be written.
pub fn create(parent: &Path, name: &str, lang: Lang) -> Result<PathBuf, AuthoringError> {
    check_name(name)?;
    let dir = parent.join(name);
    if dir.exists() {
        return Err(AuthoringError::Usage(format!(
            "{} already exists: choose another name or remove it",
            dir.display()
        )));
    }
    let mut files: Vec<(String, &str)> = template(lang)
        .iter()
        .map(|(p, t)| (p.replace("{{name}}", name), *t))
        .collect();
    files.push(("wit/relay.wit".into(), WIT));
    files.push(("tests/cases.jsonl".into(), CASES));
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).map_err(|e| AuthoringError::io(folder, e))?;
        }
        std::fs::write(&path, text.replace("{{name}}", name))
            .map_err(|e| AuthoringError::io(&path, e))?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_each_language_and_refuses_an_existing_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        for lang in Lang::ALL {
            let name = format!("first-{lang}");
            let project = create(dir.path(), &name, lang).expect("create");
            let found = super::super::Project::open(&project).expect("a project");
            assert_eq!((found.name.as_str(), found.lang), (name.as_str(), lang));
            assert!(project.join(format!("{name}.toml")).is_file());
            assert!(project.join("wit/relay.wit").is_file());
            assert!(project.join("tests/cases.jsonl").is_file());
            for entry in walk(&project) {
                let text = std::fs::read_to_string(&entry).expect("read");
                assert!(!text.contains("{{name}}"), "{}", entry.display());
            }
            let again = create(dir.path(), &name, lang).expect_err("exists");
            assert!(again.to_string().contains("already exists"), "{again}");
        }
        assert!(create(dir.path(), "Bad_Name", Lang::Rust).is_err());
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
        out
    }
}
