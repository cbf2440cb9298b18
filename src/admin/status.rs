//! `hooks show`, the state column of `hooks list`, and `deliveries`: a running relay's admin
//! API (`[admin]`) read with the address and token of the configuration, printed for people or
//! (`--json`) as the API answers.

use std::time::Duration;

use clap::Args;
use hookrelay::Config;
use serde_json::Value;

use super::{REFUSED, UNREACHABLE, fail};

/// Where the admin API is and how to call it: its Unix socket (from the configuration), or
/// `--admin-url` over TCP with the configuration's token.
pub(super) struct AdminClient {
    /// `http://localhost` for the socket.
    base: String,
    socket: Option<std::path::PathBuf>,
    token: Option<String>,
}

/// Why an admin call failed: the exit code and the line to print.
pub(super) type Failure = (u8, String);

impl AdminClient {
    pub(super) fn new(config: &Config, admin_url: Option<&str>) -> Self {
        let token = Some(config.admin.token(&config.bbb.secret).expose().to_string());
        if let Some(url) = admin_url {
            let base = url.trim_end_matches('/').to_string();
            return Self {
                base,
                socket: None,
                token,
            };
        }
        let socket = config.admin.socket_to_reach(config.api.bind.port());
        match (socket, config.admin.bind) {
            // The TCP listener when the socket is not there (a relay of another host's files).
            (Some(path), Some(bind)) if !path.exists() => Self {
                base: tcp_base(bind),
                socket: None,
                token,
            },
            (Some(path), _) => Self {
                base: "http://localhost".into(),
                socket: Some(path),
                token: None,
            },
            (None, bind) => Self {
                base: tcp_base(bind.unwrap_or(config.api.bind)),
                socket: None,
                token,
            },
        }
    }

    /// Where the calls go, for messages.
    fn target(&self) -> String {
        match &self.socket {
            Some(path) => path.display().to_string(),
            None => self.base.clone(),
        }
    }

    /// Whether the socket can be opened, told as a person needs it: missing, or not theirs.
    fn check_socket(&self) -> Result<(), Failure> {
        let Some(path) = &self.socket else {
            return Ok(());
        };
        match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err((
                REFUSED,
                format!(
                    "{}: permission denied: the admin API's socket is for the relay's user and group; run as root or as a member of group {}",
                    path.display(),
                    hookrelay::base::unix::group_of(path).unwrap_or_else(|| "hookrelay".into())
                ),
            )),
            Err(e) => Err((
                UNREACHABLE,
                format!(
                    "{}: {e} (is the relay of this configuration running, with [admin] enabled?)",
                    path.display()
                ),
            )),
        }
    }

    /// `GET {base}{path}` as JSON.
    pub(super) fn get(&self, path: &str) -> Result<Value, Failure> {
        self.call(path, None)
    }

    /// `POST {base}{path}` with `form` (URL-encoded), answered as JSON.
    pub(super) fn post(&self, path: &str, form: &[(&str, &str)]) -> Result<Value, Failure> {
        let body = form
            .iter()
            .map(|(k, v)| format!("{k}={}", hookrelay::base::form::form_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        self.call(path, Some(body))
    }

    fn call(&self, path: &str, form: Option<String>) -> Result<Value, Failure> {
        self.check_socket()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| (UNREACHABLE, e.to_string()))?;
        runtime.block_on(async {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
            if let Some(path) = &self.socket {
                builder = builder.unix_socket(path.as_path());
            }
            let client = builder.build().map_err(|e| (UNREACHABLE, e.to_string()))?;
            let url = format!("{}{path}", self.base);
            let mut request = match form {
                Some(body) => client
                    .post(url)
                    .header(
                        reqwest::header::CONTENT_TYPE,
                        "application/x-www-form-urlencoded",
                    )
                    .body(body),
                None => client.get(url),
            };
            if let Some(t) = &self.token {
                request = request.bearer_auth(t);
            }
            let unreachable = |why: &str| {
                (
                    UNREACHABLE,
                    format!(
                        "{}: {why} (is the relay running, with [admin] enabled?)",
                        self.target()
                    ),
                )
            };
            let response = request.send().await.map_err(|e| {
                unreachable(if e.is_timeout() {
                    "no answer within 10 s"
                } else {
                    "cannot reach the admin API"
                })
            })?;
            let status = response.status();
            if status == reqwest::StatusCode::UNAUTHORIZED {
                return Err((
                    REFUSED,
                    format!(
                        "{}: the admin API refused the call: wrong or missing token (admin.bearer_token of this configuration, or the derived one)",
                        self.target()
                    ),
                ));
            }
            let text = response.text().await.unwrap_or_default();
            let body: Value = serde_json::from_str(&text)
                .map_err(|_| unreachable(&format!("not an admin API answer (HTTP {status})")))?;
            if !status.is_success() {
                let why = body["error"].as_str().unwrap_or("refused").to_string();
                let code = if status.is_client_error() {
                    REFUSED
                } else {
                    UNREACHABLE
                };
                return Err((code, why));
            }
            Ok(body)
        })
    }
}

/// `http://` and the address, loopback for an unspecified one.
fn tcp_base(mut addr: std::net::SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    format!("http://{addr}")
}

/// Prints `value` for scripts.
pub(super) fn print_json(value: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

pub(super) fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v[key].as_str()
}

/// Which relay an admin command asks, and how it prints.
#[derive(Args)]
pub(super) struct AdminTarget {
    /// Print JSON (for scripts) instead of lines.
    #[arg(long)]
    pub(super) json: bool,
    /// The relay's configuration: where its admin API listens, and its token.
    #[arg(long, short, env = "HOOKRELAY_CONFIG")]
    config: Option<std::path::PathBuf>,
    /// The admin API's base URL (default: from admin.bind of the configuration).
    #[arg(long)]
    admin_url: Option<String>,
}

impl AdminTarget {
    /// The client of the relay's admin API; the exit code when the configuration is bad.
    pub(super) fn client(&self) -> Result<AdminClient, std::process::ExitCode> {
        let config = super::load(self.config.as_deref())?;
        Ok(AdminClient::new(&config, self.admin_url.as_deref()))
    }
}

#[derive(Args)]
pub(crate) struct DeliveriesArgs {
    /// The hook's id, as hooks list shows it (also a hook removed after failures).
    hook_id: u64,
    /// Only failed attempts.
    #[arg(long)]
    failed: bool,
    /// Only attempts since TIME: RFC 3339 (2026-11-26T08:00:00Z) or a duration back from now
    /// (15m).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// At most N attempts, newest first.
    #[arg(long, default_value_t = 100, value_name = "N")]
    limit: usize,
    #[command(flatten)]
    target: AdminTarget,
}

/// `hookrelay deliveries ID`: the hook's last attempts, newest first.
pub(crate) fn deliveries(args: &DeliveriesArgs) -> std::process::ExitCode {
    let client = match args.target.client() {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Err(code) = super::check_time("--since", args.since.as_deref()) {
        return code;
    }
    let mut query = format!("limit={}", args.limit);
    if args.failed {
        query.push_str("&failed=true");
    }
    if let Some(s) = &args.since {
        query.push_str(&format!("&since={}", hookrelay::base::form::form_encode(s)));
    }
    let answer = match client.get(&format!("/v1/hooks/{}/deliveries?{query}", args.hook_id)) {
        Ok(a) => a,
        Err((code, why)) => return fail(code, &why),
    };
    if args.target.json {
        print_json(&answer);
        return std::process::ExitCode::SUCCESS;
    }
    let attempts = answer["deliveries"].as_array().cloned().unwrap_or_default();
    if attempts.is_empty() {
        println!("no attempts");
        return std::process::ExitCode::SUCCESS;
    }
    println!(
        "{:<24}  {:<28}  {:>5}  {:<10}  {:>10}  error",
        "time", "event", "try", "result", "latency"
    );
    for a in attempts {
        let result = match (a["ok"].as_bool(), a["status"].as_u64()) {
            (Some(true), Some(s)) => format!("{s}"),
            (_, Some(s)) => format!("failed {s}"),
            _ => "failed".to_string(),
        };
        let error = if a["ok"].as_bool() == Some(true) {
            ""
        } else {
            text(&a, "error").unwrap_or("")
        };
        let trace = text(&a, "trace_id").map_or(String::new(), |t| format!("  trace {t}"));
        println!(
            "{:<24}  {:<28}  {:>5}  {:<10}  {:>7.1} ms  {error}{trace}",
            text(&a, "at").unwrap_or(""),
            text(&a, "event_id").unwrap_or(""),
            a["attempt"].as_u64().unwrap_or(0),
            result,
            a["latency_ms"].as_f64().unwrap_or(0.0),
        );
    }
    std::process::ExitCode::SUCCESS
}

#[derive(Args)]
pub(crate) struct RedeliverArgs {
    /// The hook's id, as hooks list shows it: a registered hook (for a hook removed after
    /// failures, register its URL again and give the new id).
    #[arg(required_unless_present_any = ["all", "destination"], conflicts_with_all = ["all", "destination"])]
    hook_id: Option<u64>,
    /// Every registered hook, each its own kept callbacks in their original order.
    #[arg(long, conflicts_with = "destination")]
    all: bool,
    /// The messages this destination (`[[destinations]]`, docs/destinations.md) published in
    /// the window, queued again in their order, each with a new message id.
    #[arg(long, value_name = "NAME")]
    destination: Option<String>,
    /// Only the events of this meeting (its external id).
    #[arg(long, value_name = "EXTERNAL_ID")]
    meeting: Option<String>,
    /// From TIME: RFC 3339 (2026-11-26T08:00:00Z) or a duration back from now (15m).
    #[arg(long, value_name = "TIME")]
    since: String,
    /// Up to TIME (default now).
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// Only these event ids, comma-separated (user-joined,meeting-ended).
    #[arg(long, value_name = "ID,...")]
    event_id: Option<String>,
    #[command(flatten)]
    target: AdminTarget,
}

/// `hookrelay redeliver ID|--all --since TIME`: queues the kept callbacks of the window again.
pub(crate) fn redeliver(args: &RedeliverArgs) -> std::process::ExitCode {
    let client = match args.target.client() {
        Ok(c) => c,
        Err(code) => return code,
    };
    for (flag, value) in [
        ("--since", Some(args.since.as_str())),
        ("--until", args.until.as_deref()),
    ] {
        if let Err(code) = super::check_time(flag, value) {
            return code;
        }
    }
    let mut form = vec![("since", args.since.as_str())];
    if let Some(u) = &args.until {
        form.push(("until", u));
    }
    if let Some(e) = &args.event_id {
        form.push(("event_id", e));
    }
    if let Some(m) = &args.meeting {
        form.push(("meeting", m));
    }
    let path = match (&args.destination, args.hook_id) {
        (Some(name), _) => format!(
            "/v1/destinations/{}/redeliver",
            hookrelay::base::form::form_encode(name)
        ),
        (None, Some(id)) => format!("/v1/hooks/{id}/redeliver"),
        (None, None) => "/v1/redeliver".into(),
    };
    let answer = match client.post(&path, &form) {
        Ok(a) => a,
        Err((code, why)) => return fail(code, &why),
    };
    if args.target.json {
        print_json(&answer);
        return std::process::ExitCode::SUCCESS;
    }
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    if let Some(name) = &args.destination {
        let n = answer["queued"].as_u64().unwrap_or(0);
        println!(
            "queued {n} message{} again for destination {name} (from {} to {})",
            plural(n),
            text(&answer, "since").unwrap_or("?"),
            text(&answer, "until").unwrap_or("?"),
        );
        return std::process::ExitCode::SUCCESS;
    }
    let queued_for = |r: &Value| {
        let n = r["queued"].as_u64().unwrap_or(0);
        println!(
            "queued {n} callback{} again for hook {} (from {} to {})",
            plural(n),
            r["hook"].as_u64().unwrap_or_default(),
            text(r, "since").unwrap_or("?"),
            text(r, "until").unwrap_or("?"),
        );
    };
    match answer["hooks"].as_array() {
        None => queued_for(&answer),
        Some(hooks) => {
            for r in hooks {
                queued_for(r);
            }
            let n = answer["queued"].as_u64().unwrap_or(0);
            println!(
                "queued {n} callback{} again for {} hook{}",
                plural(n),
                hooks.len(),
                plural(hooks.len() as u64)
            );
        }
    }
    std::process::ExitCode::SUCCESS
}
