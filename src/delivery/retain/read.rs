//! Reading kept callbacks back, for `redeliver`: a window of them, the oldest's time, and
//! those a redelivery named. Both forms are read: a group entry ([`super::group`]; each of its
//! callbacks named by the entry's id, a dot and its place) and an entry a callback (written
//! before groups, and by a relay of an earlier version in a fleet).

use std::collections::{HashMap, HashSet};

use redis::streams::{StreamId, StreamRangeReply};

use super::{group, keys};
use crate::{
    delivery::journal::{Stored, parse_ts},
    store_conn::StoreConn,
};

/// A kept callback read back.
pub(crate) struct Found {
    /// Its id among those kept (for a group's callback, the entry's id, `.` and its place).
    pub(crate) id: String,
    /// As stored; its `ts` is the callback's own timestamp.
    pub(crate) stored: Stored,
    pub(crate) bytes: u64,
}

/// The callbacks of one stream entry: a group's, or the entry itself.
fn expand(sid: StreamId) -> Vec<Found> {
    let json = match (sid.get::<Vec<u8>>("l"), sid.get::<Vec<u8>>("g")) {
        (Some(packed), _) => match group::unpack(&packed) {
            Some(json) => json,
            None => {
                tracing::warn!(entry = %sid.id, "a group of kept callbacks cannot be unpacked; it is passed over");
                return Vec::new();
            }
        },
        (None, Some(json)) => json,
        (None, None) => return one(sid).into_iter().collect(),
    };
    match group::decode(&json) {
        Ok(callbacks) => (callbacks.into_iter().enumerate())
            .filter_map(|(i, fields)| {
                one(StreamId {
                    id: format!("{}.{i}", sid.id),
                    map: (fields.into_iter())
                        .map(|(k, v)| (k, redis::Value::BulkString(v.into_bytes())))
                        .collect(),
                    ..StreamId::default()
                })
            })
            .collect(),
        Err(e) => {
            tracing::warn!(entry = %sid.id, error = %e, "a group of kept callbacks cannot be read; it is passed over");
            Vec::new()
        }
    }
}

/// A callback's fields as kept; `None` without its timestamp.
fn one(sid: StreamId) -> Option<Found> {
    let ts: u64 = sid.get::<String>("r")?.parse().ok()?;
    Some(Found {
        stored: Stored::from_fields(ts, &sid),
        bytes: (sid.get::<String>("z"))
            .and_then(|z| z.parse().ok())
            .unwrap_or(0),
        id: sid.id,
    })
}

/// What is kept for `url` whose callback timestamp is within `[since, until]`, oldest first.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn read_kept(
    conn: &StoreConn,
    url: &str,
    since: u64,
    until: u64,
) -> Result<Vec<Found>, redis::RedisError> {
    let (stream, _) = keys(url);
    // A callback is kept after it is made: its entry id is never before its timestamp.
    let reply: StreamRangeReply = redis::cmd("XRANGE")
        .arg(&stream)
        .arg(since)
        .arg("+")
        .query_async(&mut conn.clone())
        .await?;
    Ok((reply.ids.into_iter())
        .flat_map(expand)
        .filter(|f| f.stored.ts >= since && f.stored.ts <= until)
        .collect())
}

/// The timestamp of the oldest callback kept for `url` (`None`: none kept).
///
/// # Errors
/// When Redis fails.
pub(crate) async fn oldest_kept(
    conn: &StoreConn,
    url: &str,
) -> Result<Option<u64>, redis::RedisError> {
    let (stream, _) = keys(url);
    let reply: StreamRangeReply = redis::cmd("XRANGE")
        .arg(&stream)
        .arg("-")
        .arg("+")
        .arg("COUNT")
        .arg(1)
        .query_async(&mut conn.clone())
        .await?;
    Ok(reply.ids.first().and_then(|e| {
        // A group's oldest (`t`), an entry's own (`r`), else the entry's time.
        (e.get::<String>("t").or_else(|| e.get::<String>("r")))
            .and_then(|r| r.parse().ok())
            .or_else(|| parse_ts(&e.id))
    }))
}

/// The kept callbacks whose ids are `ids`, in that order (those gone meanwhile left out). A
/// group is read once, however many of its callbacks are named.
///
/// # Errors
/// When Redis fails.
pub(crate) async fn read_kept_ids(
    conn: &StoreConn,
    url: &str,
    ids: &[String],
) -> Result<Vec<Found>, redis::RedisError> {
    let (stream, _) = keys(url);
    let mut entries = HashSet::new();
    let mut pipe = redis::pipe();
    for id in ids {
        let entry = id.split_once('.').map_or(id.as_str(), |(entry, _)| entry);
        if entries.insert(entry) {
            pipe.cmd("XRANGE").arg(&stream).arg(entry).arg(entry);
        }
    }
    let replies: Vec<StreamRangeReply> = pipe.query_async(&mut conn.clone()).await?;
    let mut found: HashMap<String, Found> = (replies.into_iter())
        .flat_map(|r| r.ids)
        .flat_map(expand)
        .map(|f| (f.id.clone(), f))
        .collect();
    Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::journal::StoredBody;

    fn entry(id: &str, fields: &[(&str, &[u8])]) -> StreamId {
        StreamId {
            id: id.into(),
            map: (fields.iter())
                .map(|(k, v)| ((*k).to_owned(), redis::Value::BulkString(v.to_vec())))
                .collect(),
            ..StreamId::default()
        }
    }

    fn body(f: &Found) -> &str {
        match &f.stored.body {
            StoredBody::Inline(t) => t,
            _ => panic!("no payload"),
        }
    }

    #[test]
    fn an_entry_of_its_own_is_one_callback_named_by_its_id() {
        let found = expand(entry(
            "5-0",
            &[
                ("e", b"user-joined"),
                ("p", b"{\"a\":1}"),
                ("r", b"4"),
                ("z", b"80"),
            ],
        ));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id, "5-0");
        assert_eq!((found[0].stored.ts, found[0].bytes), (4, 80));
        assert_eq!(body(&found[0]), "{\"a\":1}");
    }

    #[test]
    fn a_group_is_its_callbacks_named_by_place_and_one_without_a_time_is_left_out() {
        let g = br#"[{"e":"a","p":"{\"x\":\"\u00e9\"}","r":"7","z":"70"},{"e":"b","p":"q"},{"e":"c","p":"r","r":"9","o":"s2"}]"#;
        let found = expand(entry(
            "10-3",
            &[("g", g), ("t", b"7"), ("n", b"3"), ("z", b"200")],
        ));
        let ids: Vec<&str> = found.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["10-3.0", "10-3.2"]);
        assert_eq!(body(&found[0]), "{\"x\":\"é\"}");
        assert_eq!(found[1].stored.source.as_deref(), Some("s2"));
        assert_eq!((found[1].stored.ts, found[1].bytes), (9, 0));
    }

    #[test]
    fn a_group_that_does_not_parse_is_passed_over() {
        for g in [&b"[{\"e\":"[..], b"{}", b"[1,2]", b"\xff\xfe"] {
            assert!(expand(entry("1-0", &[("g", g)])).is_empty());
        }
    }
}
