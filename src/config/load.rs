//! Builds a [`Config`]: serde's defaults, then the TOML file, then `HOOKRELAY_*` environment
//! variables; fails fast with one line that names the offending key.
//!
//! Environment keys: `HOOKRELAY_<SECTION>__<KEY>` (double underscores between the levels, as
//! figment's `split("__")` reads them: `HOOKRELAY_DELIVERY__SSRF__ALLOW_CIDRS`), or the older
//! single-underscore form (`HOOKRELAY_BBB_SECRET`) where exactly one key fits it. Any other
//! variable of the prefix (Kubernetes injects `HOOKRELAY_PORT` for a Service named `hookrelay`)
//! names no key: it is ignored with a warning naming it, never its value. An unknown key in the
//! file still stops start-up.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Arc,
};

use figment::{
    Figment,
    error::Kind,
    providers::{Env, Format, Serialized, Toml},
};

use super::Config;

/// The prefix of every variable the relay reads.
const PREFIX: &str = "HOOKRELAY_";
/// Variables of the prefix that belong to the command line (clap reads them), not to the
/// configuration.
const CLI_VARIABLES: &[&str] = &[
    "CONFIG",
    "LOG_FORMAT",
    "SIGN_SECRET",
    "STANDARD_SECRETS",
    "TOOLCHAINS",
];

/// The package's configuration, read by every command when `--config` is not given.
pub(super) const PACKAGE_CONFIG: &str = "/etc/hookrelay/hookrelay.toml";

/// Whether the configuration file can be read, said as the person needs it: missing, or not
/// theirs to read.
fn readable(path: &Path) -> Result<(), ConfigError> {
    match std::fs::File::open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(ConfigError(format!(
            "config file {}: permission denied (it is for root and the relay's group: run as root or as a member of group {})",
            path.display(),
            crate::base::unix::group_of(path).unwrap_or_else(|| "hookrelay".into())
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ConfigError(format!(
            "config file {} not found",
            path.display()
        ))),
        Err(e) => Err(ConfigError(format!("config file {}: {e}", path.display()))),
    }
}

/// The file beside the configuration file that holds `HOOKRELAY_*` variables (the secret), in
/// systemd's `EnvironmentFile` form.
pub(super) const SECRET_ENV: &str = "secret.env";

/// The `NAME=value` lines of an environment file.
fn read_env_file(path: &Path) -> Result<Vec<(String, String)>, ConfigError> {
    // A line that does not parse is not shown: it may hold the secret.
    let named = |e: dotenvy::Error| {
        let why = match e {
            dotenvy::Error::LineParse(_, at) => format!("a line does not parse (at {at})"),
            dotenvy::Error::Io(e) => e.to_string(),
            _ => "cannot be read".to_string(),
        };
        ConfigError(format!("{}: {why}", path.display()))
    };
    dotenvy::from_path_iter(path)
        .map_err(named)?
        .map(|line| line.map_err(named))
        .collect()
}

/// Why the configuration was refused: one line, naming the key.
#[derive(Debug, thiserror::Error)]
#[error("configuration: {0}")]
pub struct ConfigError(pub(super) String);

impl Config {
    /// Defaults, then `path` (if given), then `HOOKRELAY_*` environment variables. Variables
    /// that name no key are logged (by name) and ignored.
    ///
    /// # Errors
    /// When the file cannot be read or parsed, a key of the file is unknown, a value has the
    /// wrong type, or a value fails validation.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        Self::load_with_reference(path, &[]).map(|(c, _)| c)
    }

    /// As [`Config::load`], with the keys hookrelay understands of the reference service's
    /// YAML configuration under the file and the environment: the files `reference` (layered
    /// in that order), else, unless `reference.read_installed` is off, bbb-webhooks' files
    /// installed on this server ([`super::reference_files`]). Without `path`, the package's
    /// configuration is read when it is there. Also returns the reference's keys that were
    /// ignored.
    ///
    /// # Errors
    /// As [`Config::load`], and when a reference file cannot be read or is not YAML.
    pub fn load_with_reference(
        path: Option<&Path>,
        reference: &[PathBuf],
    ) -> Result<(Config, Vec<String>), ConfigError> {
        let package = Path::new(PACKAGE_CONFIG);
        let path = match path {
            Some(p) => Some(p),
            // Present but not this user's to see is said as such by `readable`.
            None => match std::fs::metadata(package) {
                Ok(_) => Some(package),
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Some(package),
                Err(_) => None,
            },
        };
        let mut origins = super::origins::Origins::default();
        let own = match path {
            Some(path) => own_file(path, &mut origins)?,
            None => Figment::new(),
        };
        let own = environment(own, &mut origins)?;
        let (files, given) = reference_to_read(&own, reference);
        let layered = super::reference_files::read_layered(&files)?;
        origins.reference(&layered.origins);
        let figment = Figment::new()
            .merge(Serialized::defaults(layered.reference.keys))
            .merge(own);
        let mut config = Self::parse(figment)?;
        config.reference_files = files;
        config.reference_given = given;
        config.origins = origins.into_list();
        config.find_api_url();
        // Before validating: the secret may be BBB's own, from bbb-web's properties.
        config.find_secret();
        config.validate()?;
        Ok((config, layered.reference.ignored))
    }

    /// Parses a TOML text over the defaults, without the environment (for tests and tools).
    ///
    /// # Errors
    /// As [`Config::load`].
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        Self::extract(Figment::from(Toml::string(text)))
    }

    fn extract(figment: Figment) -> Result<Config, ConfigError> {
        let config = Self::parse(figment)?;
        config.validate()?;
        Ok(config)
    }

    /// The configuration `figment` gives, its types checked but not its values.
    fn parse(figment: Figment) -> Result<Config, ConfigError> {
        figment.extract().map_err(|e| {
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
        })
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

/// Which `HOOKRELAY_*` variables are configuration keys.
#[derive(Debug, Default, PartialEq)]
struct EnvKeys {
    /// Variable name without the prefix, lowercase -> dotted key (`bbb.secret`).
    keys: HashMap<String, String>,
    /// Full names of the variables that name no key (or more than one).
    ignored: Vec<String>,
    /// `<VARIABLE>_FILE` variables (Docker's and Kubernetes' secrets): the dotted key each
    /// names, and the variable's full name (its value is the file's path).
    files: Vec<(String, String)>,
}

impl EnvKeys {
    /// Sorts the variable `names` of the process.
    fn read(names: impl Iterator<Item = String>) -> Self {
        let mut out = Self::default();
        for name in names {
            let Some(rest) = name.strip_prefix(PREFIX) else {
                continue;
            };
            if CLI_VARIABLES.iter().any(|c| c.eq_ignore_ascii_case(rest)) {
                continue;
            }
            let rest = rest.to_ascii_lowercase();
            if let Some(key) = only_key(&rest) {
                out.keys.insert(rest, key);
            } else if let Some(key) = rest.strip_suffix("_file").and_then(only_key) {
                out.files.push((key, name));
            } else {
                out.ignored.push(name);
            }
        }
        out.ignored.sort();
        out
    }

    /// The environment provider that yields exactly these keys.
    fn provider(self) -> Env {
        let keys = Arc::new(self.keys);
        // figment keeps the variable's own case in the key (it compares without case).
        Env::prefixed(PREFIX).filter_map(move |k| {
            keys.get(&k.as_str().to_ascii_lowercase())
                .map(|d| d.clone().into())
        })
    }
}

/// The one key a variable name (prefix removed, lowercase) names, if exactly one.
fn only_key(rest: &str) -> Option<String> {
    let mut known = candidate_keys(rest).into_iter().filter(|k| is_leaf_key(k));
    match (known.next(), known.next()) {
        (Some(key), None) => Some(key),
        _ => None,
    }
}

/// The value of `key` read from the file `variable` names: its text without the trailing
/// line end (a list, `[...]`, as the environment's values are read).
///
/// # Errors
/// When the file cannot be read, or the key is also set by its own variable.
fn file_value(
    key: &str,
    variable: &str,
    env: &EnvKeys,
) -> Result<figment::value::Value, ConfigError> {
    if env.keys.values().any(|k| k == key) {
        let own = variable.strip_suffix("_FILE").unwrap_or(variable);
        return Err(ConfigError(format!(
            "{key}: both {own} and {variable} are set; keep one"
        )));
    }
    let path = std::env::var_os(variable).unwrap_or_default();
    let text = std::fs::read_to_string(&path).map_err(|e| {
        ConfigError(format!(
            "{key}: cannot read {variable} ({}): {e}",
            Path::new(&path).display()
        ))
    })?;
    let text = text.trim_end_matches(['\n', '\r']).to_string();
    Ok(match text.trim_start().starts_with('[') {
        true => text
            .parse()
            .unwrap_or_else(|_| figment::value::Value::from(text)),
        false => figment::value::Value::from(text),
    })
}

/// The dotted keys a variable name (prefix removed, lowercase) may mean: with `__`, the levels
/// it spells; without, the old form, where one or two of its underscores separate the levels.
fn candidate_keys(rest: &str) -> Vec<String> {
    if rest.contains("__") {
        return vec![rest.replace("__", ".")];
    }
    let cuts: Vec<usize> = rest.match_indices('_').map(|(i, _)| i).collect();
    let with_dots = |at: &[usize]| {
        let mut k = rest.to_string().into_bytes();
        for &i in at {
            k[i] = b'.';
        }
        String::from_utf8(k).unwrap_or_default()
    };
    let mut out = Vec::new();
    for (n, &a) in cuts.iter().enumerate() {
        out.push(with_dots(&[a]));
        for &b in &cuts[n + 1..] {
            out.push(with_dots(&[a, b]));
        }
    }
    out
}

/// Whether `key` (dotted) is a configuration value, not a section and not unknown: serde itself
/// tells, by extracting a configuration that sets only that key to an empty table (fine for a
/// section, the wrong type for a value, an unknown field for anything else).
fn is_leaf_key(key: &str) -> bool {
    if key.is_empty() || key.split('.').any(str::is_empty) {
        return false;
    }
    let empty = serde_json::Map::new();
    match Figment::from((key, empty)).extract::<Config>() {
        Ok(_) => false,
        Err(e) => !e
            .into_iter()
            .any(|e| matches!(e.kind, Kind::UnknownField(..))),
    }
}

/// The TOML file at `path`, and `secret.env` beside it (the package keeps the secret there,
/// which its unit reads as its environment: the commands run by hand read it too, under the
/// process's own variables).
fn own_file(path: &Path, origins: &mut super::origins::Origins) -> Result<Figment, ConfigError> {
    readable(path)?;
    let mut own = Figment::new().merge(Toml::file(path));
    origins.toml(path);
    let beside = path.with_file_name(SECRET_ENV);
    if !beside.is_file() {
        return Ok(own);
    }
    let pairs = read_env_file(&beside)?;
    let env = EnvKeys::read(pairs.iter().map(|(k, _)| k.clone()));
    for (name, value) in pairs {
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        if std::env::var_os(&name).is_some() {
            continue;
        }
        if let Some(key) = env.keys.get(&rest.to_ascii_lowercase()) {
            origins.set(key, format!("{} ({name})", beside.display()));
            let value: figment::value::Value = value
                .parse()
                .unwrap_or_else(|_| figment::value::Value::from(value));
            own = own.merge((key.as_str(), value));
        }
    }
    Ok(own)
}

/// `own` under the `HOOKRELAY_*` variables and the files their `_FILE` variants name.
fn environment(
    own: Figment,
    origins: &mut super::origins::Origins,
) -> Result<Figment, ConfigError> {
    let names = std::env::vars_os().filter_map(|(k, _)| k.into_string().ok());
    let env = EnvKeys::read(names);
    for name in &env.ignored {
        tracing::warn!(
            variable = %name,
            "ignoring an environment variable that names no configuration key"
        );
    }
    for (rest, key) in &env.keys {
        origins.set(
            key,
            format!("the environment ({PREFIX}{})", rest.to_ascii_uppercase()),
        );
    }
    let mut from_files = Vec::with_capacity(env.files.len());
    for (key, variable) in &env.files {
        from_files.push((key.clone(), file_value(key, variable, &env)?));
        let path = std::env::var(variable).unwrap_or_default();
        origins.set(key, format!("the file {path} ({variable})"));
    }
    let mut own = own.merge(env.provider());
    for (key, value) in from_files {
        own = own.merge((key.as_str(), value));
    }
    Ok(own)
}

/// The reference's files to read, and whether they were given: `reference` when it names
/// some, else (unless `reference.read_installed` is off) bbb-webhooks' files installed under
/// `reference.root`.
fn reference_to_read(own: &Figment, reference: &[PathBuf]) -> (Vec<PathBuf>, bool) {
    if !reference.is_empty() {
        return (reference.to_vec(), true);
    }
    let read: bool = own
        .extract_inner("reference.read_installed")
        .unwrap_or(true);
    let root: PathBuf = own
        .extract_inner("reference.root")
        .unwrap_or_else(|_| PathBuf::from("/"));
    let found = match read {
        true => super::reference_files::installed(&root),
        false => Vec::new(),
    };
    (found, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(names: &[&str]) -> EnvKeys {
        EnvKeys::read(names.iter().map(|s| s.to_string()))
    }

    #[test]
    fn double_underscores_and_the_old_form_both_name_keys() {
        let env = sorted(&[
            "HOOKRELAY_BBB__SECRET",
            "HOOKRELAY_DELIVERY__SSRF__ALLOW_CIDRS",
            "HOOKRELAY_DELIVERY_RETRY_INTERVALS_MS",
            "HOOKRELAY_DELIVERY_SSRF_ENABLED",
            "HOOKRELAY_PLUGINS_DIR",
            "PATH",
        ]);
        let key = |k: &str| env.keys.get(k).map(String::as_str);
        assert_eq!(key("bbb__secret"), Some("bbb.secret"));
        assert_eq!(
            key("delivery__ssrf__allow_cidrs"),
            Some("delivery.ssrf.allow_cidrs")
        );
        assert_eq!(
            key("delivery_retry_intervals_ms"),
            Some("delivery.retry_intervals_ms")
        );
        assert_eq!(key("delivery_ssrf_enabled"), Some("delivery.ssrf.enabled"));
        assert_eq!(key("plugins_dir"), Some("plugins.dir"));
        assert!(env.ignored.is_empty(), "{:?}", env.ignored);
    }

    #[test]
    fn variables_that_name_no_key_are_ignored_by_name() {
        let env = sorted(&[
            "HOOKRELAY_CONFIG",
            "HOOKRELAY_LOG_FORMAT",
            "HOOKRELAY_PORT",
            "HOOKRELAY_PORT_3005_TCP_ADDR",
            "HOOKRELAY_SERVICE_HOST",
            "HOOKRELAY_BBB",
            "HOOKRELAY_BBB__SECRETT",
            "HOOKRELAY_",
            "HOOKRELAY___",
        ]);
        assert!(env.keys.is_empty(), "{:?}", env.keys);
        assert_eq!(
            env.ignored,
            [
                "HOOKRELAY_",
                "HOOKRELAY_BBB",
                "HOOKRELAY_BBB__SECRETT",
                "HOOKRELAY_PORT",
                "HOOKRELAY_PORT_3005_TCP_ADDR",
                "HOOKRELAY_SERVICE_HOST",
                "HOOKRELAY___",
            ]
        );
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail fixes the closure type
    fn environment_overrides_the_file_and_strays_do_not_stop_it() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("c.toml", "[bbb]\nsecret = 'from-the-file-1'\n")?;
            jail.set_env("HOOKRELAY_BBB__SECRET", "from-the-environment");
            jail.set_env("HOOKRELAY_DELIVERY_RETRY_INTERVALS_MS", "[5, 6]");
            jail.set_env("HOOKRELAY_DELIVERY__SSRF__ALLOW_CIDRS", "[\"10.0.0.0/8\"]");
            jail.set_env("HOOKRELAY_PORT", "tcp://10.0.0.1:3005");
            jail.set_env("HOOKRELAY_SERVICE_HOST", "10.0.0.1");
            jail.set_env("HOOKRELAY_CONFIG", "elsewhere.toml");
            let c = Config::load(Some(Path::new("c.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(c.bbb.secret.expose(), "from-the-environment");
            assert_eq!(c.delivery.retry_intervals_ms, vec![5, 6]);
            assert_eq!(
                c.delivery.ssrf.allow_cidrs,
                vec!["10.0.0.0/8".parse().unwrap()]
            );
            assert!(c.delivery.ssrf.enabled);
            Ok(())
        });
    }

    #[test]
    #[allow(clippy::result_large_err)]
    fn secret_env_beside_the_file_wins_over_it_and_the_environment_over_both() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("c.toml", "[bbb]\nsecret = 'change-me'\n")?;
            jail.create_file(
                SECRET_ENV,
                "# written at install\nHOOKRELAY_BBB__SECRET=from-secret-env\nOTHER=x\nHOOKRELAY_DELIVERY__MAX_UNACKED=3\n",
            )?;
            let c = Config::load(Some(Path::new("c.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(c.bbb.secret.expose(), "from-secret-env");
            assert_eq!(c.delivery.max_unacked, 3);
            jail.set_env("HOOKRELAY_BBB__SECRET", "from-the-environment");
            let c = Config::load(Some(Path::new("c.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(c.bbb.secret.expose(), "from-the-environment");
            jail.create_file(SECRET_ENV, "HOOKRELAY_BBB__SECRET='unclosed\n")?;
            let err = Config::load(Some(Path::new("c.toml")))
                .unwrap_err()
                .to_string();
            assert!(err.contains("secret.env"), "{err}");
            assert!(!err.contains("unclosed"), "{err}");
            Ok(())
        });
    }

    #[test]
    #[allow(clippy::result_large_err)]
    fn a_bad_value_from_the_environment_is_named() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("HOOKRELAY_BBB__SECRET", "x");
            jail.set_env("HOOKRELAY_API__BIND", "nowhere");
            let err = Config::load(None).unwrap_err().to_string();
            assert!(err.starts_with("configuration: api.bind"), "{err}");
            Ok(())
        });
    }
}
