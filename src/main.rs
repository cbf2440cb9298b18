//! The `hookrelay` binary: parses the command line, sets up logging, loads the configuration and
//! runs the relay until SIGTERM or ctrl-c; the plugin authors' commands live in [`tools`].

use std::{path::PathBuf, process::ExitCode};

mod tools;

use clap::{Parser, Subcommand, ValueEnum};
use hookrelay::{Config, Listeners, Shutdown};

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
    },
    /// Load and validate a configuration, then exit.
    CheckConfig {
        /// TOML configuration file, as for serve.
        #[arg(long, short, env = "HOOKRELAY_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Tools for WebAssembly plugin authors.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// Run recorded raw bus messages through the mapper, matcher and plugin chain (no Redis)
    /// and print, per hook, the payloads that would be sent.
    Replay(tools::ReplayArgs),
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // The tools print their results on stdout: their log lines go to stderr.
    let tool = matches!(cli.command, Command::Plugin { .. } | Command::Replay(_));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(move || -> Box<dyn std::io::Write> {
            if tool {
                Box::new(std::io::stderr())
            } else {
                Box::new(std::io::stdout())
            }
        });
    match cli.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    let (path, serve) = match cli.command {
        Command::Serve { config } => (config, true),
        Command::CheckConfig { config } => (config, false),
        Command::Plugin {
            command: PluginCommand::Check { file, config },
        } => return tools::plugin_check(&file, config.as_deref()),
        Command::Replay(args) => return tools::replay(&args),
    };
    let path = path.as_deref();
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hookrelay: {e}");
            return ExitCode::from(2);
        }
    };
    if !serve {
        return tools::check_config(&config);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hookrelay: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let listeners = match Listeners::bind(&config).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("hookrelay: cannot listen: {e}");
                return ExitCode::FAILURE;
            }
        };
        let shutdown = Shutdown::new();
        shutdown.on_signals();
        match hookrelay::run(config, listeners, shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("hookrelay: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}
