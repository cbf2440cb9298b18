//! A plugin project on disk: its folder, its name (the folder's name), its language (told by
//! the files in it) and where its build, settings and test cases are.

use std::path::{Path, PathBuf};

use super::AuthoringError;

/// A language plugins are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

impl Lang {
    pub const ALL: [Lang; 3] = [Lang::Rust, Lang::Python, Lang::Js];

    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
        }
    }

    /// The file whose presence marks a project of this language.
    fn marker(self) -> &'static str {
        match self {
            Lang::Rust => "Cargo.toml",
            Lang::Python => "app.py",
            Lang::Js => "package.json",
        }
    }
}

impl std::str::FromStr for Lang {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "rust" | "rs" => Ok(Lang::Rust),
            "python" | "py" => Ok(Lang::Python),
            "js" | "javascript" => Ok(Lang::Js),
            _ => Err(format!(
                "unknown language {s:?}: rust, python or js are supported"
            )),
        }
    }
}

impl std::fmt::Display for Lang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A plugin project: `NAME/` with `NAME.toml` (the settings deployed beside the plugin),
/// `wit/`, `tests/*.jsonl` and the language's sources; `plugin build` writes `build/NAME.wasm`
/// and a copy of `NAME.toml` beside it.
#[derive(Clone, Debug)]
pub struct Project {
    pub dir: PathBuf,
    pub name: String,
    pub lang: Lang,
}

impl Project {
    /// The project in `dir`.
    ///
    /// # Errors
    /// When `dir` is not a folder or holds no project of a known language.
    pub fn open(dir: &Path) -> Result<Self, AuthoringError> {
        let dir = std::fs::canonicalize(dir).map_err(|e| AuthoringError::io(dir, e))?;
        if !dir.is_dir() {
            return Err(AuthoringError::Usage(format!(
                "{} is not a folder",
                dir.display()
            )));
        }
        let lang = Lang::ALL
            .into_iter()
            .find(|l| dir.join(l.marker()).is_file())
            .ok_or_else(|| {
                AuthoringError::Usage(format!(
                    "{} is not a plugin project: it has no Cargo.toml (rust), app.py (python) or package.json (js)",
                    dir.display()
                ))
            })?;
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| AuthoringError::Usage(format!("{}: no usable name", dir.display())))?
            .to_string();
        Ok(Self { dir, name, lang })
    }

    /// The project that holds `path`: `path` itself, or for a case file in `NAME/tests/`, `NAME`.
    pub fn around(path: &Path) -> Option<Self> {
        let parent = path.parent()?;
        let dir = if parent.file_name().is_some_and(|n| n == "tests") {
            parent.parent()?
        } else {
            parent
        };
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        Self::open(dir).ok()
    }

    pub fn build_dir(&self) -> PathBuf {
        self.dir.join("build")
    }

    /// The component `plugin build` makes.
    pub fn wasm(&self) -> PathBuf {
        self.build_dir().join(format!("{}.wasm", self.name))
    }

    /// The settings written beside the plugin when it is deployed.
    pub fn settings(&self) -> PathBuf {
        self.dir.join(format!("{}.toml", self.name))
    }

    /// The test case files, in name order.
    pub fn case_files(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.dir.join("tests")) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
            .collect();
        files.sort();
        files
    }

    /// Makes `build/` a folder the relay could load: the built component and the project's
    /// current `NAME.toml` (copied again, so an edited setting counts without a rebuild).
    ///
    /// # Errors
    /// When the project is not built or the settings cannot be copied.
    pub fn staged(&self) -> Result<PathBuf, AuthoringError> {
        let wasm = self.wasm();
        if !wasm.is_file() {
            return Err(AuthoringError::Usage(format!(
                "{} is not built yet: run `hookrelay plugin build {}`",
                self.name,
                self.dir.display()
            )));
        }
        if let Some(newer) = self.newer_source(&wasm) {
            tracing::warn!(
                source = %newer.display(),
                "a source file is newer than the build: run `hookrelay plugin build` to test your change"
            );
        }
        let copy = self.build_dir().join(format!("{}.toml", self.name));
        if self.settings().is_file() {
            std::fs::copy(self.settings(), &copy).map_err(|e| AuthoringError::io(&copy, e))?;
        } else if copy.exists() {
            std::fs::remove_file(&copy).map_err(|e| AuthoringError::io(&copy, e))?;
        }
        Ok(self.build_dir())
    }

    /// A source file changed after `built` was made (build output, tests, settings and
    /// installed packages not counted).
    fn newer_source(&self, built: &Path) -> Option<PathBuf> {
        let built_at = std::fs::metadata(built).and_then(|m| m.modified()).ok()?;
        let skip = ["build", "target", "node_modules", "tests", ".venv", ".git"];
        let mut stack = vec![self.dir.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).ok()?.filter_map(Result::ok) {
                let path = entry.path();
                let name = entry.file_name();
                if path.is_dir() {
                    if !skip.iter().any(|s| name == *s) {
                        stack.push(path);
                    }
                } else if path != self.settings()
                    && entry
                        .metadata()
                        .and_then(|m| m.modified())
                        .is_ok_and(|t| t > built_at)
                {
                    return Some(path);
                }
            }
        }
        None
    }
}

/// A plugin name: lowercase letters, digits and `-`, starting with a letter (it names the
/// folder, the crate or package, and the deployed files).
///
/// # Errors
/// Says what a name may hold.
pub fn check_name(name: &str) -> Result<(), AuthoringError> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(AuthoringError::Usage(format!(
            "invalid plugin name {name:?}: use lowercase letters, digits and '-', starting with a letter (at most 64)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_parse_by_name_and_alias_and_refuse_others() {
        assert_eq!("Python".parse::<Lang>(), Ok(Lang::Python));
        assert_eq!("javascript".parse::<Lang>(), Ok(Lang::Js));
        assert_eq!("rs".parse::<Lang>(), Ok(Lang::Rust));
        let err = "go".parse::<Lang>().expect_err("go");
        assert!(err.contains("rust, python or js"), "{err}");
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("chat-filter2").is_ok());
        for bad in ["", "Chat", "2chat", "chat_filter", "chat-", "a/b", "../x"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_case_file_in_tests_belongs_to_its_project() {
        let dir = tempfile::tempdir().expect("tempdir");
        let project = dir.path().join("tagger");
        std::fs::create_dir_all(project.join("tests")).expect("mkdir");
        std::fs::write(project.join("app.py"), "").expect("write");
        let found = Project::around(&project.join("tests/cases.jsonl")).expect("project");
        assert_eq!((found.name.as_str(), found.lang), ("tagger", Lang::Python));
        assert!(Project::open(dir.path()).is_err());
    }
}
