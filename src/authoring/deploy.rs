//! `hookrelay plugin deploy`: puts a project's component and settings into a relay's plugin
//! folder so that the running relay hot-reloads them. Each file is written under a temporary
//! name and renamed into place, settings first, so the relay never reads half a file.

use std::path::{Path, PathBuf};

use super::{AuthoringError, project::Project};

/// The files written.
#[derive(Debug)]
pub struct Deployed {
    pub wasm: PathBuf,
    pub settings: Option<PathBuf>,
}

/// The name a plugin is deployed under: `name`, or the project's. An optional two-digit
/// order prefix (`05-`) is allowed before a plugin name.
///
/// # Errors
/// When the name is not a plugin name.
pub fn deployed_name(project: &Project, name: Option<&str>) -> Result<String, AuthoringError> {
    let Some(name) = name else {
        return Ok(project.name.clone());
    };
    let bare = name
        .split_once('-')
        .filter(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        .map_or(name, |(_, rest)| rest);
    super::project::check_name(bare)?;
    Ok(name.to_string())
}

/// Copies the project's staged build (`staged`, from [`Project::staged`]: `NAME.wasm` and
/// `NAME.toml` when the project has one) into `to` as `NAME.wasm` and `NAME.toml` (`NAME` from
/// `name`). A settings file of an earlier deploy is removed when the project has none now.
///
/// # Errors
/// When a file cannot be written.
pub fn deploy(
    project: &Project,
    staged: &Path,
    to: &Path,
    name: &str,
) -> Result<Deployed, AuthoringError> {
    if !to.is_dir() {
        return Err(AuthoringError::Usage(format!(
            "{} is not a folder (the relay's [plugins] dir)",
            to.display()
        )));
    }
    let settings_src = staged.join(format!("{}.toml", project.name));
    let settings = to.join(format!("{name}.toml"));
    let settings = if settings_src.is_file() {
        place(&settings_src, &settings)?;
        Some(settings)
    } else {
        if settings.exists() {
            std::fs::remove_file(&settings).map_err(|e| AuthoringError::io(&settings, e))?;
        }
        None
    };
    let wasm = to.join(format!("{name}.wasm"));
    place(&staged.join(format!("{}.wasm", project.name)), &wasm)?;
    Ok(Deployed { wasm, settings })
}

/// Copies `from` to a hidden temporary name beside `to` (which the relay ignores), then
/// renames it over `to`.
fn place(from: &Path, to: &Path) -> Result<(), AuthoringError> {
    let file_name = to
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = to.with_file_name(format!(".{file_name}.{}.tmp", std::process::id()));
    std::fs::copy(from, &tmp).map_err(|e| AuthoringError::io(&tmp, e))?;
    std::fs::rename(&tmp, to).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        AuthoringError::io(to, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authoring::Lang;

    #[test]
    fn names_may_carry_an_order_prefix() {
        let project = Project {
            dir: PathBuf::from("/x/tagger"),
            name: "tagger".into(),
            lang: Lang::Rust,
        };
        assert_eq!(deployed_name(&project, None).expect("default"), "tagger");
        assert_eq!(
            deployed_name(&project, Some("05-tagger")).expect("numbered"),
            "05-tagger"
        );
        assert!(deployed_name(&project, Some("../etc/x")).is_err());
        assert!(deployed_name(&project, Some("05-")).is_err());
    }
}
