//! A store list used as an inbox: any instance puts records in (JSON), the instance that
//! processes the bus takes the oldest, and drops them only once they are queued (a crash in
//! between takes them again: at least once). Redeliveries asked for ([`super::retain`]) and
//! the events about hooks ([`super::notices`]) come this way.

use serde::{Serialize, de::DeserializeOwned};

use crate::store_conn::StoreConn;

/// Puts `record` in inbox `key`.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn put<T: Serialize>(
    conn: &StoreConn,
    key: &str,
    record: &T,
) -> Result<(), redis::RedisError> {
    let json = serde_json::to_string(record).unwrap_or_default();
    redis::cmd("LPUSH")
        .arg(key)
        .arg(json)
        .query_async(&mut conn.clone())
        .await
}

/// The oldest records of inbox `key`, up to `n`, oldest first; `None` for one that does not
/// parse (dropped with the others by [`drop_oldest`]).
///
/// # Errors
/// When Redis fails.
pub(crate) async fn oldest<T: DeserializeOwned>(
    conn: &StoreConn,
    key: &str,
    n: usize,
) -> Result<Vec<Option<T>>, redis::RedisError> {
    let lines: Vec<String> = redis::cmd("LRANGE")
        .arg(key)
        .arg(-(n as i64))
        .arg(-1)
        .query_async(&mut conn.clone())
        .await?;
    Ok(lines
        .iter()
        .rev()
        .map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// Removes the `n` oldest records of inbox `key` (those [`oldest`] gave).
///
/// # Errors
/// When Redis fails.
pub(crate) async fn drop_oldest(
    conn: &StoreConn,
    key: &str,
    n: usize,
) -> Result<(), redis::RedisError> {
    redis::cmd("LTRIM")
        .arg(key)
        .arg(0)
        .arg(-(n as i64) - 1)
        .query_async(&mut conn.clone())
        .await
}
