//! Where the lease holder stands in each source's bus: the digests of the last two messages of
//! that source it queued, written in the same transaction as their callbacks, so that a cursor
//! never runs ahead of the queues nor behind them.

use sha1::{Digest, Sha1};

use crate::{base::sources::SourceTable, bus::BusMessage};

/// The store key of source `name`'s cursor.
pub fn key(name: &str) -> String {
    format!("hookrelay:{{src:{name}}}:cursor")
}

/// A message's digest (SHA-1 of its text, hex).
pub fn digest(text: &str) -> String {
    hex::encode(digest_bytes(text))
}

/// A message's digest as bytes.
pub fn digest_bytes(text: &str) -> [u8; 20] {
    Sha1::digest(text.as_bytes()).into()
}

/// A cursor as stored: `<digest before>:<last digest>` (nothing before the colon when the
/// holder queued one message of that source only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub before: Option<String>,
    pub last: String,
}

impl Cursor {
    pub fn parse(text: &str) -> Option<Self> {
        let (before, last) = text.split_once(':')?;
        if last.is_empty() {
            return None;
        }
        Some(Self {
            before: (!before.is_empty()).then(|| before.to_string()),
            last: last.to_string(),
        })
    }

    fn text(&self) -> String {
        format!("{}:{}", self.before.as_deref().unwrap_or(""), self.last)
    }
}

/// The holder's cursors, kept up to date batch by batch.
#[derive(Debug, Default)]
pub struct Cursors {
    /// By source: the digest of the last message queued.
    last: Vec<Option<String>>,
}

impl Cursors {
    /// Moves the cursors past `batch` and adds their writes to `pipe` (replies ignored).
    pub fn advance(
        &mut self,
        batch: &[BusMessage],
        sources: &SourceTable,
        pipe: &mut redis::Pipeline,
    ) {
        self.last.resize(sources.len(), None);
        for (i, slot) in self.last.iter_mut().enumerate() {
            let mut of_source = batch.iter().rev().filter(|m| usize::from(m.source) == i);
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
            pipe.set(key(name), cursor.text()).ignore();
            *slot = Some(cursor.last);
        }
    }
}

#[cfg(test)]
mod tests {
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

    fn msg(source: u16, text: &str) -> BusMessage {
        BusMessage {
            source,
            channel: "c".into(),
            payload: text.into(),
            arrived: std::time::Instant::now(),
            epoch: 1,
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
}
