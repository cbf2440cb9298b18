//! Sends one LRS's queue, a statement at a time in queue order (so each meeting's statements
//! arrive in the order of its events): a statement leaves the queue when the LRS took it
//! (2xx, or 409: it holds that id already), or refused it for good (another 4xx; after the
//! retry schedule for 401 and 403). An outage (no connection, a timeout, 5xx, 408, 429) is
//! waited out on the retry schedule, whose last interval repeats without end.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{
    lrs::{Auth, Lrs, PayloadError},
    store::{self, Queued},
};
use crate::{
    base::callback_url::Guard,
    config::xapi::XapiConfig,
    delivery::{GuardedResolver, RetryPolicy},
    metrics::{LrsReasonLabels, Metrics, XapiMetrics},
    shutdown::pause,
    store_conn::StoreConn,
};

/// Statements read from a queue at a time.
const PAGE: usize = 64;
/// How often an idle sender looks at its queue without being woken (another instance of a
/// fleet may have queued for it before this one took over).
const IDLE_LOOK: Duration = Duration::from_secs(5);

/// What every sender shares.
pub(crate) struct Shared {
    conn: StoreConn,
    /// For the operator's own endpoint (`[xapi] lrs_endpoint`).
    http: reqwest::Client,
    /// For endpoints meetings choose: every address through the SSRF guard, no proxy.
    guarded: reqwest::Client,
    /// The SSRF guard (of `[delivery.ssrf]`), for the endpoints meetings choose.
    guard: Arc<Guard>,
    pub(super) config: XapiConfig,
    /// Shared secrets by source name.
    secrets: HashMap<String, String>,
    pub(super) metrics: Arc<Metrics>,
    /// Decrypted payloads (a PBKDF2 of 10,000 rounds each): by payload text.
    resolved: Mutex<HashMap<String, Result<Lrs, PayloadError>>>,
    /// The tracer, while traces are on: a traced statement's tries are spans of its trace.
    traces: Option<Arc<crate::traces::Traces>>,
}

impl Shared {
    pub(crate) fn new(
        conn: StoreConn,
        config: XapiConfig,
        secrets: HashMap<String, String>,
        metrics: Arc<Metrics>,
        guard: Arc<Guard>,
    ) -> Result<Self, reqwest::Error> {
        let timeout = Duration::from_millis(config.request_timeout_ms);
        let builder = || {
            reqwest::Client::builder()
                .timeout(timeout)
                .connect_timeout(timeout)
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("hookrelay/", env!("CARGO_PKG_VERSION")))
        };
        let http = builder().build()?;
        // A proxy would resolve and connect on its own, past the guard.
        let guarded = builder()
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver {
                guard: guard.clone(),
            }))
            .build()?;
        Ok(Self {
            conn,
            http,
            guarded,
            guard,
            config,
            secrets,
            metrics,
            resolved: Mutex::new(HashMap::new()),
            traces: None,
        })
    }

    /// This output, its statements' tries traced with `traces`.
    pub(crate) fn with_traces(mut self, traces: Option<Arc<crate::traces::Traces>>) -> Self {
        self.traces = traces;
        self
    }

    /// The LRS of a statement: its meeting's (decrypted with its server's secret), else the
    /// default one.
    ///
    /// # Errors
    /// When the payload cannot be used, or there is no default LRS.
    pub(crate) fn resolve(
        &self,
        payload: Option<&str>,
        source: Option<&str>,
    ) -> Result<Lrs, PayloadError> {
        let Some(payload) = payload else {
            return Lrs::default_of(&self.config).ok_or(PayloadError::Endpoint);
        };
        let mut cache = self.resolved.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = cache.get(payload) {
            return r.clone();
        }
        let secret = source
            .and_then(|s| self.secrets.get(s))
            .or_else(|| {
                self.secrets
                    .values()
                    .next()
                    .filter(|_| self.secrets.len() == 1)
            })
            .map_or("", String::as_str);
        let r = Lrs::of_payload(payload, secret, &self.config).and_then(|lrs| {
            // An address written in the endpoint is checked here; a name, when it is resolved.
            match lrs.guarded {
                true => self
                    .guard
                    .check_url(&lrs.url)
                    .map(|()| lrs)
                    .map_err(|e| PayloadError::Blocked(e.to_string())),
                false => Ok(lrs),
            }
        });
        if cache.len() >= 1024 {
            cache.clear();
        }
        cache.insert(payload.to_string(), r.clone());
        r
    }

    fn xapi(&self) -> &XapiMetrics {
        &self.metrics.xapi
    }
}

/// A sender's handle: wakes it, counts what waits in its queue.
#[derive(Clone, Default)]
pub(crate) struct Handle {
    pub(super) wake: Arc<Notify>,
    pub(super) depth: Arc<AtomicUsize>,
}

/// How a post ended.
enum Outcome {
    Taken,
    /// Not now: try again (reason label, status if any).
    Again(&'static str, Option<u16>),
    /// Never: the statement goes.
    Refused(u16),
}

/// Sends the queue `key` (host `host`) until `token` is cancelled.
pub(crate) async fn run(
    shared: Arc<Shared>,
    key: String,
    host: String,
    handle: Handle,
    token: CancellationToken,
) {
    let mut conn = shared.conn.clone();
    let label = XapiMetrics::lrs(&host);
    let policy = RetryPolicy::new(&shared.config.retry_intervals_ms, true);
    let queued = shared.xapi().queued.get_or_create(&label).clone();
    loop {
        queued.set(i64::try_from(handle.depth.load(Ordering::Relaxed)).unwrap_or(i64::MAX));
        let page = match store::read(&mut conn, &key, PAGE).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(lrs = %host, error = %e, "cannot read the xAPI queue; trying again");
                if pause(&token, Duration::from_secs(1)).await {
                    return;
                }
                continue;
            }
        };
        if page.is_empty() {
            tokio::select! {
                () = handle.wake.notified() => {}
                () = tokio::time::sleep(IDLE_LOOK) => {}
                () = token.cancelled() => return,
            }
            continue;
        }
        for q in page {
            if !send_one(&shared, &host, &policy, &q, &token).await {
                return;
            }
            loop {
                match store::remove(&mut conn, &key, &q.id).await {
                    Ok(()) => break,
                    Err(e) => {
                        tracing::warn!(lrs = %host, error = %e, "cannot remove a sent xAPI statement; trying again");
                        if pause(&token, Duration::from_secs(1)).await {
                            return;
                        }
                    }
                }
            }
            let left = handle.depth.load(Ordering::Relaxed).saturating_sub(1);
            handle.depth.store(left, Ordering::Relaxed);
            queued.set(i64::try_from(left).unwrap_or(i64::MAX));
        }
    }
}

/// Tries one statement until it is taken or refused; `false` when cancelled first.
async fn send_one(
    shared: &Shared,
    host: &str,
    policy: &RetryPolicy,
    q: &Queued,
    token: &CancellationToken,
) -> bool {
    let lrs = match shared.resolve(q.lrs_payload.as_deref(), q.source.as_deref()) {
        Ok(l) => l,
        Err(e) => {
            // Checked when it was queued; only a changed secret gets here.
            tracing::warn!(lrs = %host, reason = %e, "an xAPI statement's LRS payload is unusable now; the statement is dropped");
            fail(shared, host, e.reason());
            return true;
        }
    };
    let mut failures = 0usize;
    loop {
        let started = Instant::now();
        let client = if lrs.guarded {
            &shared.guarded
        } else {
            &shared.http
        };
        let span = try_span(shared, &lrs, q, failures);
        let outcome = post(client, &lrs, &q.statement).await;
        // A try that will be tried again is finished below, once its delay is known.
        let span = match (&outcome, span) {
            (Outcome::Taken, Some(span)) => {
                span.finish(None, None, "delivered");
                None
            }
            (Outcome::Refused(s), Some(span)) => {
                span.finish(
                    Some(*s),
                    Some((s.to_string(), format!("HTTP {s}"))),
                    "refused",
                );
                None
            }
            (_, span) => span,
        };
        shared
            .xapi()
            .latency
            .get_or_create(&XapiMetrics::lrs(host))
            .observe(started.elapsed().as_secs_f64());
        let (reason, status) = match outcome {
            Outcome::Taken => {
                shared
                    .xapi()
                    .sent
                    .get_or_create(&XapiMetrics::lrs(host))
                    .inc();
                if failures > 0 {
                    tracing::info!(lrs = %host, failures, "the LRS takes xAPI statements again");
                }
                return true;
            }
            Outcome::Refused(status) => {
                tracing::warn!(lrs = %host, status, "the LRS refused an xAPI statement; it is dropped");
                fail(shared, host, "rejected_4xx");
                return true;
            }
            Outcome::Again(reason, status) => (reason, status),
        };
        failures += 1;
        fail(shared, host, reason);
        let auth = matches!(status, Some(401 | 403));
        let delay = if auth {
            RetryPolicy::new(&shared.config.retry_intervals_ms, false).next_delay(failures)
        } else {
            policy.next_delay(failures)
        };
        if let Some(span) = span {
            let verdict = if delay.is_some() { "retry" } else { "refused" };
            span.finish(status, Some((reason.into(), reason.into())), verdict);
        }
        let Some(delay) = delay else {
            tracing::warn!(lrs = %host, ?status, failures, "the LRS refuses these credentials; an xAPI statement is dropped");
            return true;
        };
        if failures == 1 {
            tracing::warn!(lrs = %host, reason, ?status, "an LRS does not take xAPI statements; they wait and are tried again");
        } else {
            tracing::debug!(lrs = %host, reason, ?status, failures, "the LRS still does not take xAPI statements");
        }
        if pause(token, delay).await {
            return false;
        }
    }
}

/// The span of one try of `q` (after `failures` failed ones), when `q` is traced.
fn try_span(
    shared: &Shared,
    lrs: &Lrs,
    q: &Queued,
    failures: usize,
) -> Option<crate::traces::AttemptSpan> {
    use opentelemetry::KeyValue;
    let (traces, parent) = shared.traces.as_deref().zip(q.trace)?;
    let mut attributes = vec![
        KeyValue::new("http.request.method", "POST"),
        KeyValue::new("hookrelay.output", "xapi"),
    ];
    attributes.extend(crate::traces::url_attributes(&lrs.url));
    if failures > 0 {
        attributes.push(KeyValue::new("http.request.resend_count", failures as i64));
    }
    let kind = opentelemetry::trace::SpanKind::Client;
    Some(traces.output_attempt(&parent, "POST".into(), kind, attributes))
}

fn fail(shared: &Shared, host: &str, reason: &str) {
    shared
        .xapi()
        .failed
        .get_or_create(&LrsReasonLabels {
            lrs: host.into(),
            reason: reason.into(),
        })
        .inc();
}

async fn post(http: &reqwest::Client, lrs: &Lrs, statement: &str) -> Outcome {
    let mut req = http
        .post(&lrs.url)
        .header("Content-Type", "application/json")
        .header("X-Experience-API-Version", "1.0.0")
        .body(statement.to_string());
    req = match &lrs.auth {
        Auth::None => req,
        Auth::Basic { user, password } => req.basic_auth(user, Some(password)),
        Auth::Bearer(t) => req.bearer_auth(t),
    };
    match req.send().await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            // Read the body so the connection is reused.
            let _ = resp.bytes().await;
            match status {
                200..=299 | 409 => Outcome::Taken,
                408 => Outcome::Again("timeout", Some(status)),
                429 => Outcome::Again("status_429", Some(status)),
                401 | 403 => Outcome::Again("auth", Some(status)),
                500..=599 => Outcome::Again("status_5xx", Some(status)),
                _ => Outcome::Refused(status),
            }
        }
        Err(e) if e.is_timeout() => Outcome::Again("timeout", None),
        Err(e) if e.is_connect() => Outcome::Again("connect", None),
        Err(_) => Outcome::Again("network", None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An LRS on loopback answering each path's status (`/409/xAPI/statements` answers 409).
    async fn lrs() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = axum::Router::new().fallback(|uri: axum::http::Uri| async move {
            let code: u16 = uri
                .path()
                .trim_start_matches('/')
                .split('/')
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(500);
            axum::http::StatusCode::from_u16(code)
                .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR)
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn what_each_answer_means() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let base = lrs().await;
        let http = reqwest::Client::new();
        let outcome = |code: u16| {
            let (http, url) = (http.clone(), format!("{base}/{code}/xAPI/statements"));
            async move {
                let lrs = Lrs {
                    url,
                    auth: Auth::Bearer("t".into()),
                    guarded: false,
                };
                match post(&http, &lrs, "{}").await {
                    Outcome::Taken => "taken".to_string(),
                    Outcome::Again(reason, _) => format!("again {reason}"),
                    Outcome::Refused(s) => format!("refused {s}"),
                }
            }
        };
        assert_eq!(outcome(200).await, "taken");
        assert_eq!(outcome(204).await, "taken");
        assert_eq!(outcome(409).await, "taken", "the LRS holds that id already");
        assert_eq!(outcome(500).await, "again status_5xx");
        assert_eq!(outcome(503).await, "again status_5xx");
        assert_eq!(outcome(429).await, "again status_429");
        assert_eq!(outcome(408).await, "again timeout");
        assert_eq!(outcome(401).await, "again auth");
        assert_eq!(outcome(400).await, "refused 400");
        let refused = Lrs {
            url: "http://127.0.0.1:9/xAPI/statements".into(),
            auth: Auth::None,
            guarded: false,
        };
        assert!(matches!(
            post(&http, &refused, "{}").await,
            Outcome::Again("connect", None)
        ));
    }
}
