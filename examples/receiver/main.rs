//! A minimal receiver of hookrelay (and bbb-webhooks) callbacks, for integrators to start from:
//! it checks each callback's checksum and prints its event, one line per callback.
//!
//! ```text
//! cargo run --example receiver -- --listen 127.0.0.1:8080 \
//!     --callback-url http://127.0.0.1:8080/bbb --secret "$(bbb-conf --secret | ...)"
//! ```
//!
//! The checksum is the hex digest of the callback URL exactly as registered (without the
//! `checksum` parameter the relay adds), the raw body exactly as received, and the shared
//! secret: sha1 by default, sha256 when the relay is set to it (told apart by length).

use std::net::SocketAddr;

use axum::{Router, body::Bytes, extract::State, http::StatusCode, http::Uri};
use clap::Parser;
use sha1::Sha1;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

#[derive(Parser, Clone)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The callback URL exactly as registered with hooks/create.
    #[arg(long)]
    callback_url: String,
    /// The server's shared secret.
    #[arg(long, env = "BBB_SECRET", hide_env_values = true)]
    secret: String,
}

/// The `checksum` query parameter of a request, if any.
fn checksum_of(uri: &Uri) -> Option<String> {
    form_urlencoded::parse(uri.query()?.as_bytes())
        .find(|(k, _)| k == "checksum")
        .map(|(_, v)| v.into_owned())
}

fn expected(alg_len: usize, url: &str, body: &[u8], secret: &str) -> Option<String> {
    fn digest<D: Digest>(url: &str, body: &[u8], secret: &str) -> String {
        let mut d = D::new();
        d.update(url.as_bytes());
        d.update(body);
        d.update(secret.as_bytes());
        hex::encode(d.finalize())
    }
    match alg_len {
        40 => Some(digest::<Sha1>(url, body, secret)),
        64 => Some(digest::<Sha256>(url, body, secret)),
        _ => None,
    }
}

/// One line about the event: its id, its meeting's external id and the callback's timestamp.
fn describe(body: &[u8]) -> String {
    let field = |name: &str| {
        form_urlencoded::parse(body)
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    let event: serde_json::Value = field("event")
        .and_then(|e| serde_json::from_str(&e).ok())
        .unwrap_or_default();
    // bbb-webhooks sends a one-element array, hookrelay an object.
    let event = event.get(0).unwrap_or(&event);
    let data = &event["data"];
    let meeting = &data["attributes"]["meeting"]["external-meeting-id"];
    format!(
        "event {} meeting {} timestamp {}",
        data["id"].as_str().unwrap_or("?"),
        meeting.as_str().unwrap_or("-"),
        field("timestamp").unwrap_or_default()
    )
}

async fn callback(State(args): State<Args>, uri: Uri, body: Bytes) -> StatusCode {
    let Some(checksum) = checksum_of(&uri) else {
        println!("refused: no checksum");
        return StatusCode::UNAUTHORIZED;
    };
    let good = expected(checksum.len(), &args.callback_url, &body, &args.secret)
        .is_some_and(|e| bool::from(e.as_bytes().ct_eq(checksum.as_bytes())));
    if !good {
        println!("refused: bad checksum");
        return StatusCode::UNAUTHORIZED;
    }
    println!("verified {}", describe(&body));
    StatusCode::OK
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    println!("listening on {}", listener.local_addr()?);
    let app = Router::new().fallback(callback).with_state(args);
    axum::serve(listener, app).await
}
