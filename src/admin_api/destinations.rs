//! `GET /v1/destinations`: each destination (`[[destinations]]`) with its state, last error
//! and queue, as its sender last wrote them in the store.

use std::sync::Arc;

use axum::{Json, extract::State};
use serde::Serialize;

use super::{AdminError, AdminState};
use crate::destinations::{DestinationReport, report};

/// The answer.
#[derive(Debug, Serialize)]
pub(super) struct DestinationList {
    destinations: Vec<DestinationReport>,
}

pub(super) async fn list(
    State(admin): State<Arc<AdminState>>,
) -> Result<Json<DestinationList>, AdminError> {
    Ok(Json(DestinationList {
        destinations: all(&admin).await?,
    }))
}

/// Every destination, in the configuration's order.
///
/// # Errors
/// When the store cannot be read.
pub(super) async fn all(admin: &AdminState) -> Result<Vec<DestinationReport>, AdminError> {
    let mut conn = admin.conn.clone();
    Ok(report(&admin.destinations, &mut conn).await?)
}
