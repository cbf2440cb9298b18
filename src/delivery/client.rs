//! The HTTP client: one pooled keep-alive reqwest client, no redirects, a timeout per attempt,
//! host names resolved through the SSRF guard, and only 2xx counted as success.

use std::{sync::Arc, time::Duration};

use super::ssrf::GuardedResolver;
use crate::base::callback_url::Guard;
use crate::base::standard_webhooks::Headers;

/// Most of a receiver's answer the relay reads (it is thrown away; reading a little lets the
/// connection be reused).
const MAX_RESPONSE_BYTES: usize = 4 * 1024;

/// Why one attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("receiver answered HTTP {0}")]
    Status(u16),
    #[error("no answer within the request timeout")]
    Timeout,
    #[error("could not connect: {0}")]
    Connect(String),
    #[error("request failed: {0}")]
    Request(String),
    /// The SSRF guard refused the callback's address.
    #[error("{0}")]
    Blocked(String),
}

impl DeliveryError {
    /// Every failure is retried by the schedule; kept as a method so that a future non-retryable
    /// case has one place to go.
    pub fn should_retry(&self) -> bool {
        true
    }

    /// A bounded metric label.
    pub fn reason(&self) -> String {
        match self {
            Self::Status(code) => code.to_string(),
            Self::Timeout => "timeout".into(),
            Self::Connect(_) => "connect".into(),
            Self::Request(_) => "request".into(),
            Self::Blocked(_) => "blocked".into(),
        }
    }

    fn from_reqwest(e: &reqwest::Error) -> Self {
        let chain = crate::base::error_text(e);
        if e.is_timeout() {
            Self::Timeout
        } else if let Some(i) = chain.find("blocked: ") {
            Self::Blocked(chain[i..].to_string())
        } else if e.is_connect() {
            Self::Connect(crate::base::error_text(e))
        } else {
            Self::Request(crate::base::error_text(e))
        }
    }
}

/// Sends callbacks.
/// The header naming the conference server an event came from.
pub const DOMAIN_HEADER: &str = "x-hookrelay-domain";
/// Says that a callback is sent again (`hookrelay redeliver`); its body, timestamp and event id
/// are the original's.
pub const REDELIVERY_HEADER: &str = "x-hookrelay-redelivery";
/// The callback's timestamp (ms, taken at its first attempt) of a JSON body.
pub const TIMESTAMP_HEADER: &str = "x-hookrelay-timestamp";

/// The headers of one callback besides its content type.
#[derive(Debug, Clone, Copy)]
pub struct CallbackHeaders<'a> {
    /// `Authorization: Bearer` (the reference's `auth2_0` mode).
    pub bearer: Option<&'a str>,
    /// The Standard Webhooks headers.
    pub standard: Option<&'a Headers>,
    /// The source server's domain, as `X-Hookrelay-Domain`.
    pub domain: &'a str,
    /// `X-Hookrelay-Redelivery: true`.
    pub redelivery: bool,
    /// `X-Hookrelay-Timestamp`: the callback's timestamp (ms), for JSON bodies, which do not
    /// carry it.
    pub timestamp: Option<u64>,
}

#[derive(Clone)]
pub struct CallbackClient {
    http: reqwest::Client,
    receivers: Arc<Receivers>,
    settings: Settings,
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
        let key = reqwest::Url::parse(url).map_or_else(
            |_| url.to_string(),
            |u| {
                format!(
                    "{}:{}",
                    u.host_str().unwrap_or(""),
                    u.port_or_known_default().unwrap_or(0)
                )
            },
        );
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
        })
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
        })
    }

    /// The receiver that callbacks to `url` go to, whose turns they take.
    pub fn receiver(&self, url: &str) -> Receiver {
        Receiver {
            http: self.http.clone(),
            turns: self.receivers.of(url),
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

impl Receiver {
    /// POSTs one body to `url` (of this receiver), in one of its turns, as
    /// `content_type`, with the headers `headers` says; `Ok` only for a 2xx answer.
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
        let CallbackHeaders {
            bearer,
            standard,
            domain,
            redelivery,
            timestamp,
        } = headers;
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
        // Read a little of the answer so the connection can go back to the pool; a longer
        // answer is cut off (the connection is then closed).
        let mut read = 0;
        while read < MAX_RESPONSE_BYTES {
            match resp.chunk().await {
                Ok(Some(chunk)) => read += chunk.len(),
                Ok(None) | Err(_) => break,
            }
        }
        if (200..300).contains(&status) {
            Ok(status)
        } else {
            Err(DeliveryError::Status(status))
        }
    }
}
