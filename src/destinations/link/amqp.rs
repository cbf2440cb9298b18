//! An AMQP 0-9-1 destination (RabbitMQ): each message published to its exchange with its
//! routing key, persistent, with `message_id` (for deduplication), `type` (the event id), a
//! content type and the event's headers, on a channel in confirm mode: counted once the broker
//! acknowledged it.

use std::time::Duration;

use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ErrorKind,
    options::{BasicPublishOptions, ConfirmSelectOptions},
    protocol::{AMQPErrorKind, AMQPSoftError},
    tcp::OwnedTLSConfig,
    types::{AMQPValue, FieldTable, LongString, ShortString},
};

use super::{Endpoint, Failure, header_value};
use crate::destinations::Message;

/// How long a connection (TCP, TLS, the handshake, the channel) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) struct AmqpLink {
    endpoint: Endpoint,
    name: String,
    open: Option<(Connection, Channel)>,
}

impl AmqpLink {
    pub(crate) fn new(endpoint: Endpoint, name: &str) -> Self {
        Self {
            endpoint,
            name: name.to_string(),
            open: None,
        }
    }

    pub(crate) async fn publish(&mut self, m: &Message) -> Result<(), Failure> {
        let (exchange, key) = m.target.split_once('/').unwrap_or((&m.target, ""));
        let short = |s: &str, what: &str| {
            ShortString::try_new(s.to_string()).map_err(|_| {
                Failure::TooLarge(format!("its {what} is longer than AMQP's 255 bytes"))
            })
        };
        let (exchange, key) = (short(exchange, "exchange")?, short(key, "routing key")?);
        let mut headers = FieldTable::default();
        for (name, value) in m.headers() {
            headers.insert(
                name.into(),
                AMQPValue::LongString(LongString::from(header_value(value))),
            );
        }
        let properties = BasicProperties::default()
            .with_message_id(short(&m.id, "id")?)
            .with_content_type("application/json".into())
            .with_type(short(&header_value(&m.event), "event id")?)
            .with_delivery_mode(2)
            .with_timestamp(m.queued_ms / 1000)
            .with_app_id("hookrelay".into())
            .with_headers(headers);
        let channel = self.channel().await?;
        let confirm = channel
            .basic_publish(
                exchange,
                key,
                BasicPublishOptions::default(),
                m.body.as_bytes(),
                properties,
            )
            .await
            .map_err(failure)?;
        match confirm.await.map_err(failure)? {
            Confirmation::Ack(_) => Ok(()),
            Confirmation::Nack(_) => Err(Failure::Nack("the broker nacked it".into())),
            Confirmation::NotRequested => Err(Failure::Nack("no confirmation".into())),
        }
    }

    pub(crate) async fn reset(&mut self) {
        if let Some((connection, _)) = self.open.take() {
            let _ = tokio::time::timeout(
                Duration::from_secs(1),
                connection.close(200, "hookrelay reconnects".into()),
            )
            .await;
        }
    }

    async fn channel(&mut self) -> Result<&Channel, Failure> {
        if self.open.is_none() {
            let tls = OwnedTLSConfig {
                identity: None,
                cert_chain: self
                    .endpoint
                    .ca_pem
                    .as_ref()
                    .map(|pem| String::from_utf8_lossy(pem).into_owned()),
            };
            let properties = ConnectionProperties::default()
                .with_connection_name(format!("hookrelay destination {}", self.name).into());
            let open = async {
                let runtime = lapin::runtime::default_runtime().map_err(failure)?;
                let connection = Connection::connect_with_config(
                    self.endpoint.url.as_str(),
                    properties,
                    tls,
                    runtime,
                )
                .await
                .map_err(connect_failure)?;
                let channel = connection.create_channel().await.map_err(failure)?;
                channel
                    .confirm_select(ConfirmSelectOptions::default())
                    .await
                    .map_err(failure)?;
                Ok::<_, Failure>((connection, channel))
            };
            let open = tokio::time::timeout(CONNECT_TIMEOUT, open)
                .await
                .map_err(|_| Failure::Connect("no answer".into()))??;
            self.open = Some(open);
        }
        self.open
            .as_ref()
            .map(|(_, channel)| channel)
            .ok_or_else(|| Failure::Connect("not connected".into()))
    }
}

fn connect_failure(e: lapin::Error) -> Failure {
    match failure(e) {
        Failure::Io(why) => Failure::Connect(why),
        other => other,
    }
}

fn failure(e: lapin::Error) -> Failure {
    if let ErrorKind::ProtocolError(amqp) = e.kind() {
        let text = amqp.get_message().to_string();
        return match amqp.kind() {
            AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND) => Failure::NotFound(text),
            AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED) => Failure::Auth(text),
            AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED)
                if text.contains("message size") =>
            {
                Failure::TooLarge(text)
            }
            _ => Failure::Nack(format!("{e}")),
        };
    }
    if let ErrorKind::AuthProviderError(why) = e.kind() {
        return Failure::Auth(why.clone());
    }
    Failure::Io(e.to_string())
}
