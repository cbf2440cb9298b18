//! The sources (conference servers) by index. A bus message, a callback and a queued entry
//! carry a small index; names (for labels, logs and stored entries) and domains (for
//! callbacks) are looked up here. The configured sources come first, in configuration order;
//! the servers of a pool whose edges the relay takes are added as they appear (only ever
//! added, so an index once given stays its source's).

use std::sync::Arc;

use arc_swap::ArcSwap;

/// The name of the source that a configuration without `[[sources]]` describes.
const DEFAULT: &str = "default";

/// Index of a source in the table.
pub type SourceId = u16;

/// One source's name and server domain.
#[derive(Debug, Clone)]
struct Entry {
    name: Arc<str>,
    domain: Arc<str>,
}

/// The sources' names and server domains, by index.
#[derive(Debug)]
pub struct SourceTable {
    entries: ArcSwap<Vec<Entry>>,
    /// Names read from stored entries that no source here has (a pool's server whose edge
    /// another instance takes), each its own domain, indexed down from [`SourceId::MAX`] so
    /// that they never take an index the processing stage gives.
    learned: ArcSwap<Vec<Entry>>,
    /// What an unknown index reads as: the first source, or `default` when there is none
    /// (a pool's relay without a bus of its own, before any edge appeared).
    fallback: Entry,
}

impl SourceTable {
    /// From (name, server domain) pairs; with none, `localhost` is the fallback domain.
    pub fn new(sources: impl IntoIterator<Item = (String, String)>) -> Self {
        Self::with_fallback_domain(sources, "localhost")
    }

    /// From (name, server domain) pairs; with none, `domain` is the fallback's.
    pub fn with_fallback_domain(
        sources: impl IntoIterator<Item = (String, String)>,
        domain: &str,
    ) -> Self {
        let entries: Vec<Entry> = sources
            .into_iter()
            .map(|(n, d)| Entry {
                name: n.into(),
                domain: d.into(),
            })
            .collect();
        let fallback = entries.first().cloned().unwrap_or_else(|| Entry {
            name: DEFAULT.into(),
            domain: domain.into(),
        });
        Self {
            entries: ArcSwap::from_pointee(entries),
            learned: ArcSwap::default(),
            fallback,
        }
    }

    /// Only the `default` source, with `domain`.
    pub fn single(domain: &str) -> Self {
        Self::new([(DEFAULT.to_string(), domain.to_string())])
    }

    pub fn len(&self) -> usize {
        self.entries.load().len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.load().is_empty()
    }

    /// Adds a source; returns its index (the one it has when the name is there already).
    /// `None` when the table is full.
    /// A name learned from stored entries gets an index of the table's own now (the learned
    /// one still reads as the same source).
    pub fn push(&self, name: &str, domain: &str) -> Option<SourceId> {
        let mut next = Vec::clone(&self.entries.load());
        if let Some(i) = next.iter().position(|e| &*e.name == name) {
            return SourceId::try_from(i).ok();
        }
        let id = SourceId::try_from(next.len()).ok()?;
        next.push(Entry {
            name: name.into(),
            domain: domain.into(),
        });
        self.entries.store(Arc::new(next));
        Some(id)
    }

    /// `f` of source `id`'s entry (the fallback's for an unknown id), without copying it.
    fn with_entry<R>(&self, id: SourceId, f: impl FnOnce(&Entry) -> R) -> R {
        if let Some(e) = self.entries.load().get(usize::from(id)) {
            return f(e);
        }
        let learned = usize::from(SourceId::MAX - id);
        f(self.learned.load().get(learned).unwrap_or(&self.fallback))
    }

    /// The name of source `id` (the fallback's for an unknown id).
    pub fn name(&self, id: SourceId) -> Arc<str> {
        self.with_entry(id, |e| e.name.clone())
    }

    /// The server domain of source `id` (the fallback's for an unknown id).
    pub fn domain(&self, id: SourceId) -> Arc<str> {
        self.with_entry(id, |e| e.domain.clone())
    }

    /// The index of the source named `name` (one of this table's, else a learned one).
    pub fn find(&self, name: &str) -> Option<SourceId> {
        if let Some(i) = self.entries.load().iter().position(|e| &*e.name == name) {
            return SourceId::try_from(i).ok();
        }
        let i = self.learned.load().iter().position(|e| &*e.name == name)?;
        SourceId::MAX.checked_sub(SourceId::try_from(i).ok()?)
    }

    /// The source of a stored entry, as [`find_stored`](Self::find_stored); a name that no
    /// source has is learned, with itself as its domain (a pool's server, whose name is its
    /// callbacks' domain). The fallback's index when no more can be learned.
    pub fn stored(&self, name: Option<&str>) -> SourceId {
        if let Some(id) = self.find_stored(name) {
            return id;
        }
        let Some(name) = name else { return 0 };
        let mut next = Vec::clone(&self.learned.load());
        if next.len() >= 1024 {
            return 0;
        }
        next.push(Entry {
            name: name.into(),
            domain: name.into(),
        });
        let id = SourceId::MAX - SourceId::try_from(next.len() - 1).unwrap_or(0);
        self.learned.store(Arc::new(next));
        id
    }

    /// The name a queue entry of source `id` stores; `None` for the `default` source, whose
    /// entries store none (as before sources existed).
    pub fn stored_name(&self, id: SourceId) -> Option<Arc<str>> {
        let name = self.name(id);
        (&*name != DEFAULT).then_some(name)
    }

    /// The source of a stored entry: by its stored name, `default` when it has none. A name
    /// not in the table gives `None`.
    pub fn find_stored(&self, name: Option<&str>) -> Option<SourceId> {
        self.find(name.unwrap_or(DEFAULT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_names_round_trip_and_default_stores_none() {
        let t = SourceTable::new([
            ("default".to_string(), "a.example".to_string()),
            ("b".to_string(), "b.example".to_string()),
        ]);
        assert_eq!(t.stored_name(0), None);
        assert_eq!(t.stored_name(1).as_deref(), Some("b"));
        assert_eq!(t.find_stored(None), Some(0));
        assert_eq!(t.find_stored(Some("b")), Some(1));
        assert_eq!(t.find_stored(Some("gone")), None);
        assert_eq!(&*t.domain(1), "b.example");
        let only_named = SourceTable::new([("x".to_string(), "x.example".to_string())]);
        assert_eq!(only_named.find_stored(None), None, "no default source now");
        assert_eq!(&*only_named.domain(7), "x.example");
    }

    #[test]
    fn sources_added_later_keep_their_index_and_an_empty_table_falls_back() {
        let t = SourceTable::with_fallback_domain([], "pool.example");
        assert!(t.is_empty());
        assert_eq!(&*t.name(3), "default");
        assert_eq!(&*t.domain(3), "pool.example");
        assert_eq!(t.push("bbb1", "bbb1"), Some(0));
        assert_eq!(t.push("bbb2", "bbb2"), Some(1));
        assert_eq!(t.push("bbb1", "bbb1"), Some(0), "a name is added once");
        assert_eq!(t.len(), 2);
        assert_eq!(&*t.name(1), "bbb2");
        assert_eq!(t.stored_name(1).as_deref(), Some("bbb2"));
        assert_eq!(t.find_stored(Some("bbb2")), Some(1));
        // A name stored by another instance's source is learned, apart from the indexes the
        // table gives, with itself for a domain.
        let learned = t.stored(Some("bbb9"));
        assert_eq!(learned, SourceId::MAX);
        assert_eq!(&*t.domain(learned), "bbb9");
        assert_eq!(t.stored(Some("bbb9")), learned);
        assert_eq!(t.stored(Some("bbb2")), 1);
        assert_eq!(t.push("bbb3", "bbb3"), Some(2));
        assert_eq!(t.stored_name(learned).as_deref(), Some("bbb9"));
    }
}
