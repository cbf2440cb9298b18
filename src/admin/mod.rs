//! The commands for people: administrators' `hooks` ([`hooks`]), `deliveries` ([`status`],
//! which reads the admin API), `tenants` and `audit` ([`tenancy`]), `import-reference`
//! ([`import`]) and `fleet status` ([`fleet`]), integrators' `sign` and `verify` ([`callback`]). Each prints for people and
//! answers a wrong argument, an unreachable relay or a refused call with one line on stderr and
//! a non-zero exit: 2 for arguments and configuration, 1 for a refusal or a mismatch, 3 for
//! what cannot be reached.

mod callback;
mod destinations;
mod fleet;
mod health;
mod hook_view;
mod hooks;
mod import;
mod servers;
mod status;
mod tenancy;

use std::process::ExitCode;

pub(crate) use callback::{SignArgs, VerifyArgs, sign, verify};
pub(crate) use destinations::{DestinationsArgs, destinations};
pub(crate) use fleet::{FleetArgs, fleet};
pub(crate) use health::{HealthArgs, health};
use hookrelay::Config;
pub(crate) use hooks::{HooksArgs, hooks};
pub(crate) use import::{ImportArgs, import_reference};
pub(crate) use servers::{ServersArgs, servers};
pub(crate) use status::{DeliveriesArgs, RedeliverArgs, deliveries, redeliver};
pub(crate) use tenancy::{AuditArgs, TenantsArgs, audit, tenants};

/// Exit code of a call the relay refused, or a callback that does not verify.
const REFUSED: u8 = 1;
/// Exit code of a relay or a Redis that cannot be reached or answers something unexpected.
const UNREACHABLE: u8 = 3;

/// `hookrelay admin-token`.
#[derive(clap::Args)]
pub(crate) struct AdminTokenArgs {
    /// The relay's configuration.
    #[arg(long, short, env = "HOOKRELAY_CONFIG")]
    config: Option<std::path::PathBuf>,
}

/// Prints the admin API's TCP token of the configuration.
pub(crate) fn admin_token(args: &AdminTokenArgs) -> ExitCode {
    match load(args.config.as_deref()) {
        Ok(config) => {
            println!("{}", config.admin.token(&config.bbb.secret).expose());
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

fn fail(code: u8, line: &str) -> ExitCode {
    eprintln!("hookrelay: {line}");
    ExitCode::from(code)
}

/// Checks a time given on the command line (`flag`: RFC 3339 or a duration back from now); a
/// bad one ends the command with exit code 2 and the flag's name.
fn check_time(flag: &str, value: Option<&str>) -> Result<(), ExitCode> {
    match value.map(|v| hookrelay::base::time::parse_since(v, 0)) {
        Some(Err(e)) => Err(fail(2, &format!("{flag}: {e}"))),
        _ => Ok(()),
    }
}

fn load(config: Option<&std::path::Path>) -> Result<Config, ExitCode> {
    Config::load(config).map_err(|e| fail(2, &e.to_string()))
}
