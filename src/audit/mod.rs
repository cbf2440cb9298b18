//! The audit: who changed what, when. Every `hooks/create` and `hooks/destroy`, every enable,
//! disable and removal (by a person, or by the relay itself), every secret rotation and
//! redelivery is one [`Record`] in a stream of the store ([`AUDIT`]), trimmed to
//! `audit.keep_days`; `hookrelay audit` and `GET /v1/audit` read it ([`read`]). A record never
//! holds a secret, a checksum or a URL's query: [`Record::url_of`] cuts them.

use serde::{Deserialize, Serialize};

use crate::{
    base::{redis_keys::AUDIT, time::now_ms},
    store_conn::StoreConn,
};

/// What was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
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
}

/// Who asked, when not a caller of an API: the relay itself.
pub const RELAY: &str = "hookrelay";

/// One record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// When (ms since the epoch; RFC 3339 where people read it).
    pub time: u64,
    /// The tenant's name (its id when it is not known); `None`: the operator.
    pub tenant: Option<String>,
    /// The tenant's id, when a tenant's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Who asked: the caller's address (the trusted proxy's `X-Forwarded-For` where one is
    /// configured, else the peer), `unix-socket`, or [`RELAY`].
    pub caller: String,
    pub action: Action,
    /// The hook's id; `None` for an action on many hooks.
    pub hook: Option<u64>,
    /// The hook's callback URL without its credentials, query and fragment.
    pub url: Option<String>,
    /// What else people need: why (`tenant_unknown`), what came of it (`duplicate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Record {
    /// A record made now, of the operator (see [`Record::of_tenant`]).
    pub fn now(action: Action, caller: impl Into<String>) -> Self {
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
    pub fn of_tenant(mut self, tenant: Option<(&str, &str)>) -> Self {
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
    pub fn hook(mut self, id: u64, url: &str) -> Self {
        self.hook = Some(id);
        self.url = Some(Self::url_of(url));
        self
    }

    /// With a URL but no hook (a create refused).
    pub fn with_url(mut self, url: &str) -> Self {
        self.url = Some(Self::url_of(url));
        self
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// `url` without credentials, query and fragment (they may carry tokens).
    pub fn url_of(url: &str) -> String {
        match url::Url::parse(url) {
            Ok(mut u) => {
                let _ = u.set_username("");
                let _ = u.set_password(None);
                u.set_query(None);
                u.set_fragment(None);
                u.to_string()
            }
            // Not a URL (never stored as a hook's): up to its first `?` or `#`, and nothing
            // before an `@`.
            Err(_) => {
                let head = url.split(['?', '#']).next().unwrap_or_default();
                head.rsplit_once('@').map_or(head, |(_, h)| h).to_string()
            }
        }
    }
}

/// Writes records to the store.
#[derive(Clone)]
pub struct Audit {
    conn: StoreConn,
    keep_ms: u64,
    failures: prometheus_client::metrics::counter::Counter,
}

impl Audit {
    /// Records kept `keep_ms`; writes that fail counted in `failures`.
    pub fn new(
        conn: StoreConn,
        keep_ms: u64,
        failures: prometheus_client::metrics::counter::Counter,
    ) -> Self {
        Self {
            conn,
            keep_ms,
            failures,
        }
    }

    /// Writes `record`, trimming what is older than the keep. A failure is logged and counted,
    /// never the caller's failure: the change was made.
    pub async fn record(&self, record: Record) {
        let cutoff = record.time.saturating_sub(self.keep_ms);
        // Serializing plain data cannot fail.
        let json = serde_json::to_string(&record).unwrap_or_default();
        let written: redis::RedisResult<String> = redis::cmd("XADD")
            .arg(AUDIT)
            .arg("MINID")
            .arg("~")
            .arg(cutoff)
            .arg("*")
            .arg("r")
            .arg(json)
            .query_async(&mut self.conn.clone())
            .await;
        if let Err(e) = written {
            self.failures.inc();
            tracing::warn!(error = %e, action = ?record.action, hook_id = record.hook, "cannot write an audit record");
        }
    }
}

/// Which records to read.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    /// Only this tenant's (its name, any case, or its id); empty: every record.
    pub tenant: Option<String>,
    /// Only at or after this time (ms since the epoch).
    pub since: u64,
    /// At most this many, the newest.
    pub limit: usize,
}

/// The records `filter` lets through, oldest first (at most `filter.limit`, the newest).
///
/// # Errors
/// When the store cannot be read.
pub async fn read(conn: &StoreConn, filter: &Filter) -> redis::RedisResult<Vec<Record>> {
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
