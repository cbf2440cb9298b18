//! Which callback body the relay sends, and why, decided once. `delivery.compat` when it is set
//! (in the file or the environment); else the reference's form on every path that takes over
//! from bbb-webhooks, so that the receivers written for it keep working: its configuration given
//! with `--reference-config` or installed on this server, the form recorded in the store at the
//! first takeover (so that purging bbb-webhooks later changes nothing), or its hooks imported
//! into the store; else the specification's form. The recorded takeover also keeps the
//! `domain` those callbacks carry and bbb-webhooks' permanent hooks ([`Recorded::apply`]).

use std::path::PathBuf;

use super::{Compat, Config, PermanentHook};

/// What the first takeover from bbb-webhooks recorded in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub compat: Compat,
    /// The `domain` of the reference's form.
    pub domain: String,
    /// bbb-webhooks' permanent hooks, as its configuration named them.
    pub permanent: Vec<PermanentHook>,
}

impl Recorded {
    /// `config` with what was recorded where it sets nothing itself: the domain (of a relay
    /// without `[[sources]]`) and the permanent hooks.
    pub fn apply(&self, config: &Config) -> Config {
        let mut config = config.clone();
        if config.origin("bbb.server_domain").is_none() && config.sources.is_empty() {
            config.bbb.server_domain.clone_from(&self.domain);
        }
        if config.origin("delivery.permanent_hooks").is_none() {
            config.delivery.permanent_hooks.clone_from(&self.permanent);
        }
        config
    }
}

/// Why callbacks have the form they have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// `delivery.compat`.
    Explicit,
    /// `--reference-config FILE...`.
    ReferenceConfig(Vec<PathBuf>),
    /// bbb-webhooks' configuration is on this server (and was read).
    ReferenceInstalled(Vec<PathBuf>),
    /// Recorded in the store when the relay first took over from bbb-webhooks.
    Recorded,
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
    /// imported; `recorded`: what the first takeover recorded.
    pub fn resolve(config: &Config, reference_hooks: bool, recorded: Option<&Recorded>) -> Self {
        let form = |compat, why| Self { compat, why };
        if let Some(compat) = config.delivery.compat {
            return form(compat, Why::Explicit);
        }
        let files = config.reference_files.clone();
        if config.reference_given {
            return form(Compat::Reference, Why::ReferenceConfig(files));
        }
        if !files.is_empty() {
            return form(Compat::Reference, Why::ReferenceInstalled(files));
        }
        if let Some(r) = recorded {
            return form(r.compat, Why::Recorded);
        }
        if reference_hooks {
            return form(Compat::Reference, Why::ReferenceHooks);
        }
        form(Compat::Spec, Why::Default)
    }

    /// What to record in the store now: the reference's form, its domain and its permanent
    /// hooks, on a takeover from bbb-webhooks (and again when they changed); nothing
    /// otherwise. `config` has the record applied ([`Recorded::apply`]).
    pub fn to_record(&self, config: &Config, recorded: Option<&Recorded>) -> Option<Recorded> {
        let takeover = matches!(
            self.why,
            Why::ReferenceConfig(_) | Why::ReferenceInstalled(_) | Why::ReferenceHooks
        );
        let next = Recorded {
            compat: recorded.map_or(Compat::Reference, |r| r.compat),
            domain: config.bbb.server_domain.clone(),
            permanent: config.delivery.permanent_hooks.clone(),
        };
        match recorded {
            Some(r) if *r == next => None,
            Some(_) => Some(next),
            None if takeover => Some(next),
            None => None,
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
        let files = |f: &[PathBuf]| {
            f.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let plain = "delivery.compat = \"spec\" sends the plain form";
        let why = match &self.why {
            Why::Explicit => "as delivery.compat says".to_string(),
            Why::ReferenceConfig(f) => format!(
                "as bbb-webhooks sends it, since its configuration was given ({}); {plain}",
                files(f)
            ),
            Why::ReferenceInstalled(f) => format!(
                "as bbb-webhooks sends it, since its configuration is on this server ({}); {plain}",
                files(f)
            ),
            Why::Recorded => format!(
                "as bbb-webhooks sent it, as recorded in the store when hookrelay took over from it; {plain}"
            ),
            Why::ReferenceHooks => {
                format!("as bbb-webhooks sends it, since its hooks were imported; {plain}")
            }
            Why::Default => "the default of a new installation (no bbb-webhooks found)".to_string(),
        };
        format!("callbacks are sent in {form}, {why}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::from_toml(&format!("[bbb]\nsecret='long-test-secret'\n{text}")).unwrap()
    }

    #[test]
    fn explicit_wins_then_every_way_from_bbb_webhooks_then_the_plain_form() {
        let plain = config("");
        let resolve = |c: &Config, hooks, rec| CallbackFormat::resolve(c, hooks, rec);
        assert_eq!(
            (
                resolve(&plain, false, None).compat,
                resolve(&plain, false, None).why
            ),
            (Compat::Spec, Why::Default)
        );
        let hooks = resolve(&plain, true, None);
        assert_eq!(
            (hooks.compat, hooks.why.clone()),
            (Compat::Reference, Why::ReferenceHooks)
        );
        let mut installed = plain.clone();
        installed.reference_files = vec!["/d.yml".into()];
        assert_eq!(
            resolve(&installed, false, None).why,
            Why::ReferenceInstalled(vec!["/d.yml".into()])
        );
        let mut given = installed.clone();
        given.reference_given = true;
        assert_eq!(
            resolve(&given, true, None).why,
            Why::ReferenceConfig(vec!["/d.yml".into()])
        );
        // Recorded: the form stays once bbb-webhooks' files are gone.
        let rec = Recorded {
            compat: Compat::Reference,
            domain: "bbb.example.com".into(),
            permanent: vec![PermanentHook {
                url: "https://p.example/".into(),
                get_raw: true,
            }],
        };
        let kept = resolve(&plain, false, Some(&rec));
        assert_eq!(
            (kept.compat, &kept.why),
            (Compat::Reference, &Why::Recorded)
        );
        let applied = rec.apply(&plain);
        assert_eq!(applied.bbb.server_domain, "bbb.example.com");
        assert_eq!(applied.delivery.permanent_hooks, rec.permanent);
        // What the configuration sets itself wins.
        let mut own = plain.clone();
        own.origins = vec![("bbb.server_domain".into(), "/h.toml".into())];
        assert_eq!(rec.apply(&own).bbb.server_domain, "localhost");
        // An explicit choice wins over everything.
        let mut spec = config("[delivery]\ncompat = 'spec'\n");
        spec.reference_files = vec!["/r.yml".into()];
        spec.reference_given = true;
        let chosen = resolve(&spec, true, Some(&rec));
        assert_eq!((chosen.compat, chosen.why), (Compat::Spec, Why::Explicit));
        assert!(hooks.describe().contains("delivery.compat = \"spec\""));
    }

    #[test]
    fn a_takeover_is_recorded_once_and_again_when_its_domain_changes() {
        let mut c = config("");
        c.reference_files = vec!["/d.yml".into()];
        c.bbb.server_domain = "bbb.example.com".into();
        c.origins = vec![("bbb.server_domain".into(), "bbb-webhooks' /d.yml".into())];
        let first = CallbackFormat::resolve(&c, false, None);
        let rec = first.to_record(&c, None).expect("recorded");
        assert_eq!(rec.domain, "bbb.example.com");
        let c = rec.apply(&c);
        let again = CallbackFormat::resolve(&c, false, Some(&rec));
        assert_eq!(again.to_record(&c, Some(&rec)), None);
        let mut moved_config = c.clone();
        moved_config.bbb.server_domain = "new.example.com".into();
        let moved = CallbackFormat::resolve(&moved_config, false, Some(&rec));
        assert_eq!(
            moved.to_record(&moved_config, Some(&rec)).map(|r| r.domain),
            Some("new.example.com".into())
        );
        // A fresh install records nothing.
        let fresh = config("");
        assert_eq!(
            CallbackFormat::resolve(&fresh, false, None).to_record(&fresh, None),
            None
        );
    }
}
