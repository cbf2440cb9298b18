//! `GET /v1/tenants`: the tenants in force (where each comes from, its hooks), the ones
//! refused for their secrets, and how Scalelite's were last read. Never a secret.

use std::sync::Arc;

use axum::{Json, extract::State};
use serde::Serialize;

use super::AdminState;
use crate::base::time::rfc3339;

/// One tenant in force.
#[derive(Debug, Serialize)]
pub(super) struct TenantView {
    id: String,
    name: String,
    /// `configured` (`[[tenants]]`) or `scalelite`.
    source: &'static str,
    hooks: usize,
    /// Of them, disabled.
    disabled_hooks: usize,
}

/// Something wrong with a tenant record: refused outright (`operator_secret`, `weak_secret`),
/// or kept at its last good version.
#[derive(Debug, Serialize)]
pub(super) struct ProblemView {
    /// The tenant's id (its name for `name_index`).
    tenant: String,
    reason: &'static str,
    /// Whether the tenant is refused (not in force at all).
    refused: bool,
}

/// Scalelite's reads.
#[derive(Debug, Serialize)]
pub(super) struct ScaleliteView {
    last_read: Option<String>,
    failing_since: Option<String>,
    /// When the view in force, taken from the store at the start, was kept there (until
    /// Scalelite's Redis is read).
    from_store: Option<String>,
}

/// The answer.
#[derive(Debug, Serialize)]
pub(super) struct TenantList {
    tenants: Vec<TenantView>,
    /// Tenants whose hooks wait for them: their tenant is not in force (removed, or refused).
    unknown: Vec<UnknownView>,
    problems: Vec<ProblemView>,
    /// `None` without `[scalelite]`.
    scalelite: Option<ScaleliteView>,
}

/// Hooks of a tenant that is not in force.
#[derive(Debug, Serialize)]
pub(super) struct UnknownView {
    id: String,
    hooks: usize,
}

pub(super) async fn list(State(admin): State<Arc<AdminState>>) -> Json<TenantList> {
    Json(tenants(&admin))
}

/// What `GET /v1/tenants` answers.
pub(super) fn tenants(admin: &AdminState) -> TenantList {
    let view = admin.tenants.load();
    let snapshot = admin.store.registry().load();
    let count = |id: &str| {
        snapshot.of_tenant(id).fold((0, 0), |(n, d), h| {
            (n + 1, d + usize::from(h.disabled.is_some()))
        })
    };
    let tenants = view
        .all()
        .into_iter()
        .map(|t| {
            let (hooks, disabled_hooks) = count(&t.id);
            TenantView {
                id: t.id.clone(),
                name: t.name.clone(),
                source: if admin.tenants.is_configured(t) {
                    "configured"
                } else {
                    "scalelite"
                },
                hooks,
                disabled_hooks,
            }
        })
        .collect();
    let unknown = snapshot
        .tenant_ids()
        .filter(|id| view.by_id(id).is_none())
        .map(|id| UnknownView {
            id: id.to_string(),
            hooks: count(id).0,
        })
        .collect();
    let status = admin.tenants.scalelite_status();
    let problems = status
        .problems
        .iter()
        .map(|p| ProblemView {
            tenant: p.subject().to_string(),
            reason: p.reason(),
            refused: matches!(p, crate::tenants::Problem::Refused(..)),
        })
        .collect();
    let time = |t: Option<u64>| t.map(rfc3339);
    TenantList {
        tenants,
        unknown,
        problems,
        scalelite: admin.scalelite.then(|| ScaleliteView {
            last_read: time(status.last_read),
            failing_since: time(status.failing_since),
            from_store: time(status.from_store),
        }),
    }
}
