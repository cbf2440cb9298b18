//! Scalelite's tenants, read from its Redis as Scalelite writes them (`app/models/tenant.rb`,
//! `lib/redis_store.rb`, under its `REDIS_NAMESPACE`): the set `<ns>:tenants` of ids, the
//! hash `<ns>:tenant:<id>` (`name`, `secrets` joined by `:`, and LRS fields the relay leaves
//! alone) and the name index `<ns>:tenant_name:<name>` (field `id`). Read again every
//! `refresh_ms`; a record that cannot be used keeps its last good version, a failed read keeps
//! every tenant, each told once in the log and always in the metrics. A tenant whose secrets
//! no tenant may have ([`super::refusal`]) is refused outright. Each good view is kept in the
//! relay's store ([`super::kept`]), and taken from there at a start while Scalelite's Redis
//! cannot be read.

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

use tokio_util::sync::CancellationToken;

use super::{Refusal, Tenant, Tenants, View, kept, refusal};
use crate::{
    base::{secret::Secret, time::now_ms},
    config::tenants::ScaleliteConfig,
    metrics::Metrics,
    store_conn::StoreConn,
};

/// Why a record of Scalelite's cannot be used as it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Problem {
    /// An id in the set without its hash.
    NoRecord(String),
    /// A tenant's hash without a name.
    NoName(String),
    /// A tenant's hash without a secret.
    NoSecrets(String),
    /// A name whose index is missing or names another id (`name`, what it names).
    NameIndex(String, Option<String>),
    /// A tenant refused for its secrets (its id): not in force at all, not even its last
    /// good version.
    Refused(String, Refusal),
}

impl Problem {
    /// Every `reason`, for the metric's series.
    pub(crate) const REASONS: [&'static str; 6] = [
        "no_record",
        "no_name",
        "no_secrets",
        "name_index",
        "operator_secret",
        "weak_secret",
    ];

    /// The metric's `reason`.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::NoRecord(_) => "no_record",
            Self::NoName(_) => "no_name",
            Self::NoSecrets(_) => "no_secrets",
            Self::NameIndex(..) => "name_index",
            Self::Refused(_, Refusal::OperatorSecret) => "operator_secret",
            Self::Refused(_, Refusal::WeakSecret) => "weak_secret",
        }
    }

    /// The tenant id or name it is about.
    pub(crate) fn subject(&self) -> &str {
        match self {
            Self::NoRecord(id) | Self::NoName(id) | Self::NoSecrets(id) | Self::Refused(id, _) => {
                id
            }
            Self::NameIndex(name, _) => name,
        }
    }
}

/// What one read of Scalelite's keys found.
#[derive(Debug, Default)]
pub(crate) struct Records {
    /// Tenant id -> its hash's fields (empty: no hash).
    pub(super) tenants: HashMap<String, HashMap<String, String>>,
    /// Name -> the id its index names (every `<ns>:tenant_name:*` key).
    pub(super) index: HashMap<String, Option<String>>,
}

/// The tenants `records` give, and what is wrong with them. A tenant whose record cannot be
/// used keeps its version in `last` if it had one; a tenant holding one of `operator`'s
/// secrets, or a weak one, is refused and left out.
pub(crate) fn interpret(
    records: &Records,
    last: &View,
    operator: &[Secret],
) -> (Vec<Arc<Tenant>>, Vec<Problem>) {
    let mut tenants = Vec::new();
    let mut problems = Vec::new();
    let mut ids: Vec<&String> = records.tenants.keys().collect();
    ids.sort();
    for id in ids {
        let fields = &records.tenants[id];
        let name = fields.get("name").filter(|n| !n.is_empty());
        let secrets: Vec<Secret> = fields
            .get("secrets")
            .map(|s| s.split(':').map(Secret::new).collect())
            .unwrap_or_default();
        let made = name.and_then(|n| Tenant::new(id.as_str(), n, secrets));
        match (made, name) {
            (Some(t), Some(n)) => {
                // Refused outright: not its last good version either.
                if let Some(why) = refusal(t.secrets(), operator) {
                    problems.push(Problem::Refused(id.clone(), why));
                    continue;
                }
                let indexed = records.index.get(n).cloned().flatten();
                if indexed.as_deref() != Some(id.as_str()) {
                    problems.push(Problem::NameIndex(n.clone(), indexed));
                }
                tenants.push(Arc::new(t));
                continue;
            }
            _ if fields.is_empty() => problems.push(Problem::NoRecord(id.clone())),
            (_, None) => problems.push(Problem::NoName(id.clone())),
            (None, Some(_)) => problems.push(Problem::NoSecrets(id.clone())),
        }
        if let Some(kept) = last.by_id(id) {
            tenants.push(kept.clone());
        }
    }
    // Index entries naming no tenant of the set.
    for (name, id) in &records.index {
        let named = id.as_ref().and_then(|id| records.tenants.get(id));
        if named.is_none_or(|f| f.get("name") != Some(name)) {
            let p = Problem::NameIndex(name.clone(), id.clone());
            if !problems.contains(&p) {
                problems.push(p);
            }
        }
    }
    problems.sort();
    (tenants, problems)
}

/// Reads Scalelite's tenant keys under namespace `ns`.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn read<C: redis::aio::ConnectionLike + Send>(
    conn: &mut C,
    ns: &str,
) -> redis::RedisResult<Records> {
    let ids: Vec<String> = redis::cmd("SMEMBERS")
        .arg(format!("{ns}:tenants"))
        .query_async(conn)
        .await?;
    let mut pipe = redis::pipe();
    for id in &ids {
        pipe.hgetall(format!("{ns}:tenant:{id}"));
    }
    // An empty pipeline is refused by the client ("empty command"): a Scalelite whose every
    // tenant was deleted has none to read.
    let hashes: Vec<HashMap<String, String>> = match ids.is_empty() {
        true => Vec::new(),
        false => pipe.query_async(conn).await?,
    };
    let mut records = Records {
        tenants: ids.into_iter().zip(hashes).collect(),
        index: HashMap::new(),
    };
    let prefix = format!("{ns}:tenant_name:");
    let mut keys: Vec<String> = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.hget(k, "id");
    }
    let named: Vec<Option<String>> = match keys.is_empty() {
        true => Vec::new(),
        false => pipe.query_async(conn).await?,
    };
    for (key, id) in keys.iter().zip(named) {
        if let Some(name) = key.strip_prefix(&prefix) {
            records.index.insert(name.to_string(), id);
        }
    }
    Ok(records)
}

/// Follows Scalelite's tenants until `token` is cancelled: the last good view kept in `store`
/// first (in force until Scalelite's Redis is read), then a read at once and one every
/// `refresh_ms`; each good view that differs from the one kept is kept.
pub(crate) async fn follow(
    tenants: Arc<Tenants>,
    config: ScaleliteConfig,
    metrics: Arc<Metrics>,
    store: StoreConn,
    token: CancellationToken,
) {
    let every = Duration::from_millis(config.refresh_ms);
    let mut conn = None;
    let mut told = Told::default();
    let mut kept = take_kept(&tenants, &metrics, &store).await;
    loop {
        if conn.is_none() {
            conn = connect(&config)
                .await
                .map_err(|e| told.failure(&e, &tenants))
                .ok();
        }
        if let Some(c) = conn.as_mut() {
            // A paused Redis must not hold the view up forever: the read has a deadline.
            match tokio::time::timeout(every * 2, read(c, &config.namespace)).await {
                Ok(Ok(records)) => {
                    let (found, problems) =
                        interpret(&records, &tenants.load(), tenants.operator_secrets());
                    if kept.as_ref() != Some(&found) {
                        kept = keep(&store, &found, &mut told)
                            .await
                            .then_some(found.clone());
                    }
                    let n = tenants.set_scalelite(found);
                    metrics
                        .tenants
                        .known
                        .set(i64::try_from(n).unwrap_or(i64::MAX));
                    metrics.tenants.from_store.set(0);
                    told.problems(&problems, &metrics);
                    told.ok();
                    tenants.update_status(|s| {
                        s.last_read = Some(now_ms());
                        s.failing_since = None;
                        s.from_store = None;
                        s.problems = problems;
                    });
                    tenants.settle();
                }
                Ok(Err(e)) => {
                    told.failure(&e, &tenants);
                    metrics.tenants.read_failures.inc();
                }
                Err(_) => {
                    told.failure(&"no answer in time", &tenants);
                    metrics.tenants.read_failures.inc();
                    conn = None;
                }
            }
        } else {
            metrics.tenants.read_failures.inc();
        }
        tenants.mark_tried();
        tokio::select! {
            () = token.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// Puts the view kept in `store` in force (it says which tenants exist until Scalelite's Redis
/// is read); the tenants it holds, to compare the next reads with.
async fn take_kept(
    tenants: &Tenants,
    metrics: &Metrics,
    store: &StoreConn,
) -> Option<Vec<Arc<Tenant>>> {
    let found = match kept::load(&mut store.clone()).await {
        Ok(found) => found?,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the tenants kept in the store");
            return None;
        }
    };
    let list: Vec<Arc<Tenant>> = found.tenants.into_iter().map(Arc::new).collect();
    let n = tenants.set_scalelite(list.iter().cloned());
    metrics
        .tenants
        .known
        .set(i64::try_from(n).unwrap_or(i64::MAX));
    metrics.tenants.from_store.set(1);
    tenants.update_status(|s| s.from_store = Some(found.saved_at));
    tenants.settle();
    Some(list)
}

/// Keeps `found` in the store; whether it was kept.
async fn keep(store: &StoreConn, found: &[Arc<Tenant>], told: &mut Told) -> bool {
    match kept::save(&mut store.clone(), found).await {
        Ok(()) => {
            told.keeping_failed = false;
            true
        }
        Err(e) => {
            if !std::mem::replace(&mut told.keeping_failed, true) {
                tracing::warn!(error = %e, "cannot keep Scalelite's tenants in the store: a start while its Redis is down would use an older view");
            }
            false
        }
    }
}

/// Waits, briefly, for [`follow`]'s first read: API calls of Scalelite's tenants are answered
/// from the start, and an unreachable Redis of Scalelite's does not hold the relay up.
pub(crate) async fn first_read(tenants: &Tenants, token: &CancellationToken) {
    tokio::select! {
        () = token.cancelled() => {}
        () = tenants.tried(Duration::from_secs(5)) => {}
    }
}

async fn connect(config: &ScaleliteConfig) -> redis::RedisResult<redis::aio::ConnectionManager> {
    let client = crate::redis_conn::redis_client_verified(
        config.redis_url.expose(),
        config.ca_file.as_deref(),
    )?;
    let settings = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_number_of_retries(1);
    redis::aio::ConnectionManager::new_with_config(client, settings).await
}

/// What the log has been told, so that each problem and each outage is one line, not one per
/// read.
#[derive(Default)]
struct Told {
    problems: BTreeSet<Problem>,
    failing: bool,
    /// The view could not be kept in the store (said once until it can).
    keeping_failed: bool,
}

impl Told {
    fn failure(&mut self, e: &dyn std::fmt::Display, tenants: &Tenants) {
        if self.failing {
            return;
        }
        self.failing = true;
        tenants.update_status(|s| s.failing_since = Some(now_ms()));
        // Redis errors name no password (the URL is not in them).
        match tenants.scalelite_status().from_store {
            Some(saved_at) => tracing::error!(
                error = %e,
                tenants = tenants.load().len(),
                kept_at = %crate::base::time::rfc3339(saved_at),
                "cannot read Scalelite's tenants: the view kept in the store stays in force"
            ),
            None => {
                tracing::error!(error = %e, "cannot read Scalelite's tenants: the last good ones stay in force")
            }
        }
    }

    fn ok(&mut self) {
        if std::mem::take(&mut self.failing) {
            tracing::info!("Scalelite's tenants are read again");
        }
    }

    fn problems(&mut self, problems: &[Problem], metrics: &Metrics) {
        for p in problems.iter().filter(|p| !self.problems.contains(p)) {
            match p {
                Problem::Refused(id, _) => tracing::error!(
                    tenant = id,
                    reason = p.reason(),
                    "a tenant of Scalelite's is refused: one of its secrets is the operator's or shorter than 12 characters; its calls fail the checksum and its hooks send nothing until its secrets are changed"
                ),
                _ => {
                    tracing::warn!(problem = ?p, reason = p.reason(), "a tenant record of Scalelite's cannot be used as it is: its last good version (if any) stays in force")
                }
            }
        }
        for reason in Problem::REASONS {
            let n = problems.iter().filter(|p| p.reason() == reason).count();
            metrics
                .tenants
                .set_problems(reason, i64::try_from(n).unwrap_or(i64::MAX));
        }
        self.problems = problems.iter().cloned().collect();
    }
}
