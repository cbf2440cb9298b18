//! The status page, for people who would rather look than type: plain server-rendered HTML
//! (templates in `templates/`, every value escaped), readable on a phone. `/` lists the hooks
//! with their state; `/servers` the edges' servers of a pool; `/destinations` the brokers and
//! files that get events; `/hooks/{id}` shows one hook, its recent attempts and a form that queues
//! its callbacks of a window again. Behind the admin API's credentials (a browser gives them
//! as user `admin` and the token as password).

use std::sync::Arc;

use askama::Template;
use axum::{
    Extension, Form,
    extract::{Path, Query, State},
    http::{StatusCode, header},
    response::{Html, IntoResponse, Redirect, Response},
};
use serde::Deserialize;

use super::{
    AdminError, AdminState, Caller, destinations,
    hooks::{self, AttemptView, Filter, HookView},
    redeliver::{self, Window},
    servers,
};

/// A hook as a row or a page shows it.
struct Shown {
    id: u64,
    state: &'static str,
    url: String,
    queued: String,
    last_success: String,
    last_failure: String,
    removal: String,
    delivered_by: String,
    /// The tenant's name, empty for the operator's hooks.
    tenant: String,
    /// Why it is disabled, for people; empty while enabled.
    disabled_why: String,
    /// Whether it may be enabled by hand (disabled for its failures, not for its tenant).
    enable: bool,
}

impl From<HookView> for Shown {
    fn from(h: HookView) -> Self {
        let queued = match h.oldest_queued_age_s {
            Some(age) if h.queued > 0 => format!("{}, the oldest {age:.0} s old", h.queued),
            _ => h.queued.to_string(),
        };
        let last_failure = match (h.last_failure, h.last_error) {
            (Some(t), Some(e)) => format!("{t}: {e}"),
            (Some(t), None) => t,
            _ => "never".into(),
        };
        let tenant_gone = h.disabled_reason == Some("tenant_unknown");
        let removal = match (h.removed, h.removal_due) {
            (Some(t), _) => format!("{t}, after its callbacks kept failing"),
            (None, Some(t)) if tenant_gone => format!("due {t} if its tenant does not come back"),
            (None, Some(t)) => format!("due {t} if the failures go on"),
            (None, None) => String::new(),
        };
        let since = h
            .disabled_since
            .map(|t| format!(" (since {t})"))
            .unwrap_or_default();
        let disabled_why = match h.disabled_reason {
            Some("tenant_unknown") => format!(
                "its tenant is not known{since}: it is enabled again when the tenant is back; its callbacks are kept"
            ),
            Some(_) => format!("its callbacks kept failing{since}; its callbacks are kept"),
            None => String::new(),
        };
        Self {
            id: h.id,
            state: h.state.as_str(),
            url: h.callback_url,
            queued,
            last_success: h.last_success.unwrap_or_else(|| "never".into()),
            last_failure,
            removal,
            delivered_by: h.delivered_by.unwrap_or_default(),
            tenant: h.tenant.unwrap_or_default(),
            disabled_why,
            enable: h.disabled_reason == Some("failures"),
        }
    }
}

/// An attempt as a row shows it.
struct Tried {
    ok: bool,
    at: String,
    event: String,
    attempt: u32,
    result: String,
    latency: String,
}

impl From<AttemptView> for Tried {
    fn from(a: AttemptView) -> Self {
        let result = match (a.ok, a.status, a.error) {
            (true, Some(s), _) => format!("HTTP {s}"),
            (_, _, Some(e)) => e,
            _ => "failed".into(),
        };
        Self {
            ok: a.ok,
            at: a.at,
            event: a.event_id,
            attempt: a.attempt,
            result,
            latency: format!("{:.1} ms", a.latency_ms),
        }
    }
}

#[derive(Template)]
#[template(path = "hooks.html")]
struct HooksPage {
    hooks: Vec<Shown>,
    /// The tenant the list is filtered by (`/?tenant=NAME`).
    tenant: Option<String>,
}

#[derive(Template)]
#[template(path = "hook.html")]
struct HookPage {
    h: Shown,
    attempts: Vec<Tried>,
    message: Option<String>,
    problem: Option<String>,
}

/// An edge's server as a card shows it.
struct ServerShown {
    server: String,
    /// `ok` while its edge runs and was seen lately, else `failing`.
    state: &'static str,
    state_text: &'static str,
    seen: String,
    lag: String,
    buffered: u64,
    dropped: u64,
    read: u64,
    forwarded: u64,
}

impl From<servers::ServerView> for ServerShown {
    fn from(s: servers::ServerView) -> Self {
        let silent = s.seconds_since_seen.is_none_or(|t| t >= 10);
        let (state, state_text) = match (s.running, silent) {
            (true, false) => ("ok", "running"),
            (true, true) => ("failing", "silent"),
            (false, _) => ("removed", "stopped"),
        };
        Self {
            server: s.server,
            state,
            state_text,
            seen: match (s.last_seen, s.seconds_since_seen) {
                (Some(at), Some(ago)) => format!("{at} ({ago} s ago)"),
                _ => "never".into(),
            },
            lag: format!("{:.1} s", s.lag_s),
            buffered: s.buffered,
            dropped: s.dropped,
            read: s.read,
            forwarded: s.forwarded,
        }
    }
}

#[derive(Template)]
#[template(path = "servers.html")]
struct ServersPage {
    servers: Vec<ServerShown>,
}

/// `GET /servers`: the edges' servers of a pool.
pub(super) async fn servers_page(State(admin): State<Arc<AdminState>>) -> Response {
    match servers::all(&admin).await {
        Ok(all) => render(
            StatusCode::OK,
            &ServersPage {
                servers: all.into_iter().map(ServerShown::from).collect(),
            },
        ),
        Err(e) => problem(&e),
    }
}

/// A destination as a card shows it.
struct DestinationShown {
    name: String,
    kind: &'static str,
    url: String,
    state: &'static str,
    state_text: String,
    queued: usize,
    oldest: String,
    last_error: String,
}

impl From<crate::destinations::DestinationReport> for DestinationShown {
    fn from(d: crate::destinations::DestinationReport) -> Self {
        let failing = d.state == "failing";
        Self {
            name: d.name,
            kind: d.kind,
            url: d.url,
            state: if failing { "failing" } else { "ok" },
            state_text: d.state,
            queued: d.queued,
            oldest: d.oldest_age_ms.map_or_else(
                || "none".into(),
                |ms| format!("{:.1} s", ms as f64 / 1000.0),
            ),
            last_error: if failing { d.last_error } else { String::new() },
        }
    }
}

#[derive(Template)]
#[template(path = "destinations.html")]
struct DestinationsPage {
    destinations: Vec<DestinationShown>,
}

/// `GET /destinations`: the message brokers and files that get events.
pub(super) async fn destinations_page(State(admin): State<Arc<AdminState>>) -> Response {
    match destinations::all(&admin).await {
        Ok(all) => render(
            StatusCode::OK,
            &DestinationsPage {
                destinations: all.into_iter().map(DestinationShown::from).collect(),
            },
        ),
        Err(e) => problem(&e),
    }
}

/// Renders `page` with `status`.
fn render(status: StatusCode, page: &impl Template) -> Response {
    match page.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "cannot render the status page");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot render the page\n",
            )
                .into_response()
        }
    }
}

/// An error as a page: its status and sentence.
fn problem(e: &AdminError) -> Response {
    let status = e.status();
    let text = format!(
        "<!doctype html><meta name=viewport content=\"width=device-width, initial-scale=1\"><p><a href=\"/\">All hooks</a></p><p>{}</p>",
        askama::filters::escape(e.to_string(), askama::filters::Html)
            .map(|s| s.to_string())
            .unwrap_or_default()
    );
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        text,
    )
        .into_response()
}

/// `GET /`, `GET /?tenant=NAME`.
pub(super) async fn list(
    State(admin): State<Arc<AdminState>>,
    Query(filter): Query<hooks::ListFilter>,
) -> Response {
    match hooks::all(&admin, &filter).await {
        Ok(all) => render(
            StatusCode::OK,
            &HooksPage {
                hooks: all.into_iter().map(Shown::from).collect(),
                tenant: filter.tenant,
            },
        ),
        Err(e) => problem(&e),
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Done {
    /// Callbacks a redelivery just queued.
    queued: Option<usize>,
    /// The hook was just enabled.
    enabled: Option<u8>,
}

/// One hook's page, with `message` or `problem` said on top.
async fn hook_page(
    admin: &AdminState,
    id: u64,
    message: Option<String>,
    failed: Option<AdminError>,
) -> Response {
    let h = match hooks::view(admin, id).await {
        Ok(h) => h,
        Err(e) => return problem(&e),
    };
    let attempts = match hooks::attempts(admin, id, &Filter::default()).await {
        Ok(a) => a,
        Err(e) => return problem(&e),
    };
    let status = failed.as_ref().map_or(StatusCode::OK, AdminError::status);
    render(
        status,
        &HookPage {
            h: h.into(),
            attempts: attempts.into_iter().map(Tried::from).collect(),
            message,
            problem: failed.map(|e| e.to_string()),
        },
    )
}

/// `GET /hooks/{id}`.
pub(super) async fn hook(
    State(admin): State<Arc<AdminState>>,
    Path(id): Path<u64>,
    Query(done): Query<Done>,
) -> Response {
    let message = done
        .queued
        .map(|n| {
            format!(
                "Queued {n} callback{} again; they are sent after what was queued.",
                if n == 1 { "" } else { "s" }
            )
        })
        .or_else(|| {
            done.enabled
                .map(|_| "Enabled: its kept callbacks are sent, in order.".to_string())
        });
    hook_page(&admin, id, message, None).await
}

/// `POST /hooks/{id}/enable` (the button of a disabled hook): back to its page.
pub(super) async fn enable(
    State(admin): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<u64>,
) -> Response {
    match hooks::enable_hook(&admin, &caller, id).await {
        Ok(_) => Redirect::to(&format!("/hooks/{id}?enabled=1")).into_response(),
        Err(e) => hook_page(&admin, id, None, Some(e)).await,
    }
}

/// `POST /hooks/{id}/redeliver` (the form): back to the hook's page, saying what was queued.
pub(super) async fn redeliver(
    State(admin): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<u64>,
    Form(window): Form<Window>,
) -> Response {
    match redeliver::ask(&admin, &caller, id, &window).await {
        Ok(r) => Redirect::to(&format!("/hooks/{id}?queued={}", r.queued)).into_response(),
        Err(e) => hook_page(&admin, id, None, Some(e)).await,
    }
}
