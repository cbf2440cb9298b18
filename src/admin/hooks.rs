//! Commands for administrators: `hooks list|create|destroy` against a running relay, the
//! checksum computed from the configuration.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{Args, Subcommand};
use hookrelay::base::{digest::Algorithm, form::form_encode};
use serde::Deserialize;

use super::{
    REFUSED, UNREACHABLE, fail,
    hook_view::{print_hook, print_traces},
    load,
    status::{AdminClient, print_json},
};

#[derive(Subcommand)]
pub(super) enum HooksCommand {
    /// List the registered hooks (with --meeting-id: the global ones and those bound to it).
    List {
        /// Only the global hooks and those bound to this meeting (its external id).
        #[arg(long)]
        meeting_id: Option<String>,
        /// Only this tenant's hooks (its name, the first label of its host names).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Register a hook.
    Create {
        /// Where the callbacks go (absolute http or https URL).
        callback_url: String,
        /// Only this meeting's events (its external id); a global hook without it.
        #[arg(long)]
        meeting_id: Option<String>,
        /// Only these event ids, comma-separated (e.g. user-joined,meeting-ended).
        #[arg(long)]
        event_id: Option<String>,
        /// Send the bus messages as they came instead of processed events.
        #[arg(long)]
        get_raw: bool,
    },
    /// Remove a hook by its id.
    Destroy {
        /// The hook's id, as hooks create and hooks list show it.
        hook_id: u64,
    },
    /// Show one hook's delivery: its state, queue, last success and failure, when it is
    /// removed if its failures go on, who delivers it (read from the admin API).
    Show {
        /// The hook's id (also a hook removed after failures, for 7 days).
        hook_id: u64,
    },
    /// Enable a hook disabled after its callbacks kept failing (`delivery.on_give_up =
    /// "disable"`): it sends its kept callbacks, in order, then the new ones (through the
    /// admin API). A hook whose tenant is gone is enabled when its tenant is back.
    Enable {
        /// The hook's id, as hooks list shows it.
        hook_id: u64,
    },
    /// Give a hook a new signing secret (`delivery.hook_secrets`) and print it; the old one
    /// signs too for delivery.hook_secret_overlap_s, while its receiver moves to the new one
    /// (through the admin API).
    RotateSecret {
        /// The hook's id, as hooks list shows it.
        hook_id: u64,
    },
}

#[derive(Args)]
pub(crate) struct HooksArgs {
    /// The relay's configuration: its secret, and where its API listens.
    #[arg(long, short, env = "HOOKRELAY_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// The API's base URL (default: from api.bind and api.path of the configuration).
    #[arg(long, global = true)]
    api_url: Option<String>,
    /// The admin API's base URL, for the hooks' states (default: from admin.bind).
    #[arg(long, global = true)]
    admin_url: Option<String>,
    /// Print JSON (for scripts) instead of lines.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: HooksCommand,
}

/// An answer of the hooks API.
#[derive(Debug, Deserialize)]
struct Answer {
    returncode: String,
    #[serde(rename = "messageKey")]
    message_key: Option<String>,
    message: Option<String>,
    #[serde(rename = "hookID")]
    hook_id: Option<u64>,
    hooks: Option<Hooks>,
}

#[derive(Debug, Deserialize)]
struct Hooks {
    #[serde(default)]
    hook: Vec<ListedHook>,
}

#[derive(Debug, Deserialize)]
struct ListedHook {
    #[serde(rename = "hookID")]
    id: u64,
    #[serde(rename = "callbackURL")]
    url: String,
    #[serde(rename = "meetingID")]
    meeting: Option<String>,
    #[serde(rename = "eventID")]
    events: Option<String>,
    #[serde(rename = "permanentHook")]
    permanent: bool,
    #[serde(rename = "rawData")]
    raw: bool,
    /// The tenant's name, for a tenant's hook.
    tenant: Option<String>,
}

/// `hookrelay hooks ...`.
pub(crate) fn hooks(args: &HooksArgs) -> ExitCode {
    let config = match load(args.config.as_deref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let admin = AdminClient::new(&config, args.admin_url.as_deref());
    let base = args.api_url.clone().unwrap_or_else(|| {
        let mut addr = config.api.bind;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        format!("http://{addr}{}", config.api.path)
    });
    let (call, query) = match &args.command {
        HooksCommand::List { meeting_id, .. } => (
            "list",
            meeting_id
                .as_ref()
                .map(|m| format!("meetingID={}", form_encode(m)))
                .unwrap_or_default(),
        ),
        HooksCommand::Create {
            callback_url,
            meeting_id,
            event_id,
            get_raw,
        } => (
            "create",
            create_query(
                callback_url,
                meeting_id.as_deref(),
                event_id.as_deref(),
                *get_raw,
            ),
        ),
        HooksCommand::Destroy { hook_id } => ("destroy", format!("hookID={hook_id}")),
        HooksCommand::Show { hook_id } => return show(&admin, *hook_id, args.json),
        HooksCommand::Enable { hook_id } => return enable(&admin, *hook_id, args.json),
        HooksCommand::RotateSecret { hook_id } => {
            return rotate_secret(&admin, *hook_id, args.json);
        }
    };
    let url = signed_url(&config, &base, call, &query);
    let answer = match fetch(&url) {
        Ok(a) => a,
        Err(why) => return fail(UNREACHABLE, &format!("{base}: {why}")),
    };
    if answer.returncode != "SUCCESS" {
        return refused(call, answer);
    }
    print_answer(args, &admin, answer)
}

/// The query of `hooks/create`.
fn create_query(
    callback_url: &str,
    meeting_id: Option<&str>,
    event_id: Option<&str>,
    get_raw: bool,
) -> String {
    let mut q = format!("callbackURL={}", form_encode(callback_url));
    if let Some(m) = meeting_id {
        q.push_str(&format!("&meetingID={}", form_encode(m)));
    }
    if let Some(e) = event_id {
        q.push_str(&format!("&eventID={}", form_encode(e)));
    }
    if get_raw {
        q.push_str("&getRaw=true");
    }
    q
}

/// The URL of hooks API `call` with `query` at `base`, its checksum made with the
/// configuration's first algorithm and its secret.
fn signed_url(config: &hookrelay::Config, base: &str, call: &str, query: &str) -> String {
    let alg = config
        .api
        .checksum_algorithms
        .first()
        .copied()
        .unwrap_or(Algorithm::Sha1);
    let checksum = alg.hex_digest(&[
        format!("hooks/{call}").as_bytes(),
        query.as_bytes(),
        config.bbb.secret.expose().as_bytes(),
    ]);
    let sep = if query.is_empty() { "" } else { "&" };
    format!(
        "{}/hooks/{call}?{query}{sep}checksum={checksum}",
        base.trim_end_matches('/')
    )
}

/// Fails with the reason the API gave for refusing `call`.
fn refused(call: &str, answer: Answer) -> ExitCode {
    let key = answer.message_key.unwrap_or_default();
    let message = answer.message.unwrap_or_default();
    let hint = if key == "checksumError" {
        " (is bbb.secret of this configuration the relay's?)"
    } else {
        ""
    };
    fail(REFUSED, &format!("{call} refused: {key}: {message}{hint}"))
}

/// Prints a successful answer to the command: the list (with the hooks' states from the admin
/// API), the created hook, the removed one.
fn print_answer(args: &HooksArgs, admin: &AdminClient, answer: Answer) -> ExitCode {
    match &args.command {
        HooksCommand::List { tenant, .. } => {
            let mut hooks = answer.hooks.map(|h| h.hook).unwrap_or_default();
            if let Some(name) = tenant {
                hooks.retain(|h| {
                    h.tenant
                        .as_deref()
                        .is_some_and(|t| t.eq_ignore_ascii_case(name))
                });
            }
            // The states come from the admin API; without it, the list says so and goes on.
            let states = match admin.get("/v1/hooks") {
                Ok(v) => Some(v),
                Err((_, why)) => {
                    eprintln!("hookrelay: no hook states: {why}");
                    None
                }
            };
            if args.json {
                print_json(&serde_json::json!({ "hooks": listed_json(&hooks, states.as_ref()) }));
            } else {
                print_list(&hooks, states.as_ref());
            }
        }
        HooksCommand::Create { .. } => match (answer.message_key.as_deref(), answer.hook_id) {
            (key, Some(id)) if args.json => print_json(&serde_json::json!({
                "hook_id": id,
                "created": key != Some("duplicateWarning"),
            })),
            (Some("duplicateWarning"), Some(id)) => {
                println!("a hook for this URL exists already: {id}");
            }
            (_, Some(id)) => println!("created hook {id}"),
            _ => return fail(UNREACHABLE, "the answer has no hookID"),
        },
        HooksCommand::Destroy { hook_id } if args.json => {
            print_json(&serde_json::json!({ "hook_id": hook_id, "removed": true }));
        }
        HooksCommand::Destroy { hook_id } => println!("removed hook {hook_id}"),
        HooksCommand::Show { .. }
        | HooksCommand::Enable { .. }
        | HooksCommand::RotateSecret { .. } => {}
    }
    ExitCode::SUCCESS
}

/// `hooks show ID`.
fn show(admin: &AdminClient, id: u64, json: bool) -> ExitCode {
    match admin.get(&format!("/v1/hooks/{id}")) {
        Ok(h) if json => print_json(&h),
        Ok(h) => {
            print_hook(&h);
            // The traces of its last attempts (`[tracing]`), to go from a failure to its trace.
            if let Ok(d) = admin.get(&format!("/v1/hooks/{id}/deliveries?limit=5")) {
                print_traces(&d);
            }
        }
        Err((code, why)) => return fail(code, &why),
    }
    ExitCode::SUCCESS
}

/// `hooks enable ID`.
fn enable(admin: &AdminClient, id: u64, json: bool) -> ExitCode {
    match admin.post(&format!("/v1/hooks/{id}/enable"), &[]) {
        Ok(v) if json => print_json(&v),
        Ok(v) if v["enabled"] == true => {
            println!("enabled hook {id}: its kept callbacks are sent, in order")
        }
        Ok(_) => println!("hook {id} was not disabled"),
        Err((code, why)) => return fail(code, &why),
    }
    ExitCode::SUCCESS
}

/// `hooks rotate-secret ID`: prints the new secret (the only command that shows one).
fn rotate_secret(admin: &AdminClient, id: u64, json: bool) -> ExitCode {
    match admin.post(&format!("/v1/hooks/{id}/rotate-secret"), &[]) {
        Ok(v) if json => print_json(&v),
        Ok(v) => {
            println!("{}", v["signing_secret"].as_str().unwrap_or_default());
            match v["previous_secret_until"].as_str() {
                Some(t) => eprintln!(
                    "hook {id}: new signing secret above; the old one signs too until {t}"
                ),
                None => eprintln!("hook {id}: new signing secret above"),
            }
        }
        Err((code, why)) => return fail(code, &why),
    }
    ExitCode::SUCCESS
}

/// The state of hook `id` in the admin API's list, when it is there.
fn state_of(states: Option<&serde_json::Value>, id: u64) -> Option<&serde_json::Value> {
    states?["hooks"]
        .as_array()?
        .iter()
        .find(|h| h["id"].as_u64() == Some(id))
}

/// The hooks removed after failures that the admin API still knows (not in the BBB list).
fn removed(states: Option<&serde_json::Value>) -> Vec<&serde_json::Value> {
    let Some(all) = states.and_then(|s| s["hooks"].as_array()) else {
        return Vec::new();
    };
    all.iter().filter(|h| h["state"] == "removed").collect()
}

/// The list for scripts: the BBB API's hooks with their states, then the removed ones.
fn listed_json(hooks: &[ListedHook], states: Option<&serde_json::Value>) -> Vec<serde_json::Value> {
    let mut out: Vec<serde_json::Value> = hooks
        .iter()
        .map(|h| {
            let mut row = state_of(states, h.id).cloned().unwrap_or_else(|| {
                serde_json::json!({
                    "id": h.id,
                    "callback_url": h.url,
                    "meeting_id": h.meeting,
                    "event_ids": h.events.as_ref().map(|e| e.split(',').collect::<Vec<_>>()),
                    "get_raw": h.raw,
                    "permanent": h.permanent,
                    "state": null,
                })
            });
            row["tenant"] = h.tenant.clone().into();
            row
        })
        .collect();
    out.extend(removed(states).into_iter().cloned());
    out
}

fn print_list(hooks: &[ListedHook], states: Option<&serde_json::Value>) {
    let removed = removed(states);
    if hooks.is_empty() && removed.is_empty() {
        println!("no hooks");
        return;
    }
    // The tenant column where a listed hook is a tenant's.
    let tenants = hooks.iter().any(|h| h.tenant.is_some());
    let tenant_of = |h: &ListedHook| match (tenants, &h.tenant) {
        (false, _) => String::new(),
        (true, t) => format!("{:<12}  ", t.as_deref().unwrap_or("(operator)")),
    };
    let state_of_hook = |id: u64| {
        let shown = state_of(states, id);
        match (
            shown.and_then(|s| s["state"].as_str()),
            shown.and_then(|s| s["disabled_reason"].as_str()),
        ) {
            (Some("disabled"), Some(why)) => format!("disabled ({why})"),
            (Some(s), _) => s.to_string(),
            (None, _) => "?".to_string(),
        }
    };
    // As wide as the widest state (`disabled (tenant_unknown)`), at least 7.
    let w = hooks
        .iter()
        .map(|h| state_of_hook(h.id).len())
        .max()
        .unwrap_or(0)
        .max(7);
    println!(
        "{:>6}  {:<w$}  {:<9}  {}{:<12}  {:<20}  callback URL",
        "id",
        "state",
        "kind",
        if tenants { "tenant        " } else { "" },
        "meeting",
        "events"
    );
    for h in hooks {
        let state = state_of_hook(h.id);
        let kind = match (h.permanent, h.raw) {
            (true, true) => "perm,raw",
            (true, false) => "permanent",
            (false, true) => "raw",
            (false, false) => "-",
        };
        println!(
            "{:>6}  {:<w$}  {:<9}  {}{:<12}  {:<20}  {}",
            h.id,
            state,
            kind,
            tenant_of(h),
            h.meeting.as_deref().unwrap_or("(all)"),
            h.events.as_deref().unwrap_or("(all)"),
            h.url
        );
    }
    for h in removed {
        println!(
            "{:>6}  {:<w$}  {:<9}  {}{:<12}  {:<20}  {}",
            h["id"].as_u64().unwrap_or_default(),
            "removed",
            "-",
            if tenants { "              " } else { "" },
            "",
            "",
            h["callback_url"].as_str().unwrap_or("")
        );
    }
}

fn fetch(url: &str) -> Result<Answer, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| e.to_string())?;
        let response = client
            .get(url)
            .send()
            .await
            .map_err(|e| format!("cannot reach the relay ({})", error_kind(&e)))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| format!("the answer broke off ({})", error_kind(&e)))?;
        quick_xml::de::from_str::<Answer>(&text)
            .map_err(|_| format!("not a hooks API answer (HTTP {status})"))
    })
}

/// A short reason without the URL (it carries the checksum).
fn error_kind(e: &reqwest::Error) -> &'static str {
    if e.is_connect() {
        "connection refused or no route"
    } else if e.is_timeout() {
        "no answer within 10 s"
    } else {
        "request failed"
    }
}
