//! The tenants of a hosted cluster (`docs/tenants.md`): who they are, found by the host name
//! their API calls come to, by the id their meetings carry, with the secrets that sign their
//! calls and callbacks. [`Tenants`] holds the view in force (configured tenants and
//! Scalelite's, swapped atomically) and how Scalelite's were last read ([`ScaleliteStatus`]);
//! [`scalelite`] reads and follows Scalelite's, [`kept`] keeps the last good view of them in
//! the relay's store for a start while Scalelite's Redis is down. Below them all, [`refusal`]:
//! the secrets no tenant may have, wherever it comes from.

mod kept;
mod scalelite;
#[cfg(test)]
mod tests;

pub(crate) use scalelite::{Problem, first_read, follow};

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use arc_swap::ArcSwap;

use crate::{
    base::{secret::Secret, standard_webhooks::StandardSigner},
    config::{
        Config,
        tenants::{TenantConfig, is_host_label},
        weak_secret,
    },
};

/// Why a tenant is refused whatever its record says: its calls get `checksumError`, as an
/// unknown tenant's, and its callbacks are not signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Refusal {
    /// One of its secrets is the operator's (`bbb.secret`, or a source's server secret): its
    /// calls would be the operator's.
    OperatorSecret,
    /// One of its secrets is shorter than 12 characters (guessed from one signed URL).
    WeakSecret,
}

/// Whether a tenant with `secrets` must be refused, `operator` being the secrets only the
/// operator may hold.
pub(crate) fn refusal(secrets: &[Secret], operator: &[Secret]) -> Option<Refusal> {
    if secrets
        .iter()
        .any(|s| operator.iter().any(|o| !o.is_empty() && o == s))
    {
        return Some(Refusal::OperatorSecret);
    }
    secrets
        .iter()
        .any(|s| weak_secret(s.expose()).is_some())
        .then_some(Refusal::WeakSecret)
}

/// One tenant.
#[derive(Debug, PartialEq, Eq)]
pub struct Tenant {
    /// What its meetings' `tenant-id` metadata says, and what its hooks record.
    pub(crate) id: String,
    /// The first label of its host names, lowercase.
    pub(crate) name: String,
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

    /// Its Standard Webhooks signer: a signature per secret of its first two (the new one and
    /// the old one during a rotation), each secret's bytes the key.
    pub fn standard_signer(&self) -> StandardSigner {
        StandardSigner::of_raw_keys(self.secrets.iter().take(2).map(|s| s.expose().as_bytes()))
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

/// How Scalelite's tenants were last read, for `hookrelay tenants` and the admin API (no
/// secret in it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScaleliteStatus {
    /// When its Redis was last read (ms since the epoch).
    pub(crate) last_read: Option<u64>,
    /// Since when its reads fail (ms since the epoch), while they do.
    pub(crate) failing_since: Option<u64>,
    /// The view in force is the one kept in the store, saved at this time (ms), until its
    /// Redis is read.
    pub(crate) from_store: Option<u64>,
    /// What the last read found wrong, by tenant.
    pub(crate) problems: Vec<scalelite::Problem>,
}

/// The view in force: the configuration's tenants, then Scalelite's (a configured tenant wins
/// over one of Scalelite's with its id or name).
#[derive(Debug)]
pub struct Tenants {
    configured: Vec<Arc<Tenant>>,
    current: ArcSwap<View>,
    /// Whether Scalelite's tenants were read (or tried) once.
    tried: tokio::sync::watch::Sender<bool>,
    /// Whether the view in force says which tenants exist: no `[scalelite]`, or its tenants
    /// read once, or its last good view taken from the store. Until then a tenant missing
    /// from the view may only not be read yet: its hooks are left alone.
    settled: tokio::sync::watch::Sender<bool>,
    /// The secrets no tenant may hold ([`refusal`]).
    operator: Vec<Secret>,
    /// Scalelite's reads, for people.
    status: Mutex<ScaleliteStatus>,
    /// Every tenant's name seen in force since the start, by id: what the audit says of a
    /// tenant that is gone.
    names: Mutex<HashMap<String, String>>,
}

impl Tenants {
    /// The configuration's `[[tenants]]` (checked already: each has a strong secret that is
    /// not in `operator`), settled at once unless Scalelite's are to be read too.
    pub fn new(configured: &[TenantConfig], operator: Vec<Secret>, scalelite: bool) -> Arc<Self> {
        let configured: Vec<Arc<Tenant>> = configured
            .iter()
            .filter_map(|t| Tenant::new(t.id(), &t.name, t.secrets.clone()))
            .map(Arc::new)
            .collect();
        let current = ArcSwap::from_pointee(View::of(configured.iter().cloned()));
        let names = configured
            .iter()
            .map(|t| (t.id.clone(), t.name.clone()))
            .collect();
        Arc::new(Self {
            configured,
            current,
            tried: tokio::sync::watch::Sender::new(false),
            settled: tokio::sync::watch::Sender::new(!scalelite),
            operator,
            status: Mutex::default(),
            names: Mutex::new(names),
        })
    }

    /// The tenants of `config`.
    pub fn of_config(config: &Config) -> Arc<Self> {
        Self::new(
            &config.tenants,
            config.operator_secrets(),
            config.scalelite.is_some(),
        )
    }

    pub fn load(&self) -> Arc<View> {
        self.current.load_full()
    }

    /// The secrets no tenant may hold.
    pub fn operator_secrets(&self) -> &[Secret] {
        &self.operator
    }

    /// Whether the view in force says which tenants exist (see the field).
    pub fn settled(&self) -> bool {
        *self.settled.borrow()
    }

    /// Marks the view in force as saying which tenants exist.
    fn settle(&self) {
        self.settled
            .send_if_modified(|s| !std::mem::replace(s, true));
    }

    /// Waits until the view is settled or `token` is cancelled.
    pub async fn wait_settled(&self, token: &tokio_util::sync::CancellationToken) {
        let mut rx = self.settled.subscribe();
        tokio::select! {
            _ = rx.wait_for(|s| *s) => {}
            () = token.cancelled() => {}
        }
    }

    /// Scalelite's reads as last seen.
    pub fn scalelite_status(&self) -> ScaleliteStatus {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Changes what [`Tenants::scalelite_status`] says.
    fn update_status(&self, change: impl FnOnce(&mut ScaleliteStatus)) {
        change(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Whether `tenant` came from the configuration (else from Scalelite).
    pub fn is_configured(&self, tenant: &Tenant) -> bool {
        self.configured.iter().any(|c| c.id == tenant.id)
    }

    /// Puts Scalelite's tenants in force beside the configured ones.
    pub fn set_scalelite(&self, scalelite: impl IntoIterator<Item = Arc<Tenant>>) -> usize {
        let view = View::of(self.configured.iter().cloned().chain(scalelite));
        let n = view.len();
        // Unchanged (the usual read): the view in force stays, and what is cached on it.
        if **self.current.load() != view {
            let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
            for t in view.all() {
                names.insert(t.id.clone(), t.name.clone());
            }
            drop(names);
            self.current.store(Arc::new(view));
        }
        n
    }

    /// The name of tenant `id`, as last seen in force (since the start) even when it is gone
    /// now; its id when it was never seen.
    pub fn name_of(&self, id: &str) -> String {
        if let Some(t) = self.load().by_id(id) {
            return t.name.clone();
        }
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        names.get(id).cloned().unwrap_or_else(|| id.to_string())
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
