//! The `hookrelay` binary: parses the command line, sets up logging, loads the configuration and
//! runs the relay until SIGTERM or ctrl-c; the plugin authors' commands live in [`tools`], the
//! administrators' and integrators' in [`admin`].

use std::{path::PathBuf, process::ExitCode};

mod admin;
mod events_cli;
mod plugin_cli;
mod tools;

use clap::{Parser, Subcommand, ValueEnum};
use hookrelay::{Config, Listeners, Shutdown};

/// jemalloc rather than glibc's malloc: fewer CPU cycles per callback (BENCHMARKS.md). Only the
/// binary uses it; the library and its tests keep the system allocator, and so does a build
/// with `--no-default-features` (for heaptrack).
#[cfg(all(feature = "jemalloc", target_os = "linux", not(target_env = "musl")))]
mod allocator {
    #[global_allocator]
    static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

    /// jemalloc's options, read once when it starts (its C `malloc_conf`, under the prefix this
    /// build of jemalloc gives its symbols). One arena instead of four per core: with a handful
    /// of threads it kept peak RSS at or below glibc's, where the default was up to 10 % above
    /// it. Freed pages go back to the kernel over 250 ms rather than ten seconds: a one-hook
    /// burst's peak RSS was 0.84 of one second's, and a 100-hook burst's 0.88 of ten seconds',
    /// at the same CPU per callback. Returning them at once cost 1.5 times the CPU, and over
    /// 100 ms a restart's drain of 100,000 callbacks took 1.1 times as long (BENCHMARKS.md,
    /// issue 63). `_RJEM_MALLOC_CONF` in the environment still overrides it.
    #[unsafe(export_name = "_rjem_malloc_conf")]
    static JEMALLOC_CONF: &[u8; 29] = b"narenas:1,dirty_decay_ms:250\0";
}

#[derive(Parser)]
#[command(version, about = "Webhook relay for BigBlueButton")]
struct Cli {
    /// Log output format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "HOOKRELAY_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the relay.
    Serve {
        /// TOML configuration file (every key is optional but bbb.secret; HOOKRELAY_SECTION__KEY
        /// variables override it, e.g. HOOKRELAY_BBB__SECRET).
        #[arg(long, short, env = "HOOKRELAY_CONFIG")]
        config: Option<PathBuf>,
        /// The reference service's YAML configuration (bbb-webhooks' default.yml, then its
        /// overrides: several files, or the flag repeated, are layered in that order): the keys
        /// hookrelay understands are read under the TOML file; the others are named. Without
        /// it, bbb-webhooks' configuration installed on this server is read.
        #[arg(long, num_args = 1..)]
        reference_config: Vec<PathBuf>,
    },
    /// Load and validate a configuration, then exit.
    CheckConfig {
        /// TOML configuration file, as for serve.
        #[arg(long, short, env = "HOOKRELAY_CONFIG")]
        config: Option<PathBuf>,
        /// As for serve.
        #[arg(long, num_args = 1..)]
        reference_config: Vec<PathBuf>,
    },
    /// Tools for WebAssembly plugin authors.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// Run recorded raw bus messages through the mapper, matcher and plugin chain (no Redis)
    /// and print, per hook, the payloads that would be sent.
    Replay(tools::ReplayArgs),
    /// Write what the bus carries (read-only) to a file, one message a line, for `replay` and
    /// `plugin test`.
    Record(plugin_cli::RecordArgs),
    /// List, create or destroy hooks of a running relay (the checksum is computed from the
    /// configuration's secret).
    Hooks(admin::HooksArgs),
    /// Show a hook's last delivery attempts, newest first: time, event, attempt, status or
    /// error, latency (read from the admin API).
    Deliveries(admin::DeliveriesArgs),
    /// Queue again, for a hook, the callbacks sent to its URL in a window (kept for
    /// delivery.retain), in their original order, after what it has queued; each says so in
    /// X-Hookrelay-Redelivery and keeps its original body, timestamp and event id. With
    /// --destination, the messages a destination published in the window.
    Redeliver(admin::RedeliverArgs),
    /// Print the checksum of a callback and the URL it is posted to.
    Sign(admin::SignArgs),
    /// Check the checksum of a callback a receiver got (exit 0 when it is right, 1 when not).
    Verify(admin::VerifyArgs),
    /// Import the hooks bbb-webhooks left in Redis (as the relay does at start); --dry-run
    /// prints what would be imported, skipped or refused.
    ImportReference(admin::ImportArgs),
    /// Print the token the admin API's TCP listener (`admin.bind`) wants: admin.bearer_token,
    /// or the one derived from the shared secret (a browser's password for user admin).
    AdminToken(admin::AdminTokenArgs),
    /// The tenants in force (configured and Scalelite's), each with its hooks; the ones
    /// refused for their secrets; how Scalelite's were last read (from the admin API).
    Tenants(admin::TenantsArgs),
    /// Who changed what, when: every hooks/create and hooks/destroy, enable, disable, removal,
    /// secret rotation and redelivery, oldest first (from the admin API).
    Audit(admin::AuditArgs),
    /// The BBB servers whose edges write to the store (`[edge]`, docs/pool.md): each edge's
    /// state, last seen, and its counts (from the admin API).
    Servers(admin::ServersArgs),
    /// The message brokers and files that get events (`[[destinations]]`,
    /// docs/destinations.md): each one's state, last error and queue (from the admin API).
    Destinations(admin::DestinationsArgs),
    /// Several instances on one store: show who holds the fleet lease, how far back each
    /// instance's kept messages reach and who delivers each hook (read from the store).
    Fleet(admin::FleetArgs),
    /// Ask a running relay whether it is alive (/healthz) or, with --ready, ready (/readyz):
    /// its line of JSON, exit 0 when it answered 200 (for container health checks).
    Health(admin::HealthArgs),
    /// The events hookrelay sends: list their ids and who gets them, or print the JSON Schema
    /// of one (docs/schemas/).
    Events {
        #[command(subcommand)]
        command: events_cli::EventsCommand,
    },
}

#[derive(Subcommand)]
enum PluginCommand {
    /// Check that a .wasm file is a hookrelay plugin: compile it, link it against the
    /// bbb:relay/plugin interface and run its init (with the NAME.toml beside it, if any).
    Check {
        file: PathBuf,
        /// The relay's configuration, for its [plugins] defaults (limits, on_error).
        #[arg(long, short, env = "HOOKRELAY_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Make a plugin project: ./NAME with the interface, a first plugin, its settings, test
    /// cases and a README.
    New(plugin_cli::NewArgs),
    /// Build a project into build/NAME.wasm (installing the language's pinned tools when
    /// missing) and print its path.
    Build(plugin_cli::BuildArgs),
    /// Run test cases (bus messages, the hook, what must come out) through the mapper, matcher
    /// and plugin chain, without Redis.
    Test(plugin_cli::TestArgs),
    /// Check and test a project, then write its .wasm and NAME.toml into a relay's plugin
    /// folder (atomically: the running relay reloads them).
    Deploy(plugin_cli::DeployArgs),
}

/// A command line clap refuses: one line and exit 2 (help and version as clap prints them).
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    // The first paragraph on one line (a missing argument's name is on the line after).
    let text = e.to_string();
    let first: Vec<&str> = text
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty())
        .collect();
    let first = first.join(" ");
    let first = first.strip_prefix("error: ").unwrap_or(&first);
    let first = if first.is_empty() {
        "invalid arguments"
    } else {
        first
    };
    eprintln!("hookrelay: {first} (see --help)");
    ExitCode::from(2)
}

/// The HTTP libraries, which at debug and trace print connections, requests and their bytes:
/// URLs with checksums and tokens, bodies.
const HTTP_LIBRARIES: [&str; 4] = ["reqwest", "hyper", "hyper_util", "h2"];

/// `RUST_LOG` (default `info`), with the HTTP libraries held at `info` whatever it says: no
/// log line at any level carries a URL or a body the relay sends.
fn log_filter() -> tracing_subscriber::EnvFilter {
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    for library in HTTP_LIBRARIES {
        if let Ok(d) = format!("{library}=info").parse() {
            filter = filter.add_directive(d);
        }
    }
    filter
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    // The tools print their results on stdout: their log lines go to stderr.
    let tool = !matches!(
        cli.command,
        Command::Serve { .. } | Command::CheckConfig { .. }
    );
    init_logs(tool, cli.log_format);
    let (path, reference, serve) = match cli.command {
        Command::Serve {
            config,
            reference_config,
        } => (config, reference_config, true),
        Command::CheckConfig {
            config,
            reference_config,
        } => (config, reference_config, false),
        Command::Plugin {
            command: PluginCommand::Check { file, config },
        } => return tools::plugin_check(&file, config.as_deref()),
        Command::Plugin {
            command: PluginCommand::New(args),
        } => return plugin_cli::new(&args),
        Command::Plugin {
            command: PluginCommand::Build(args),
        } => return plugin_cli::build(&args),
        Command::Plugin {
            command: PluginCommand::Test(args),
        } => return plugin_cli::test(&args),
        Command::Plugin {
            command: PluginCommand::Deploy(args),
        } => return plugin_cli::deploy(&args),
        Command::Record(args) => return plugin_cli::record(&args),
        Command::Replay(args) => return tools::replay(&args),
        Command::Hooks(args) => return admin::hooks(&args),
        Command::Deliveries(args) => return admin::deliveries(&args),
        Command::Redeliver(args) => return admin::redeliver(&args),
        Command::Sign(args) => return admin::sign(&args),
        Command::Verify(args) => return admin::verify(&args),
        Command::ImportReference(args) => return admin::import_reference(&args),
        Command::Fleet(args) => return admin::fleet(&args),
        Command::Tenants(args) => return admin::tenants(&args),
        Command::Audit(args) => return admin::audit(&args),
        Command::Servers(args) => return admin::servers(&args),
        Command::Destinations(args) => return admin::destinations(&args),
        Command::Health(args) => return admin::health(&args),
        Command::Events { command } => return events_cli::run(&command),
        Command::AdminToken(args) => return admin::admin_token(&args),
    };
    let config = match Config::load_with_reference(path.as_deref(), &reference) {
        Ok((c, ignored)) => {
            if !ignored.is_empty() {
                tracing::info!(
                    keys = ignored.join(", "),
                    "keys of the reference configuration that hookrelay does not use"
                );
            }
            c
        }
        Err(e) => {
            eprintln!("hookrelay: {e}");
            return ExitCode::from(2);
        }
    };
    if !serve {
        return tools::check_config(&config);
    }
    serve_relay(config)
}

/// Sends the log lines (as text or JSON) to stderr for a tool, whose results go to stdout,
/// else to stdout.
fn init_logs(tool: bool, format: LogFormat) {
    let filter = log_filter();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(move || -> Box<dyn std::io::Write> {
            if tool {
                Box::new(std::io::stderr())
            } else {
                Box::new(std::io::stdout())
            }
        });
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Ends `hookrelay serve`: a listener that could not be bound, or the run's error, is one
/// line (exit status 1).
async fn served<L, F>(
    bound: Result<L, impl std::fmt::Display>,
    run: impl FnOnce(L, Shutdown) -> F,
) -> ExitCode
where
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    let listeners = match bound {
        Ok(l) => l,
        Err(e) => {
            // One line: the key, the address and why.
            eprintln!("hookrelay: {e}");
            return ExitCode::FAILURE;
        }
    };
    let shutdown = Shutdown::new();
    shutdown.on_signals();
    match run(listeners, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hookrelay: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `hookrelay serve`: binds the listeners and runs the relay until a signal stops it.
fn serve_relay(config: Config) -> ExitCode {
    // An edge only moves messages from one Redis to another: one thread does (less memory and
    // CPU beside BBB's own processes); a whole relay uses every core.
    let runtime = match config.edge.is_some() {
        true => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        false => tokio::runtime::Runtime::new(),
    };
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hookrelay: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // An edge serves no hooks: its metrics listener alone.
    if config.edge.is_some() {
        return runtime.block_on(async {
            let bound = Listeners::bind_metrics(&config).await;
            served(bound, |l, s| hookrelay::run_edge(config, l, s)).await
        });
    }
    runtime.block_on(async {
        let bound = Listeners::bind(&config).await;
        served(bound, |l, s| hookrelay::run(config, l, s)).await
    })
}
