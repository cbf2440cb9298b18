//! What an instance that does not hold the lease keeps of each source's bus: the messages of
//! the last `fleet.buffer_s` seconds (at most `fleet.buffer_mib` per source), so that on taking
//! the lease over it can queue what the holder had not queued yet.

use std::{collections::VecDeque, time::Duration};

use super::cursor::{Cursor, digest};
use crate::bus::BusMessage;

/// Each source's last messages, oldest first.
pub struct Backlog {
    sources: Vec<(VecDeque<BusMessage>, usize)>,
    keep: Duration,
    max_bytes: usize,
}

/// What a source's cursor said about its kept messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// The cursor was found: everything after it is queued.
    AfterCursor,
    /// No cursor: nothing of that source was ever queued; everything kept is.
    NoCursor,
    /// The cursor is not among the kept messages (older than them, or a message this
    /// instance never got): everything kept is queued, some perhaps a second time.
    CursorNotFound,
    /// Nothing of that source was kept (this instance has just started, or the source is
    /// quiet): nothing to queue.
    NothingKept,
}

impl Backlog {
    pub fn new(sources: usize, keep: Duration, max_bytes: usize) -> Self {
        Self {
            sources: (0..sources).map(|_| (VecDeque::new(), 0)).collect(),
            keep,
            max_bytes,
        }
    }

    /// Keeps `m`, and lets go of what is too old or too much.
    pub fn push(&mut self, m: BusMessage) {
        let Some((queue, bytes)) = self.sources.get_mut(usize::from(m.source)) else {
            return;
        };
        *bytes += m.payload.len();
        let now = m.arrived;
        queue.push_back(m);
        while let Some(front) = queue.front() {
            let old = now.saturating_duration_since(front.arrived) > self.keep;
            if !old && *bytes <= self.max_bytes {
                break;
            }
            *bytes -= front.payload.len();
            queue.pop_front();
        }
    }

    /// Messages kept in all.
    pub fn len(&self) -> usize {
        self.sources.iter().map(|(q, _)| q.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The messages to queue on taking the lease: for each source those after its cursor
    /// (`cursors[source]`), all in arrival order; and what was found of each cursor.
    pub fn after(self, cursors: &[Option<Cursor>]) -> (Vec<BusMessage>, Vec<Resume>) {
        let mut out = Vec::new();
        let mut found = Vec::with_capacity(self.sources.len());
        for (i, (queue, _)) in self.sources.into_iter().enumerate() {
            let (from, how) = match cursors.get(i).and_then(Option::as_ref) {
                _ if queue.is_empty() => (0, Resume::NothingKept),
                None => (0, Resume::NoCursor),
                Some(c) => match position(&queue, c) {
                    Some(p) => (p + 1, Resume::AfterCursor),
                    None => (0, Resume::CursorNotFound),
                },
            };
            found.push(how);
            out.extend(queue.into_iter().skip(from));
        }
        out.sort_by_key(|m| m.arrived);
        (out, found)
    }
}

/// Where the cursor's last message stands: the earliest place where it follows the cursor's
/// `before` message, or else (its `before` older than what is kept, or none) the earliest place
/// it appears at all. Earliest, so that an ambiguity repeats messages rather than loses them.
fn position(queue: &VecDeque<BusMessage>, c: &Cursor) -> Option<usize> {
    let digests: Vec<String> = queue.iter().map(|m| digest(&m.payload)).collect();
    let at = |i: usize| digests[i] == c.last;
    let verified = c
        .before
        .as_ref()
        .and_then(|before| (1..digests.len()).find(|&i| at(i) && digests[i - 1] == *before));
    verified.or_else(|| (0..digests.len()).find(|&i| at(i)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn at(source: u16, text: &str, arrived: Instant) -> BusMessage {
        BusMessage {
            source,
            channel: "c".into(),
            payload: text.into(),
            arrived,
        }
    }

    fn texts(ms: &[BusMessage]) -> Vec<String> {
        ms.iter().map(|m| m.payload.to_string()).collect()
    }

    #[test]
    fn resumes_each_source_after_its_cursor() {
        let t = Instant::now();
        let mut b = Backlog::new(2, Duration::from_secs(60), 1 << 20);
        for (i, (s, text)) in [
            (0, "a1"),
            (1, "b1"),
            (0, "a2"),
            (0, "a1"),
            (1, "b2"),
            (0, "a3"),
        ]
        .into_iter()
        .enumerate()
        {
            b.push(at(s, text, t + Duration::from_millis(i as u64)));
        }
        // Source 0 stopped after the second "a1" (the one after "a2"); source 1 never queued.
        let cursors = [
            Some(Cursor {
                before: Some(digest("a2")),
                last: digest("a1"),
            }),
            None,
        ];
        let (out, how) = b.after(&cursors);
        assert_eq!(texts(&out), ["b1", "b2", "a3"]);
        assert_eq!(how, [Resume::AfterCursor, Resume::NoCursor]);
    }

    #[test]
    fn an_unknown_cursor_queues_everything_and_old_messages_go() {
        let t = Instant::now();
        let mut b = Backlog::new(1, Duration::from_secs(1), 10);
        b.push(at(0, "old", t));
        b.push(at(0, "x1", t + Duration::from_secs(2)));
        b.push(at(0, "x2", t + Duration::from_secs(2)));
        assert_eq!(b.len(), 2, "older than a second");
        b.push(at(0, "0123456789", t + Duration::from_secs(2)));
        assert_eq!(b.len(), 1, "more than 10 bytes");
        let cursors = [Some(Cursor {
            before: None,
            last: digest("gone"),
        })];
        let (out, how) = b.after(&cursors);
        assert_eq!(texts(&out), ["0123456789"]);
        assert_eq!(how, [Resume::CursorNotFound]);
        let (out, how) = Backlog::new(1, Duration::from_secs(1), 10).after(&cursors);
        assert!(out.is_empty());
        assert_eq!(how, [Resume::NothingKept]);
    }
}
