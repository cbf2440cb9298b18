//! A lean receiver for the load tool: answers 200 (after an optional delay), counts with an
//! atomic and keeps each body with its arrival time, so that watching the count costs nothing
//! and the checks run once, after the clock stopped.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{Router, body::Bytes, extract::State, http::StatusCode};

#[derive(Default)]
struct Inner {
    got: Mutex<Vec<(Instant, Bytes)>>,
    count: AtomicUsize,
    delay: Duration,
    /// While set, requests wait, and are then answered 503 and not recorded.
    held: AtomicBool,
}

pub(crate) struct Sink {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
}

impl Sink {
    /// A receiver on a free loopback port that waits `delay` before each answer.
    pub(crate) async fn start(delay: Duration) -> Self {
        let inner = Arc::new(Inner {
            delay,
            ..Inner::default()
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = Router::new().fallback(receive).with_state(inner.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, inner }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub(crate) fn count(&self) -> usize {
        self.inner.count.load(Ordering::Acquire)
    }

    /// Holds (or releases) every request: a held one is never recorded.
    pub(crate) fn hold(&self, on: bool) {
        self.inner.held.store(on, Ordering::Release);
    }

    pub(crate) fn first_arrival(&self) -> Option<Instant> {
        self.inner
            .got
            .lock()
            .expect("sink lock")
            .first()
            .map(|g| g.0)
    }

    pub(crate) fn last_arrival(&self) -> Option<Instant> {
        self.inner
            .got
            .lock()
            .expect("sink lock")
            .last()
            .map(|g| g.0)
    }

    /// The size of the first callback's body.
    pub(crate) fn first_body_len(&self) -> Option<usize> {
        self.inner
            .got
            .lock()
            .expect("sink lock")
            .first()
            .map(|g| g.1.len())
    }

    /// Every callback so far: arrival time and the `user-joined` number it carries.
    pub(crate) fn arrivals(&self) -> Vec<(Instant, Option<usize>)> {
        let got = self.inner.got.lock().expect("sink lock");
        got.iter()
            .map(|(at, body)| (*at, user_number(body)))
            .collect()
    }
}

async fn receive(State(inner): State<Arc<Inner>>, body: Bytes) -> StatusCode {
    let at = Instant::now();
    if inner.held.load(Ordering::Acquire) {
        while inner.held.load(Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    if !inner.delay.is_zero() {
        tokio::time::sleep(inner.delay).await;
    }
    // Copied: the body may be a slice of the connection's read buffer, which it would keep
    // alive (a 100-hook run once grew the load tool to 23 GiB, and it was OOM-killed).
    let body = Bytes::copy_from_slice(&body);
    inner.got.lock().expect("sink lock").push((at, body));
    inner.count.fetch_add(1, Ordering::Release);
    StatusCode::OK
}

/// The `i` of the user named `user {i}` in a callback body.
fn user_number(body: &[u8]) -> Option<usize> {
    let (_, event) = form_urlencoded::parse(body).find(|(k, _)| k == "event")?;
    let json: serde_json::Value = serde_json::from_str(&event).ok()?;
    let name = json
        .pointer("/data/attributes/user/name")
        .or_else(|| json.pointer("/0/data/attributes/user/name"))?
        .as_str()?
        .strip_prefix("user ")?;
    name.parse().ok()
}
