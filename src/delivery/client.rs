//! The HTTP client: one pooled keep-alive reqwest client, no redirects, a timeout per attempt,
//! host names resolved through the SSRF guard, and only 2xx counted as success.

use std::{sync::Arc, time::Duration};

use prometheus_client::metrics::counter::Counter;

use std::time::Instant;

use super::{
    circuit::{Change, Circuit, Pass, Seen},
    ssrf::GuardedResolver,
};
use crate::{
    base::{callback_url::Guard, standard_webhooks::Headers},
    config::ReceiverConfig,
    metrics::{Metrics, ReceiverLabel},
};

mod error;

pub(crate) use error::DeliveryError;

/// Most of a receiver's answer the relay reads (it is thrown away; reading a little lets the
/// connection be reused).
const MAX_RESPONSE_BYTES: usize = 4 * 1024;

/// Sends callbacks.
/// The header naming the conference server an event came from.
pub(crate) const DOMAIN_HEADER: &str = "x-hookrelay-domain";
/// Says that a callback is sent again (`hookrelay redeliver`); its body, timestamp and event id
/// are the original's.
pub(crate) const REDELIVERY_HEADER: &str = "x-hookrelay-redelivery";
/// The callback's timestamp (ms, taken at its first attempt) of a JSON body.
pub(crate) const TIMESTAMP_HEADER: &str = "x-hookrelay-timestamp";

/// The headers of one callback besides its content type.
#[derive(Debug, Clone, Copy)]
pub struct CallbackHeaders<'a> {
    /// `Authorization: Bearer` (the reference's `auth2_0` mode).
    pub(crate) bearer: Option<&'a str>,
    /// The Standard Webhooks headers.
    pub(crate) standard: Option<&'a Headers>,
    /// The source server's domain, as `X-Hookrelay-Domain`.
    pub(crate) domain: &'a str,
    /// `X-Hookrelay-Redelivery: true`.
    pub(crate) redelivery: bool,
    /// `X-Hookrelay-Timestamp`: the callback's timestamp (ms), for JSON bodies, which do not
    /// carry it.
    pub(crate) timestamp: Option<u64>,
    /// W3C `traceparent` of the attempt's span (`delivery.traceparent`).
    pub(crate) traceparent: Option<&'a str>,
}

#[derive(Clone)]
pub struct CallbackClient {
    http: reqwest::Client,
    receivers: Arc<Receivers>,
    settings: Settings,
    /// `[[delivery.receivers]]`: the first whose prefix a callback URL has applies.
    rules: Arc<[Rule]>,
    /// Each receiver's circuit (host and port), when `delivery.circuit_after` is set.
    circuits: Option<Arc<Circuits>>,
}

/// The receivers' circuits, by host and port ([`super::circuit`]), shared by the delivery
/// lanes' clients and read by the admin API.
pub struct Circuits {
    after: u32,
    max_open: Duration,
    open: std::sync::Mutex<std::collections::HashMap<String, Arc<Circuit>>>,
    /// `hookrelay_receiver_circuit_open{receiver}`.
    gauges: prometheus_client::metrics::family::Family<
        ReceiverLabel,
        prometheus_client::metrics::gauge::Gauge,
    >,
}

/// One receiver's circuit, with its name and gauge.
#[derive(Clone)]
struct Guarded {
    circuit: Arc<Circuit>,
    receiver: String,
    gauge: prometheus_client::metrics::gauge::Gauge,
}

/// The limits of one `[[delivery.receivers]]` entry, shared by every hook it matches.
struct Rule {
    prefix: String,
    /// Its rate (a token bucket: `rate_per_s`, `burst`).
    limiter: Option<Arc<governor::DefaultDirectRateLimiter>>,
    /// Its own turns (`max_connections`), instead of those per host and port.
    turns: Option<Arc<tokio::sync::Semaphore>>,
    /// Time its callbacks waited for the rate, in seconds.
    waited: Counter<f64, std::sync::atomic::AtomicU64>,
}

/// What a client is built with.
#[derive(Clone)]
struct Settings {
    timeout: Duration,
    guard: Arc<Guard>,
    per_receiver: usize,
}

/// Callbacks to one receiver (host and port): each is sent in one of its turns. Looked up once
/// per hook ([`CallbackClient::receiver`]), not per callback.
#[derive(Clone)]
pub struct Receiver {
    http: reqwest::Client,
    turns: Arc<tokio::sync::Semaphore>,
    /// Its `[[delivery.receivers]]` rate, and where the time waited for it is counted.
    rate: Option<(
        Arc<governor::DefaultDirectRateLimiter>,
        Counter<f64, std::sync::atomic::AtomicU64>,
    )>,
    circuit: Option<Guarded>,
}

/// The host and port of `url` (the key of its receiver's turns and circuit).
fn host_port(url: &str) -> String {
    reqwest::Url::parse(url).map_or_else(
        |_| url.to_string(),
        |u| {
            format!(
                "{}:{}",
                u.host_str().unwrap_or(""),
                u.port_or_known_default().unwrap_or(0)
            )
        },
    )
}

/// At most so many requests at once to one receiver (host and port), each on its own
/// connection: a fan-out to thousands of hooks on one receiver holds that many sockets and
/// their buffers (about 40 KiB each), not one per hook. Waiters go in turn.
struct Receivers {
    max: usize,
    open: std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>>,
}

impl Receivers {
    fn of(&self, url: &str) -> Arc<tokio::sync::Semaphore> {
        let key = host_port(url);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.len() >= 1024 && open.len().is_power_of_two() {
            // Receivers no request waits on or uses.
            open.retain(|_, s| Arc::strong_count(s) > 1 || s.available_permits() < self.max);
        }
        open.entry(key)
            .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(self.max)))
            .clone()
    }
}

impl CallbackClient {
    /// # Errors
    /// When the TLS back end cannot be set up.
    /// `per_receiver`: most requests at once to one host and port.
    pub fn new(
        timeout: Duration,
        guard: Arc<Guard>,
        per_receiver: usize,
    ) -> Result<Self, reqwest::Error> {
        let settings = Settings {
            timeout,
            guard,
            per_receiver,
        };
        Ok(Self {
            http: http_client(&settings)?,
            receivers: Arc::new(Receivers {
                max: per_receiver.max(1),
                open: std::sync::Mutex::default(),
            }),
            settings,
            rules: Arc::new([]),
            circuits: None,
        })
    }

    /// This client with the receivers' circuits (`None`: none).
    pub fn with_circuits(self, circuits: Option<Arc<Circuits>>) -> Self {
        Self { circuits, ..self }
    }

    /// This client with the limits of `[[delivery.receivers]]`; the time callbacks wait for a
    /// receiver's rate is counted in `metrics`.
    pub fn with_receivers(self, receivers: &[ReceiverConfig], metrics: &Metrics) -> Self {
        let rules = receivers
            .iter()
            .map(|r| {
                let limiter = std::num::NonZeroU32::new(r.rate_per_s).map(|rate| {
                    let burst = std::num::NonZeroU32::new(r.burst).unwrap_or(rate);
                    Arc::new(governor::RateLimiter::direct(
                        governor::Quota::per_second(rate).allow_burst(burst),
                    ))
                });
                Rule {
                    prefix: r.url_prefix.clone(),
                    limiter,
                    turns: (r.max_connections > 0)
                        .then(|| Arc::new(tokio::sync::Semaphore::new(r.max_connections))),
                    waited: metrics
                        .receiver_rate_wait
                        .get_or_create(&ReceiverLabel {
                            receiver: r.label(),
                        })
                        .clone(),
                }
            })
            .collect();
        Self { rules, ..self }
    }

    /// A client with the same settings and the same turns per receiver, whose connections are
    /// its own (a delivery lane's: their tasks run where its requests are made).
    ///
    /// # Errors
    /// When the TLS back end cannot be set up.
    pub fn with_own_connections(&self) -> Result<Self, reqwest::Error> {
        Ok(Self {
            http: http_client(&self.settings)?,
            receivers: self.receivers.clone(),
            settings: self.settings.clone(),
            rules: self.rules.clone(),
            circuits: self.circuits.clone(),
        })
    }

    /// The receiver that callbacks to `url` go to, whose turns (and rate) they take.
    pub fn receiver(&self, url: &str) -> Receiver {
        let rule = self.rules.iter().find(|r| url.starts_with(&r.prefix));
        Receiver {
            http: self.http.clone(),
            turns: rule
                .and_then(|r| r.turns.clone())
                .unwrap_or_else(|| self.receivers.of(url)),
            rate: rule.and_then(|r| Some((r.limiter.clone()?, r.waited.clone()))),
            circuit: self.circuits.as_ref().map(|c| c.of(url)),
        }
    }
}

fn http_client(s: &Settings) -> Result<reqwest::Client, reqwest::Error> {
    // reqwest is built without a bundled crypto provider; ring is installed once for the
    // process (a second call finds it installed, which is fine).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        // A proxy would resolve and connect on its own, past the SSRF guard.
        .no_proxy()
        .timeout(s.timeout)
        .connect_timeout(s.timeout)
        .pool_idle_timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(s.per_receiver)
        .dns_resolver(Arc::new(GuardedResolver {
            guard: s.guard.clone(),
        }))
        .user_agent(concat!("hookrelay/", env!("CARGO_PKG_VERSION")))
        .build()
}

impl Circuits {
    /// A circuit per receiver: open after `after` unreachable attempts in a row (0: no
    /// circuits, `None`), probes at most `max_open` apart; open ones shown in `metrics`.
    pub fn new(after: u32, max_open: Duration, metrics: &Metrics) -> Option<Arc<Self>> {
        (after > 0).then(|| {
            Arc::new(Self {
                after,
                max_open,
                open: std::sync::Mutex::default(),
                gauges: metrics.receiver_circuit_open.clone(),
            })
        })
    }

    /// Whether the circuit of the receiver of `url` is open now.
    pub fn is_open(&self, url: &str) -> bool {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.get(&host_port(url)).is_some_and(|c| c.is_open())
    }

    fn of(&self, url: &str) -> Guarded {
        let receiver = host_port(url);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.len() >= 1024 && open.len().is_power_of_two() {
            // Closed circuits no hook holds.
            open.retain(|_, c| Arc::strong_count(c) > 1 || c.is_open());
        }
        let circuit = open
            .entry(receiver.clone())
            .or_insert_with(|| Arc::new(Circuit::new(self.after, self.max_open)))
            .clone();
        let gauge = self
            .gauges
            .get_or_create(&ReceiverLabel {
                receiver: receiver.clone(),
            })
            .clone();
        Guarded {
            circuit,
            receiver,
            gauge,
        }
    }
}

/// A probe let through: if it is dropped unfinished (its task cancelled), the next may go.
struct Probing<'a>(Option<&'a Circuit>);

impl Drop for Probing<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.0 {
            c.abandon_probe();
        }
    }
}

impl Receiver {
    /// POSTs one body to `url` (of this receiver), in one of its turns, as
    /// `content_type`, with the headers `headers` says; `Ok` only for a 2xx answer. While
    /// the receiver's circuit is open, nothing is sent ([`DeliveryError::CircuitOpen`]).
    ///
    /// # Errors
    /// Any other status, a timeout, or a connection or protocol error.
    pub async fn post(
        &self,
        url: impl reqwest::IntoUrl,
        body: bytes::Bytes,
        content_type: &'static str,
        headers: CallbackHeaders<'_>,
    ) -> Result<u16, DeliveryError> {
        let Some(g) = &self.circuit else {
            return self.send(url, body, content_type, headers).await;
        };
        let pass = g
            .circuit
            .enter(Instant::now())
            .map_err(|retry_in| DeliveryError::CircuitOpen { retry_in })?;
        let mut probing = Probing((pass == Pass::Probe).then_some(&*g.circuit));
        let outcome = self.send(url, body, content_type, headers).await;
        probing.0 = None;
        let seen = match &outcome {
            Err(e) if e.unreachable() => Seen::Unreachable,
            // Refused by the SSRF guard before any connection: says nothing of the receiver.
            Err(DeliveryError::Blocked(_)) => return outcome,
            _ => Seen::Answer,
        };
        match g.circuit.record(pass, seen, Instant::now()) {
            Change::Opened => {
                g.gauge.set(1);
                tracing::warn!(receiver = %g.receiver, "a receiver is unreachable: its hooks stop sending, one probe at a time tries again (its circuit is open)");
            }
            Change::Closed => {
                g.gauge.set(0);
                tracing::info!(receiver = %g.receiver, "a receiver answers again: its hooks resume (its circuit is closed)");
            }
            Change::None => {}
        }
        outcome
    }

    /// [`Receiver::post`] past the circuit.
    async fn send(
        &self,
        url: impl reqwest::IntoUrl,
        body: bytes::Bytes,
        content_type: &'static str,
        headers: CallbackHeaders<'_>,
    ) -> Result<u16, DeliveryError> {
        let CallbackHeaders {
            bearer,
            standard,
            domain,
            redelivery,
            timestamp,
            traceparent,
        } = headers;
        // The receiver's rate first (the callback waits in its queue meanwhile, which the queue
        // age shows), then a turn.
        if let Some((limiter, waited)) = &self.rate {
            let started = std::time::Instant::now();
            limiter.until_ready().await;
            waited.inc_by(started.elapsed().as_secs_f64());
        }
        // Never closed: a permit always comes.
        let _turn = self
            .turns
            .acquire()
            .await
            .map_err(|e| DeliveryError::Request(e.to_string()))?;
        let mut request = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body);
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        // A domain that cannot be a header value is left out rather than failing the call.
        if let Ok(v) = reqwest::header::HeaderValue::from_str(domain) {
            request = request.header(DOMAIN_HEADER, v);
        }
        if redelivery {
            request = request.header(REDELIVERY_HEADER, "true");
        }
        if let Some(ts) = timestamp {
            request = request.header(TIMESTAMP_HEADER, ts);
        }
        if let Some(tp) = traceparent {
            request = request.header("traceparent", tp);
        }
        if let Some(h) = standard {
            request = request
                .header("webhook-id", &h.id)
                .header("webhook-timestamp", &h.timestamp)
                .header("webhook-signature", &h.signature);
        }
        let mut resp = request
            .send()
            .await
            // The URL carries the checksum (and maybe a token): never in an error message.
            .map_err(|e| DeliveryError::from_reqwest(&e.without_url()))?;
        let status = resp.status().as_u16();
        let retry_after = matches!(status, 429 | 503)
            .then(|| resp.headers().get(reqwest::header::RETRY_AFTER))
            .flatten()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry_after(v, std::time::SystemTime::now()));
        // Read a little of the answer so the connection can go back to the pool; a longer
        // answer is cut off (the connection is then closed).
        let mut read = 0;
        while read < MAX_RESPONSE_BYTES {
            match resp.chunk().await {
                Ok(Some(chunk)) => read += chunk.len(),
                Ok(None) | Err(_) => break,
            }
        }
        match retry_after {
            _ if (200..300).contains(&status) => Ok(status),
            Some(retry_after) => Err(DeliveryError::AskedToWait {
                status,
                retry_after,
            }),
            None => Err(DeliveryError::Status(status)),
        }
    }
}

/// The wait a `Retry-After` value asks for at `now`: seconds, or an HTTP date (a date past is
/// no wait). `None` for anything else.
pub(crate) fn retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use super::retry_after;

    #[test]
    fn retry_after_takes_seconds_and_http_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(1_445_412_480); // 2015-10-21 07:28:00 GMT
        assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO),
            "a date past"
        );
        for bad in ["", "-5", "1.5", "soon", "Wed, 21 Oct 2015"] {
            assert_eq!(retry_after(bad, now), None, "{bad:?}");
        }
        assert!(retry_after("1", SystemTime::now()).is_some());
    }
}
