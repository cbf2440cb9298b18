//! A NATS JetStream destination: each message published to its subject with `Nats-Msg-Id`
//! (JetStream's deduplication) and the event's headers, counted once JetStream's PubAck says
//! a stream stored it.

use std::time::Duration;

use async_nats::{
    ConnectErrorKind, HeaderMap,
    jetstream::{self, context::PublishErrorKind},
};

use super::{Endpoint, Failure, header_value};
use crate::destinations::Message;

/// How long a connection (TCP, TLS, the server's handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct NatsLink {
    endpoint: Endpoint,
    name: String,
    open: Option<jetstream::Context>,
}

impl NatsLink {
    pub(crate) fn new(endpoint: Endpoint, name: &str) -> Self {
        Self {
            endpoint,
            name: name.to_string(),
            open: None,
        }
    }

    pub(crate) async fn publish(&mut self, m: &Message) -> Result<(), Failure> {
        let js = self.context().await?;
        let mut headers = HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, header_value(&m.id));
        headers.insert("Content-Type", "application/json");
        for (name, value) in m.headers() {
            headers.insert(name, header_value(value));
        }
        let ack = js
            .publish_with_headers(m.target.clone(), headers, m.body.clone().into())
            .await
            .map_err(publish_failure)?;
        ack.await.map_err(publish_failure)?;
        Ok(())
    }

    pub(crate) fn reset(&mut self) {
        self.open = None;
    }

    async fn context(&mut self) -> Result<&jetstream::Context, Failure> {
        if self.open.is_none() {
            let url = &self.endpoint.url;
            let mut options = async_nats::ConnectOptions::new()
                .name(format!("hookrelay destination {}", self.name))
                .connection_timeout(CONNECT_TIMEOUT);
            // The client does not read credentials from the URL: they are given here.
            if let Some((user, password)) = self.endpoint.credentials() {
                options = match password.is_empty() {
                    true => options.token(user),
                    false => options.user_and_password(user, password),
                };
            }
            if let Some(ca) = &self.endpoint.ca_file {
                options = options.add_root_certificates(ca.clone()).require_tls(true);
            }
            if url.scheme() == "tls" {
                options = options.require_tls(true);
            }
            let address = format!(
                "{}://{}:{}",
                url.scheme(),
                url.host_str().unwrap_or_default(),
                url.port().unwrap_or(4222)
            );
            let client = tokio::time::timeout(CONNECT_TIMEOUT * 2, connect(options, &address))
                .await
                .map_err(|_| Failure::Connect("no answer".into()))??;
            self.open = Some(jetstream::new(client));
        }
        self.open
            .as_ref()
            .ok_or_else(|| Failure::Connect("not connected".into()))
    }
}

/// Connects once (a failure is the sender's to retry, on its schedule).
async fn connect(
    options: async_nats::ConnectOptions,
    address: &str,
) -> Result<async_nats::Client, Failure> {
    options
        .max_reconnects(Some(1))
        .connect(address)
        .await
        .map_err(|e| match e.kind() {
            ConnectErrorKind::Authentication | ConnectErrorKind::AuthorizationViolation => {
                Failure::Auth(e.to_string())
            }
            _ => Failure::Connect(e.to_string()),
        })
}

fn publish_failure(e: async_nats::jetstream::context::PublishError) -> Failure {
    match e.kind() {
        PublishErrorKind::StreamNotFound => {
            Failure::NotFound("no JetStream stream takes this subject".into())
        }
        PublishErrorKind::TimedOut => Failure::Timeout,
        PublishErrorKind::MaxPayloadExceeded => Failure::TooLarge(e.to_string()),
        _ if e.to_string().contains("maximum message size") => Failure::TooLarge(e.to_string()),
        _ => Failure::Nack(e.to_string()),
    }
}
