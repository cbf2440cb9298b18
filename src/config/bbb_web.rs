//! BigBlueButton's own configuration, read where `bbb.api_url` is left empty: bbb-web's
//! properties (the packaged defaults, then the server's overrides in
//! `/etc/bigbluebutton/bbb-web.properties`) name the server's public address,
//! `bigbluebutton.web.serverURL`, from which the API's address follows. On the server itself
//! bbb-web answers on `bbb.local_api_url` (nginx proxies the API there), which is tried first.
//! Where no shared secret is configured (or only the example's placeholder), the same files'
//! `securitySalt` is taken, as the package's postinst takes it: a container that mounts
//! `/etc/bigbluebutton` read-only needs no copy of the secret.

use std::path::PathBuf;

use super::{BbbConfig, Config};

/// bbb-web's properties on a BBB server, in the order they are layered (later wins).
pub const WEB_PROPERTIES: [&str; 2] = [
    "/usr/share/bbb-web/WEB-INF/classes/bigbluebutton.properties",
    "/etc/bigbluebutton/bbb-web.properties",
];

/// Where bbb-web listens on a BBB server (`proxy_pass` of BBB's nginx `web.nginx`).
pub const LOCAL_API_URL: &str = "http://127.0.0.1:8090/bigbluebutton/api";

/// The key of the server's public address.
const SERVER_URL: &str = "bigbluebutton.web.serverURL";
/// The key of the server's shared secret.
const SECURITY_SALT: &str = "securitySalt";

/// Where the API's address came from when the configuration did not set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundApi {
    /// The serverURL's API: `<serverURL>/bigbluebutton/api`.
    pub public: String,
    /// The properties file that named it.
    pub file: PathBuf,
}

/// The value of `key` in the last of `files` that sets it (later files win, as bbb-web layers
/// them), and that file. Unreadable or malformed files are skipped.
fn last_value(files: &[PathBuf], key: &str) -> Option<(String, PathBuf)> {
    files
        .iter()
        .filter_map(|f| {
            let read = std::fs::File::open(f).ok()?;
            let props = java_properties::read(std::io::BufReader::new(read)).ok()?;
            Some((props.get(key)?.trim().to_string(), f.clone()))
        })
        .next_back()
}

/// The last `bigbluebutton.web.serverURL` of `files` (later files win), and the file it came
/// from, when it is an http(s) URL.
pub fn server_url(files: &[PathBuf]) -> Option<(String, PathBuf)> {
    let (url, file) = last_value(files, SERVER_URL)?;
    let url = url.trim_end_matches('/').to_string();
    super::sources::is_http_url(&url).then_some((url, file))
}

/// The `securitySalt` bbb-web uses (the last of `files` that sets one), and its file, when it
/// is a plain secret (letters and digits), as the package's postinst takes it; else none (an
/// earlier file's, the packaged default, is not the server's).
pub fn security_salt(files: &[PathBuf]) -> Option<(String, PathBuf)> {
    let (salt, file) = last_value(files, SECURITY_SALT)?;
    let plain = !salt.is_empty() && salt.chars().all(|c| c.is_ascii_alphanumeric());
    plain.then_some((salt, file))
}

impl Config {
    /// Fills `bbb.api_url` from bbb-web's properties when it is empty and no `[[sources]]` are
    /// configured; [`Config::api_found`] then says from where.
    pub(super) fn find_api_url(&mut self) {
        if !self.bbb.api_url.is_empty() || !self.sources.is_empty() {
            return;
        }
        if let Some((url, file)) = server_url(&self.bbb.web_properties) {
            let public = format!("{url}/bigbluebutton/api");
            self.bbb.api_url.clone_from(&public);
            self.bbb.api_found = Some(FoundApi { public, file });
        }
    }

    /// Takes bbb-web's `securitySalt` as `bbb.secret` when the configuration gives none, or only
    /// the example's placeholder, and says so in the origins `check-config` lists. An edge
    /// signs nothing and takes none.
    pub(super) fn find_secret(&mut self) {
        let unset =
            self.bbb.secret.is_empty() || self.bbb.secret.expose() == super::strength::PLACEHOLDER;
        if !unset || self.edge.is_some() {
            return;
        }
        if let Some((salt, file)) = security_salt(&self.bbb.web_properties) {
            self.bbb.secret = super::Secret::new(salt);
            self.origins.retain(|(key, _)| key != "bbb.secret");
            self.origins.push((
                "bbb.secret".into(),
                format!("bbb-web's {} ({SECURITY_SALT})", file.display()),
            ));
            self.origins.sort();
        }
    }

    /// The API's address when it came from bbb-web's properties.
    pub fn api_found(&self) -> Option<&FoundApi> {
        self.bbb.api_found.as_ref()
    }

    /// One line for `check-config`: which BBB API the relay calls, and why.
    pub fn describe_api(&self) -> String {
        match (&self.bbb.api_found, self.bbb.api_url.is_empty()) {
            (_, true) if self.sources.is_empty() => "BBB API: none (bbb.api_url is empty and no bbb-web.properties names a serverURL): getMeetings reconciliation is off".into(),
            (_, true) => "BBB API: as each source's api_url says".into(),
            (Some(found), false) => format!(
                "BBB API: {} (bbb-web on this host){}, else {} (bigbluebutton.web.serverURL of {})",
                self.bbb.local_api_url,
                if answers(&self.bbb.local_api_url) { ", which answers now" } else { ", which does not answer now" },
                found.public,
                found.file.display()
            ),
            (None, false) => format!("BBB API: {} (bbb.api_url)", self.bbb.api_url),
        }
    }
}

impl BbbConfig {
    /// The API addresses to try for the default source, in order: bbb-web on this host, then
    /// the serverURL's, when the address came from bbb-web's properties; else `api_url` alone.
    pub fn api_candidates(&self, api_url: &str) -> Vec<String> {
        let mut urls = Vec::new();
        if self.api_found.is_some() && !self.local_api_url.is_empty() {
            urls.push(self.local_api_url.clone());
        }
        if !api_url.is_empty() {
            urls.push(api_url.to_string());
        }
        urls
    }
}

/// Whether something accepts connections at `url`'s host and port (within a second).
fn answers(url: &str) -> bool {
    let Ok(parsed) = url::Url::parse(url) else {
        return false;
    };
    let Ok(addrs) = parsed.socket_addrs(|| None) else {
        return false;
    };
    addrs
        .iter()
        .any(|a| std::net::TcpStream::connect_timeout(a, std::time::Duration::from_secs(1)).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn config(files: &[&Path], extra: &str) -> Config {
        let list: Vec<String> = files.iter().map(|f| format!("'{}'", f.display())).collect();
        let mut c = Config::from_toml(&format!(
            "[bbb]\nsecret='long-test-secret'\nweb_properties = [{}]\n{extra}",
            list.join(", ")
        ))
        .unwrap();
        c.find_api_url();
        c
    }

    #[test]
    fn the_servers_override_wins_and_the_local_bbb_web_comes_first() {
        let dir = tempfile::tempdir().unwrap();
        let (defaults, local) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(
            &defaults,
            "securitySalt=x\nbigbluebutton.web.serverURL=http://bigbluebutton.example.com\n",
        )
        .unwrap();
        std::fs::write(
            &local,
            "# the server's\nbigbluebutton.web.serverURL=https\\://bbb.school.example/\n",
        )
        .unwrap();
        let c = config(&[&defaults, &local], "");
        assert_eq!(
            c.bbb.api_url,
            "https://bbb.school.example/bigbluebutton/api"
        );
        assert_eq!(c.api_found().map(|f| f.file.clone()), Some(local.clone()));
        assert_eq!(
            c.bbb.api_candidates(&c.bbb.api_url),
            [
                LOCAL_API_URL,
                "https://bbb.school.example/bigbluebutton/api"
            ]
        );
        let only_defaults = config(&[&defaults, &dir.path().join("missing")], "");
        assert_eq!(
            only_defaults.bbb.api_url,
            "http://bigbluebutton.example.com/bigbluebutton/api"
        );
    }

    #[test]
    fn a_configured_api_url_is_kept_and_tried_alone() {
        let dir = tempfile::tempdir().unwrap();
        let props = dir.path().join("p");
        std::fs::write(&props, "bigbluebutton.web.serverURL=https://x.example\n").unwrap();
        let c = config(
            &[&props],
            "api_url = 'https://mine.example/bigbluebutton/api'\n",
        );
        assert_eq!(c.bbb.api_url, "https://mine.example/bigbluebutton/api");
        assert!(c.api_found().is_none());
        assert_eq!(
            c.bbb.api_candidates(&c.bbb.api_url),
            std::slice::from_ref(&c.bbb.api_url)
        );
        let none = config(&[&dir.path().join("missing")], "");
        assert!(none.bbb.api_url.is_empty());
        assert!(none.bbb.api_candidates("").is_empty());
        assert!(none.describe_api().contains("none"));
    }

    /// The configuration after loading, with `secret` as the TOML file's `bbb.secret`.
    fn with_secret(files: &[&Path], secret: &str) -> Config {
        let list: Vec<String> = files.iter().map(|f| format!("'{}'", f.display())).collect();
        let mut c = Config::from_toml(&format!(
            "[bbb]\nsecret='valid-until-replaced'\nweb_properties = [{}]\n",
            list.join(", ")
        ))
        .unwrap();
        c.bbb.secret = crate::config::Secret::new(secret);
        c.origins = vec![("bbb.secret".into(), "the TOML file".into())];
        c.find_secret();
        c
    }

    #[test]
    fn the_servers_salt_replaces_a_missing_or_placeholder_secret_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let (defaults, local) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&defaults, "securitySalt=packagedDefault0123456789\n").unwrap();
        std::fs::write(
            &local,
            "securitySalt = 0a1b2c3d4e5f60718293a4b5c6d7e8f9\r\n",
        )
        .unwrap();
        for unset in ["", "change-me"] {
            let c = with_secret(&[&defaults, &local], unset);
            assert_eq!(c.bbb.secret.expose(), "0a1b2c3d4e5f60718293a4b5c6d7e8f9");
            let said = format!("bbb-web's {} (securitySalt)", local.display());
            assert_eq!(c.origins, [("bbb.secret".to_string(), said)]);
        }
        let own = with_secret(&[&defaults, &local], "a-secret-of-my-own");
        assert_eq!(own.bbb.secret.expose(), "a-secret-of-my-own");
        assert_eq!(own.origins[0].1, "the TOML file");
        // The server's salt is not a plain secret: none is taken, not the packaged default
        // (bbb-web does not use that one).
        std::fs::write(&local, "securitySalt=has spaces and $igns\n").unwrap();
        let c = with_secret(&[&defaults, &local], "");
        assert!(c.bbb.secret.is_empty());
        // The server's file without a salt: the packaged one is bbb-web's.
        std::fs::write(&local, "bigbluebutton.web.serverURL=https://x.example\n").unwrap();
        let c = with_secret(&[&defaults, &local], "change-me");
        assert_eq!(c.bbb.secret.expose(), "packagedDefault0123456789");
    }
}
