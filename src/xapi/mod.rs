//! The xAPI output (`[xapi]`, docs/xapi.md): statements about meetings (the virtual-classroom
//! profile, as the reference's `out/xapi` makes them) sent to Learning Record Stores, durably.
//!
//! Data flow: the processing stage hands each batch's events to [`Output::add`], which
//! [`translate`]s them with each meeting's state (read back from the store when not in
//! memory) and adds the state's changes and the statements to the batch's transaction
//! ([`store`]); once that is written, [`Output::wake`] tells each LRS's [`sender`] (one per
//! queue, on the instance that processes the bus).

mod lrs;
mod sender;
mod statement;
mod store;
mod translate;

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, atomic::Ordering},
};

use serde_json::Value;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    base::sources::SourceTable, config::Config, event::Event, metrics::Metrics,
    store_conn::StoreConn,
};
use sender::{Handle, Shared};
use statement::Ids;
use translate::{Input, State, Write};

/// The output, owned by the processing stage.
pub(crate) struct Output {
    shared: Arc<Shared>,
    sources: Arc<SourceTable>,
    /// Ids (namespace and domain) by configured source.
    ids: Vec<Ids>,
    /// `xapi.server_domain`, and the namespace: the ids of an edge's server are made with
    /// them (its name for the domain when that is empty).
    server_domain: String,
    namespace: uuid::Uuid,
    /// Meetings' state by (source, internal meeting id), with when it last changed: one that
    /// no event touched for `state_ttl_s` is forgotten here as it expires in the store.
    states: HashMap<(usize, String), State>,
    touched_at: HashMap<(usize, String), std::time::Instant>,
    last_prune: std::time::Instant,
    /// Meetings known to have no state in the store (not created while the relay listened).
    unknown: HashSet<(usize, String)>,
    senders: HashMap<String, Handle>,
    /// Meetings whose statements have no usable LRS, told once in the log.
    warned: HashSet<String>,
    /// Queues that got statements in the batch being written.
    touched: HashSet<String>,
    tracker: TaskTracker,
    token: CancellationToken,
}

impl Output {
    /// The ids of `source`: a configured source's, or those of an edge's server (its name
    /// for the domain, unless `xapi.server_domain` says).
    fn ids_of(&self, source: crate::base::sources::SourceId) -> Ids {
        if let Some(ids) = self.ids.get(usize::from(source)) {
            return ids.clone();
        }
        Ids {
            namespace: self.namespace,
            domain: if self.server_domain.is_empty() {
                self.sources.domain(source).to_string()
            } else {
                self.server_domain.clone()
            },
        }
    }

    /// The output of `config` (`None` when off), with a sender for each queue left in the store.
    pub(crate) async fn start(
        config: &Config,
        sources: Arc<SourceTable>,
        conn: &StoreConn,
        metrics: Arc<Metrics>,
        traces: &Option<Arc<crate::traces::Traces>>,
        (tracker, token): (&TaskTracker, &CancellationToken),
    ) -> Option<Self> {
        let x = &config.xapi;
        if !x.enabled {
            return None;
        }
        let namespace = uuid::Uuid::parse_str(&x.uuid_namespace).ok()?;
        let effective = config.effective_sources();
        let ids = effective
            .iter()
            .map(|s| Ids {
                namespace,
                domain: if x.server_domain.is_empty() {
                    s.server_domain.clone()
                } else {
                    x.server_domain.clone()
                },
            })
            .collect();
        let secrets = effective
            .iter()
            .map(|s| (s.name.clone(), s.secret.expose().to_string()))
            .collect();
        // The endpoints meetings choose go through the callbacks' SSRF guard (its networks,
        // without the callbacks' own https and credentials rules).
        let ssrf = &config.delivery.ssrf;
        let guard = Arc::new(crate::base::callback_url::Guard::new(
            ssrf.enabled,
            ssrf.allow_cidrs.clone(),
        ));
        let shared = match Shared::new(conn.clone(), x.clone(), secrets, metrics, guard) {
            Ok(s) => Arc::new(s.with_traces(traces.clone())),
            Err(e) => {
                tracing::error!(error = %e, "cannot build the xAPI output's HTTP client; the output is off");
                return None;
            }
        };
        let mut out = Self {
            shared,
            sources,
            ids,
            server_domain: x.server_domain.clone(),
            namespace,
            states: HashMap::new(),
            touched_at: HashMap::new(),
            last_prune: std::time::Instant::now(),
            unknown: HashSet::new(),
            senders: HashMap::new(),
            touched: HashSet::new(),
            warned: HashSet::new(),
            tracker: tracker.clone(),
            token: token.child_token(),
        };
        let mut conn = conn.clone();
        match store::queues(&mut conn).await {
            Ok(queues) => {
                for (key, host, len) in queues {
                    let handle = out.sender(&key, host);
                    handle.depth.store(len, Ordering::Relaxed);
                    handle.wake.notify_one();
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the xAPI queues back; they are sent once new statements come")
            }
        }
        tracing::info!("xAPI output on");
        Some(out)
    }

    /// The sender of queue `key`, started when new.
    fn sender(&mut self, key: &str, host: String) -> Handle {
        if let Some(h) = self.senders.get(key) {
            return h.clone();
        }
        let handle = Handle::default();
        self.tracker.spawn(sender::run(
            self.shared.clone(),
            key.to_string(),
            host,
            handle.clone(),
            self.token.clone(),
        ));
        self.senders.insert(key.to_string(), handle.clone());
        handle
    }

    /// Translates `events` (one batch, in order) and adds the state's changes and the
    /// statements to `pipe`, the batch's transaction.
    pub(crate) async fn add(
        &mut self,
        events: &[Arc<Event>],
        conn: &mut StoreConn,
        pipe: &mut redis::Pipeline,
        trace: &mut (dyn FnMut(usize, &str, &str) -> Option<crate::traces::TraceParent> + Send),
    ) {
        self.prune();
        for (i, event) in events.iter().enumerate() {
            if !translate::handles(&event.id) {
                continue;
            }
            let source = usize::from(event.source);
            let ids = self.ids_of(event.source);
            let Ok(processed) = serde_json::from_str::<Value>(event.processed.text()) else {
                continue;
            };
            let raw: Option<Value> = event
                .raw
                .as_ref()
                .and_then(|r| serde_json::from_str(r.text()).ok());
            let mid = event.internal_meeting_id.clone().unwrap_or_default();
            let key = (source, mid.clone());
            let source_name = self.sources.name(event.source).to_string();
            if event.id != "meeting-created" {
                self.ensure_loaded(conn, &source_name, &key).await;
            }
            let input = Input {
                processed: &processed,
                raw: raw.as_ref(),
                raw_text: event.raw.as_ref().map(|r| r.text()),
            };
            let mut writes = Vec::new();
            let made = translate::translate(&ids, &input, self.states.get(&key), &mut writes);
            for w in &writes {
                match w {
                    Write::Forget(_) => {
                        self.states.remove(&key);
                        self.touched_at.remove(&key);
                    }
                    Write::Meeting(..) => {
                        self.unknown.remove(&key);
                        self.states.entry(key.clone()).or_default().apply(w);
                    }
                    _ => self.states.entry(key.clone()).or_default().apply(w),
                }
            }
            if writes.iter().any(|w| !matches!(w, Write::Forget(_))) {
                self.touched_at
                    .insert(key.clone(), std::time::Instant::now());
            }
            store::add_writes(pipe, &source_name, &writes, self.shared.config.state_ttl_s);
            match made {
                Ok(Some(st)) => {
                    self.queue(pipe, st, &source_name, &mut |lrs| trace(i, "xapi", lrs));
                }
                Ok(None) => {}
                Err(skip) => self.shared.metrics.xapi.skip(skip.reason()),
            }
        }
    }

    /// Forgets, once a minute, the meetings whose state has expired in the store.
    fn prune(&mut self) {
        if self.last_prune.elapsed() < std::time::Duration::from_secs(60) {
            return;
        }
        self.last_prune = std::time::Instant::now();
        let ttl = std::time::Duration::from_secs(self.shared.config.state_ttl_s);
        self.touched_at.retain(|_, t| t.elapsed() < ttl);
        let touched = &self.touched_at;
        self.states.retain(|k, _| touched.contains_key(k));
    }

    /// Reads a meeting's state back from the store once, if not in memory.
    async fn ensure_loaded(&mut self, conn: &mut StoreConn, source: &str, key: &(usize, String)) {
        if self.states.contains_key(key) || self.unknown.contains(key) || key.1.is_empty() {
            return;
        }
        match store::load(conn, source, &key.1).await {
            Ok(Some(state)) => {
                self.states.insert(key.clone(), state);
                self.touched_at
                    .insert(key.clone(), std::time::Instant::now());
            }
            Ok(None) => {
                if self.unknown.len() >= 10_000 {
                    self.unknown.clear();
                }
                self.unknown.insert(key.clone());
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read a meeting's xAPI state; its statement is skipped")
            }
        }
    }

    fn queue(
        &mut self,
        pipe: &mut redis::Pipeline,
        st: translate::Statement,
        source: &str,
        trace: &mut dyn FnMut(&str) -> Option<crate::traces::TraceParent>,
    ) {
        let lrs = match self.shared.resolve(st.lrs_payload.as_deref(), Some(source)) {
            Ok(l) => l,
            Err(e) => {
                // Once per meeting; never the payload itself.
                if self.warned.len() >= 10_000 {
                    self.warned.clear();
                }
                if self.warned.insert(st.internal_meeting_id.clone()) {
                    tracing::warn!(
                        meeting = %st.internal_meeting_id,
                        reason = %e,
                        "a meeting's xAPI statements have no usable LRS; they are not sent"
                    );
                }
                self.shared.metrics.xapi.skip(if st.lrs_payload.is_some() {
                    "bad_payload"
                } else {
                    "no_lrs"
                });
                return;
            }
        };
        let key = lrs.key();
        let handle = self.sender(&key, lrs.host());
        if handle.depth.load(Ordering::Relaxed) >= self.shared.config.max_queue {
            tracing::warn!(lrs = %lrs.host(), "an LRS's xAPI queue is full; a statement is not queued");
            self.shared.metrics.xapi.skip("queue_full");
            return;
        }
        let depth = handle.depth.fetch_add(1, Ordering::Relaxed) + 1;
        self.shared
            .metrics
            .xapi
            .queued
            .get_or_create(&crate::metrics::XapiMetrics::lrs(&lrs.host()))
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
        let host = lrs.host();
        store::add_statement(
            pipe,
            &key,
            &st.json.to_string(),
            st.lrs_payload.as_deref(),
            source,
            &host,
            trace(&host),
        );
        self.touched.insert(key);
    }

    /// The batch is written: its statements' senders go.
    pub(crate) fn wake(&mut self) {
        for key in self.touched.drain() {
            if let Some(h) = self.senders.get(&key) {
                h.wake.notify_one();
            }
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        self.token.cancel();
    }
}
