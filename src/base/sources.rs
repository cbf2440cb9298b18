//! The sources (conference servers) by index. A bus message, a callback and a queued entry
//! carry a small index; names (for labels, logs and stored entries) and domains (for
//! callbacks) are looked up here.

use std::sync::Arc;

/// The name of the source that a configuration without `[[sources]]` describes.
const DEFAULT: &str = "default";

/// Index of a source in the table.
pub type SourceId = u16;

/// The sources' names and server domains, in configuration order.
#[derive(Debug, Clone)]
pub struct SourceTable {
    names: Vec<Arc<str>>,
    domains: Vec<Arc<str>>,
}

impl SourceTable {
    /// From (name, server domain) pairs; at least one.
    pub fn new(sources: impl IntoIterator<Item = (String, String)>) -> Self {
        let (names, domains): (Vec<Arc<str>>, Vec<Arc<str>>) = sources
            .into_iter()
            .map(|(n, d)| (Arc::from(n), Arc::from(d)))
            .unzip();
        if names.is_empty() {
            return Self::single("localhost");
        }
        Self { names, domains }
    }

    /// Only the `default` source, with `domain`.
    pub fn single(domain: &str) -> Self {
        Self {
            names: vec![DEFAULT.into()],
            domains: vec![domain.into()],
        }
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The name of source `id` (the first source's for an unknown id).
    pub fn name(&self, id: SourceId) -> &Arc<str> {
        self.names.get(usize::from(id)).unwrap_or(&self.names[0])
    }

    /// The server domain of source `id` (the first source's for an unknown id).
    pub fn domain(&self, id: SourceId) -> &str {
        self.domains
            .get(usize::from(id))
            .unwrap_or(&self.domains[0])
    }

    /// The name a queue entry of source `id` stores; `None` for the `default` source, whose
    /// entries store none (as before sources existed).
    pub fn stored_name(&self, id: SourceId) -> Option<&str> {
        let name = self.name(id);
        (&**name != DEFAULT).then_some(&**name)
    }

    /// The source of a stored entry: by its stored name, `default` when it has none. A name
    /// no longer configured gives `None`.
    pub fn find_stored(&self, name: Option<&str>) -> Option<SourceId> {
        let name = name.unwrap_or(DEFAULT);
        let i = self.names.iter().position(|n| &**n == name)?;
        SourceId::try_from(i).ok()
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
        assert_eq!(t.stored_name(1), Some("b"));
        assert_eq!(t.find_stored(None), Some(0));
        assert_eq!(t.find_stored(Some("b")), Some(1));
        assert_eq!(t.find_stored(Some("gone")), None);
        assert_eq!(t.domain(1), "b.example");
        let only_named = SourceTable::new([("x".to_string(), "x.example".to_string())]);
        assert_eq!(only_named.find_stored(None), None, "no default source now");
        assert_eq!(only_named.domain(7), "x.example");
    }
}
