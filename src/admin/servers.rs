//! `hookrelay servers`: the BBB servers whose edges write to the relay's store (docs/pool.md),
//! read from a running relay's admin API.

use std::process::ExitCode;

use clap::Args;
use serde_json::Value;

use super::{
    fail,
    status::{AdminTarget, print_json},
};

#[derive(Args)]
pub(crate) struct ServersArgs {
    #[command(flatten)]
    target: AdminTarget,
    /// Take this server out of the store (its edge stopped for good): its name, stream and
    /// counts. Refused while its edge runs.
    #[arg(long, value_name = "SERVER")]
    forget: Option<String>,
}

/// `hookrelay servers`: one line per server: its name, whether its edge runs, when it was
/// last seen, how far behind it the pool's relays are, and its counts.
pub(crate) fn servers(args: &ServersArgs) -> ExitCode {
    let client = match args.target.client() {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(name) = &args.forget {
        let path = format!(
            "/v1/servers/{}/forget",
            hookrelay::base::form::form_encode(name)
        );
        return match client.post(&path, &[]) {
            Ok(a) if args.target.json => {
                print_json(&a);
                ExitCode::SUCCESS
            }
            Ok(a) => {
                println!(
                    "{name} forgotten; {} of its messages no relay had queued went with it",
                    a["messages_dropped"].as_u64().unwrap_or_default()
                );
                ExitCode::SUCCESS
            }
            Err((code, why)) => fail(code, &why),
        };
    }
    let answer = match client.get("/v1/servers") {
        Ok(a) => a,
        Err((code, why)) => return fail(code, &why),
    };
    if args.target.json {
        print_json(&answer);
        return ExitCode::SUCCESS;
    }
    let servers = answer["servers"].as_array().cloned().unwrap_or_default();
    if servers.is_empty() {
        println!("no edges write to this store (docs/pool.md)");
        return ExitCode::SUCCESS;
    }
    println!(
        "{:<24}  {:<8}  {:>10}  {:>8}  {:>10}  {:>10}  {:>9}  {:>8}  {:>8}",
        "server",
        "edge",
        "seen (s)",
        "lag (s)",
        "read",
        "forwarded",
        "buffered",
        "dropped",
        "stream"
    );
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or_default();
    for s in &servers {
        let seen = s["seconds_since_seen"]
            .as_u64()
            .map_or_else(|| "never".to_string(), |v| v.to_string());
        println!(
            "{:<24}  {:<8}  {:>10}  {:>8.1}  {:>10}  {:>10}  {:>9}  {:>8}  {:>8}",
            s["server"].as_str().unwrap_or_default(),
            if s["running"] == true {
                "running"
            } else {
                "stopped"
            },
            seen,
            s["lag_s"].as_f64().unwrap_or_default(),
            n(s, "read"),
            n(s, "forwarded"),
            n(s, "buffered"),
            n(s, "dropped"),
            n(s, "stream_length"),
        );
    }
    ExitCode::SUCCESS
}
