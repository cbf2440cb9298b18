//! Reading the streams that a pool's edges write to the store ([`crate::edge`]): a server's
//! entries after a position, in order, as bus messages of its source, each with its entry's
//! id. An entry that is not a bus message (no text payload) is handed on empty, so that it is
//! skipped and counted where every malformed message is, and the position moves past it.

use std::sync::Arc;

use redis::streams::StreamRangeReply;

use super::BusMessage;
use crate::{base::sources::SourceId, store_conn::StoreConn};

/// One server's stream, and how far it was read.
#[derive(Debug, Clone)]
pub(crate) struct Position {
    pub(crate) source: SourceId,
    /// The stream's key.
    pub(crate) key: String,
    /// The id of the last entry read (`0-0`: none yet).
    pub(crate) after: Arc<str>,
}

/// What one read gave.
#[derive(Debug, Default)]
pub(crate) struct Read {
    /// Each stream's new entries in order, the streams one after the other.
    pub(crate) messages: Vec<BusMessage>,
    /// Whether some stream gave `count` entries (more may wait there).
    pub(crate) full: bool,
}

/// Reads, in one round trip, at most `count` entries of each stream after its position, and
/// moves the positions past them.
///
/// # Errors
/// When the store fails; no position moves then.
pub(crate) async fn read(
    conn: &mut StoreConn,
    streams: &mut [&mut Position],
    count: usize,
) -> redis::RedisResult<Read> {
    if streams.is_empty() {
        return Ok(Read::default());
    }
    let mut pipe = redis::pipe();
    for s in streams.iter() {
        pipe.cmd("XRANGE")
            .arg(&s.key)
            .arg(format!("({}", s.after))
            .arg("+")
            .arg("COUNT")
            .arg(count);
    }
    let replies: Vec<StreamRangeReply> = pipe.query_async(conn).await?;
    let arrived = std::time::Instant::now();
    let mut out = Read::default();
    for (s, reply) in streams.iter_mut().zip(replies) {
        out.full |= reply.ids.len() >= count;
        for entry in reply.ids {
            let payload: String = entry.get("p").unwrap_or_default();
            let channel: String = entry.get("c").unwrap_or_default();
            let id: Arc<str> = entry.id.into();
            s.after = id.clone();
            out.messages.push(BusMessage {
                source: s.source,
                channel: channel.into(),
                payload: payload.into(),
                arrived,
                epoch: 1,
                position: Some(id),
            });
        }
    }
    Ok(out)
}
