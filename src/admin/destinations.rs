//! `hookrelay destinations`: the brokers and files that get events (`[[destinations]]`,
//! docs/destinations.md), each with its state, last error and queue, read from a running
//! relay's admin API.

use std::process::ExitCode;

use clap::Args;
use serde_json::Value;

use super::{
    fail,
    status::{AdminTarget, print_json},
};

#[derive(Args)]
pub(crate) struct DestinationsArgs {
    #[command(flatten)]
    target: AdminTarget,
}

/// `hookrelay destinations`: one line per destination, then its last error when it fails.
pub(crate) fn destinations(args: &DestinationsArgs) -> ExitCode {
    let client = match args.target.client() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let answer = match client.get("/v1/destinations") {
        Ok(a) => a,
        Err((code, why)) => return fail(code, &why),
    };
    if args.target.json {
        print_json(&answer);
        return ExitCode::SUCCESS;
    }
    let all = answer["destinations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if all.is_empty() {
        println!("no destinations are configured ([[destinations]], docs/destinations.md)");
        return ExitCode::SUCCESS;
    }
    println!(
        "{:<20}  {:<5}  {:<8}  {:>8}  {:>10}  url",
        "destination", "kind", "state", "queued", "oldest (s)"
    );
    let text = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    for d in &all {
        let oldest = d["oldest_age_ms"].as_u64().map_or_else(
            || "-".to_string(),
            |ms| format!("{:.1}", ms as f64 / 1000.0),
        );
        println!(
            "{:<20}  {:<5}  {:<8}  {:>8}  {:>10}  {}",
            text(d, "name"),
            text(d, "kind"),
            text(d, "state"),
            d["queued"].as_u64().unwrap_or_default(),
            oldest,
            text(d, "url"),
        );
        let error = text(d, "last_error");
        if text(d, "state") == "failing" && !error.is_empty() {
            println!("  last error: {error}");
        }
    }
    ExitCode::SUCCESS
}
