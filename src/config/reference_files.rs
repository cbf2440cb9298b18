//! Which files of bbb-webhooks' configuration are read, and how they are layered: as its
//! packaging layers them on a BBB server. The application sets `NODE_CONFIG_DIR` to
//! `/etc/bigbluebutton/bbb-webhooks/:/usr/local/bigbluebutton/bbb-webhooks/config/` and its
//! unit `NODE_ENV=production`, so node-config applies `default`, then `production`, then
//! `local`, then `local-production`, each from both folders in that order (bbb-webhooks
//! `src/common/env.js`; BigBlueButton `build/packages-template/bbb-webhooks/`); the package's
//! after-install writes the server's secret and domain into the application's `default.yml`.
//! Objects are merged key by key and arrays replaced whole. `/etc/bigbluebutton/bbb-webhooks.yml`,
//! which some guides name, is read last.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{
    ConfigError,
    reference::{Reference, translate},
};

/// Reads one reference configuration file.
///
/// # Errors
/// When the file cannot be read or is not YAML.
pub fn read(path: &Path) -> Result<Reference, ConfigError> {
    Ok(translate(&read_yaml(path)?))
}

/// The reference's files read together: hookrelay's keys from them, and which file gave each.
#[derive(Debug, Default)]
pub struct Layered {
    pub reference: Reference,
    /// hookrelay's dotted key -> the last file that changed its value.
    pub origins: Vec<(String, PathBuf)>,
}

/// Reads `files` (in the order they apply), merges them and translates the result.
///
/// # Errors
/// When a file cannot be read or is not YAML.
pub fn read_layered(files: &[PathBuf]) -> Result<Layered, ConfigError> {
    let mut merged = Value::Object(serde_json::Map::new());
    let mut before: Vec<(String, Value)> = Vec::new();
    let mut origins: Vec<(String, PathBuf)> = Vec::new();
    for file in files {
        merge(&mut merged, read_yaml(file)?);
        let now = flat(&Value::Object(translate(&merged).keys));
        for (key, value) in &now {
            if !before.iter().any(|(k, v)| k == key && v == value) {
                origins.retain(|(k, _)| k != key);
                origins.push((key.clone(), file.clone()));
            }
        }
        before = now;
    }
    Ok(Layered {
        reference: translate(&merged),
        origins,
    })
}

/// Every leaf of `v` with its dotted key (arrays are leaves).
pub fn flat(v: &Value) -> Vec<(String, Value)> {
    fn walk(v: &Value, prefix: &str, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, v) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(v, &key, out);
                }
            }
            other => out.push((prefix.to_string(), other.clone())),
        }
    }
    let mut out = Vec::new();
    walk(v, "", &mut out);
    out.retain(|(k, _)| !k.is_empty());
    out
}

/// The override folder, the application's folder and the single override file, under a root.
const ETC_DIR: &str = "etc/bigbluebutton/bbb-webhooks";
const APP_DIR: &str = "usr/local/bigbluebutton/bbb-webhooks/config";
const SINGLE_OVERRIDE: &str = "etc/bigbluebutton/bbb-webhooks.yml";

/// node-config's file names, in the order they apply under `NODE_ENV=production`.
const NAMES: [&str; 4] = ["default", "production", "local", "local-production"];

/// The installed configuration files under `root` (`/` on a server), in the order they apply.
pub fn installed(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for name in NAMES {
        for dir in [ETC_DIR, APP_DIR] {
            for ext in ["yml", "yaml"] {
                let file = root.join(dir).join(format!("{name}.{ext}"));
                if file.is_file() {
                    files.push(file);
                }
            }
        }
    }
    let single = root.join(SINGLE_OVERRIDE);
    if single.is_file() {
        files.push(single);
    }
    files
}

/// One file's YAML as JSON values.
///
/// # Errors
/// When the file cannot be read or is not YAML.
pub fn read_yaml(path: &Path) -> Result<Value, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("reference config {}: {e}", path.display())))?;
    if text.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_saphyr::from_str(&text).map_err(|e| {
        let first = e.to_string();
        let first = first.lines().next().unwrap_or_default().to_string();
        ConfigError(format!("reference config {}: {first}", path.display()))
    })
}

/// `over` laid on `base`: objects merged key by key, anything else (arrays included) replaced.
pub fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bad_or_missing_file_is_one_line_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.yml");
        std::fs::write(&bad, "bbb: [unclosed\n").unwrap();
        let err = read(&bad).unwrap_err().to_string();
        assert!(err.starts_with("configuration: reference config "), "{err}");
        assert_eq!(err.lines().count(), 1);
        let missing = read(&dir.path().join("none.yml")).unwrap_err().to_string();
        assert!(missing.contains("none.yml"), "{missing}");
    }

    #[test]
    fn objects_merge_and_arrays_are_replaced() {
        let mut base = json!({"bbb": {"serverDomain": "a", "sharedSecret": "s"}, "list": [1, 2]});
        merge(
            &mut base,
            json!({"bbb": {"serverDomain": "b"}, "list": [3], "new": true}),
        );
        assert_eq!(
            base,
            json!({"bbb": {"serverDomain": "b", "sharedSecret": "s"}, "list": [3], "new": true})
        );
    }

    #[test]
    fn each_key_comes_from_the_last_file_that_changed_it() {
        let dir = tempfile::tempdir().unwrap();
        let default = dir.path().join("default.yml");
        let over = dir.path().join("production.yml");
        std::fs::write(
            &default,
            "bbb:\n  serverDomain: bbb.example.com\n  sharedSecret: first-secret-123\n",
        )
        .unwrap();
        std::fs::write(&over, "bbb:\n  serverDomain: other.example.com\n").unwrap();
        let layered = read_layered(&[default.clone(), over.clone()]).unwrap();
        let from = |key: &str| {
            layered
                .origins
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, f)| f.clone())
        };
        assert_eq!(from("bbb.server_domain"), Some(over));
        assert_eq!(from("bbb.secret"), Some(default));
        assert_eq!(
            layered.reference.keys["bbb"]["server_domain"],
            "other.example.com"
        );
    }

    #[test]
    fn installed_files_come_in_node_configs_order() {
        let root = tempfile::tempdir().unwrap();
        let put = |p: &str| {
            let f = root.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(&f, "a: 1\n").unwrap();
            f
        };
        let app_default = put("usr/local/bigbluebutton/bbb-webhooks/config/default.yml");
        let etc_production = put("etc/bigbluebutton/bbb-webhooks/production.yml");
        let etc_default = put("etc/bigbluebutton/bbb-webhooks/default.yml");
        let single = put("etc/bigbluebutton/bbb-webhooks.yml");
        let local = put("usr/local/bigbluebutton/bbb-webhooks/config/local.yaml");
        assert_eq!(
            installed(root.path()),
            [etc_default, app_default, etc_production, local, single]
        );
        assert!(installed(&root.path().join("none")).is_empty());
    }
}
