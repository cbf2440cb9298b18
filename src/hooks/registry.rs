//! The in-memory snapshot of all hooks (arc-swap): matching and listing read it without a lock
//! or a Redis round trip; the store replaces it after every change.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use arc_swap::ArcSwap;

use super::Hook;

/// An immutable view of every hook, indexed the ways the relay looks them up.
#[derive(Debug, Default)]
pub struct Snapshot {
    by_id: BTreeMap<u64, Arc<Hook>>,
    by_url: HashMap<String, u64>,
    /// Global hooks in id order.
    globals: Vec<Arc<Hook>>,
    /// Hooks bound to each external meeting id, in id order.
    by_meeting: HashMap<String, Vec<Arc<Hook>>>,
}

impl Snapshot {
    fn build(hooks: impl IntoIterator<Item = Arc<Hook>>) -> Self {
        let mut s = Snapshot::default();
        for h in hooks {
            s.by_id.insert(h.id, h);
        }
        for h in s.by_id.values() {
            s.by_url.insert(h.callback_url.clone(), h.id);
            match &h.meeting_id {
                None => s.globals.push(h.clone()),
                Some(m) => s.by_meeting.entry(m.clone()).or_default().push(h.clone()),
            }
        }
        s
    }

    pub fn get(&self, id: u64) -> Option<&Arc<Hook>> {
        self.by_id.get(&id)
    }

    pub fn by_url(&self, url: &str) -> Option<&Arc<Hook>> {
        self.by_url.get(url).and_then(|id| self.by_id.get(id))
    }

    /// Every hook in id order.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Hook>> {
        self.by_id.values()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn globals(&self) -> &[Arc<Hook>] {
        &self.globals
    }

    pub fn bound_to(&self, meeting_id: &str) -> &[Arc<Hook>] {
        self.by_meeting.get(meeting_id).map_or(&[], Vec::as_slice)
    }
}

/// The current snapshot, swapped atomically.
#[derive(Debug, Default)]
pub struct Registry {
    current: ArcSwap<Snapshot>,
}

impl Registry {
    pub fn load(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    pub fn contains(&self, id: u64) -> bool {
        self.current.load().get(id).is_some()
    }

    /// Replaces every hook.
    pub fn replace_all(&self, hooks: impl IntoIterator<Item = Hook>) {
        self.current
            .store(Arc::new(Snapshot::build(hooks.into_iter().map(Arc::new))));
    }

    /// Adds or replaces one hook.
    pub fn upsert(&self, hook: Hook) {
        let hook = Arc::new(hook);
        self.current.rcu(|cur| {
            Snapshot::build(
                cur.all()
                    .filter(|h| h.id != hook.id)
                    .cloned()
                    .chain(std::iter::once(hook.clone())),
            )
        });
    }

    /// Removes one hook; returns it if it was there.
    pub fn remove(&self, id: u64) -> Option<Arc<Hook>> {
        let old = self.current.load().get(id).cloned()?;
        self.current
            .rcu(|cur| Snapshot::build(cur.all().filter(|h| h.id != id).cloned()));
        Some(old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(id: u64, url: &str, meeting: Option<&str>) -> Hook {
        Hook {
            id,
            callback_url: url.into(),
            meeting_id: meeting.map(String::from),
            event_ids: None,
            get_raw: false,
            permanent: false,
        }
    }

    #[test]
    fn indexes_follow_changes() {
        let r = Registry::default();
        r.replace_all([hook(2, "http://b/", Some("m")), hook(1, "http://a/", None)]);
        r.upsert(hook(3, "http://c/", Some("m")));
        let s = r.load();
        assert_eq!(s.all().map(|h| h.id).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(
            s.bound_to("m").iter().map(|h| h.id).collect::<Vec<_>>(),
            vec![2, 3]
        );
        assert_eq!(s.by_url("http://a/").map(|h| h.id), Some(1));
        assert_eq!(r.remove(2).map(|h| h.id), Some(2));
        assert!(r.remove(2).is_none());
        let s = r.load();
        assert_eq!(s.bound_to("m").len(), 1);
        assert!(s.by_url("http://b/").is_none());
    }
}
