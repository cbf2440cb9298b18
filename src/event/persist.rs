//! Meeting mappings in Redis (the reference v3 keys): read back at start-up, written by one
//! background task that batches whatever has queued up into one pipeline, so the hot path never
//! waits for Redis.

use std::{collections::HashMap, time::Duration};

use redis::{AsyncCommands, aio::ConnectionManager};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use super::mapping::MappingWrite;

const MAPPINGS_SET: &str = "bigbluebutton:webhooks:proc:mappings";
const MAPPING_PREFIX: &str = "bigbluebutton:webhooks:proc:mapping:";
/// Most writes sent in one pipeline.
const BATCH: usize = 512;

/// Reads every stored meeting mapping as (internal, external, last activity ms).
///
/// # Errors
/// When Redis cannot be read.
pub async fn load_meetings(
    conn: &mut ConnectionManager,
) -> Result<Vec<(String, String, u64)>, redis::RedisError> {
    let members: Vec<String> = conn.smembers(MAPPINGS_SET).await?;
    if members.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for m in &members {
        pipe.hgetall(format!("{MAPPING_PREFIX}{m}"));
    }
    let hashes: Vec<HashMap<String, String>> = pipe.query_async(conn).await?;
    Ok(hashes
        .into_iter()
        .filter_map(|h| {
            Some((
                h.get("internalMeetingID")?.clone(),
                h.get("externalMeetingID")?.clone(),
                h.get("lastActivity")?.parse().ok()?,
            ))
        })
        .collect())
}

/// Writes mapping changes until `token` is cancelled; a failed batch is retried (in order) once
/// Redis answers again.
pub async fn run_writer(
    mut conn: ConnectionManager,
    mut rx: UnboundedReceiver<MappingWrite>,
    token: CancellationToken,
) {
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let n = tokio::select! {
            n = rx.recv_many(&mut batch, BATCH) => n,
            () = token.cancelled() => {
                // Last chance for what is queued.
                while let Ok(w) = rx.try_recv() { batch.push(w); }
                if !batch.is_empty() {
                    let _ = write_batch(&mut conn, &batch).await;
                }
                return;
            }
        };
        if n == 0 {
            return;
        }
        while let Err(e) = write_batch(&mut conn, &batch).await {
            tracing::warn!(error = %e, writes = batch.len(), "could not persist id mappings; retrying");
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                () = token.cancelled() => return,
            }
        }
        batch.clear();
    }
}

async fn write_batch(
    conn: &mut ConnectionManager,
    batch: &[MappingWrite],
) -> Result<(), redis::RedisError> {
    let mut pipe = redis::pipe();
    for w in batch {
        match w {
            MappingWrite::Meeting {
                internal,
                external,
                last_activity_ms,
            } => {
                pipe.hset_multiple(
                    format!("{MAPPING_PREFIX}{internal}"),
                    &[
                        ("id", internal.as_str()),
                        ("internalMeetingID", internal.as_str()),
                        ("externalMeetingID", external.as_str()),
                        ("lastActivity", &last_activity_ms.to_string()),
                    ],
                )
                .ignore()
                .sadd(MAPPINGS_SET, internal)
                .ignore();
            }
            MappingWrite::DeleteMeeting { internal } => {
                pipe.del(format!("{MAPPING_PREFIX}{internal}"))
                    .ignore()
                    .srem(MAPPINGS_SET, internal)
                    .ignore();
            }
        }
    }
    pipe.query_async::<()>(conn).await
}
