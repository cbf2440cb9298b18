//! The in-memory snapshot of all hooks (arc-swap): matching and listing read it without a lock
//! or a Redis round trip; the store replaces it after every change. Its indexes are persistent
//! maps (imbl), so adding or removing one hook copies O(log n) of them, not every hook.

use crate::base::ids::HookId;

use std::sync::Arc;

use arc_swap::ArcSwap;
use imbl::{HashMap, OrdMap, OrdSet};

use super::{Hook, model::Registration};
/// How many hooks of each kind a snapshot holds, kept as hooks come and go (the metrics' own
/// type: they sit below the hooks).
pub(crate) use crate::metrics::HookCounts as Counts;

impl Counts {
    fn add(&mut self, h: &Hook, sign: i64) {
        if h.meeting_id.is_some() {
            self.meeting += sign;
        } else {
            self.global += sign;
        }
        self.raw += sign * i64::from(h.get_raw);
        self.permanent += sign * i64::from(h.permanent);
        self.disabled += sign * i64::from(h.disabled.is_some());
    }
}

/// Hooks in id order.
type ById = OrdMap<HookId, Arc<Hook>>;

/// An immutable view of every hook, indexed the ways the relay looks them up.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    by_id: ById,
    /// Ids per registration (callback URL within its tenant): one, but stores written by
    /// concurrent tools can hold two hooks of one URL, and the URL stays found while either
    /// exists.
    /// Keyed by [`Registration::key`].
    by_registration: HashMap<String, OrdSet<HookId>>,
    globals: ById,
    by_meeting: HashMap<String, ById>,
    /// Each tenant's hooks (the operator's are not in it).
    by_tenant: HashMap<String, ById>,
    counts: Counts,
}

impl Snapshot {
    /// This snapshot with `hook` added, or put in place of the hook with its id.
    fn with(&self, hook: Arc<Hook>) -> Self {
        let mut s = self.without(hook.id);
        s.by_registration
            .entry(hook.registration().key().into_owned())
            .or_default()
            .insert(hook.id);
        match &hook.meeting_id {
            None => {
                s.globals.insert(hook.id, hook.clone());
            }
            Some(m) => {
                s.by_meeting
                    .entry(m.clone())
                    .or_default()
                    .insert(hook.id, hook.clone());
            }
        }
        if let Some(t) = &hook.tenant {
            s.by_tenant
                .entry(t.clone())
                .or_default()
                .insert(hook.id, hook.clone());
        }
        s.counts.add(&hook, 1);
        s.by_id.insert(hook.id, hook);
        s
    }

    /// This snapshot without hook `id`.
    fn without(&self, id: HookId) -> Self {
        let mut s = self.clone();
        let Some(old) = s.by_id.remove(&id) else {
            return s;
        };
        let registration = old.registration().key();
        if let Some(ids) = s.by_registration.get_mut(registration.as_ref()) {
            ids.remove(&id);
            if ids.is_empty() {
                s.by_registration.remove(registration.as_ref());
            }
        }
        match &old.meeting_id {
            None => {
                s.globals.remove(&id);
            }
            Some(m) => {
                if let Some(bound) = s.by_meeting.get_mut(m) {
                    bound.remove(&id);
                    if bound.is_empty() {
                        s.by_meeting.remove(m);
                    }
                }
            }
        }
        if let Some(t) = &old.tenant
            && let Some(own) = s.by_tenant.get_mut(t)
        {
            own.remove(&id);
            if own.is_empty() {
                s.by_tenant.remove(t);
            }
        }
        s.counts.add(&old, -1);
        s
    }

    pub fn get(&self, id: HookId) -> Option<&Arc<Hook>> {
        self.by_id.get(&id)
    }

    /// The hook of this registration (the lowest id, should there be two).
    pub fn by_registration(&self, registration: Registration<'_>) -> Option<&Arc<Hook>> {
        self.by_registration
            .get(registration.key().as_ref())
            .and_then(OrdSet::get_min)
            .and_then(|id| self.by_id.get(id))
    }

    /// Every hook in id order.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Hook>> {
        self.by_id.values()
    }

    /// The highest hook id in use.
    pub fn max_id(&self) -> Option<HookId> {
        self.by_id.get_max().map(|(id, _)| *id)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// How many distinct registrations (callback URLs within their tenants) the hooks have.
    pub fn url_count(&self) -> usize {
        self.by_registration.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Tenant `tenant`'s hooks in id order.
    pub fn of_tenant<'s>(&'s self, tenant: &str) -> impl Iterator<Item = &'s Arc<Hook>> + use<'s> {
        self.by_tenant
            .get(tenant)
            .into_iter()
            .flat_map(OrdMap::values)
    }

    /// The tenants (ids) that have hooks, in no order.
    pub fn tenant_ids(&self) -> impl Iterator<Item = &str> {
        self.by_tenant.keys().map(String::as_str)
    }

    /// The most hooks one event can match: every global hook and every hook of the meeting
    /// with the most (with a tenant's hooks and filters, often fewer).
    pub fn widest_match(&self) -> usize {
        let per_meeting = self.by_meeting.values().map(OrdMap::len).max();
        self.globals.len() + per_meeting.unwrap_or(0)
    }

    /// Global hooks in id order.
    pub fn globals(&self) -> impl Iterator<Item = &Arc<Hook>> {
        self.globals.values()
    }

    /// Hooks bound to external meeting id `meeting_id`, in id order.
    pub fn bound_to<'s>(
        &'s self,
        meeting_id: &str,
    ) -> impl Iterator<Item = &'s Arc<Hook>> + use<'s> {
        self.by_meeting
            .get(meeting_id)
            .into_iter()
            .flat_map(OrdMap::values)
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

    pub fn contains(&self, id: HookId) -> bool {
        self.current.load().get(id).is_some()
    }

    /// Whether hook `id` is disabled; `None` when there is no such hook. Without a copy of
    /// the snapshot: delivery asks it before every callback.
    pub fn is_disabled(&self, id: HookId) -> Option<bool> {
        self.current.load().get(id).map(|h| h.disabled.is_some())
    }

    /// Replaces every hook.
    pub fn replace_all(&self, hooks: impl IntoIterator<Item = Hook>) {
        let s = hooks
            .into_iter()
            .fold(Snapshot::default(), |s, h| s.with(Arc::new(h)));
        self.current.store(Arc::new(s));
    }

    /// Adds or replaces one hook.
    pub fn upsert(&self, hook: Hook) {
        let hook = Arc::new(hook);
        self.current.rcu(|cur| cur.with(hook.clone()));
    }

    /// Removes one hook; returns it if it was there.
    pub fn remove(&self, id: HookId) -> Option<Arc<Hook>> {
        let old = self.current.load().get(id).cloned()?;
        self.current.rcu(|cur| cur.without(id));
        Some(old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(id: u64, url: &str, meeting: Option<&str>) -> Hook {
        Hook {
            id: HookId(id),
            callback_url: url.into(),
            meeting_id: meeting.map(String::from),
            event_ids: None,
            get_raw: false,
            permanent: false,
            tenant: None,
            disabled: None,
            signing: None,
        }
    }

    /// The operator's hook registered for `url`.
    trait ByUrl {
        fn by_url(&self, url: &str) -> Option<&Arc<Hook>>;
    }

    impl ByUrl for Snapshot {
        fn by_url(&self, url: &str) -> Option<&Arc<Hook>> {
            self.by_registration(Registration { tenant: None, url })
        }
    }

    fn ids<'a>(hooks: impl Iterator<Item = &'a Arc<Hook>>) -> Vec<HookId> {
        hooks.map(|h| h.id).collect()
    }

    #[test]
    fn indexes_follow_changes() {
        let r = Registry::default();
        r.replace_all([hook(2, "http://b/", Some("m")), hook(1, "http://a/", None)]);
        r.upsert(hook(3, "http://c/", Some("m")));
        let s = r.load();
        assert_eq!(ids(s.all()), vec![HookId(1), HookId(2), HookId(3)]);
        assert_eq!(ids(s.bound_to("m")), vec![HookId(2), HookId(3)]);
        assert_eq!(s.widest_match(), 3, "one global and meeting m's two");
        assert_eq!(s.by_url("http://a/").map(|h| h.id), Some(HookId(1)));
        assert_eq!(s.max_id(), Some(HookId(3)));
        assert_eq!(r.remove(HookId(2)).map(|h| h.id), Some(HookId(2)));
        assert!(r.remove(HookId(2)).is_none());
        let s = r.load();
        assert_eq!(ids(s.bound_to("m")), vec![HookId(3)]);
        assert!(s.by_url("http://b/").is_none());
    }

    #[test]
    fn replacing_a_hook_moves_it_between_indexes() {
        let r = Registry::default();
        r.replace_all([hook(1, "http://a/", Some("m")), hook(2, "http://b/", None)]);
        let before = r.load();
        r.upsert(Hook {
            get_raw: true,
            permanent: true,
            ..hook(1, "http://a2/", None)
        });
        let s = r.load();
        assert_eq!(ids(s.globals()), vec![HookId(1), HookId(2)]);
        assert_eq!(ids(s.bound_to("m")), Vec::<HookId>::new());
        assert!(s.by_url("http://a/").is_none());
        assert_eq!(s.by_url("http://a2/").map(|h| h.id), Some(HookId(1)));
        assert_eq!(
            s.counts(),
            Counts {
                global: 2,
                meeting: 0,
                raw: 1,
                permanent: 1,
                disabled: 0,
            }
        );
        // The snapshot taken before is unchanged.
        assert_eq!(ids(before.bound_to("m")), vec![HookId(1)]);
        assert_eq!(before.counts().meeting, 1);
    }

    #[test]
    fn a_url_held_by_two_hooks_stays_found_while_either_exists() {
        let r = Registry::default();
        r.replace_all([hook(7, "http://a/", None), hook(3, "http://a/", None)]);
        assert_eq!(r.load().by_url("http://a/").map(|h| h.id), Some(HookId(3)));
        r.remove(HookId(3));
        assert_eq!(r.load().by_url("http://a/").map(|h| h.id), Some(HookId(7)));
        r.remove(HookId(7));
        assert!(r.load().by_url("http://a/").is_none());
    }

    #[test]
    fn one_url_of_two_tenants_is_two_registrations() {
        let r = Registry::default();
        let of = |id, tenant: Option<&str>| Hook {
            tenant: tenant.map(String::from),
            ..hook(id, "http://a/", None)
        };
        r.replace_all([of(1, Some("t1")), of(2, Some("t2")), of(3, None)]);
        let s = r.load();
        let found = |tenant| {
            s.by_registration(Registration {
                tenant,
                url: "http://a/",
            })
            .map(|h| h.id)
        };
        assert_eq!(found(Some("t1")), Some(HookId(1)));
        assert_eq!(found(Some("t2")), Some(HookId(2)));
        assert_eq!(found(None), Some(HookId(3)));
        assert_eq!(found(Some("t3")), None);
        assert_eq!(s.url_count(), 3);
        assert_eq!(ids(s.of_tenant("t2")), vec![HookId(2)]);
        r.remove(HookId(1));
        assert_eq!(ids(r.load().of_tenant("t1")), Vec::<HookId>::new());
        assert_eq!(r.load().by_url("http://a/").map(|h| h.id), Some(HookId(3)));
    }

    #[test]
    fn counts_match_a_recount_after_any_changes() {
        let r = Registry::default();
        for i in 0..200u64 {
            let m = (i % 3 == 0).then(|| format!("m{}", i % 7));
            r.upsert(Hook {
                get_raw: i % 5 == 0,
                ..hook(i, &format!("http://h/{i}"), m.as_deref())
            });
            if i % 4 == 1 {
                r.remove(HookId(i / 2));
            }
        }
        let s = r.load();
        let mut recount = Counts::default();
        for h in s.all() {
            recount.add(h, 1);
        }
        assert_eq!(s.counts(), recount);
        let bound: usize = (0..7).map(|m| s.bound_to(&format!("m{m}")).count()).sum();
        assert_eq!(s.globals().count() + bound, s.len());
    }
}
