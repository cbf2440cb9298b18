//! `GET /v1/audit`: the audit's records, oldest first: `?tenant=NAME` (or its id) keeps one
//! tenant's, `?since=` (RFC 3339, or a duration back from now: `24h`) the recent ones,
//! `?limit=` at most that many (the newest; default 1000).

use std::sync::Arc;

use axum::{
    Json,
    extract::{Query, State},
};
use serde::{Deserialize, Serialize};

use super::{AdminError, AdminState};
use crate::{
    audit::{self, Action},
    base::time::{now_ms, parse_since, rfc3339},
};

/// The filters.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Filter {
    tenant: Option<String>,
    since: Option<String>,
    limit: Option<usize>,
}

/// One record as the API shows it: the keys `hookrelay audit --json` prints.
#[derive(Debug, Serialize)]
pub(super) struct RecordView {
    time: String,
    /// The tenant's name; `null`: the operator.
    tenant: Option<String>,
    caller: String,
    action: Action,
    hook: Option<u64>,
    url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
}

#[derive(Serialize)]
pub(super) struct AuditList {
    records: Vec<RecordView>,
}

pub(super) async fn list(
    State(admin): State<Arc<AdminState>>,
    Query(filter): Query<Filter>,
) -> Result<Json<AuditList>, AdminError> {
    let since = match &filter.since {
        Some(s) => parse_since(s, now_ms()).map_err(AdminError::BadParameter)?,
        None => 0,
    };
    let wanted = audit::Filter {
        tenant: filter.tenant.clone(),
        since,
        limit: filter.limit.unwrap_or(1000).clamp(1, 100_000),
    };
    let records = audit::read(&admin.conn, &wanted)
        .await?
        .into_iter()
        .map(|r| RecordView {
            time: rfc3339(r.time),
            tenant: r.tenant,
            caller: r.caller,
            action: r.action,
            hook: r.hook,
            url: r.url,
            detail: r.detail,
        })
        .collect();
    Ok(Json(AuditList { records }))
}
