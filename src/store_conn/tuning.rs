//! What the store's own settings cost the relay: read once at start and said in one log line
//! when one makes delivery dearer than it needs to be. The relay never changes them (the
//! store is the operator's, and often BigBlueButton's own Redis).

use super::StoreConn;

/// The `stream-node-max-entries` the relay's queues are cheapest with (docs/reliability.md,
/// "The store's settings").
pub(crate) const STREAM_NODE_ENTRIES: u64 = 16;

/// Above this many entries a stream node, the start says so. Each hook's queue is a stream
/// whose delivered entries are removed oldest first, and Redis finds an entry to remove by
/// walking its node from the start, past the entries already removed: with Redis' default of
/// 100, removing a delivered callback costs about 3 times what it costs with 16 (BENCHMARKS.md,
/// "Issue 63, the store's stream node size").
const ADVISE_ABOVE: u64 = 32;

/// Reads the store's stream node size and logs, once, when it is above [`ADVISE_ABOVE`].
/// A store that refuses `CONFIG` (a managed Redis, a renamed command) is left alone.
pub(crate) async fn advise(conn: &StoreConn) {
    let mut conn = conn.clone();
    let reply: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("stream-node-max-entries")
        .query_async(&mut conn)
        .await;
    match reply.map(|pair| entries(&pair)) {
        Ok(Some(n)) if n > ADVISE_ABOVE => tracing::info!(
            stream_node_max_entries = n,
            advised = STREAM_NODE_ENTRIES,
            "store: stream-node-max-entries is {n}: removing a delivered callback from its \
             queue costs the store about 3 times what it costs at {STREAM_NODE_ENTRIES} \
             (docs/reliability.md, \"The store's settings\")"
        ),
        Ok(_) => {}
        Err(e) => tracing::debug!(error = %e, "store: its settings could not be read"),
    }
}

/// The value of a `CONFIG GET` reply of one parameter (`[name, value]`).
fn entries(pair: &[String]) -> Option<u64> {
    pair.get(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::entries;

    #[test]
    fn reads_the_value_of_a_config_get_reply() {
        let reply = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(
            entries(&reply(&["stream-node-max-entries", "100"])),
            Some(100)
        );
        assert_eq!(entries(&reply(&[])), None);
        assert_eq!(entries(&reply(&["stream-node-max-entries", "x"])), None);
    }
}
