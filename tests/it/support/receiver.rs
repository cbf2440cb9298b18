//! `TestReceiver`: a real HTTP server on loopback that records every request and answers as
//! scripted (a status, a delay, a redirect).

use std::{
    collections::VecDeque,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, Method, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};
use hookrelay::{base::digest::Algorithm, callback_checksum};

use super::{PATIENCE, SECRET};

/// How the receiver answers one request.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    Status(u16),
    /// Waits, then answers with the status.
    Delay(Duration, u16),
    /// 302 to this location.
    Redirect(String),
    /// The status (429, 503) with this `Retry-After`.
    Busy(u16, String),
}

/// One request as received.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub method: Method,
    /// Path and query as sent.
    pub uri: String,
    pub headers: HeaderMap,
    pub body: String,
    /// The status the receiver answered.
    pub status: u16,
    /// When it arrived.
    pub at: std::time::Instant,
}

impl Received {
    /// A form field of the body.
    pub(crate) fn field(&self, name: &str) -> Option<String> {
        form_urlencoded::parse(self.body.as_bytes())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }

    pub(crate) fn event(&self) -> String {
        self.field("event").expect("event field")
    }

    pub(crate) fn timestamp(&self) -> u64 {
        self.field("timestamp")
            .and_then(|t| t.parse().ok())
            .expect("timestamp field")
    }

    /// Checks the checksum as an integrator would: sha1 of registered URL + raw body + secret.
    pub(crate) fn assert_signed(&self, registered_url: &str) {
        let (path, checksum) = self
            .uri
            .rsplit_once("checksum=")
            .expect("checksum parameter");
        let expected = callback_checksum(Algorithm::Sha1, registered_url, &self.body, SECRET);
        assert_eq!(checksum, expected, "signature of {path}");
        assert!(
            registered_url.ends_with(path.trim_end_matches(['?', '&'])),
            "{path} vs {registered_url}"
        );
    }
}

#[derive(Default)]
struct Inner {
    received: Mutex<Vec<Received>>,
    script: Mutex<VecDeque<Reply>>,
    default: Mutex<Option<Reply>>,
    /// Paths starting with this get that status, whatever the script says.
    by_prefix: Mutex<Option<(String, u16)>>,
    /// By path: requests being answered now, and the most there ever were at once.
    in_flight: Mutex<std::collections::HashMap<String, (usize, usize)>>,
}

/// The key of [`TestReceiver::max_in_flight`] that counts every path together.
pub(crate) const ALL_PATHS: &str = "*";

/// Counts one request of a path (and of all paths) as in flight while it lives.
struct InFlight {
    inner: Arc<Inner>,
    path: String,
}

impl InFlight {
    fn new(inner: &Arc<Inner>, path: &str) -> Self {
        let mut map = inner.in_flight.lock().unwrap();
        for key in [path, ALL_PATHS] {
            let (now, most) = map.entry(key.to_string()).or_default();
            *now += 1;
            *most = (*most).max(*now);
        }
        Self {
            inner: inner.clone(),
            path: path.to_string(),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut map = self.inner.in_flight.lock().unwrap();
        for key in [self.path.as_str(), ALL_PATHS] {
            if let Some((now, _)) = map.get_mut(key) {
                *now -= 1;
            }
        }
    }
}

pub(crate) struct TestReceiver {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    _server: tokio::task::JoinHandle<()>,
}

impl TestReceiver {
    pub(crate) async fn start() -> Self {
        Self::start_on("127.0.0.1").await
    }

    /// A receiver listening on `ip` (`0.0.0.0`: every address; then [`url`](Self::url) names
    /// 127.0.0.1).
    pub(crate) async fn start_on(ip: &str) -> Self {
        let inner = Arc::new(Inner::default());
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.expect("bind");
        let mut addr = listener.local_addr().expect("addr");
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let app = Router::new().fallback(handle).with_state(inner.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            addr,
            inner,
            _server: server,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Answers the next requests with these replies, in order (then the default).
    pub(crate) fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.inner.script.lock().unwrap().extend(replies);
    }

    /// The answer once the script is used up (200 unless set).
    pub(crate) fn set_default(&self, reply: Reply) {
        *self.inner.default.lock().unwrap() = Some(reply);
    }

    /// Answers every request whose path starts with `prefix` with `status`.
    pub(crate) fn status_for_prefix(&self, prefix: &str, status: u16) {
        *self.inner.by_prefix.lock().unwrap() = Some((prefix.to_string(), status));
    }

    /// Ends [`status_for_prefix`](Self::status_for_prefix): the script and default answer again.
    #[allow(dead_code)]
    pub(crate) fn clear_status_for_prefix(&self) {
        *self.inner.by_prefix.lock().unwrap() = None;
    }

    pub(crate) fn received(&self) -> Vec<Received> {
        self.inner.received.lock().unwrap().clone()
    }

    /// The most requests to `path` ([`ALL_PATHS`]: to any) that were ever being answered at
    /// once.
    #[allow(dead_code)]
    pub(crate) fn max_in_flight(&self, path: &str) -> usize {
        self.inner
            .in_flight
            .lock()
            .unwrap()
            .get(path)
            .map_or(0, |(_, most)| *most)
    }

    /// Requests answered with 2xx.
    pub(crate) fn delivered(&self) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| (200..300).contains(&r.status))
            .collect()
    }

    /// The user names of the events delivered to `path`, in order.
    #[allow(dead_code)]
    pub(crate) fn names_at(&self, path: &str) -> Vec<String> {
        self.delivered()
            .iter()
            .filter(|r| r.uri.split('?').next() == Some(path))
            .map(|r| super::user_name(&r.event()))
            .collect()
    }

    /// How many requests were answered with 2xx (cheap: nothing is copied).
    pub(crate) fn delivered_count(&self) -> usize {
        let received = self.inner.received.lock().unwrap();
        received
            .iter()
            .filter(|r| (200..300).contains(&r.status))
            .count()
    }

    /// Waits until `n` requests were answered with 2xx, and returns them.
    pub(crate) async fn wait_delivered(&self, n: usize) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if self.delivered_count() >= n {
                return self.delivered();
            }
            let got = self.delivered();
            assert!(
                tokio::time::Instant::now() < deadline,
                "expected {n} deliveries, got {}: {:?}",
                got.len(),
                got.iter().map(|r| r.event()).collect::<Vec<_>>()
            );
            // The loop's pace: it polls until `n` requests were answered with 2xx.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let _in_flight = InFlight::new(&inner, uri.path());
    let by_prefix = inner
        .by_prefix
        .lock()
        .unwrap()
        .as_ref()
        .filter(|(p, _)| uri.path().starts_with(p.as_str()))
        .map(|(_, s)| Reply::Status(*s));
    let reply = by_prefix
        .or_else(|| inner.script.lock().unwrap().pop_front())
        .or_else(|| inner.default.lock().unwrap().clone())
        .unwrap_or(Reply::Status(200));
    let status = match &reply {
        Reply::Status(s) | Reply::Delay(_, s) | Reply::Busy(s, _) => *s,
        Reply::Redirect(_) => 302,
    };
    inner.received.lock().unwrap().push(Received {
        method,
        uri: uri.to_string(),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        status,
        at: std::time::Instant::now(),
    });
    match reply {
        Reply::Status(s) => StatusCode::from_u16(s).unwrap().into_response(),
        Reply::Delay(d, s) => {
            // Part of the scenario: a receiver told to answer late (Reply::Delay).
            tokio::time::sleep(d).await;
            StatusCode::from_u16(s).unwrap().into_response()
        }
        Reply::Redirect(to) => (StatusCode::FOUND, [(header::LOCATION, to)]).into_response(),
        Reply::Busy(s, after) => (
            StatusCode::from_u16(s).unwrap(),
            [(header::RETRY_AFTER, after)],
        )
            .into_response(),
    }
}
