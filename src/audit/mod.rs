//! The audit: who changed what, when. Every `hooks/create` and `hooks/destroy`, every enable,
//! disable and removal (by a person, or by the relay itself), every secret rotation and
//! redelivery is one [`Record`] in a stream of the store ([`AUDIT`]), trimmed to
//! `audit.keep_days`; `hookrelay audit` and `GET /v1/audit` read it ([`read`]). Records are
//! handed to a writer that sends them in batches (a change does not wait for the store), and
//! writes what is waiting when the relay stops. A record never
//! holds a secret, a checksum or a URL's query: [`Record::url_of`] cuts them.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    base::{redis_keys::AUDIT, time::now_ms},
    store_conn::StoreConn,
};

/// What was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Action {
    /// `hooks/create` (a duplicate, or one refused by the tenant's limit, says so in `detail`).
    Create,
    Destroy,
    /// Enabled again: by `hooks enable`, by a `hooks/create` of its URL, or by the relay when
    /// its tenant is back.
    Enable,
    /// Disabled by the relay: its callbacks kept failing, or its tenant is gone.
    Disable,
    /// Removed by the relay: its callbacks kept failing, or its tenant stayed gone past the
    /// grace period.
    Remove,
    RotateSecret,
    Redeliver,
    /// A pool's server forgotten in the store (`hookrelay servers --forget`); its name in
    /// `detail`.
    ForgetServer,
}

/// Who asked, when not a caller of an API: the relay itself.
pub(crate) const RELAY: &str = "hookrelay";

/// One record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// When (ms since the epoch; RFC 3339 where people read it).
    pub(crate) time: u64,
    /// The tenant's name (its id when it is not known); `None`: the operator.
    pub(crate) tenant: Option<String>,
    /// The tenant's id, when a tenant's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tenant_id: Option<String>,
    /// Who asked: the caller's address (the trusted proxy's `X-Forwarded-For` where one is
    /// configured, else the peer), `unix-socket`, or [`RELAY`].
    pub(crate) caller: String,
    pub(crate) action: Action,
    /// The hook's id; `None` for an action on many hooks.
    pub(crate) hook: Option<u64>,
    /// The hook's callback URL without its credentials, query and fragment.
    pub(crate) url: Option<String>,
    /// What else people need: why (`tenant_unknown`), what came of it (`duplicate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) detail: Option<String>,
}

impl Record {
    /// A record made now, of the operator (see [`Record::of_tenant`]).
    pub(crate) fn now(action: Action, caller: impl Into<String>) -> Self {
        Self {
            time: now_ms(),
            tenant: None,
            tenant_id: None,
            caller: caller.into(),
            action,
            hook: None,
            url: None,
            detail: None,
        }
    }

    /// Of the tenant `id` named `name` (its id again when it is not known), or of the
    /// operator (`None`).
    pub(crate) fn of_tenant(mut self, tenant: Option<(&str, &str)>) -> Self {
        self.tenant_id = tenant.map(|(id, _)| id.to_string());
        self.tenant = tenant.map(|(_, name)| name.to_string());
        self
    }

    /// Whether it is of tenant `t` (its name, any case, or its id).
    fn is_of(&self, t: &str) -> bool {
        self.tenant
            .as_deref()
            .is_some_and(|n| n.eq_ignore_ascii_case(t))
            || self.tenant_id.as_deref() == Some(t)
    }

    /// With hook `id` of URL `url` (cut by [`Record::url_of`]).
    pub(crate) fn hook(mut self, id: u64, url: &str) -> Self {
        self.hook = Some(id);
        self.url = Some(Self::url_of(url));
        self
    }

    /// With a URL but no hook (a create refused).
    pub(crate) fn with_url(mut self, url: &str) -> Self {
        self.url = Some(Self::url_of(url));
        self
    }

    pub(crate) fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// `url` without credentials, query and fragment (they may carry tokens).
    pub(crate) fn url_of(url: &str) -> String {
        match url::Url::parse(url) {
            Ok(mut u) if !u.cannot_be_a_base() => {
                let _ = u.set_username("");
                let _ = u.set_password(None);
                u.set_query(None);
                u.set_fragment(None);
                u.to_string()
            }
            // Not a URL with a host (never stored as a hook's): up to its first `?` or `#`,
            // and nothing before an `@`.
            _ => {
                let head = url.split(['?', '#']).next().unwrap_or_default();
                head.rsplit_once('@').map_or(head, |(_, h)| h).to_string()
            }
        }
    }
}

/// Hands records to the writer ([`Audit::start`]): the change asked for does not wait for the
/// store's round trip.
#[derive(Clone)]
pub(crate) struct Audit {
    tx: mpsc::Sender<Record>,
    failures: Counter,
}

/// Records waiting for the writer; a change waits (at most [`WAIT`]) while it is full.
const BUFFER: usize = 10_000;
/// The longest a change waits for room before its record is given up (counted, logged).
const WAIT: Duration = Duration::from_secs(2);
/// Records written in one round trip.
const BATCH: usize = 512;
/// How long the writer waits for more records after the first of a batch: under a burst of
/// changes, a round trip carries many records, not one each.
const LINGER: Duration = Duration::from_millis(5);

impl Audit {
    /// Starts the writer of records to `conn`, each kept `keep_ms`; records that cannot be
    /// written are counted in `failures`. It writes what is waiting when `token` is cancelled,
    /// then ends (tracked by `tracker`).
    pub(crate) fn start(
        conn: StoreConn,
        keep_ms: u64,
        failures: Counter,
        tracker: &TaskTracker,
        token: &CancellationToken,
    ) -> Self {
        let (tx, rx) = mpsc::channel(BUFFER);
        let writer = Writer {
            conn,
            keep_ms,
            failures: failures.clone(),
            failing: false,
        };
        tracker.spawn(writer.run(rx, token.clone()));
        Self { tx, failures }
    }

    /// Records `record`. A record the writer cannot take within [`WAIT`] (the store down for
    /// long) is logged and counted, never the caller's failure: the change was made.
    pub(crate) async fn record(&self, record: Record) {
        let record = match self.tx.try_send(record) {
            Ok(()) => return,
            Err(mpsc::error::TrySendError::Full(r) | mpsc::error::TrySendError::Closed(r)) => r,
        };
        let (action, hook) = (record.action, record.hook);
        if !matches!(self.tx.send_timeout(record, WAIT).await, Ok(())) {
            self.failures.inc();
            tracing::warn!(
                ?action,
                hook_id = hook,
                "an audit record is lost: the writer cannot keep up (is the store down?)"
            );
        }
    }
}

/// Writes batches of records to the store, trimming what is older than the keep.
struct Writer {
    conn: StoreConn,
    keep_ms: u64,
    failures: Counter,
    /// Writes fail (said once until they succeed again).
    failing: bool,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Record>, token: CancellationToken) {
        loop {
            let first = tokio::select! {
                r = rx.recv() => r,
                () = token.cancelled() => None,
            };
            let Some(first) = first else {
                // Stopping: what is waiting is written once more.
                let mut rest = Vec::new();
                while let Ok(r) = rx.try_recv() {
                    rest.push(r);
                }
                if !rest.is_empty() {
                    let _ = tokio::time::timeout(WAIT, self.write(&rest)).await;
                }
                return;
            };
            let mut batch = vec![first];
            let until = tokio::time::Instant::now() + LINGER;
            while batch.len() < BATCH {
                match tokio::time::timeout_at(until, rx.recv()).await {
                    Ok(Some(r)) => batch.push(r),
                    Ok(None) | Err(_) => break,
                }
            }
            // Written, or tried until the relay stops.
            while !self.write(&batch).await {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    () = token.cancelled() => break,
                }
            }
        }
    }

    /// Writes `batch` in one round trip; whether it was written.
    async fn write(&mut self, batch: &[Record]) -> bool {
        let mut pipe = redis::pipe();
        for record in batch {
            let cutoff = record.time.saturating_sub(self.keep_ms);
            // Serializing plain data cannot fail.
            let json = serde_json::to_string(record).unwrap_or_default();
            pipe.cmd("XADD")
                .arg(AUDIT)
                .arg("MINID")
                .arg("~")
                .arg(cutoff)
                .arg("*")
                .arg("r")
                .arg(json)
                .ignore();
        }
        match pipe.query_async::<()>(&mut self.conn.clone()).await {
            Ok(()) => {
                if std::mem::take(&mut self.failing) {
                    tracing::info!("audit records are written again");
                }
                true
            }
            Err(e) => {
                self.failures.inc_by(batch.len() as u64);
                if !std::mem::replace(&mut self.failing, true) {
                    tracing::warn!(error = %e, records = batch.len(), "cannot write audit records: tried again every second");
                }
                false
            }
        }
    }
}

/// Which records to read.
#[derive(Debug, Default, Clone)]
pub(crate) struct Filter {
    /// Only this tenant's (its name, any case, or its id); empty: every record.
    pub(crate) tenant: Option<String>,
    /// Only at or after this time (ms since the epoch).
    pub(crate) since: u64,
    /// At most this many, the newest.
    pub(crate) limit: usize,
}

/// The records `filter` lets through, oldest first (at most `filter.limit`, the newest).
///
/// # Errors
/// When the store cannot be read.
pub(crate) async fn read(conn: &StoreConn, filter: &Filter) -> redis::RedisResult<Vec<Record>> {
    const PAGE: usize = 1000;
    let mut conn = conn.clone();
    let mut out = Vec::new();
    let mut end = "+".to_string();
    let tenant = filter.tenant.as_deref().filter(|t| !t.is_empty());
    loop {
        let page: Vec<(String, Vec<(String, String)>)> = redis::cmd("XREVRANGE")
            .arg(AUDIT)
            .arg(&end)
            .arg(filter.since)
            .arg("COUNT")
            .arg(PAGE)
            .query_async(&mut conn)
            .await?;
        let Some((last, _)) = page.last() else {
            break;
        };
        end = format!("({last}");
        let full = page.len() == PAGE;
        for (_, fields) in page {
            let Some(record) = fields
                .iter()
                .find(|(k, _)| k == "r")
                .and_then(|(_, v)| serde_json::from_str::<Record>(v).ok())
            else {
                continue;
            };
            if tenant.is_none_or(|t| record.is_of(t)) {
                out.push(record);
                if out.len() >= filter.limit {
                    break;
                }
            }
        }
        if !full || out.len() >= filter.limit {
            break;
        }
    }
    out.reverse();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_loses_its_credentials_query_and_fragment() {
        assert_eq!(
            Record::url_of("https://user:pw@lms.example/in/hook?token=abc#x"),
            "https://lms.example/in/hook"
        );
        assert_eq!(Record::url_of("http://h:8080/a"), "http://h:8080/a");
        // Not a URL: cut all the same.
        assert_eq!(Record::url_of("u:p@host/x?token=1"), "host/x");
    }

    #[test]
    fn a_record_is_one_json_object_with_the_keys_people_read() {
        let r = Record::now(Action::RotateSecret, "203.0.113.7")
            .of_tenant(Some(("0b4e-acme", "acme")))
            .hook(7, "https://h/in?secret=1");
        let v: serde_json::Value = serde_json::to_value(&r).expect("json");
        assert_eq!(v["action"], "rotate-secret");
        assert_eq!(v["tenant"], "acme");
        assert_eq!(v["tenant_id"], "0b4e-acme");
        assert_eq!(v["url"], "https://h/in");
        assert!(v.get("detail").is_none());
        assert!(r.is_of("ACME") && r.is_of("0b4e-acme") && !r.is_of("beta"));
        let operator = Record::now(Action::Create, RELAY);
        assert!(serde_json::to_value(&operator).expect("json")["tenant"].is_null());
    }
}
