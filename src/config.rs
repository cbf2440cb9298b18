//! One validated [`Config`]: built-in defaults, then the TOML file, then `HOOKRELAY_*` environment
//! variables. Loading fails fast with one line that names the offending key.

use std::{
    fmt,
    net::SocketAddr,
    path::{Path, PathBuf},
};

use figment::{
    Figment,
    providers::{Env, Format, Serialized, Toml},
};
use serde::{Deserialize, Serialize};

use crate::{
    delivery::sign::Algorithm,
    plugin_host::{Defaults, OnError},
};

/// Sections whose keys can be set from the environment as `HOOKRELAY_<SECTION>_<KEY>`.
/// Longer names first, so that a nested section wins over its parent.
const ENV_SECTIONS: &[(&str, &str)] = &[
    ("delivery_ssrf", "delivery.ssrf"),
    ("bbb", "bbb"),
    ("api", "api"),
    ("redis", "redis"),
    ("delivery", "delivery"),
    ("mapping", "mapping"),
    ("metrics", "metrics"),
    ("plugins", "plugins"),
];

/// The whole configuration of one relay.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
    pub url: String,
    /// Pub/sub channels listened to (exact names, as BBB publishes them).
    pub channels: Vec<String>,
    /// Bus messages larger than this are skipped and counted, never parsed.
    pub max_message_bytes: usize,
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            url: "redis://127.0.0.1:6379".into(),
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
    /// `Authorization: Bearer <secret>` and no checksum (the reference's `auth2_0` mode).
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
    pub bind: SocketAddr,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            bind: SocketAddr::from(([127, 0, 0, 1], 3004)),
        }
    }
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
        let d = Defaults::default();
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
    pub fn defaults(&self) -> Defaults {
        Defaults {
            on_error: self.on_error,
            timeout_ms: self.timeout_ms,
            memory_mib: self.memory_mib,
            max_failures: self.max_failures,
            failed_cooldown_ms: self.failed_cooldown_ms,
        }
    }

    /// The cache folder: `cache_dir`; else systemd's `$CACHE_DIRECTORY`, `$XDG_CACHE_HOME/hookrelay`
    /// or `~/.cache/hookrelay`, in that order.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        let env = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        self.cache_dir.clone().or_else(|| {
            // systemd may list several folders, separated by ':'.
            env("CACHE_DIRECTORY")
                .and_then(|d| d.to_str()?.split(':').next().map(PathBuf::from))
                .map(|d| d.join("plugins"))
                .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("hookrelay")))
                .or_else(|| env("HOME").map(|d| d.join(".cache/hookrelay")))
        })
    }
}

/// A secret string that never shows in `Debug` output or logs.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The secret itself: only for hashing.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Why the configuration was refused: one line, naming the key.
#[derive(Debug, thiserror::Error)]
#[error("configuration: {0}")]
pub struct ConfigError(String);

impl Config {
    /// Defaults, then `path` (if given), then `HOOKRELAY_*` environment variables.
    ///
    /// # Errors
    /// When the file cannot be read or parsed, a key is unknown or has the wrong type, or a value
    /// fails validation.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(path) = path {
            if !path.is_file() {
                return Err(ConfigError(format!(
                    "config file {} not found",
                    path.display()
                )));
            }
            figment = figment.merge(Toml::file(path));
        }
        Self::extract(figment.merge(env_provider()))
    }

    /// Parses a TOML text over the defaults, without the environment (for tests and tools).
    ///
    /// # Errors
    /// As [`Config::load`].
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        Self::extract(
            Figment::from(Serialized::defaults(Config::default())).merge(Toml::string(text)),
        )
    }

    fn extract(figment: Figment) -> Result<Config, ConfigError> {
        let config: Config = figment.extract().map_err(|e| {
            let e = e.into_iter().next().map_or_else(
                || "invalid".to_string(),
                |e| {
                    let key = e.path.join(".");
                    let kind = one_line(&e.kind.to_string());
                    if key.is_empty() {
                        kind
                    } else {
                        format!("{key}: {kind}")
                    }
                },
            );
            ConfigError(e)
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what types alone cannot.
    ///
    /// # Errors
    /// Names the first key whose value is unusable.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |key: &str, why: &str| Err(ConfigError(format!("{key}: {why}")));
        if self.bbb.secret.expose().is_empty() {
            return fail("bbb.secret", "must be set to the server's shared secret");
        }
        if !self.api.path.starts_with('/') {
            return fail("api.path", "must start with '/'");
        }
        if self.api.checksum_algorithms.is_empty() {
            return fail(
                "api.checksum_algorithms",
                "must name at least one algorithm",
            );
        }
        match url::Url::parse(&self.redis.url) {
            Ok(u) if u.scheme() == "redis" || u.scheme() == "rediss" || u.scheme() == "unix" => {}
            _ => return fail("redis.url", "must be a redis:// URL"),
        }
        if self.redis.channels.is_empty() {
            return fail("redis.channels", "must name at least one channel");
        }
        if self.redis.max_message_bytes == 0 {
            return fail("redis.max_message_bytes", "must be greater than 0");
        }
        if self.delivery.retry_intervals_ms.is_empty() {
            return fail(
                "delivery.retry_intervals_ms",
                "must hold at least one interval",
            );
        }
        if self.delivery.max_queue == 0 {
            return fail("delivery.max_queue", "must be greater than 0");
        }
        if self.delivery.request_timeout_ms == 0 {
            return fail("delivery.request_timeout_ms", "must be greater than 0");
        }
        if let Some(dir) = &self.plugins.dir
            && !dir.is_dir()
        {
            return fail("plugins.dir", "is not a folder");
        }
        if !(10..=60_000).contains(&self.plugins.reload_debounce_ms) {
            return fail("plugins.reload_debounce_ms", "must be between 10 and 60000");
        }
        if let Err(e) = self.plugins.defaults().validate() {
            return Err(ConfigError(format!("plugins.{}", e.detail())));
        }
        let guard = self.callback_guard();
        for hook in &self.delivery.permanent_hooks {
            if let Err(why) = crate::hooks::model::validate_callback_url(&hook.url) {
                return fail("delivery.permanent_hooks", &format!("{}: {why}", hook.url));
            }
            if let Err(why) = guard.check_url(&hook.url) {
                let why = format!("{} is not allowed by delivery.ssrf: {why}", hook.url);
                return fail("delivery.permanent_hooks", &why);
            }
        }
        if self.mapping.inactivity_timeout_s == 0 {
            return fail("mapping.inactivity_timeout_s", "must be greater than 0");
        }
        Ok(())
    }
}

/// Folds a multi-line parser message (with its source excerpt) into one line.
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with('|')
                && !l
                    .split('|')
                    .next()
                    .is_some_and(|n| n.trim().parse::<u32>().is_ok() && l.contains('|'))
        })
        .collect::<Vec<_>>()
        .join(": ")
}

impl Config {
    /// The rules callback URLs must pass (`[delivery.ssrf]`, `delivery.allow_url_credentials`).
    pub fn callback_guard(&self) -> crate::delivery::ssrf::Guard {
        crate::delivery::ssrf::Guard::new(
            self.delivery.ssrf.enabled,
            self.delivery.ssrf.allow_cidrs.clone(),
        )
        .allow_credentials(self.delivery.allow_url_credentials)
    }
}

/// `HOOKRELAY_BBB_SECRET` -> `bbb.secret`, `HOOKRELAY_DELIVERY_RETRY_INTERVALS_MS` ->
/// `delivery.retry_intervals_ms`.
fn env_provider() -> Env {
    Env::prefixed("HOOKRELAY_").map(|key| {
        let key = key.as_str().to_ascii_lowercase();
        for (prefix, section) in ENV_SECTIONS {
            if let Some(rest) = key.strip_prefix(prefix).and_then(|r| r.strip_prefix('_')) {
                return format!("{section}.{rest}").into();
            }
        }
        key.into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
                "configuration: delivery.permanent_hooks: http://127.0.0.1:9/x is not allowed"
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
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail fixes the closure type
    fn environment_maps_section_and_key() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("HOOKRELAY_BBB_SECRET", "from-env");
            jail.set_env("HOOKRELAY_DELIVERY_RETRY_INTERVALS_MS", "[5, 6]");
            jail.set_env("HOOKRELAY_DELIVERY_SSRF_ALLOW_CIDRS", "[\"10.0.0.0/8\"]");
            let c = Config::load(None).map_err(|e| e.to_string())?;
            assert_eq!(c.bbb.secret.expose(), "from-env");
            assert_eq!(c.delivery.retry_intervals_ms, vec![5, 6]);
            assert_eq!(
                c.delivery.ssrf.allow_cidrs,
                vec!["10.0.0.0/8".parse().unwrap()]
            );
            assert!(c.delivery.ssrf.enabled);
            Ok(())
        });
    }
}
