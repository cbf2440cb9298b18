//! Reading back what [`super::Insight`] wrote, with each hook's queue: its state and its last
//! attempts, for the admin API. Any instance of a fleet reads the same.

use std::collections::HashMap;

use redis::{RedisError, Value};
use serde::Serialize;

use super::AttemptRecord;
use crate::{
    base::{
        ids::HookId,
        redis_keys::{REMOVED_HOOKS, attempts_key, status_key},
    },
    delivery::journal::{self, Head},
    store_conn::StoreConn,
};

/// A hook's delivery as the store has it. Times are ms since the epoch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct HookState {
    /// Callbacks in its queue (the last few delivered may still be counted until they are
    /// marked: at most `delivery.max_unacked`).
    pub(crate) queued: u64,
    /// The `timestamp` of the oldest queued callback.
    pub(crate) oldest_queued: Option<u64>,
    pub(crate) last_ok: Option<u64>,
    pub(crate) last_failure: Option<u64>,
    pub(crate) last_error: Option<String>,
    /// Failed attempts since the last success.
    pub(crate) failures_in_row: u64,
    /// When it is removed if its failures go on (none for a permanent hook, or when it is not
    /// failing).
    pub(crate) removal_due: Option<u64>,
    /// When it was removed after failures.
    pub(crate) removed: Option<u64>,
    /// The callback URL of a removed hook.
    pub(crate) url: Option<String>,
    /// In a fleet: the instance that delivered its last callback.
    pub(crate) instance: Option<String>,
}

/// A hook's state in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum State {
    /// Its last attempt succeeded, or it has had none.
    Ok,
    /// Its last attempts failed; it is retrying.
    Failing,
    /// Removed after its callbacks kept failing.
    Removed,
    /// Disabled after its callbacks kept failing (`delivery.on_give_up = "disable"`): it keeps
    /// its callbacks until it is enabled again.
    Disabled,
}

impl State {
    /// The word the API and the page say.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Failing => "failing",
            Self::Removed => "removed",
            Self::Disabled => "disabled",
        }
    }
}

impl HookState {
    pub(crate) fn state(&self) -> State {
        if self.removed.is_some() {
            State::Removed
        } else if self.failures_in_row > 0 {
            State::Failing
        } else {
            State::Ok
        }
    }

    fn from_values(head: Head, fields: Value) -> Result<Self, RedisError> {
        let mut f: HashMap<String, String> = redis::from_redis_value(fields)?;
        let number = |k: &str| f.get(k).and_then(|v| v.parse::<u64>().ok());
        Ok(Self {
            queued: head.position.length as u64,
            oldest_queued: head.oldest,
            last_ok: number("last_ok"),
            last_failure: number("last_failure"),
            failures_in_row: number("failures_in_row").unwrap_or(0),
            removal_due: number("removal_due"),
            removed: number("removed"),
            last_error: f.remove("last_error"),
            url: f.remove("url"),
            instance: f.remove("instance"),
        })
    }
}

/// The states of `hooks`, in their order, read in two pipelines.
///
/// # Errors
/// When Redis fails or holds something else under their keys.
pub(crate) async fn states(
    conn: &StoreConn,
    hooks: &[HookId],
) -> Result<Vec<HookState>, RedisError> {
    if hooks.is_empty() {
        return Ok(Vec::new());
    }
    let heads = journal::heads(&mut conn.clone(), hooks).await?;
    let mut pipe = redis::pipe();
    for &h in hooks {
        pipe.hgetall(status_key(h));
    }
    let values: Vec<Value> = pipe.query_async(&mut conn.clone()).await?;
    heads
        .into_iter()
        .zip(values)
        .map(|(head, fields)| HookState::from_values(head, fields))
        .collect()
}

/// The timestamp of the oldest callback queued for each of `hooks` (`None`: none queued), in
/// one pipeline.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn oldest_queued(
    conn: &StoreConn,
    hooks: &[HookId],
) -> Result<Vec<Option<u64>>, RedisError> {
    journal::oldest(&mut conn.clone(), hooks).await
}

/// Hook `hook`'s last attempts, newest first.
///
/// # Errors
/// When Redis fails. A record that does not parse is left out.
pub(crate) async fn attempts(
    conn: &StoreConn,
    hook: HookId,
) -> Result<Vec<AttemptRecord>, RedisError> {
    let lines: Vec<String> = redis::cmd("LRANGE")
        .arg(attempts_key(hook))
        .arg(0)
        .arg(-1)
        .query_async(&mut conn.clone())
        .await?;
    Ok(lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// The hooks removed after failures whose state is still kept, oldest removal first.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn removed_hooks(conn: &StoreConn) -> Result<Vec<HookId>, RedisError> {
    let ids: Vec<u64> = redis::cmd("ZRANGE")
        .arg(REMOVED_HOOKS)
        .arg(0)
        .arg(-1)
        .query_async(&mut conn.clone())
        .await?;
    Ok(ids.into_iter().map(HookId).collect())
}
