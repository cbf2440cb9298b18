//! The tenants of a hosted cluster (`docs/tenants.md`): who they are, found by the host name
//! their API calls come to, by the id their meetings carry, with the secrets that sign their
//! calls and callbacks. [`Tenants`] holds the view in force (configured tenants and
//! Scalelite's, swapped atomically); [`scalelite`] reads and follows Scalelite's.

pub mod scalelite;
#[cfg(test)]
mod tests;

use std::{collections::HashMap, sync::Arc};

use arc_swap::ArcSwap;

use crate::{
    base::secret::Secret,
    config::tenants::{TenantConfig, is_host_label},
};

/// One tenant.
#[derive(Debug, PartialEq, Eq)]
pub struct Tenant {
    /// What its meetings' `tenant-id` metadata says, and what its hooks record.
    pub id: String,
    /// The first label of its host names, lowercase.
    pub name: String,
    /// Never empty: a tenant without secrets is not made ([`Tenant::new`]).
    secrets: Vec<Secret>,
}

impl Tenant {
    /// A tenant; `None` without a secret (it could sign nothing).
    pub fn new(id: impl Into<String>, name: &str, secrets: Vec<Secret>) -> Option<Self> {
        let secrets: Vec<Secret> = secrets.into_iter().filter(|s| !s.is_empty()).collect();
        (!secrets.is_empty()).then(|| Self {
            id: id.into(),
            name: name.to_ascii_lowercase(),
            secrets,
        })
    }

    /// Any of them signs its API calls.
    pub fn secrets(&self) -> &[Secret] {
        &self.secrets
    }

    /// The first: it signs its callbacks (a rotation puts the new secret first).
    pub fn signing_secret(&self) -> &Secret {
        &self.secrets[0]
    }
}

/// The tenants in force, by id and by name.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct View {
    by_id: HashMap<String, Arc<Tenant>>,
    by_name: HashMap<String, Arc<Tenant>>,
}

impl View {
    /// A view of `tenants`; of two with one id or one name, the first stays.
    pub fn of(tenants: impl IntoIterator<Item = Arc<Tenant>>) -> Self {
        let mut view = Self::default();
        for t in tenants {
            if view.by_id.contains_key(&t.id) || view.by_name.contains_key(&t.name) {
                continue;
            }
            view.by_name.insert(t.name.clone(), t.clone());
            view.by_id.insert(t.id.clone(), t);
        }
        view
    }

    pub fn by_id(&self, id: &str) -> Option<&Arc<Tenant>> {
        self.by_id.get(id)
    }

    pub fn by_name(&self, name: &str) -> Option<&Arc<Tenant>> {
        self.by_name.get(&name.to_ascii_lowercase())
    }

    /// The tenant a request to host `host` is for: its first label (`acme` of
    /// `acme.sl.example.com:443`), as Scalelite finds it.
    pub fn of_host(&self, host: &str) -> Option<&Arc<Tenant>> {
        let label = host.split(['.', ':']).next()?;
        if self.by_name.is_empty() || !is_host_label(label) {
            return None;
        }
        self.by_name(label)
    }

    /// The tenant (its id) of a meeting whose metadata says `tenant-id` = `id` or
    /// `tenant-name` = `name`; the id wins.
    pub fn resolve(&self, id: Option<&str>, name: Option<&str>) -> Option<&str> {
        if self.by_id.is_empty() {
            return None;
        }
        id.and_then(|id| self.by_id(id))
            .or_else(|| name.and_then(|n| self.by_name(n)))
            .map(|t| t.id.as_str())
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Every tenant, in name order.
    pub fn all(&self) -> Vec<&Arc<Tenant>> {
        let mut all: Vec<_> = self.by_name.values().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }
}

/// The view in force: the configuration's tenants, then Scalelite's (a configured tenant wins
/// over one of Scalelite's with its id or name).
#[derive(Debug)]
pub struct Tenants {
    configured: Vec<Arc<Tenant>>,
    current: ArcSwap<View>,
    /// Whether Scalelite's tenants were read (or tried) once.
    tried: tokio::sync::watch::Sender<bool>,
}

impl Tenants {
    /// The configuration's `[[tenants]]` (checked already: each has a secret).
    pub fn new(configured: &[TenantConfig]) -> Arc<Self> {
        let configured: Vec<Arc<Tenant>> = configured
            .iter()
            .filter_map(|t| Tenant::new(t.id(), &t.name, t.secrets.clone()))
            .map(Arc::new)
            .collect();
        let current = ArcSwap::from_pointee(View::of(configured.iter().cloned()));
        Arc::new(Self {
            configured,
            current,
            tried: tokio::sync::watch::Sender::new(false),
        })
    }

    pub fn load(&self) -> Arc<View> {
        self.current.load_full()
    }

    /// Puts Scalelite's tenants in force beside the configured ones.
    pub fn set_scalelite(&self, scalelite: impl IntoIterator<Item = Arc<Tenant>>) -> usize {
        let view = View::of(self.configured.iter().cloned().chain(scalelite));
        let n = view.len();
        // Unchanged (the usual read): the view in force stays, and what is cached on it.
        if **self.current.load() != view {
            self.current.store(Arc::new(view));
        }
        n
    }

    /// Tells [`Tenants::tried`]'s waiters that Scalelite was read, or tried.
    fn mark_tried(&self) {
        self.tried.send_replace(true);
    }

    /// Waits until Scalelite's tenants were read (or tried) once, at most `limit`.
    pub async fn tried(&self, limit: std::time::Duration) {
        let mut rx = self.tried.subscribe();
        let _ = tokio::time::timeout(limit, rx.wait_for(|tried| *tried)).await;
    }
}
