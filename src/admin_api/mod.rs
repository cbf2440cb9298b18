//! The admin API: JSON about each hook's delivery (its state, its last attempts) and
//! redelivery, on a listener of its own (`[admin]`, never under the BBB API's path), behind
//! `[admin] bearer_token`. The `hooks show`, `hooks list`, `deliveries` and `redeliver` commands
//! use it; [`hooks`] and [`redeliver`] hold the calls, [`page`] the status page for people.
//! Errors are typed here and answered as `{"error": "..."}` with their status.

mod hooks;
mod page;
mod redeliver;

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::Request,
    http::{Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
    routing::{get, post},
};

use crate::{
    delivery::retain::Bounds, hooks::HookStore, metrics::auth, store_conn::StoreConn,
    tenants::Tenants,
};

/// What the calls read: the hooks registered, and the store.
pub struct AdminState {
    pub store: Arc<HookStore>,
    pub conn: StoreConn,
    /// What is kept of sent callbacks (`delivery.retain`); `None`: nothing.
    pub retain: Option<Bounds>,
    /// `delivery.max_queue`: a redelivery queues no more.
    pub max_queue: usize,
    /// The tenants, whose names the hooks show and are filtered by.
    pub tenants: Arc<Tenants>,
    /// The receivers' circuits, whose state each hook shows (`None`: off).
    pub circuits: Option<Arc<crate::delivery::client::Circuits>>,
}

/// Why a call fails.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
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
    #[error("the store cannot be read: {0}")]
    Store(#[from] redis::RedisError),
}

impl AdminError {
    /// The HTTP status it is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::UnknownHook(_) | Self::NotRegistered(_) => StatusCode::NOT_FOUND,
            Self::BadParameter(_) | Self::BeforeWindow { .. } => StatusCode::BAD_REQUEST,
            Self::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
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
pub fn router(state: Arc<AdminState>, access: Arc<auth::Access>) -> Router {
    Router::new()
        .route("/v1/hooks", get(hooks::list))
        .route("/v1/hooks/{id}", get(hooks::show))
        .route("/v1/hooks/{id}/deliveries", get(hooks::deliveries))
        .route("/v1/hooks/{id}/redeliver", post(redeliver::redeliver))
        .route("/v1/hooks/{id}/enable", post(hooks::enable))
        .route("/v1/redeliver", post(redeliver::redeliver_all))
        .route("/", get(page::list))
        .route("/hooks/{id}", get(page::hook))
        .route("/hooks/{id}/redeliver", post(page::redeliver))
        .route("/hooks/{id}/enable", post(page::enable))
        .with_state(state)
        .layer(axum::middleware::from_fn(same_origin))
        .layer(axum::middleware::from_fn_with_state(access, auth::require))
}
