//! `hookrelay tenants` (the tenants in force, the ones refused, Scalelite's reads) and
//! `hookrelay audit` (who changed what, when), read from a running relay's admin API.

use std::process::ExitCode;

use clap::Args;
use serde_json::Value;

use super::{
    fail,
    status::{AdminTarget, print_json},
};

#[derive(Args)]
pub(crate) struct TenantsArgs {
    #[command(flatten)]
    target: AdminTarget,
}

/// `hookrelay tenants`.
pub(crate) fn tenants(args: &TenantsArgs) -> ExitCode {
    let client = match args.target.client() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let answer = match client.get("/v1/tenants") {
        Ok(a) => a,
        Err((code, why)) => return fail(code, &why),
    };
    if args.target.json {
        print_json(&answer);
        return ExitCode::SUCCESS;
    }
    print_tenants(&answer);
    ExitCode::SUCCESS
}

fn print_tenants(answer: &Value) {
    let text = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let count = |v: &Value, k: &str| v[k].as_u64().unwrap_or_default();
    let tenants = answer["tenants"].as_array().cloned().unwrap_or_default();
    if tenants.is_empty() {
        println!("no tenants");
    } else {
        println!(
            "{:<20}  {:<38}  {:<10}  {:>6}  {:>8}",
            "name", "id", "from", "hooks", "disabled"
        );
        for t in &tenants {
            println!(
                "{:<20}  {:<38}  {:<10}  {:>6}  {:>8}",
                text(t, "name"),
                text(t, "id"),
                text(t, "source"),
                count(t, "hooks"),
                count(t, "disabled_hooks")
            );
        }
    }
    for u in answer["unknown"].as_array().into_iter().flatten() {
        println!(
            "tenant {} is not known: its {} hooks are disabled until it is back",
            text(u, "id"),
            count(u, "hooks")
        );
    }
    for p in answer["problems"].as_array().into_iter().flatten() {
        let (tenant, reason) = (text(p, "tenant"), text(p, "reason"));
        if p["refused"] == true {
            let why = match reason.as_str() {
                "operator_secret" => "one of its secrets is the operator's",
                _ => "one of its secrets is shorter than 12 characters",
            };
            println!("refused: tenant {tenant} ({reason}): {why}; its calls fail the checksum");
        } else {
            println!("problem: tenant {tenant} ({reason}): its last good version stays in force");
        }
    }
    let s = &answer["scalelite"];
    if s.is_object() {
        let last = s["last_read"].as_str().unwrap_or("never");
        match (s["failing_since"].as_str(), s["from_store"].as_str()) {
            (Some(since), Some(kept)) => println!(
                "Scalelite: cannot be read since {since}; the tenants kept in the store at {kept} are in force"
            ),
            (Some(since), None) => println!(
                "Scalelite: cannot be read since {since} (last read {last}); the last good tenants stay in force"
            ),
            (None, Some(kept)) => {
                println!(
                    "Scalelite: not read yet; the tenants kept in the store at {kept} are in force"
                )
            }
            (None, None) => println!("Scalelite: last read {last}"),
        }
    }
}

#[derive(Args)]
pub(crate) struct AuditArgs {
    /// Only this tenant's records (its name, or its id).
    #[arg(long, value_name = "NAME")]
    tenant: Option<String>,
    /// Only records since then: a duration back from now (24h, 7d) or an RFC 3339 time.
    #[arg(long, value_name = "DURATION")]
    since: Option<String>,
    /// At most this many records (the newest).
    #[arg(long, default_value_t = 1000, value_name = "N")]
    limit: usize,
    #[command(flatten)]
    target: AdminTarget,
}

/// `hookrelay audit`: one record a line, oldest first; `--json`: one JSON object a line with
/// the keys `time`, `tenant`, `caller`, `action`, `hook`, `url` (and `detail` where there is
/// one).
pub(crate) fn audit(args: &AuditArgs) -> ExitCode {
    let client = match args.target.client() {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Err(code) = super::check_time("--since", args.since.as_deref()) {
        return code;
    }
    let mut query = format!("limit={}", args.limit);
    let encode = hookrelay::base::form::form_encode;
    if let Some(t) = &args.tenant {
        query.push_str(&format!("&tenant={}", encode(t)));
    }
    if let Some(s) = &args.since {
        query.push_str(&format!("&since={}", encode(s)));
    }
    let answer = match client.get(&format!("/v1/audit?{query}")) {
        Ok(a) => a,
        Err((code, why)) => return fail(code, &why),
    };
    let records = answer["records"].as_array().cloned().unwrap_or_default();
    for r in &records {
        if args.target.json {
            println!("{}", serde_json::to_string(r).unwrap_or_default());
            continue;
        }
        let hook = r["hook"]
            .as_u64()
            .map_or_else(String::new, |h| format!(" hook {h}"));
        let detail = r["detail"]
            .as_str()
            .map_or_else(String::new, |d| format!(" ({d})"));
        println!(
            "{}  {:<14}  {:<16}  {}{hook}{detail}  {}",
            r["time"].as_str().unwrap_or_default(),
            r["tenant"].as_str().unwrap_or("(operator)"),
            r["caller"].as_str().unwrap_or_default(),
            r["action"].as_str().unwrap_or_default(),
            r["url"].as_str().unwrap_or_default(),
        );
    }
    if records.is_empty() && !args.target.json {
        println!("no records");
    }
    ExitCode::SUCCESS
}
