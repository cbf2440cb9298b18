//! The HTTP endpoint: `GET /metrics` and the merged endpoint, behind the credentials and the
//! host names they require. `/metrics` answers in the format the scraper asks for, as
//! Prometheus' client libraries (and bbb-exporter) do: OpenMetrics when its `Accept` prefers
//! it, else the text format 0.0.4.

use std::sync::Arc;

use axum::{
    Router,
    extract::State,
    http::{HeaderMap, StatusCode, header},
    response::IntoResponse,
    routing::get,
};

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

/// The content type of the OpenMetrics exposition.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the text format.
const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

async fn serve(State(m): State<Arc<Metrics>>, headers: HeaderMap) -> impl IntoResponse {
    let rendered = m.render();
    if prefers_openmetrics(&headers) {
        return (
            StatusCode::OK,
            [(header::CONTENT_TYPE, OPENMETRICS)],
            rendered,
        );
    }
    match merge::text_format(&rendered) {
        Ok(text) => (StatusCode::OK, [(header::CONTENT_TYPE, TEXT)], text),
        Err(e) => {
            tracing::error!(error = %e, "cannot write the relay's metrics in the text format");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(header::CONTENT_TYPE, TEXT)],
                String::new(),
            )
        }
    }
}

/// Whether `Accept` prefers OpenMetrics to the text format: it names
/// `application/openmetrics-text` with a weight above zero and at least that of
/// `text/plain` (absent: 0) and of `*/*`.
fn prefers_openmetrics(headers: &HeaderMap) -> bool {
    let (mut openmetrics, mut text) = (0.0f32, 0.0f32);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "application/openmetrics-text" => openmetrics = openmetrics.max(q),
                "text/plain" | "*/*" | "text/*" => text = text.max(q),
                _ => {}
            }
        }
    }
    openmetrics > 0.0 && openmetrics >= text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> bool {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, value.parse().expect("header"));
        prefers_openmetrics(&h)
    }

    #[test]
    fn the_scraper_chooses_the_format() {
        assert!(!prefers_openmetrics(&HeaderMap::new()), "no Accept: text");
        // Prometheus 2.x's scrape.
        assert!(accept(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ));
        // Telegraf's, vmagent's, curl's.
        assert!(!accept("text/plain; version=0.0.4"));
        assert!(!accept("*/*"));
        assert!(!accept(
            "text/plain;version=0.0.4;q=1,application/openmetrics-text;q=0.5"
        ));
        assert!(!accept("application/openmetrics-text;q=0"));
        assert!(accept("application/openmetrics-text"));
    }
}
