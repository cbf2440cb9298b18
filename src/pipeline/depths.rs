//! The queues' depths and the age of their oldest callbacks, for the metrics.

use crate::{base::ids::HookId, metrics::Metrics, store_conn::StoreConn};

/// Reports the queues' depths, and the age of the oldest callback of each non-empty one (read
/// from the store: the one in flight is still there).
pub(super) async fn report_queues(
    metrics: &Metrics,
    conn: &StoreConn,
    depths: &[(HookId, usize)],
    registry: &crate::hooks::Registry,
) {
    let snapshot = registry.load();
    let tenant_of = |h: HookId| snapshot.get(h).and_then(|h| h.tenant.clone());
    metrics.report_queues(depths, &tenant_of);
    let busy: Vec<HookId> = depths
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(h, _)| *h)
        .collect();
    match crate::delivery::records::oldest_queued(conn, &busy).await {
        Ok(oldest) => {
            let oldest: Vec<(HookId, u64)> = busy
                .iter()
                .zip(oldest)
                .filter_map(|(h, t)| Some((*h, t?)))
                .collect();
            metrics.report_oldest(crate::base::time::now_ms(), &oldest, &tenant_of);
        }
        Err(e) => tracing::debug!(error = %e, "cannot read the queues' oldest callbacks"),
    }
}
