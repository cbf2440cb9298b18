//! Which callback body the relay sends, and why. `delivery.compat` when it is set (in the file
//! or the environment); else the reference's form on every path that takes over from
//! bbb-webhooks, so that the receivers written for it keep working: its configuration read
//! with `--reference-config`, its configuration installed on this server, or its hooks
//! imported into the store; else the specification's form.

use std::path::{Path, PathBuf};

use super::{Compat, Config};

/// Where bbb-webhooks keeps its configuration on a BBB server (3.x, and the override file of
/// BBB 2.7 and later).
pub const REFERENCE_INSTALLED: [&str; 2] = [
    "/usr/local/bigbluebutton/bbb-webhooks/config/default.yml",
    "/etc/bigbluebutton/bbb-webhooks.yml",
];

/// Why callbacks have the form they have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// `delivery.compat`.
    Explicit,
    /// `--reference-config FILE`.
    ReferenceConfig(PathBuf),
    /// bbb-webhooks' configuration is on this server.
    ReferenceInstalled(PathBuf),
    /// Hooks of bbb-webhooks were imported into the store.
    ReferenceHooks,
    /// None of the above: a fresh install.
    Default,
}

/// The form in force and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackFormat {
    pub compat: Compat,
    pub why: Why,
}

impl CallbackFormat {
    /// The form for `config`; `reference_hooks`: the store says hooks of bbb-webhooks were
    /// imported.
    pub fn resolve(config: &Config, reference_hooks: bool) -> Self {
        Self::resolve_with(config, reference_hooks, &REFERENCE_INSTALLED)
    }

    fn resolve_with(config: &Config, reference_hooks: bool, installed: &[&str]) -> Self {
        let reference = |why| Self {
            compat: Compat::Reference,
            why,
        };
        if let Some(compat) = config.delivery.compat {
            return Self {
                compat,
                why: Why::Explicit,
            };
        }
        if let Some(path) = &config.reference_config {
            return reference(Why::ReferenceConfig(path.clone()));
        }
        if let Some(path) = installed.iter().map(Path::new).find(|p| p.is_file()) {
            return reference(Why::ReferenceInstalled(path.to_path_buf()));
        }
        if reference_hooks {
            return reference(Why::ReferenceHooks);
        }
        Self {
            compat: Compat::Spec,
            why: Why::Default,
        }
    }

    /// One sentence for the log and `check-config`.
    pub fn describe(&self) -> String {
        let form = match self.compat {
            Compat::Spec => "the plain form (event=<one JSON object>&timestamp=<ms>)",
            Compat::Reference => {
                "bbb-webhooks' form (domain=<server>&event=[<JSON object>]&timestamp=<ms>)"
            }
        };
        let why = match &self.why {
            Why::Explicit => "as delivery.compat says".to_string(),
            Why::ReferenceConfig(p) => format!(
                "as bbb-webhooks sends it, since its configuration was given ({}); delivery.compat = \"spec\" sends the plain form",
                p.display()
            ),
            Why::ReferenceInstalled(p) => format!(
                "as bbb-webhooks sends it, since its configuration is on this server ({}); delivery.compat = \"spec\" sends the plain form",
                p.display()
            ),
            Why::ReferenceHooks => "as bbb-webhooks sends it, since its hooks were imported; delivery.compat = \"spec\" sends the plain form".to_string(),
            Why::Default => "the default of a new installation (no bbb-webhooks found)".to_string(),
        };
        format!("callbacks are sent in {form}, {why}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::from_toml(&format!("[bbb]\nsecret='x'\n{text}")).unwrap()
    }

    #[test]
    fn explicit_wins_then_every_way_from_bbb_webhooks_then_the_plain_form() {
        let dir = tempfile::tempdir().unwrap();
        let installed = dir.path().join("default.yml");
        let there = [installed.to_str().unwrap()];
        let none: [&str; 0] = [];
        let plain = config("");
        assert_eq!(
            CallbackFormat::resolve_with(&plain, false, &none),
            CallbackFormat {
                compat: Compat::Spec,
                why: Why::Default
            }
        );
        let hooks = CallbackFormat::resolve_with(&plain, true, &none);
        assert_eq!(
            (hooks.compat, hooks.why),
            (Compat::Reference, Why::ReferenceHooks)
        );
        // Installed: only once the file is there.
        assert_eq!(
            CallbackFormat::resolve_with(&plain, false, &there).compat,
            Compat::Spec
        );
        std::fs::write(&installed, "x: 1\n").unwrap();
        let found = CallbackFormat::resolve_with(&plain, false, &there);
        assert_eq!(found.why, Why::ReferenceInstalled(installed.clone()));
        let mut given = plain.clone();
        given.reference_config = Some("/r.yml".into());
        assert_eq!(
            CallbackFormat::resolve_with(&given, true, &there).why,
            Why::ReferenceConfig("/r.yml".into())
        );
        // An explicit choice wins over everything.
        let mut spec = config("[delivery]\ncompat = 'spec'\n");
        spec.reference_config = Some("/r.yml".into());
        let chosen = CallbackFormat::resolve_with(&spec, true, &there);
        assert_eq!((chosen.compat, chosen.why), (Compat::Spec, Why::Explicit));
        assert!(found.describe().contains("delivery.compat = \"spec\""));
    }
}
