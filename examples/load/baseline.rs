//! `baseline`: the loopback limit one ordered hook is measured against. A bare client loop (the
//! relay's HTTP client crate, one connection, one request in flight, no queue, no signing) posts
//! bodies of a callback's size to the load tool's lean receiver, from a process of its own as
//! the relay is. `burst --hooks 1` measures it in every run, against the same receiver.

use std::time::{Duration, Instant};

use crate::{scenario::Figures, sink::Sink};

/// The figure the bare loop prints, read back by [`measure`].
const FIGURE: &str = "posts_per_s=";

/// The size of a relay's `user-joined` callback to the lean receiver (a form body with the
/// event, its timestamp and the domain), used when no relay run gave one.
pub(crate) const CALLBACK_BYTES: usize = 620;

/// The `baseline` scenario: a lean receiver and the bare loop, nothing else.
pub(crate) async fn run(requests: usize, body_bytes: usize) -> Figures {
    let sink = Sink::start(Duration::ZERO).await;
    let posts = measure(&sink, requests, body_bytes).await;
    let mut f = Figures {
        ok: posts.is_some() && sink.count() == requests + 1,
        ..Figures::default()
    };
    f.push("posts_per_s", posts.unwrap_or(0.0));
    f.push("us_per_post", posts.map_or(0.0, |p| 1e6 / p));
    f
}

/// Runs the bare loop (this tool again, as `post-loop`) against `sink`: POSTs per second, or
/// `None` when it failed.
pub(crate) async fn measure(sink: &Sink, requests: usize, body_bytes: usize) -> Option<f64> {
    let exe = std::env::current_exe().ok()?;
    let out = tokio::process::Command::new(exe)
        .arg("post-loop")
        .arg("--url")
        .arg(sink.url("/baseline"))
        .arg("--requests")
        .arg(requests.to_string())
        .arg("--body-bytes")
        .arg(body_bytes.to_string())
        .output()
        .await
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "the baseline loop failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(FIGURE)?.trim().parse().ok())
}

/// The bare loop itself (`load post-loop`): one task on one thread posting `requests` bodies of
/// `body_bytes` one after the other (after one to open the connection), then the rate on stdout.
pub(crate) fn post_loop(url: &str, requests: usize, body_bytes: usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // As the relay does: reqwest is built without a bundled crypto provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .no_proxy()
            .build()
            .expect("a client");
        let body = bytes::Bytes::from(vec![b'x'; body_bytes]);
        let post = || async {
            let resp = client
                .post(url)
                .header(
                    reqwest::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                )
                .body(body.clone())
                .send()
                .await
                .expect("the receiver answers");
            assert!(
                resp.status().is_success(),
                "the receiver said {}",
                resp.status()
            );
            resp.bytes().await.expect("the answer");
        };
        post().await;
        let start = Instant::now();
        for _ in 0..requests {
            post().await;
        }
        println!(
            "{FIGURE}{}",
            requests as f64 / start.elapsed().as_secs_f64()
        );
    });
}
