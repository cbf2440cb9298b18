//! `hookrelay health`: asks a running relay's API listener whether it is alive (`/healthz`) or
//! ready (`/readyz`), for the health checks of container engines: the image has no shell and
//! no HTTP client but the relay itself.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    path::PathBuf,
    process::ExitCode,
    time::Duration,
};

use clap::Args;
use hookrelay::config::Config;

#[derive(Args)]
pub(crate) struct HealthArgs {
    /// Ask `/readyz` (the store answers, the bus is subscribed, the hooks are loaded) rather
    /// than `/healthz` (the process's loops turn).
    #[arg(long)]
    ready: bool,
    /// The API listener, HOST:PORT (default: api.bind of the configuration, asked on loopback
    /// when it is a wildcard address).
    #[arg(long)]
    address: Option<SocketAddr>,
    /// TOML configuration file, as for serve.
    #[arg(long, short, env = "HOOKRELAY_CONFIG")]
    config: Option<PathBuf>,
}

/// The relay's API listener when none is given: the configuration's `api.bind` (a wildcard
/// address asked on loopback). A configuration that does not load is an error, not the
/// default port: that may be another relay's.
fn configured(path: Option<&std::path::Path>) -> Result<SocketAddr, String> {
    let bind = Config::load(path)
        .map_err(|e| format!("{e} (or give --address)"))?
        .api
        .bind;
    Ok(match bind.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, bind.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, bind.port()).into(),
        _ => bind,
    })
}

/// `hookrelay health [--ready]`: prints the endpoint's one line of JSON; exit 0 when it
/// answered 200, 1 otherwise (503, no answer within 5 s, nothing listening, a configuration
/// that does not load).
pub(crate) fn health(args: &HealthArgs) -> ExitCode {
    let address = match args.address {
        Some(a) => a,
        None => match configured(args.config.as_deref()) {
            Ok(a) => a,
            Err(why) => {
                eprintln!("hookrelay: {why}");
                return ExitCode::FAILURE;
            }
        },
    };
    let path = if args.ready { "readyz" } else { "healthz" };
    let url = format!("http://{address}/{path}");
    let asked = async {
        // reqwest is built without a crypto provider of its own (plain HTTP here, but the
        // client wants one).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()?;
        let response = client.get(&url).send().await?;
        let status = response.status();
        Ok::<_, reqwest::Error>((status, response.text().await.unwrap_or_default()))
    };
    let answer = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|r| r.block_on(asked).map_err(|e| e.without_url().to_string()));
    match answer {
        Ok((status, body)) => {
            println!("{}", body.trim_end());
            if status.is_success() {
                ExitCode::SUCCESS
            } else {
                eprintln!("hookrelay: {url} answered {status}");
                ExitCode::FAILURE
            }
        }
        Err(why) => {
            eprintln!("hookrelay: {url}: {why}");
            ExitCode::FAILURE
        }
    }
}
