//! `BadReceiver`: a raw TCP server on loopback that misbehaves on purpose: never answers,
//! resets the connection, answers one byte a second, or sends an endless body.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

#[derive(Debug, Clone, Copy)]
pub(crate) enum Misbehaviour {
    /// Reads the request and never answers.
    Hang,
    /// Reads the request and resets the connection.
    Reset,
    /// Answers `200 OK` one byte a second.
    Trickle,
    /// Answers `200 OK` with an endless body.
    Huge,
}

pub(crate) struct BadReceiver {
    pub addr: SocketAddr,
    /// Connections accepted.
    pub connections: Arc<AtomicU64>,
    /// Bytes written to the relay.
    pub written: Arc<AtomicU64>,
    /// Set: it behaves, answering every request `200 OK` (counted in `answered`).
    pub healed: Arc<std::sync::atomic::AtomicBool>,
    pub answered: Arc<AtomicU64>,
}

impl BadReceiver {
    pub(crate) async fn start(mode: Misbehaviour) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let connections = Arc::new(AtomicU64::new(0));
        let written = Arc::new(AtomicU64::new(0));
        let healed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let answered = Arc::new(AtomicU64::new(0));
        let (c, w, h, a) = (
            connections.clone(),
            written.clone(),
            healed.clone(),
            answered.clone(),
        );
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                if h.load(Ordering::SeqCst) {
                    tokio::spawn(behave(stream, a.clone()));
                } else {
                    tokio::spawn(serve(stream, mode, w.clone()));
                }
            }
        });
        Self {
            addr,
            connections,
            written,
            healed,
            answered,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/bad", self.addr)
    }
}

/// Answers each request on the connection `200 OK` (keep-alive).
async fn behave(mut stream: TcpStream, answered: Arc<AtomicU64>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        answered.fetch_add(1, Ordering::SeqCst);
        if stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
    }
}

async fn serve(mut stream: TcpStream, mode: Misbehaviour, written: Arc<AtomicU64>) {
    let mut buf = vec![0u8; 64 * 1024];
    // Read the request head and body (the relay sends small bodies).
    let _ = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf)).await;
    match mode {
        Misbehaviour::Hang => tokio::time::sleep(Duration::from_secs(3600)).await,
        Misbehaviour::Reset => {
            let _ = stream.set_zero_linger();
            drop(stream);
        }
        Misbehaviour::Trickle => {
            for b in b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n" {
                if stream.write_all(&[*b]).await.is_err() {
                    return;
                }
                written.fetch_add(1, Ordering::SeqCst);
                // Part of the scenario: the trickle, one byte a second.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        Misbehaviour::Huge => {
            let head = b"HTTP/1.1 200 OK\r\ncontent-length: 1099511627776\r\n\r\n";
            if stream.write_all(head).await.is_err() {
                return;
            }
            let chunk = vec![b'x'; 64 * 1024];
            while stream.write_all(&chunk).await.is_ok() {
                written.fetch_add(chunk.len() as u64, Ordering::SeqCst);
            }
        }
    }
}
