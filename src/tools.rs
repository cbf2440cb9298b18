//! The plugin authors' commands: `plugin check` and `replay`. They print for people, and
//! exit 1 when something is wrong.

use std::{path::PathBuf, process::ExitCode, sync::Arc, time::Duration};

use hookrelay::{
    CallbackClient, Config, EventFilter, Host, Metrics, PluginSet, Signer, check_file, replay,
};

/// `hookrelay check-config`: the configuration is valid; with a plugin folder, every plugin in
/// it loads too.
pub(crate) fn check_config(config: &Config) -> ExitCode {
    println!("{}", callback_format(config));
    println!("{}", config.describe_api());
    for d in &config.destinations {
        let kind = d.kind().map_or("?", |k| k.name());
        println!("destination {}: {kind} {} {}", d.name, d.url, d.target);
    }
    let origins = origins(config);
    if !origins.is_empty() {
        println!("values set, and where each comes from:");
        for line in origins {
            println!("{line}");
        }
    }
    let Some(dir) = &config.plugins.dir else {
        println!("configuration ok");
        return ExitCode::SUCCESS;
    };
    let set = match load_plugins(dir, config) {
        Ok(set) => set,
        Err(code) => return code,
    };
    println!(
        "configuration ok; plugins, in order: {}",
        names(&set).join(", ")
    );
    ExitCode::SUCCESS
}

/// Which callback form the relay would send, and why; whether bbb-webhooks' hooks were imported
/// and what the takeover recorded are read from the store when the configuration leaves it
/// open.
fn callback_format(config: &Config) -> String {
    use hookrelay::config::compat::{CallbackFormat, Why};
    let unread = CallbackFormat::resolve(config, false, None);
    if unread.why == Why::Explicit {
        return unread.describe();
    }
    let stored = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()
        .and_then(|rt| {
            rt.block_on(async {
                let connect = hookrelay::StoreConn::connect_once(config);
                let mut conn = tokio::time::timeout(Duration::from_secs(2), connect)
                    .await
                    .ok()?
                    .ok()?;
                let imported = hookrelay::import::reference_hooks_imported(&mut conn)
                    .await
                    .ok()?;
                let recorded = hookrelay::takeover::read(&mut conn).await.ok()?;
                Some((imported, recorded))
            })
        });
    match stored {
        Some((imported, recorded)) => {
            CallbackFormat::resolve(config, imported, recorded.as_ref()).describe()
        }
        None => format!(
            "{} (the store could not be read: if hooks of bbb-webhooks were imported there, or a takeover recorded, bbb-webhooks' form is sent)",
            unread.describe()
        ),
    }
}

/// Every value that is not a default, and where it came from: lines for `check-config`.
fn origins(config: &Config) -> Vec<String> {
    let width = config
        .origins
        .iter()
        .map(|(k, _)| k.len())
        .max()
        .unwrap_or(0);
    config
        .origins
        .iter()
        .map(|(key, from)| format!("  {key:width$}  {from}"))
        .collect()
}

/// Loads a plugin folder as the relay would (without the cache); prints every failure.
fn load_plugins(dir: &std::path::Path, config: &Config) -> Result<PluginSet, ExitCode> {
    let host = Host::new(None).map_err(|e| {
        eprintln!("hookrelay: {e}");
        ExitCode::FAILURE
    })?;
    let defaults = config.plugins.defaults();
    let (set, report) = PluginSet::load_dir(
        &host,
        dir,
        &defaults,
        &PluginSet::default(),
        &Metrics::new(),
    );
    if report.failures.is_empty() {
        return Ok(set);
    }
    for f in &report.failures {
        eprintln!("hookrelay: plugin {}: {}", f.name, f.error);
    }
    Err(ExitCode::FAILURE)
}

fn names(set: &PluginSet) -> Vec<&str> {
    set.plugins.iter().map(|p| p.name()).collect()
}

/// `hookrelay plugin check FILE.wasm`.
pub(crate) fn plugin_check(file: &std::path::Path, config: Option<&std::path::Path>) -> ExitCode {
    let defaults = match config.map(|c| Config::load(Some(c))).transpose() {
        Ok(c) => c.unwrap_or_default().plugins.defaults(),
        Err(e) => {
            eprintln!("hookrelay: {e}");
            return ExitCode::FAILURE;
        }
    };
    match check_file(file, &defaults) {
        Ok(r) => {
            let events = if r.wants.is_empty() {
                "every event".to_string()
            } else {
                r.wants.join(", ")
            };
            let settings = if r.has_settings {
                format!("{}.toml", r.name)
            } else {
                "defaults (no NAME.toml beside it)".into()
            };
            let t = &r.times;
            println!(
                "ok: {} is a bbb:relay/plugin@0.1.0 component\n  init: ok, sees {events}\n  settings: {settings}\n  compiled in {} ms, instantiated and initialized in {} ms\n  on a recorded meeting: {} calls, {:.1} us per call (slowest {:.1} us); kept {}, replaced {}, dropped {}\n  one instance: {:.1} MiB of linear memory (each of max_instances adds as much)",
                r.name,
                r.compile_ms,
                r.init_ms,
                t.calls,
                t.mean().as_secs_f64() * 1e6,
                t.slowest.as_secs_f64() * 1e6,
                t.kept,
                t.replaced,
                t.dropped,
                r.instance_memory as f64 / f64::from(1u32 << 20)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hookrelay: {}: {e}", file.display());
            ExitCode::FAILURE
        }
    }
}

/// The arguments of `hookrelay replay`.
#[derive(clap::Args)]
pub(crate) struct ReplayArgs {
    /// Raw bus messages: one JSON message per line, or a JSON array.
    events: PathBuf,
    /// Plugin folder (NAME.wasm and NAME.toml files), applied in file-name order.
    #[arg(long, value_name = "DIR")]
    plugins: Option<PathBuf>,
    /// A hook getting processed events (repeatable); default: one at http://localhost/.
    #[arg(long = "hook", value_name = "URL")]
    hooks: Vec<String>,
    /// A hook getting raw bus messages (repeatable).
    #[arg(long = "raw-hook", value_name = "URL")]
    raw_hooks: Vec<String>,
    /// POST the callbacks, signed with the configuration's secret, instead of printing them.
    #[arg(long)]
    send: bool,
    /// Configuration (secret and signing for --send, event filters, plugin defaults).
    #[arg(long, short, value_name = "FILE", env = "HOOKRELAY_CONFIG")]
    config: Option<PathBuf>,
}

/// `hookrelay replay EVENTS --plugins DIR [--hook URL ...] [--send]`.
pub(crate) fn replay(args: &ReplayArgs) -> ExitCode {
    let fail = |msg: String| {
        eprintln!("hookrelay: {msg}");
        ExitCode::FAILURE
    };
    // A configuration is needed to sign (--send) or when one is named; else defaults.
    let config = if args.config.is_some() || args.send {
        match Config::load(args.config.as_deref()) {
            Ok(c) => c,
            Err(e) => return fail(e.to_string()),
        }
    } else {
        Config::default()
    };
    let text = match std::fs::read_to_string(&args.events) {
        Ok(t) => t,
        Err(e) => return fail(format!("cannot read {}: {e}", args.events.display())),
    };
    let messages = match replay::read_messages(&text) {
        Ok(m) => m,
        Err(e) => return fail(format!("{}: {e}", args.events.display())),
    };
    let set = match &args.plugins {
        None => PluginSet::default(),
        Some(dir) => match load_plugins(dir, &config) {
            Ok(set) => {
                eprintln!("plugins, in order: {}", names(&set).join(", "));
                set
            }
            Err(code) => return code,
        },
    };
    let filter = EventFilter::of(&config);
    let hooks = replay::hooks(&args.hooks, &args.raw_hooks);
    let result = replay::run(&messages, hooks, &set, filter);
    let sent = if args.send {
        match send(&result, &config) {
            Ok(lines) => Some(lines),
            Err(e) => return fail(e),
        }
    } else {
        None
    };
    for (i, out) in result.hooks.iter().enumerate() {
        let kind = if out.hook.get_raw { "raw" } else { "processed" };
        println!(
            "# hook {} {} ({kind}): {} callbacks, {} dropped by plugins",
            out.hook.id,
            out.hook.callback_url,
            out.callbacks.len(),
            out.dropped
        );
        match &sent {
            Some(lines) => lines[i].iter().for_each(|l| println!("{l}")),
            None => out
                .callbacks
                .iter()
                .for_each(|c| println!("{}", c.payload.text())),
        }
    }
    eprintln!(
        "replayed {} messages: {} events, {} messages made none",
        result.messages, result.events, result.skipped
    );
    ExitCode::SUCCESS
}

fn send(result: &replay::Replay, config: &Config) -> Result<Vec<Vec<String>>, String> {
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let timeout = Duration::from_millis(config.delivery.request_timeout_ms);
        let client = CallbackClient::new(
            timeout,
            Arc::new(hookrelay::config::callback_guard(&config.delivery)),
            config.delivery.max_connections_per_receiver,
        )
        .map_err(|e| e.to_string())?;
        Ok(replay::send(result, &Signer::from_config(config), &client).await)
    })
}
