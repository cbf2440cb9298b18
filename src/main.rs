//! The `hookrelay` binary: parses the command line, sets up logging, loads the configuration and
//! runs the relay until SIGTERM or ctrl-c.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand, ValueEnum};
use hookrelay::{Config, Listeners, Shutdown};

#[derive(Parser)]
#[command(version, about = "Webhook relay for BigBlueButton")]
struct Cli {
    /// Log output format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
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
        /// TOML configuration file (every key is optional but bbb.secret; HOOKRELAY_* variables
        /// override it).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Load and validate a configuration, then exit.
    CheckConfig {
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match cli.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    let (path, serve) = match &cli.command {
        Command::Serve { config } => (config.as_deref(), true),
        Command::CheckConfig { config } => (config.as_deref(), false),
    };
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hookrelay: {e}");
            return ExitCode::from(2);
        }
    };
    if !serve {
        println!("configuration ok");
        return ExitCode::SUCCESS;
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
