//! The processing stage's side of a pool's edges ([`super::edges`]): a server that appeared
//! is added as a source before any of its messages, and each batch records, in the
//! transaction that queues it, what it took of each edge's stream.

use tokio::sync::mpsc;

use super::{edges::Joined, stage::ProcessStage};
use crate::{
    base::{redis_keys::EdgeKeys, sources::SourceId},
    bus::BusMessage,
    delivery::journal::Commit,
};

impl ProcessStage {
    /// Adds a server whose edge appeared: its source (named and with the domain of the server),
    /// processor and state, before any of its messages; answers with its source.
    pub(super) fn join(&mut self, joined: Joined) {
        let Joined {
            name,
            keys,
            processor,
            conference,
            reply,
        } = joined;
        // Only this task adds sources, so a new one's index is the processors' count.
        let next = self.router.next_source();
        let id = next.filter(|n| self.sources.push(&name, &name) == Some(*n));
        if let Some(id) = id {
            self.router.add_source(processor.with_source(id));
            self.keys.push(keys);
            self.conferences.push(conference.clone());
            (self.joined.write().unwrap_or_else(|p| p.into_inner()))
                .push((name.clone(), conference));
            self.taken.push((id, EdgeKeys::new(&name).taken));
        }
        let _ = reply.send(id);
    }

    /// `commit` with what `batch` takes of each edge's stream: the id of its last message
    /// there, so that the stream is read again from after it, and only after it.
    pub(super) fn with_taken(
        &self,
        batch: &[BusMessage],
        commit: Option<Commit>,
    ) -> Option<Commit> {
        // Each edge's last message of the batch, in one pass from its end.
        let mut last: Vec<(SourceId, &str)> = Vec::new();
        for m in batch.iter().rev() {
            if let Some(position) = m.position.as_deref()
                && !last.iter().any(|(s, _)| *s == m.source)
            {
                last.push((m.source, position));
            }
        }
        let mut writes = redis::pipe();
        for (source, key) in &self.taken {
            if let Some((_, position)) = last.iter().find(|(s, _)| s == source) {
                writes.set(key, *position).ignore();
            }
        }
        if writes.is_empty() {
            return commit;
        }
        let mut commit = commit.unwrap_or(Commit {
            writes: redis::pipe(),
            mark: None,
        });
        for cmd in writes.cmd_iter() {
            commit.writes.add_command(cmd.clone()).ignore();
        }
        Some(commit)
    }
}

/// The next server whose edge appeared; never, when the relay takes no edges.
pub(super) async fn next(joins: &mut Option<mpsc::Receiver<Joined>>) -> Option<Joined> {
    if let Some(rx) = joins
        && let Some(joined) = rx.recv().await
    {
        return Some(joined);
    }
    // The taker is gone (the relay is stopping): nothing more comes.
    *joins = None;
    std::future::pending().await
}
