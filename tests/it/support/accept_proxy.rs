//! `AcceptProxy`: a forward HTTP proxy for a scraper that passes each request on with its
//! `Accept` header replaced, and notes the content type each answer came in. Prometheus 2.42
//! always asks for OpenMetrics first; scraping through this proxy (`proxy_url`), it gets what a
//! scraper that asks for the text format (Telegraf, vmagent) gets.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

pub(crate) struct AcceptProxy {
    pub(crate) addr: SocketAddr,
    answered: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl AcceptProxy {
    /// A proxy on a free loopback port that asks every target with `Accept: accept`.
    pub(crate) async fn start(accept: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let answered = Arc::new(Mutex::new(Vec::new()));
        let (accept, noted) = (accept.to_string(), answered.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (accept, noted) = (accept.clone(), noted.clone());
                tokio::spawn(async move {
                    if let Some(content_type) = pass_on(client, &accept).await {
                        noted.lock().expect("lock").push(content_type);
                    }
                });
            }
        });
        Self {
            addr,
            answered,
            task,
        }
    }

    /// The content types of the answers passed back so far.
    pub(crate) fn answered(&self) -> Vec<String> {
        self.answered.lock().expect("lock").clone()
    }
}

impl Drop for AcceptProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads up to the end of an HTTP head (`\r\n\r\n`).
async fn head(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = got.split_off(end + 4);
            return Some((String::from_utf8(got).ok()?, rest));
        }
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
    }
}

/// One request (a scrape is a body-less GET) in absolute form, passed on with `Accept`
/// replaced and the connection closed after it; the answer passed back as it came. Gives the
/// answer's content type.
async fn pass_on(mut client: TcpStream, accept: &str) -> Option<String> {
    let (request, _) = head(&mut client).await?;
    let mut lines = request.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target, version) = (first.next()?, first.next()?, first.next()?);
    let rest = target.strip_prefix("http://")?;
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut out = format!("{method} {path} {version}\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !matches!(name.as_str(), "accept" | "connection") && !name.starts_with("proxy-") {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str(&format!("Accept: {accept}\r\nConnection: close\r\n\r\n"));
    let mut upstream = TcpStream::connect(host).await.ok()?;
    upstream.write_all(out.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    upstream.read_to_end(&mut answer).await.ok()?;
    client.write_all(&answer).await.ok()?;
    client.shutdown().await.ok()?;
    let text = String::from_utf8_lossy(&answer);
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    head.split("\r\n")
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_string())
        })
        .or(Some(String::new()))
}
