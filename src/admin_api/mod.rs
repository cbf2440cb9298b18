//! The admin API: JSON about each hook's delivery (its state, its last attempts), redelivery,
//! the tenants, the audit, the edges' servers and the destinations, on a listener of its own
//! (`[admin]`, never under the BBB API's path), behind `[admin] bearer_token`. The `hooks
//! show`, `hooks list`, `hooks enable`, `hooks rotate-secret`, `deliveries`, `redeliver`,
//! `tenants`, `audit`, `servers` and `destinations` commands use it;
//! [`hooks`], [`redeliver`], [`tenants`] and [`audit`] hold the calls, [`page`] the status page
//! for people. Every change is recorded in the audit with its caller ([`Caller`]). Errors are
//! typed here and answered as `{"error": "..."}` with their status.

mod audit;
mod destinations;
mod hooks;
mod page;
mod redeliver;
mod servers;
mod tenants;

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::{Request, State},
    http::{Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
    routing::{get, post},
};

use crate::{
    audit::Audit,
    base::forwarded,
    delivery::records::Bounds,
    hooks::HookStore,
    metrics::{Access, require_access},
    store_conn::StoreConn,
    tenants::Tenants,
};

/// What the calls read: the hooks registered, and the store.
pub(crate) struct AdminState {
    pub(crate) store: Arc<HookStore>,
    pub(crate) conn: StoreConn,
    /// What is kept of sent callbacks (`delivery.retain`); `None`: nothing.
    pub(crate) retain: Option<Bounds>,
    /// `delivery.max_queue`: a redelivery queues no more.
    pub(crate) max_queue: usize,
    /// The tenants, whose names the hooks show and are filtered by.
    pub(crate) tenants: Arc<Tenants>,
    /// The receivers' circuits, whose state each hook shows (`None`: off).
    pub(crate) circuits: Option<Arc<crate::delivery::Circuits>>,
    /// Where every change made through it is recorded.
    pub(crate) audit: Audit,
    /// `api.trusted_proxies`: whose `X-Forwarded-For` names the caller.
    pub(crate) trusted_proxies: Vec<ipnet::IpNet>,
    /// Whether Scalelite's tenants are read (`[scalelite]`).
    pub(crate) scalelite: bool,
    /// `delivery.hook_secret_overlap_s`, in ms.
    pub(crate) hook_secret_overlap_ms: u64,
    /// `tenancy.removed_grace_s`, in ms: when a gone tenant's hook is removed.
    pub(crate) removed_grace_ms: u64,
    /// `[[destinations]]`, whose states and queues it shows.
    pub(crate) destinations: Vec<crate::config::destinations::DestinationConfig>,
}

/// Who made a request, for the audit: its address (or `unix-socket`), put in the request's
/// extensions by [`router`].
#[derive(Debug, Clone)]
pub(crate) struct Caller(pub String);

/// Puts the request's [`Caller`] in its extensions.
async fn with_caller(
    State(admin): State<Arc<AdminState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let caller = forwarded::caller_of(req.extensions(), req.headers(), &admin.trusted_proxies);
    req.extensions_mut().insert(Caller(caller));
    next.run(req).await
}

/// Why a call fails.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdminError {
    #[error("no hook {0}: not registered, and none of that id removed in the last 7 days")]
    UnknownHook(u64),
    #[error(
        "hook {0} is not registered: redeliver to a registered hook (a hook removed after failures: register its URL again, and redeliver to the new hook)"
    )]
    NotRegistered(u64),
    #[error(
        "{since} is before what is kept for this hook's URL: callbacks are kept for {kept} (delivery.retain), and {reach}"
    )]
    BeforeWindow {
        since: String,
        kept: String,
        reach: String,
    },
    #[error("{0}")]
    BadParameter(String),
    #[error(
        "hook {0}'s tenant is not known: it is enabled again when its tenant is back (or removed after tenancy.removed_grace_s)"
    )]
    TenantGone(u64),
    #[error("no edge writes to this store as {0}")]
    UnknownServer(String),
    #[error("no destination is named {0} ([[destinations]])")]
    UnknownDestination(String),
    #[error("{0}'s edge is running: stop it first (its name is given up within 15 s of its stop)")]
    ServerRunning(String),
    #[error("the store cannot be read: {0}")]
    Store(#[from] redis::RedisError),
    /// What is not the caller's doing (no random bytes for a secret).
    #[error("{0}")]
    Internal(String),
}

impl From<crate::hooks::StoreError> for AdminError {
    fn from(e: crate::hooks::StoreError) -> Self {
        match e {
            crate::hooks::StoreError::Redis(e) => Self::Store(e),
            other => Self::Internal(other.to_string()),
        }
    }
}

impl AdminError {
    /// The HTTP status it is answered with.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::UnknownHook(_)
            | Self::NotRegistered(_)
            | Self::UnknownServer(_)
            | Self::UnknownDestination(_) => StatusCode::NOT_FOUND,
            Self::BadParameter(_) | Self::BeforeWindow { .. } => StatusCode::BAD_REQUEST,
            Self::TenantGone(_) | Self::ServerRunning(_) => StatusCode::CONFLICT,
            Self::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.to_string() });
        (self.status(), Json(body)).into_response()
    }
}

/// Refuses a request that changes something when a browser says it comes from another site
/// (its `Origin` is not this host): a page elsewhere cannot make an operator's browser queue
/// redeliveries. Tools that send no `Origin` (the commands, curl) pass.
async fn same_origin(req: Request, next: Next) -> Response {
    let headers = req.headers();
    let foreign = req.method() != Method::GET
        && req.method() != Method::HEAD
        && headers.get(header::ORIGIN).is_some_and(|origin| {
            let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
            let origin = origin.to_str().unwrap_or_default();
            let origin_host = origin.split_once("://").map(|(_, rest)| rest);
            host.is_none() || origin_host != host
        });
    if foreign {
        let body = serde_json::json!({ "error": "a request from another site is refused" });
        return (StatusCode::FORBIDDEN, Json(body)).into_response();
    }
    next.run(req).await
}

/// The admin API's routes, behind `access`.
pub(crate) fn router(state: Arc<AdminState>, access: Arc<Access>) -> Router {
    Router::new()
        .route("/v1/hooks", get(hooks::list))
        .route("/v1/hooks/{id}", get(hooks::show))
        .route("/v1/hooks/{id}/deliveries", get(hooks::deliveries))
        .route("/v1/hooks/{id}/redeliver", post(redeliver::redeliver))
        .route("/v1/hooks/{id}/enable", post(hooks::enable))
        .route("/v1/hooks/{id}/rotate-secret", post(hooks::rotate_secret))
        .route("/v1/redeliver", post(redeliver::redeliver_all))
        .route("/v1/tenants", get(tenants::list))
        .route("/v1/servers", get(servers::list))
        .route("/v1/destinations", get(destinations::list))
        .route(
            "/v1/destinations/{name}/redeliver",
            post(destinations::redeliver),
        )
        .route("/v1/servers/{name}/forget", post(servers::forget))
        .route("/v1/audit", get(audit::list))
        .route("/", get(page::list))
        .route("/servers", get(page::servers_page))
        .route("/destinations", get(page::destinations_page))
        .route("/hooks/{id}", get(page::hook))
        .route("/hooks/{id}/redeliver", post(page::redeliver))
        .route("/hooks/{id}/enable", post(page::enable))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            with_caller,
        ))
        .with_state(state)
        .layer(axum::middleware::from_fn(same_origin))
        .layer(axum::middleware::from_fn_with_state(access, require_access))
}
