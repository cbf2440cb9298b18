//! `hookrelay fleet status`: the fleet's state read from the store, for an operator during an
//! incident (who queues, who can resume, who delivers which hook).

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{Args, Subcommand};

use super::{UNREACHABLE, fail, load};

#[derive(Subcommand)]
pub(super) enum FleetCommand {
    /// Show who holds the fleet lease, the live instances and how far back each one's kept
    /// messages reach, and which instance delivers each hook.
    Status {
        /// Print JSON (for scripts) instead of lines.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub(crate) struct FleetArgs {
    /// The relay's configuration: its store.
    #[arg(long, short, env = "HOOKRELAY_CONFIG", global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: FleetCommand,
}

/// `hookrelay fleet status`.
pub(crate) fn fleet(args: &FleetArgs) -> ExitCode {
    let config = match load(args.config.as_deref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let FleetCommand::Status { json } = args.command;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(UNREACHABLE, &e.to_string()),
    };
    let status = runtime.block_on(async {
        let connect = hookrelay::StoreConn::connect_once(&config);
        let mut conn = tokio::time::timeout(Duration::from_secs(5), connect)
            .await
            .map_err(|_| "Redis (the store) did not answer within 5 s".to_string())?
            .map_err(|e| format!("cannot reach Redis (the store): {e}"))?;
        hookrelay::fleet_status::read(&mut conn)
            .await
            .map_err(|e| format!("cannot read the fleet's state: {e}"))
    });
    let status = match status {
        Ok(s) => s,
        Err(e) => return fail(UNREACHABLE, &e),
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&status).unwrap_or_default()
        );
    } else {
        if !config.fleet.enabled {
            eprintln!(
                "hookrelay: [fleet] is not enabled in this configuration; showing the store's state all the same"
            );
        }
        print!("{}", status.text());
    }
    ExitCode::SUCCESS
}
