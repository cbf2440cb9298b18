//! Events about hooks (`docs/receivers.md`): `hook-failing` (after `delivery.failing_after`
//! failed attempts in a row), `hook-disabled`, `hook-removed` and `hook-recovered` (the first
//! success after failing). A worker tells them ([`tell`]) into a store inbox; the instance that
//! processes the bus turns each into an event for the hooks that name its id in their
//! `eventID` (never a hook without an `eventID` list, so receivers that did not ask see nothing
//! new) and that may see the hook it is about (a tenant's hooks: their own tenant's hooks).

use serde::{Deserialize, Serialize};

use super::inbox;
use crate::{
    base::{ids::HookId, redis_keys::HOOK_NOTICES, time::now_ms},
    hooks::Hook,
    metrics::Metrics,
    store_conn::StoreConn,
};

/// The event ids, in the order a hook's troubles go.
pub(crate) use crate::event::ABOUT_HOOKS as IDS;

/// One event about a hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Notice {
    /// One of [`IDS`].
    pub(crate) id: String,
    hook: HookId,
    callback_url: String,
    /// The tenant of the hook, whose hooks (and the operator's) may be told.
    tenant: Option<String>,
    /// The last attempt's HTTP status, when it got one.
    last_status: Option<u16>,
    last_error: Option<String>,
    /// Failed attempts in a row.
    failures: u64,
    /// When it happened (ms).
    at: u64,
}

impl Notice {
    /// The notice `id` about `hook`, after `failures` failed attempts in a row, the last
    /// ending with `last` (a status or an error).
    pub(crate) fn new(
        id: &str,
        hook: &Hook,
        failures: usize,
        last: (Option<u16>, Option<String>),
    ) -> Self {
        Self {
            id: id.to_string(),
            hook: hook.id,
            callback_url: hook.callback_url.clone(),
            tenant: hook.tenant.clone(),
            last_status: last.0,
            last_error: last.1,
            failures: failures as u64,
            at: now_ms(),
        }
    }

    /// The processed event hooks get, in the catalogue's shape.
    pub(crate) fn event_json(&self) -> String {
        serde_json::json!({
            "data": {
                "type": "event",
                "id": self.id,
                "attributes": {
                    "hook": {
                        "id": self.hook.0,
                        "callback-url": self.callback_url,
                        "last-status": self.last_status,
                        "last-error": self.last_error,
                        "failures": self.failures,
                    }
                },
                "event": {"ts": self.at}
            }
        })
        .to_string()
    }

    /// Whether `hook` gets it: its `eventID` names it, and it may see the hook it is about.
    pub(crate) fn goes_to(&self, hook: &Hook) -> bool {
        hook.names(&self.id)
            && IDS.contains(&self.id.as_str())
            && !hook.get_raw
            && hook.owns(self.tenant.as_deref())
    }
}

/// Tells `notice`: a log line's worth is the caller's; here, the metric and the store.
pub(crate) async fn tell(conn: &StoreConn, metrics: &Metrics, notice: &Notice) {
    metrics.count_hook_notice(&notice.id);
    if let Err(e) = inbox::put(conn, HOOK_NOTICES, notice).await {
        tracing::warn!(hook_id = notice.hook.0, event = %notice.id, error = %e, "cannot store an event about a hook: it is not sent");
    }
}

/// The oldest notices told, up to `n` (`None`: one that does not parse).
///
/// # Errors
/// When Redis fails.
pub(crate) async fn notices_told(
    conn: &StoreConn,
    n: usize,
) -> Result<Vec<Option<Notice>>, redis::RedisError> {
    inbox::oldest(conn, HOOK_NOTICES, n).await
}

/// Drops the `n` oldest notices (those [`notices_told`] gave), once queued.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn notices_taken(conn: &StoreConn, n: usize) -> Result<(), redis::RedisError> {
    inbox::drop_oldest(conn, HOOK_NOTICES, n).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(id: u64, events: Option<&[&str]>, tenant: Option<&str>) -> Hook {
        Hook {
            id: HookId(id),
            callback_url: format!("http://h/{id}"),
            meeting_id: None,
            event_ids: events.map(|e| e.iter().map(|s| s.to_string()).collect()),
            get_raw: false,
            permanent: false,
            tenant: tenant.map(String::from),
            disabled: None,
            signing: None,
        }
    }

    #[test]
    fn only_hooks_that_name_it_and_may_see_its_hook_get_it() {
        let failing = Notice::new(
            "hook-failing",
            &hook(1, None, Some("t1")),
            3,
            (Some(503), None),
        );
        assert!(
            failing.goes_to(&hook(2, Some(&["hook-failing"]), None)),
            "the operator's"
        );
        assert!(
            failing.goes_to(&hook(3, Some(&["hook-failing"]), Some("t1"))),
            "its tenant's"
        );
        assert!(
            !failing.goes_to(&hook(4, Some(&["hook-failing"]), Some("t2"))),
            "another tenant's"
        );
        assert!(
            !failing.goes_to(&hook(5, None, None)),
            "no eventID: nothing new"
        );
        assert!(!failing.goes_to(&hook(6, Some(&["hook-removed"]), None)));
        let v: serde_json::Value = serde_json::from_str(&failing.event_json()).expect("JSON");
        assert_eq!(v["data"]["id"], "hook-failing");
        assert_eq!(v["data"]["attributes"]["hook"]["id"], 1);
        assert_eq!(v["data"]["attributes"]["hook"]["last-status"], 503);
        assert_eq!(v["data"]["attributes"]["hook"]["failures"], 3);
    }
}
