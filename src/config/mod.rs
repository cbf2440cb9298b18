//! The configuration as plain data: one [`Config`] of sections, each documented here and in
//! `hookrelay.example.toml`, with its defaults. [`load`] builds it (defaults, then the TOML
//! file, then `HOOKRELAY_*` environment variables) and [`validate`] checks what types alone
//! cannot. It depends on nothing but [`crate::base`]; the stages read it, never the reverse.
//! `Debug` and serialized output show neither the shared secret nor a Redis password.

mod load;
mod validate;

use std::{net::SocketAddr, path::PathBuf};

use serde::{Deserialize, Serialize};

use crate::base::digest::Algorithm;
pub use crate::base::secret::{Secret, SecretUrl};
pub use load::ConfigError;
pub use validate::callback_guard;

/// The whole configuration of one relay.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub bbb: BbbConfig,
    pub api: ApiConfig,
    pub redis: RedisConfig,
    pub delivery: DeliveryConfig,
    pub mapping: MappingConfig,
    pub metrics: MetricsConfig,
    pub plugins: PluginsConfig,
}

/// The conference server this relay serves.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BbbConfig {
    /// The server's shared secret: checks API checksums and signs callbacks. Required.
    pub secret: Secret,
    /// Sent as the `domain` field of callbacks when `delivery.compat = "reference"`.
    pub server_domain: String,
}

impl Default for BbbConfig {
    fn default() -> Self {
        Self {
            secret: Secret::default(),
            server_domain: "localhost".into(),
        }
    }
}

/// The hooks API listener.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    pub bind: SocketAddr,
    /// Calls live at `{path}/hooks/create` and so on; also the prefix removed to get the call name
    /// that the API checksum covers.
    pub path: String,
    /// Digests accepted for the API checksum (chosen by the checksum's length).
    pub checksum_algorithms: Vec<Algorithm>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 3005)),
            path: "/bigbluebutton/api".into(),
            checksum_algorithms: Algorithm::ALL.to_vec(),
        }
    }
}

/// The Redis server that carries BBB's bus and stores hooks and mappings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedisConfig {
    /// `redis://[:password@]host:port[/db]`, `rediss://` or `unix://`; its password is never
    /// shown.
    pub url: SecretUrl,
    /// Pub/sub channels listened to (exact names, as BBB publishes them).
    pub channels: Vec<String>,
    /// Bus messages larger than this are skipped and counted, never parsed.
    pub max_message_bytes: usize,
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            url: SecretUrl::new("redis://127.0.0.1:6379"),
            channels: [
                "from-akka-apps-redis-channel",
                "from-bbb-web-redis-channel",
                "from-akka-apps-chat-redis-channel",
                "from-akka-apps-pres-redis-channel",
                "bigbluebutton:from-bbb-apps:meeting",
                "bigbluebutton:from-bbb-apps:users",
                "bigbluebutton:from-rap",
            ]
            .map(String::from)
            .to_vec(),
            max_message_bytes: 1024 * 1024,
        }
    }
}

/// Which callback body to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compat {
    /// `event=<json object>&timestamp=<ms>` as the specification says.
    #[default]
    Spec,
    /// The reference service's `domain=…&event=[<json>]&timestamp=…`.
    Reference,
}

/// How receivers can tell a callback is genuine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallbackAuth {
    /// `checksum=` in the URL: digest of URL + body + secret.
    #[default]
    Checksum,
    /// `Authorization: Bearer <secret>` and no checksum (the reference's `auth2_0` mode). The
    /// secret opens the whole BBB API: callbacks need `https` unless
    /// `delivery.allow_insecure_bearer`.
    Bearer,
}

/// A hook that exists because the configuration names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermanentHook {
    pub url: String,
    #[serde(default)]
    pub get_raw: bool,
}

/// How callbacks are sent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeliveryConfig {
    /// Wait before retry k (after the k-th failure). When it runs out the hook is removed.
    pub retry_intervals_ms: Vec<u64>,
    pub request_timeout_ms: u64,
    pub checksum_algorithm: Algorithm,
    pub compat: Compat,
    pub auth: CallbackAuth,
    pub permanent_hooks: Vec<PermanentHook>,
    /// Most callbacks queued per hook; beyond it the oldest are dropped (and counted).
    pub max_queue: usize,
    /// Accept callback URLs carrying `user:password@` (refused by default: they end up in logs
    /// and lists of other tools).
    pub allow_url_credentials: bool,
    /// With `auth = "bearer"`, accept plain `http` callback URLs all the same (the shared
    /// secret then crosses the network in clear).
    pub allow_insecure_bearer: bool,
    /// When not empty, only these event ids are delivered (mappings are kept up to date anyway).
    pub include_events: Vec<String>,
    /// These event ids are never delivered.
    pub exclude_events: Vec<String>,
    pub ssrf: SsrfConfig,
}

/// Which addresses callbacks may go to.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SsrfConfig {
    /// Refuse loopback, private, link-local, CGNAT, multicast and reserved addresses.
    pub enabled: bool,
    /// Networks allowed all the same, e.g. `["10.1.2.0/24"]`.
    pub allow_cidrs: Vec<ipnet::IpNet>,
}

impl Default for SsrfConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            allow_cidrs: Vec::new(),
        }
    }
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        Self {
            retry_intervals_ms: vec![
                100, 500, 1000, 2000, 4000, 8000, 10000, 30000, 60000, 60000, 60000, 60000,
            ],
            request_timeout_ms: 5000,
            checksum_algorithm: Algorithm::Sha1,
            compat: Compat::Spec,
            auth: CallbackAuth::Checksum,
            permanent_hooks: Vec::new(),
            max_queue: 10_000,
            allow_url_credentials: false,
            allow_insecure_bearer: false,
            include_events: Vec::new(),
            exclude_events: Vec::new(),
            ssrf: SsrfConfig::default(),
        }
    }
}

/// Internal -> external id mappings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MappingConfig {
    /// A meeting mapping with no event for this long is dropped.
    pub inactivity_timeout_s: u64,
}

impl Default for MappingConfig {
    fn default() -> Self {
        Self {
            inactivity_timeout_s: 86_400,
        }
    }
}

/// The Prometheus endpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// `false` serves no metrics endpoint.
    pub enabled: bool,
    /// Loopback by default: expose it only behind `auth` or a firewall.
    pub bind: SocketAddr,
    /// Credentials a scrape must present; none set: open.
    pub auth: MetricsAuth,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            bind: SocketAddr::from(([127, 0, 0, 1], 3004)),
            auth: MetricsAuth::default(),
        }
    }
}

/// `[metrics.auth]`: a bearer token, a basic-auth pair, or both (either is accepted).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsAuth {
    /// Scrapes must send `Authorization: Bearer <token>`.
    pub bearer_token: Secret,
    /// Scrapes must send HTTP basic auth with this user and `basic_password`.
    pub basic_user: String,
    pub basic_password: Secret,
}

/// WebAssembly event plugins.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PluginsConfig {
    /// Folder of `NAME.wasm` plugins (and optional `NAME.toml` settings); none: no plugins.
    pub dir: Option<PathBuf>,
    /// Where compiled plugins are cached (a folder of the relay's own user, writable by no one
    /// else); default `$CACHE_DIRECTORY`, `$XDG_CACHE_HOME/hookrelay` or `~/.cache/hookrelay`.
    pub cache_dir: Option<PathBuf>,
    /// Reload when the folder changes.
    pub watch: bool,
    /// Quiet time after the last change in the folder before reloading.
    pub reload_debounce_ms: u64,
    /// What happens to an event a plugin fails on, unless its `NAME.toml` says otherwise.
    pub on_error: OnError,
    /// CPU deadline of one plugin call.
    pub timeout_ms: u64,
    /// Memory limit of one plugin instance, in MiB.
    pub memory_mib: u64,
    /// Failures in a row after which a plugin is marked failed.
    pub max_failures: u32,
    /// How long a failed plugin is not called (its `on_error` applies) before it is tried again.
    pub failed_cooldown_ms: u64,
}

impl Default for PluginsConfig {
    fn default() -> Self {
        let d = PluginDefaults::default();
        Self {
            dir: None,
            cache_dir: None,
            watch: true,
            reload_debounce_ms: 300,
            on_error: d.on_error,
            timeout_ms: d.timeout_ms,
            memory_mib: d.memory_mib,
            max_failures: d.max_failures,
            failed_cooldown_ms: d.failed_cooldown_ms,
        }
    }
}

impl PluginsConfig {
    /// The per-plugin defaults that `NAME.toml` files override.
    pub fn defaults(&self) -> PluginDefaults {
        PluginDefaults {
            on_error: self.on_error,
            timeout_ms: self.timeout_ms,
            memory_mib: self.memory_mib,
            max_failures: self.max_failures,
            failed_cooldown_ms: self.failed_cooldown_ms,
        }
    }
}

/// What happens to an event when a plugin fails on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// The event is not sent to that hook (fail closed).
    #[default]
    Drop,
    /// The event goes on as if the plugin had kept it.
    Pass,
}

/// A plugin's error policy and limits: the relay-wide defaults (`[plugins]`), which a plugin's
/// `NAME.toml` may override.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginDefaults {
    pub on_error: OnError,
    /// CPU deadline of one call, in milliseconds.
    pub timeout_ms: u64,
    /// Memory limit of one instance, in MiB.
    pub memory_mib: u64,
    /// Consecutive failures after which the plugin is marked failed.
    pub max_failures: u32,
    /// How long a failed plugin is not called (its `on_error` applies) before it is tried again.
    pub failed_cooldown_ms: u64,
}

impl Default for PluginDefaults {
    fn default() -> Self {
        Self {
            on_error: OnError::Drop,
            timeout_ms: 10,
            memory_mib: 32,
            max_failures: 5,
            failed_cooldown_ms: 30_000,
        }
    }
}

impl PluginDefaults {
    /// # Errors
    /// Names the limit that is zero or absurdly large.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=60_000).contains(&self.timeout_ms) {
            return Err("timeout_ms must be between 1 and 60000".into());
        }
        if !(1..=4096).contains(&self.memory_mib) {
            return Err("memory_mib must be between 1 and 4096".into());
        }
        if self.max_failures == 0 {
            return Err("max_failures must be at least 1".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Configuration is plain data: it uses the leaf modules of `base` and nothing of the
    /// stages, which all read it (no cycle).
    #[test]
    fn config_imports_only_the_leaf_modules() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config");
        for entry in std::fs::read_dir(&dir).expect("src/config") {
            let path = entry.expect("entry").path();
            let text = std::fs::read_to_string(&path).expect("source");
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            assert!(
                !code.replace("crate::base", "").contains("crate::"),
                "{} imports a stage",
                path.display()
            );
        }
    }

    #[test]
    fn missing_secret_names_the_key() {
        let err = Config::from_toml("").unwrap_err().to_string();
        assert!(err.contains("bbb.secret"), "{err}");
    }

    #[test]
    fn unknown_key_is_named() {
        let err = Config::from_toml("[bbb]\nsecret='x'\n[api]\nbnd='1.2.3.4:5'\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("bnd"), "{err}");
    }

    #[test]
    fn bad_redis_url_is_named() {
        let err = Config::from_toml("[bbb]\nsecret='x'\n[redis]\nurl='http://x'\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("configuration: redis.url"), "{err}");
    }

    #[test]
    fn defaults_and_overrides() {
        let c = Config::from_toml(
            "[bbb]\nsecret='x'\n[delivery]\ncompat='reference'\nretry_intervals_ms=[1,2]\n",
        )
        .unwrap();
        assert_eq!(c.delivery.compat, Compat::Reference);
        assert_eq!(c.delivery.retry_intervals_ms, vec![1, 2]);
        assert_eq!(c.api.bind.port(), 3005);
        assert_eq!(c.redis.channels.len(), 7);
        assert_eq!(c.mapping.inactivity_timeout_s, 86_400);
    }

    proptest::proptest! {
        /// Any text as a configuration file: a config or one error line, never a panic.
        #[test]
        fn any_text_loads_or_fails_cleanly(text in "(\\[[a-z.]{0,12}\\]\n|[a-z_]{1,12} = (\"[ -~]{0,10}\"|[0-9]{1,6}|\\[[0-9, ]{0,12}\\]|true)\n|[ -~]{0,20}\n){0,8}") {
            match Config::from_toml(&text) {
                Ok(c) => proptest::prop_assert!(!c.bbb.secret.expose().is_empty()),
                Err(e) => proptest::prop_assert_eq!(e.to_string().lines().count(), 1),
            }
        }
    }

    #[test]
    fn permanent_hooks_must_pass_the_ssrf_guard() {
        let text =
            "[bbb]\nsecret='x'\n[delivery]\npermanent_hooks=[{url='http://127.0.0.1:9/x'}]\n";
        let err = Config::from_toml(text).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "configuration: delivery.permanent_hooks: http://127.0.0.1:9/x: not allowed"
            ),
            "{err}"
        );
        let allowed = format!("{text}[delivery.ssrf]\nallow_cidrs=['127.0.0.0/8']\n");
        assert!(Config::from_toml(&allowed).is_ok());
    }

    #[test]
    fn secret_is_not_debug_printed() {
        let c = Config::from_toml("[bbb]\nsecret='hunter2'\n").unwrap();
        assert!(!format!("{c:?}").contains("hunter2"));
        assert_eq!(c.bbb.secret.expose(), "hunter2");
    }

    #[test]
    fn neither_debug_nor_serialized_output_shows_a_secret() {
        let c = Config::from_toml(
            "[bbb]\nsecret='hunter2'\n[redis]\nurl='redis://:opensesame@127.0.0.1:6379/0'\n",
        )
        .unwrap();
        assert_eq!(c.redis.url.expose(), "redis://:opensesame@127.0.0.1:6379/0");
        let shown = [
            format!("{c:?}"),
            format!("{c:#?}"),
            serde_json::to_string(&c).unwrap(),
            toml::to_string(&c).unwrap(),
        ];
        for text in shown {
            assert!(!text.contains("hunter2"), "{text}");
            assert!(!text.contains("opensesame"), "{text}");
            assert!(
                text.contains("127.0.0.1:6379"),
                "the rest of the URL is shown: {text}"
            );
        }
    }

    #[test]
    fn bearer_mode_refuses_plain_http_permanent_hooks() {
        let text = "[bbb]\nsecret='x'\n[delivery]\nauth='bearer'\npermanent_hooks=[{url='http://example.com/x'}]\n";
        let err = Config::from_toml(text).unwrap_err().to_string();
        assert!(err.contains("allow_insecure_bearer"), "{err}");
        let allowed = text.replace("auth='bearer'", "auth='bearer'\nallow_insecure_bearer=true");
        assert!(Config::from_toml(&allowed).is_ok());
        let https = text.replace("http://", "https://");
        assert!(Config::from_toml(&https).is_ok());
    }
}
