//! The storage layout shared by hooks and id mappings: an index set of ids, one hash per id.
//! Reading it back is one `SMEMBERS` and one pipeline of `HGETALL`s.

use std::collections::HashMap;

use crate::store_conn::StoreConn;
use redis::AsyncCommands;

/// Every (member, hash) of the index `set`, hashes at `{prefix}{member}`.
///
/// # Errors
/// When Redis cannot be read.
pub(crate) async fn load_all(
    conn: &mut StoreConn,
    set: &str,
    prefix: &str,
) -> Result<Vec<(String, HashMap<String, String>)>, redis::RedisError> {
    let members: Vec<String> = conn.smembers(set).await?;
    if members.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for m in &members {
        pipe.hgetall(format!("{prefix}{m}"));
    }
    let hashes: Vec<HashMap<String, String>> = pipe.query_async(conn).await?;
    Ok(members.into_iter().zip(hashes).collect())
}
