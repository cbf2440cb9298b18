//! The HTTP endpoint: `GET /metrics` and the merged endpoint, behind the credentials and the
//! host names they require.

use std::sync::Arc;

use axum::{Router, extract::State, http::header, response::IntoResponse, routing::get};

use super::{Metrics, auth, hosts, merge};

/// `GET /metrics` and the merged endpoint at `merge_path`, behind `access`.
pub(crate) fn router(
    metrics: Arc<Metrics>,
    merger: Arc<merge::Merger>,
    merge_path: &str,
    access: Arc<auth::Access>,
    hosts: Arc<hosts::Hosts>,
) -> Router {
    let open = access.is_open();
    let router = Router::new()
        .route("/metrics", get(serve))
        .with_state(metrics)
        .route(merge_path, get(serve_merged).with_state(merger))
        .layer(axum::middleware::from_fn_with_state(
            access,
            auth::require_access,
        ));
    // Without credentials, only for its own names (DNS rebinding).
    match open {
        true => router.layer(axum::middleware::from_fn_with_state(hosts, hosts::require)),
        false => router,
    }
}

async fn serve_merged(State(merger): State<Arc<merge::Merger>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        merger.scrape().await,
    )
}

async fn serve(State(m): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        m.render(),
    )
}
