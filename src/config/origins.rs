//! Where each configuration value came from, for `check-config`: bbb-webhooks' files, the TOML
//! file, `secret.env` or the environment, each later one winning as they do when loading.

use std::{collections::BTreeMap, path::Path};

/// Dotted key -> where its value came from.
#[derive(Debug, Default)]
pub(super) struct Origins {
    map: BTreeMap<String, String>,
}

impl Origins {
    /// `key`'s value came from `from` (over what set it before).
    pub(super) fn set(&mut self, key: &str, from: String) {
        self.map.insert(key.to_string(), from);
    }

    /// Every key the TOML file at `path` sets (a file that does not parse sets none here; the
    /// load says why).
    pub(super) fn toml(&mut self, path: &Path) {
        let Ok(text) = std::fs::read_to_string(path) else {
            return;
        };
        let Ok(value) = toml::from_str::<serde_json::Value>(&text) else {
            return;
        };
        for (key, _) in super::reference_files::flat(&value) {
            self.set(&key, path.display().to_string());
        }
    }

    /// The keys bbb-webhooks' files set, under everything else.
    pub(super) fn reference(&mut self, origins: &[(String, std::path::PathBuf)]) {
        for (key, file) in origins {
            self.map
                .entry(key.clone())
                .or_insert_with(|| format!("bbb-webhooks' {}", file.display()));
        }
    }

    pub(super) fn into_list(self) -> Vec<(String, String)> {
        self.map.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_sources_win_and_the_reference_is_under_all() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("h.toml");
        std::fs::write(
            &file,
            "[bbb]\nserver_domain = 'a'\n[delivery.ssrf]\nenabled = false\n",
        )
        .unwrap();
        let mut o = Origins::default();
        o.toml(&file);
        o.set("bbb.secret", "secret.env (HOOKRELAY_BBB__SECRET)".into());
        o.reference(&[
            ("bbb.server_domain".into(), "/d.yml".into()),
            ("delivery.auth".into(), "/d.yml".into()),
        ]);
        let list = o.into_list();
        let at = |k: &str| {
            list.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        };
        let shown = file.display().to_string();
        assert_eq!(at("bbb.server_domain").as_deref(), Some(shown.as_str()));
        assert_eq!(at("delivery.ssrf.enabled").as_deref(), Some(shown.as_str()));
        assert_eq!(at("delivery.auth").as_deref(), Some("bbb-webhooks' /d.yml"));
        assert_eq!(
            at("bbb.secret").as_deref(),
            Some("secret.env (HOOKRELAY_BBB__SECRET)")
        );
    }
}
