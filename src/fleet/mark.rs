//! Batch marks, on a Redis Cluster: with each hook's callbacks of a batch, in the same slot's
//! transaction, the holder writes how that batch moves the cursors ([`Mark`]). The cursors
//! themselves are written after every slot took its part; a holder that dies in between
//! leaves callbacks queued with the cursors still before their messages. The instance that
//! takes the lease over reads the marks and does not queue those callbacks a second time.

use std::collections::HashMap;

use crate::{
    base::{
        ids::HookId,
        redis_keys::{BATCH_MARK_PATTERN, batch_mark_hook_id},
        sources::{SourceId, SourceTable},
    },
    bus::BusMessage,
    fleet::cursor::{Cursor, Mark, digest},
    store_conn::StoreConn,
};

/// Every hook's mark.
///
/// # Errors
/// When the store fails.
pub(crate) async fn read(conn: &StoreConn) -> redis::RedisResult<Vec<(HookId, Mark)>> {
    let keys = conn.keys_matching(BATCH_MARK_PATTERN).await?;
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.get(k);
    }
    let texts: Vec<Option<String>> = pipe.query_async(&mut conn.clone()).await?;
    Ok(keys
        .iter()
        .zip(texts)
        .filter_map(|(k, t)| Some((batch_mark_hook_id(k)?, Mark::parse(t.as_deref()?)?)))
        .collect())
}

/// The resumed messages whose callbacks some hooks already have: by hook and source, the
/// index (in the resumed messages) of the last such message.
#[derive(Debug, Default)]
pub(crate) struct AlreadyQueued(HashMap<(HookId, SourceId), usize>);

impl AlreadyQueued {
    /// What `marks` say of `resumed`, the messages after `cursors`: a hook whose mark moves a
    /// source's cursor from where it stands has the callbacks of that source's messages up to
    /// the mark's last one.
    pub(crate) fn find(
        resumed: &[BusMessage],
        cursors: &[Option<Cursor>],
        sources: &SourceTable,
        marks: &[(HookId, Mark)],
    ) -> Self {
        let mut found = HashMap::new();
        let mut digests: Option<Vec<String>> = None;
        for (hook, mark) in marks {
            for m in &mark.moves {
                let Some(source) = (0..sources.len())
                    .filter_map(|i| SourceId::try_from(i).ok())
                    .find(|i| *sources.name(*i) == *m.source)
                else {
                    continue;
                };
                let now = cursors.get(usize::from(source)).and_then(Option::as_ref);
                if now.map(Cursor::text) != m.from {
                    continue;
                }
                let Some(to) = Cursor::parse(&m.to) else {
                    continue;
                };
                let digests = digests
                    .get_or_insert_with(|| resumed.iter().map(|b| digest(&b.payload)).collect());
                let at = resumed
                    .iter()
                    .zip(digests.iter())
                    .position(|(b, d)| b.source == source && *d == to.last);
                if let Some(at) = at {
                    found.insert((*hook, source), at);
                }
            }
        }
        Self(found)
    }

    /// Whether `hook` has the callback of resumed message `index`, of `source`.
    pub(crate) fn has(&self, hook: HookId, source: SourceId, index: usize) -> bool {
        self.0
            .get(&(hook, source))
            .is_some_and(|last| index <= *last)
    }

    /// How many hooks' sources it covers.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::cursor::{Move, tests::msg};

    fn at(before: &str, last: &str) -> String {
        format!("{}:{}", digest(before), digest(last))
    }

    #[test]
    fn a_mark_moving_the_cursor_from_where_it_stands_covers_its_batch() {
        let sources = SourceTable::new([
            ("default".to_string(), "a".to_string()),
            ("b".to_string(), "b".to_string()),
        ]);
        let cursors = [Cursor::parse(&at("x0", "x1")), None];
        let resumed = [msg(0, "x2"), msg(1, "y1"), msg(0, "x3"), msg(0, "x4")];
        let mark = |source: &str, from: Option<String>, to: String| Mark {
            moves: vec![Move {
                source: source.into(),
                from,
                to,
            }],
        };
        let marks = [
            // Hook 1 took the batch x2, y1, x3 that never moved the cursors.
            (
                HookId(1),
                Mark {
                    moves: vec![
                        Move {
                            source: "default".into(),
                            from: Some(at("x0", "x1")),
                            to: at("x2", "x3"),
                        },
                        Move {
                            source: "b".into(),
                            from: None,
                            to: format!(":{}", digest("y1")),
                        },
                    ],
                },
            ),
            // Hook 2's last batch is an older one: the cursor moved on since.
            (
                HookId(2),
                mark("default", Some(at("x", "x0")), at("x0", "x1")),
            ),
            // Hook 3's mark names a source this relay does not have.
            (HookId(3), mark("gone", None, at("x2", "x3"))),
        ];
        let q = AlreadyQueued::find(&resumed, &cursors, &sources, &marks);
        assert!(q.has(HookId(1), 0, 0) && q.has(HookId(1), 0, 2));
        assert!(!q.has(HookId(1), 0, 3), "x4 was not in the batch");
        assert!(q.has(HookId(1), 1, 1));
        for i in 0..4 {
            assert!(!q.has(HookId(2), 0, i) && !q.has(HookId(3), 0, i));
        }
        let none = AlreadyQueued::find(&resumed, &cursors, &sources, &[]);
        assert_eq!(none.len(), 0);
    }
}
