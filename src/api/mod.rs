//! The hooks API (axum): `{path}/hooks/create|destroy|list|ping` over GET, HEAD and POST
//! (parameters in the query string), authenticated by [`checksum`], answered in BBB XML
//! ([`xml`]) with HTTP 200 whatever the outcome.

pub mod checksum;
pub mod hooks;
pub mod params;
pub mod xml;

use std::sync::Arc;

use axum::{
    Router,
    extract::State,
    http::{HeaderMap, Method, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};

use crate::{
    base::{callback_url::Guard, digest::Algorithm, secret::Secret},
    hooks::HookStore,
    metrics::Metrics,
    tenants::Tenants,
};

/// Longest query string accepted.
pub const MAX_QUERY_BYTES: usize = 8 * 1024;

/// What the handlers share.
pub struct ApiState {
    pub store: Arc<HookStore>,
    pub secret: Secret,
    /// `api.path` without a trailing `/`.
    pub path: String,
    pub algorithms: Vec<Algorithm>,
    pub metrics: Arc<Metrics>,
    /// Refuses callback URLs whose address can never be allowed.
    pub guard: Arc<Guard>,
    /// The answer to an unfiltered `hooks/list` for the hook snapshot it was made from.
    pub list_cache: hooks::ListCache,
    /// The tenants whose calls (by host, with their own secrets) see their own hooks only.
    pub tenants: Arc<Tenants>,
}

/// The API router. One fallback handler matches paths the way the reference does
/// (case-insensitive, optional trailing `/`), keeping the path as sent for the checksum.
pub fn router(state: Arc<ApiState>) -> Router {
    Router::new().fallback(handle).with_state(state)
}

/// A call of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
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

async fn handle(
    State(state): State<Arc<ApiState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
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
        matches!(method, Method::GET | Method::HEAD | Method::POST),
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
        host: host(&headers),
    };
    let (returncode, message_key, body) = hooks::answer(&state, asked).await;
    state
        .metrics
        .api_requests
        .get_or_create(&crate::metrics::ApiLabels {
            call: call.label().into(),
            returncode: returncode.into(),
            message_key: message_key.into(),
        })
        .inc();
    ([(header::CONTENT_TYPE, "text/xml; charset=utf-8")], body).into_response()
}
