//! A plugin's `NAME.toml`: its error policy, limits, scope and free-form `[config]` table,
//! with the defaults of the relay's `[plugins]` section.

use crate::base::ids::HookId;

use std::{collections::HashMap, path::Path, sync::Arc};

use serde::Deserialize;

use super::PluginError;
use crate::hooks::Hook;

pub(crate) use crate::config::OnError;
/// The relay-wide error policy and limits (`[plugins]`), which `NAME.toml` may override.
pub use crate::config::PluginDefaults as Defaults;

/// Which (event, hook) pairs a plugin sees. Every list that is given must match; an absent or
/// empty list matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct Scope {
    /// Hook ids.
    hooks: Vec<HookId>,
    /// Callback URL prefixes.
    callback_prefixes: Vec<String>,
    /// External meeting ids of the event.
    meetings: Vec<String>,
}

impl Scope {
    pub(super) fn matches(&self, hook: &Hook, external_meeting_id: Option<&str>) -> bool {
        (self.hooks.is_empty() || self.hooks.contains(&hook.id))
            && (self.callback_prefixes.is_empty()
                || self
                    .callback_prefixes
                    .iter()
                    .any(|p| hook.callback_url.starts_with(p.as_str())))
            && (self.meetings.is_empty()
                || external_meeting_id.is_some_and(|m| self.meetings.iter().any(|x| x == m)))
    }
}

/// `NAME.toml` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    on_error: Option<OnError>,
    timeout_ms: Option<u64>,
    init_timeout_ms: Option<u64>,
    memory_mib: Option<u64>,
    max_failures: Option<u32>,
    failed_cooldown_ms: Option<u64>,
    max_instances: Option<u32>,
    #[serde(default)]
    scope: Scope,
    #[serde(default)]
    config: toml::Table,
}

/// One plugin's effective settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    pub limits: Defaults,
    pub(super) scope: Scope,
    /// `[config]`, each value as `get-config` returns it (shared with the plugin's stores).
    pub(super) config: Arc<HashMap<String, String>>,
}

impl Settings {
    /// Parses the text of a `NAME.toml` (`None` when there is none) over `defaults`.
    ///
    /// # Errors
    /// When the TOML is invalid or a key is unknown or out of range.
    pub fn parse(text: Option<&str>, defaults: &Defaults) -> Result<Self, PluginError> {
        let file: File = match text {
            Some(t) => toml::from_str(t).map_err(|e| PluginError::Settings(one_line(&e)))?,
            None => File::default(),
        };
        let limits = Defaults {
            on_error: file.on_error.unwrap_or(defaults.on_error),
            timeout_ms: file.timeout_ms.unwrap_or(defaults.timeout_ms),
            init_timeout_ms: file.init_timeout_ms.unwrap_or(defaults.init_timeout_ms),
            memory_mib: file.memory_mib.unwrap_or(defaults.memory_mib),
            max_failures: file.max_failures.unwrap_or(defaults.max_failures),
            failed_cooldown_ms: file
                .failed_cooldown_ms
                .unwrap_or(defaults.failed_cooldown_ms),
            max_instances: file.max_instances.unwrap_or(defaults.max_instances),
        };
        limits.validate().map_err(PluginError::Settings)?;
        let config = file
            .config
            .into_iter()
            .map(|(k, v)| {
                let text = match v {
                    toml::Value::String(s) => s,
                    other => serde_json::to_string(&other).unwrap_or_default(),
                };
                (k, text)
            })
            .collect();
        Ok(Self {
            limits,
            scope: file.scope,
            config: Arc::new(config),
        })
    }

    /// Reads `NAME.toml` beside `wasm`, if there is one.
    ///
    /// # Errors
    /// When the file exists but cannot be read or parsed.
    pub fn load_beside(wasm: &Path, defaults: &Defaults) -> Result<Self, PluginError> {
        Self::parse(read_beside(wasm)?.as_deref(), defaults)
    }
}

/// The text of the `NAME.toml` beside `wasm`; `None` when there is none.
///
/// # Errors
/// When the file exists but cannot be read.
pub(crate) fn read_beside(wasm: &Path) -> Result<Option<String>, PluginError> {
    let path = wasm.with_extension("toml");
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(PluginError::Io(path.display().to_string(), e.to_string())),
    }
}

fn one_line(e: &toml::de::Error) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(id: u64, url: &str) -> Hook {
        Hook {
            id: HookId(id),
            callback_url: url.into(),
            meeting_id: None,
            get_raw: false,
            permanent: false,
            tenant: None,
            disabled: None,
            signing: None,
            event_ids: None,
        }
    }

    #[test]
    fn file_overrides_defaults_and_config_values_become_text() {
        let s = Settings::parse(
            Some(
                "on_error = \"pass\"\ntimeout_ms = 5\n[scope]\nhooks = [2]\n\
                 [config]\nallow = [\"a\", \"b\"]\nname = \"x\"\nn = 3\n",
            ),
            &Defaults::default(),
        )
        .expect("valid");
        assert_eq!(s.limits.on_error, OnError::Pass);
        assert_eq!(s.limits.timeout_ms, 5);
        // Making an instance keeps its own, longer deadline unless the file sets it.
        assert_eq!(s.limits.init_timeout_ms, 1000);
        assert_eq!(s.limits.memory_mib, 32);
        assert_eq!(s.config["allow"], r#"["a","b"]"#);
        assert_eq!(s.config["name"], "x");
        assert_eq!(s.config["n"], "3");
        assert!(s.scope.matches(&hook(2, "http://a/"), None));
        assert!(!s.scope.matches(&hook(3, "http://a/"), None));
    }

    #[test]
    fn every_given_scope_list_must_match() {
        let scope = Scope {
            hooks: vec![],
            callback_prefixes: vec!["https://lms/".into()],
            meetings: vec!["m1".into()],
        };
        assert!(scope.matches(&hook(1, "https://lms/cb"), Some("m1")));
        assert!(!scope.matches(&hook(1, "https://lms/cb"), Some("m2")));
        assert!(!scope.matches(&hook(1, "https://lms/cb"), None));
        assert!(!scope.matches(&hook(1, "https://other/"), Some("m1")));
        assert!(Scope::default().matches(&hook(9, "http://x/"), None));
    }

    proptest::proptest! {
        /// Any text, and any value for every key, gives settings or an error: never a panic,
        /// and never limits outside their ranges.
        #[test]
        fn any_name_toml_parses_or_is_refused(
            text in ".{0,200}",
            timeout in 0u64..70_000,
            memory in 0u64..5_000,
            key in "[a-z_]{1,12}",
        ) {
            let d = Defaults::default();
            let _ = Settings::parse(Some(&text), &d);
            let generated = format!(
                "timeout_ms = {timeout}\nmemory_mib = {memory}\n[config]\n{key} = {timeout}\n"
            );
            let in_range = (1..=60_000).contains(&timeout) && (1..=4096).contains(&memory);
            match Settings::parse(Some(&generated), &d) {
                Ok(s) => {
                    proptest::prop_assert!(in_range);
                    proptest::prop_assert_eq!(s.limits.timeout_ms, timeout);
                    proptest::prop_assert_eq!(s.limits.memory_mib, memory);
                    proptest::prop_assert_eq!(s.config.get(&key), Some(&timeout.to_string()));
                }
                Err(e) => proptest::prop_assert!(!in_range, "{}", e),
            }
        }
    }

    #[test]
    fn unknown_keys_and_bad_limits_are_refused() {
        let d = Defaults::default();
        assert!(Settings::parse(Some("on_eror = \"drop\""), &d).is_err());
        assert!(Settings::parse(Some("on_error = \"explode\""), &d).is_err());
        assert!(Settings::parse(Some("timeout_ms = 0"), &d).is_err());
        assert!(Settings::parse(Some("init_timeout_ms = 0"), &d).is_err());
        assert!(Settings::parse(Some("init_timeout_ms = 60001"), &d).is_err());
        assert_eq!(
            Settings::parse(Some("init_timeout_ms = 250"), &d)
                .expect("valid")
                .limits
                .init_timeout_ms,
            250
        );
        assert!(Settings::parse(Some("memory_mib = 100000"), &d).is_err());
    }
}
