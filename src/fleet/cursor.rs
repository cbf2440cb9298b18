//! Where the lease holder stands in each source's bus: the digests of the last two messages of
//! that source it queued, written in the same transaction as their callbacks, so that a cursor
//! never runs ahead of the queues nor behind them. On a Redis Cluster, where one transaction
//! holds one slot, the cursors are written once the callbacks are, and each hook's callbacks
//! carry a [`Mark`] of the move ([`super::mark`]).

use sha1::{Digest, Sha1};

use crate::{base::sources::SourceTable, bus::BusMessage};

/// The store key of source `name`'s cursor.
pub(crate) fn key(name: &str) -> String {
    format!("hookrelay:{{src:{name}}}:cursor")
}

/// A message's digest (SHA-1 of its text, hex).
pub(crate) fn digest(text: &str) -> String {
    hex::encode(digest_bytes(text))
}

/// A message's digest as bytes.
pub(crate) fn digest_bytes(text: &str) -> [u8; 20] {
    Sha1::digest(text.as_bytes()).into()
}

/// A cursor as stored: `<digest before>:<last digest>` (nothing before the colon when the
/// holder queued one message of that source only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub(super) before: Option<String>,
    pub(super) last: String,
}

impl Cursor {
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let (before, last) = text.split_once(':')?;
        if last.is_empty() {
            return None;
        }
        Some(Self {
            before: (!before.is_empty()).then(|| before.to_string()),
            last: last.to_string(),
        })
    }

    pub(crate) fn text(&self) -> String {
        format!("{}:{}", self.before.as_deref().unwrap_or(""), self.last)
    }
}

/// The holder's cursors, kept up to date batch by batch.
#[derive(Debug, Default)]
pub(crate) struct Cursors {
    /// By source: the digest of the last message queued.
    last: Vec<Option<String>>,
    /// By source: the cursor as last written (or as read when the lease was taken).
    written: Vec<Option<String>>,
}

impl Cursors {
    /// Goes on from the cursors the last holder left (read when the lease was taken).
    pub(crate) fn resuming(read: &[Option<Cursor>]) -> Self {
        Self {
            last: read
                .iter()
                .map(|c| c.as_ref().map(|c| c.last.clone()))
                .collect(),
            written: read.iter().map(|c| c.as_ref().map(Cursor::text)).collect(),
        }
    }

    /// Moves the cursors past `batch` and adds their writes to `pipe` (replies ignored);
    /// returns how they moved (empty when `batch` is).
    pub(crate) fn advance(
        &mut self,
        batch: &[BusMessage],
        sources: &SourceTable,
        pipe: &mut redis::Pipeline,
    ) -> Mark {
        self.last.resize(sources.len(), None);
        self.written.resize(sources.len(), None);
        let mut mark = Mark::default();
        for (i, (slot, written)) in self.last.iter_mut().zip(&mut self.written).enumerate() {
            // Messages taken from an edge's stream have a cursor of their own (its entry id).
            let mut of_source =
                (batch.iter().rev()).filter(|m| usize::from(m.source) == i && m.position.is_none());
            let Some(last) = of_source.next() else {
                continue;
            };
            let before = match of_source.next() {
                Some(m) => Some(digest(&m.payload)),
                None => slot.take(),
            };
            let cursor = Cursor {
                before,
                last: digest(&last.payload),
            };
            let name = sources.name(u16::try_from(i).unwrap_or(0));
            let text = cursor.text();
            pipe.set(key(&name), &text).ignore();
            mark.moves.push(Move {
                source: name.to_string(),
                from: written.replace(text.clone()),
                to: text,
            });
            *slot = Some(cursor.last);
        }
        mark
    }
}

/// How a batch moves the cursors: of each source it has messages of, from where to where.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Mark {
    pub(super) moves: Vec<Move>,
}

/// One source's cursor moved by a batch (cursors as stored).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Move {
    pub(super) source: String,
    pub(super) from: Option<String>,
    pub(super) to: String,
}

impl Mark {
    pub(crate) fn is_empty(&self) -> bool {
        self.moves.is_empty()
    }

    pub(crate) fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip() {
        let c = Cursor {
            before: Some("ab".into()),
            last: "cd".into(),
        };
        assert_eq!(Cursor::parse(&c.text()), Some(c));
        let first = Cursor::parse(":cd").unwrap();
        assert_eq!(first.before, None);
        assert_eq!(Cursor::parse("cd"), None);
        assert_eq!(Cursor::parse("ab:"), None);
    }

    /// A message of `source` whose text is `text`.
    pub(crate) fn msg(source: u16, text: &str) -> BusMessage {
        BusMessage {
            source,
            channel: "c".into(),
            payload: text.into(),
            arrived: std::time::Instant::now(),
            epoch: 1,
            position: None,
        }
    }

    /// The commands a pipeline would send, as text.
    fn sent(pipe: &redis::Pipeline) -> String {
        String::from_utf8_lossy(&pipe.get_packed_pipeline()).into_owned()
    }

    #[test]
    fn each_source_moves_to_its_last_two_messages_across_batches() {
        let sources = SourceTable::new([
            ("default".to_string(), "a".to_string()),
            ("b".to_string(), "b".to_string()),
        ]);
        let mut cursors = Cursors::default();
        let mut pipe = redis::pipe();
        cursors.advance(
            &[msg(0, "x1"), msg(1, "y1"), msg(0, "x2")],
            &sources,
            &mut pipe,
        );
        let text = sent(&pipe);
        assert!(
            text.contains(&format!("{}:{}", digest("x1"), digest("x2"))),
            "{text}"
        );
        assert!(text.contains(&format!(":{}", digest("y1"))));
        assert!(text.contains("hookrelay:{src:b}:cursor"));
        // A batch with one message of b: the one before comes from the batch before.
        let mut pipe = redis::pipe();
        cursors.advance(&[msg(1, "y2")], &sources, &mut pipe);
        let text = sent(&pipe);
        assert!(
            text.contains(&format!("{}:{}", digest("y1"), digest("y2"))),
            "{text}"
        );
        assert!(
            !text.contains("{src:default}"),
            "no write for a source with nothing new"
        );
    }

    #[test]
    fn a_mark_says_where_each_cursor_moved_from_and_to() {
        let sources = SourceTable::new([
            ("default".to_string(), "a".to_string()),
            ("b".to_string(), "b".to_string()),
        ]);
        let read = [Cursor::parse(&format!(":{}", digest("x0"))), None];
        let mut cursors = Cursors::resuming(&read);
        let mark = cursors.advance(&[msg(0, "x1"), msg(1, "y1")], &sources, &mut redis::pipe());
        let x1 = format!("{}:{}", digest("x0"), digest("x1"));
        let y1 = format!(":{}", digest("y1"));
        assert_eq!(
            mark.moves,
            vec![
                Move {
                    source: "default".into(),
                    from: Some(format!(":{}", digest("x0"))),
                    to: x1.clone(),
                },
                Move {
                    source: "b".into(),
                    from: None,
                    to: y1,
                },
            ]
        );
        assert_eq!(Mark::parse(&mark.text()), Some(mark));
        let next = cursors.advance(&[msg(0, "x2")], &sources, &mut redis::pipe());
        assert_eq!(next.moves.len(), 1);
        assert_eq!(next.moves[0].from, Some(x1));
        assert!(
            cursors
                .advance(&[], &sources, &mut redis::pipe())
                .is_empty()
        );
    }
}
