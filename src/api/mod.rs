//! The hooks API (axum): `{path}/hooks/create|destroy|list|ping` over GET, HEAD and POST
//! (parameters in the query string), authenticated by [`checksum`], a tenant's calls within
//! its [`limits`], answered in BBB XML ([`xml`]) with HTTP 200 whatever the outcome (429 for a
//! tenant calling too fast). Beside it, [`health`]'s `/healthz` and `/readyz` for
//! orchestrators.

mod checksum;
mod health;
mod hooks;
mod limits;
pub mod params;
mod xml;

pub(crate) use health::Health;
pub(crate) use limits::TenantLimits;

use std::sync::Arc;

use axum::{
    Router,
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    response::{IntoResponse, Response},
};

use crate::{
    audit::Audit,
    base::{callback_url::Guard, digest::Algorithm, forwarded, secret::Secret},
    hooks::HookStore,
    metrics::Metrics,
    tenants::Tenants,
};

/// Longest query string accepted.
pub(crate) const MAX_QUERY_BYTES: usize = 8 * 1024;

/// What the handlers share.
pub(crate) struct ApiState {
    pub(crate) store: Arc<HookStore>,
    pub(crate) secret: Secret,
    /// `api.path` without a trailing `/`.
    pub(crate) path: String,
    pub(crate) algorithms: Vec<Algorithm>,
    pub(crate) metrics: Arc<Metrics>,
    /// Refuses callback URLs whose address can never be allowed.
    pub(crate) guard: Arc<Guard>,
    /// The answer to an unfiltered `hooks/list` for the hook snapshot it was made from.
    pub(crate) list_cache: hooks::ListCache,
    /// The tenants whose calls (by host, with their own secrets) see their own hooks only.
    pub(crate) tenants: Arc<Tenants>,
    /// What each tenant may do (`[tenancy]`).
    pub(crate) limits: limits::TenantLimits,
    /// Where every change is recorded.
    pub(crate) audit: Audit,
    /// `delivery.hook_secrets`: each hook created gets its own signing secret.
    pub(crate) hook_secrets: bool,
    /// `api.trusted_proxies`: whose `X-Forwarded-For` names the caller.
    pub(crate) trusted_proxies: Vec<ipnet::IpNet>,
    /// What `/healthz` and `/readyz` answer from.
    pub(crate) health: Arc<health::Health>,
}

impl ApiState {
    /// Counts the hooks in the metrics after a change.
    fn count_hooks(&self) {
        let hooks = self.store.registry().load();
        self.metrics.count_hooks(hooks.len(), hooks.counts());
    }
}

/// The API router. One fallback handler matches paths the way the reference does
/// (case-insensitive, optional trailing `/`), keeping the path as sent for the checksum.
pub(crate) fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/healthz", axum::routing::get(health::live))
        .route("/readyz", axum::routing::get(health::ready))
        .fallback(handle)
        .with_state(state)
}

/// A call of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    Create,
    Destroy,
    List,
    Ping,
}

impl Call {
    fn label(self) -> &'static str {
        match self {
            Call::Create => "create",
            Call::Destroy => "destroy",
            Call::List => "list",
            Call::Ping => "ping",
        }
    }
}

/// The host a call was made to, as Scalelite reads it: a proxy's `X-Forwarded-Host` (its
/// first), else `Host`.
fn host(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("x-forwarded-host")
        .or_else(|| headers.get(header::HOST))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .map(str::trim)
}

async fn handle(State(state): State<Arc<ApiState>>, request: Request) -> Response {
    let caller = forwarded::caller_of(
        request.extensions(),
        request.headers(),
        &state.trusted_proxies,
    );
    let (method, uri, headers) = (request.method(), request.uri(), request.headers());
    let path = uri.path();
    let call_name = path
        .get(..state.path.len())
        .filter(|p| p.eq_ignore_ascii_case(&state.path))
        .and_then(|_| path[state.path.len()..].strip_prefix('/'));
    let call =
        call_name.and_then(
            |name| match name.trim_end_matches('/').to_ascii_lowercase().as_str() {
                "hooks/create" => Some(Call::Create),
                "hooks/destroy" => Some(Call::Destroy),
                "hooks/list" => Some(Call::List),
                "hooks/ping" => Some(Call::Ping),
                _ => None,
            },
        );
    let (Some(call), Some(call_name), true) = (
        call,
        call_name,
        matches!(*method, Method::GET | Method::HEAD | Method::POST),
    ) else {
        return (StatusCode::NOT_FOUND, format!("Cannot {method} {path}")).into_response();
    };
    if call == Call::Ping {
        return "bbb-webhooks API up!".into_response();
    }
    let query = uri.query().unwrap_or("");
    let asked = hooks::Asked {
        call,
        call_name,
        query,
        host: host(headers),
        caller,
    };
    let answered = hooks::answer(&state, asked).await;
    state
        .metrics
        .api_requests
        .get_or_create(&crate::metrics::ApiLabels {
            call: call.label().into(),
            returncode: answered.returncode.into(),
            message_key: answered.message_key.into(),
            tenant: answered.tenant.unwrap_or_default(),
        })
        .inc();
    let xml = [(header::CONTENT_TYPE, "text/xml; charset=utf-8")];
    match answered.retry_after {
        Some(wait) => (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, wait.as_secs().to_string())],
            xml,
            answered.body,
        )
            .into_response(),
        None => (xml, answered.body).into_response(),
    }
}
