//! An MQTT 5 destination: each message published to its topic at QoS 1, with its id, the
//! event's headers as user properties and a content type, counted once the broker's PUBACK
//! says it took it. The client's event loop runs on a task of its own while connected, so
//! that its keep-alive goes on between messages.

use std::time::Duration;

use rumqttc::{
    Outgoing,
    v5::{
        AsyncClient, ConnectionError, Event, EventLoop, MqttOptions, StateError,
        mqttbytes::{
            self, QoS,
            v5::{ConnectReturnCode, Packet, PubAckReason, PublishProperties},
        },
    },
};
use tokio::{sync::mpsc, task::JoinHandle};

use super::{Endpoint, Failure, header_value};
use crate::destinations::Message;

/// How long a connection (TCP, TLS, CONNACK) may take, in seconds.
const CONNECT_TIMEOUT_S: u64 = 10;

/// What the event loop's task tells the publisher.
#[derive(Debug)]
enum Told {
    /// The packet id given to the publish just sent.
    Sent(u16),
    /// The broker's answer to publish `pkid`.
    Acked(u16, PubAckReason),
    /// The connection failed (the task ends).
    Failed(Failure),
}

pub(crate) struct MqttLink {
    endpoint: Endpoint,
    name: String,
    open: Option<Open>,
}

struct Open {
    client: AsyncClient,
    told: mpsc::UnboundedReceiver<Told>,
    task: JoinHandle<()>,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MqttLink {
    pub(crate) fn new(endpoint: Endpoint, name: &str) -> Self {
        Self {
            endpoint,
            name: name.to_string(),
            open: None,
        }
    }

    pub(crate) async fn publish(&mut self, m: &Message) -> Result<(), Failure> {
        let mut user_properties = vec![("message-id".to_string(), m.id.clone())];
        user_properties.extend(
            m.headers()
                .map(|(k, v)| (k.to_ascii_lowercase(), header_value(v))),
        );
        let properties = PublishProperties {
            content_type: Some("application/json".into()),
            user_properties,
            ..PublishProperties::default()
        };
        let open = self.open()?;
        open.client
            .publish_with_properties(
                m.target.clone(),
                QoS::AtLeastOnce,
                false,
                m.body.clone(),
                properties,
            )
            .await
            .map_err(|e| Failure::Io(e.to_string()))?;
        let mut ours = None;
        loop {
            match open.told.recv().await {
                Some(Told::Sent(pkid)) if ours.is_none() => ours = Some(pkid),
                Some(Told::Acked(pkid, reason)) if Some(pkid) == ours => {
                    return match reason {
                        PubAckReason::Success | PubAckReason::NoMatchingSubscribers => Ok(()),
                        PubAckReason::NotAuthorized => {
                            Err(Failure::Auth(format!("the broker answered {reason:?}")))
                        }
                        _ => Err(Failure::Nack(format!("the broker answered {reason:?}"))),
                    };
                }
                Some(Told::Failed(f)) => return Err(f),
                Some(_) => {}
                None => return Err(Failure::Io("the connection ended".into())),
            }
        }
    }

    pub(crate) fn reset(&mut self) {
        self.open = None;
    }

    /// The connection, made (its task started) when there is none.
    fn open(&mut self) -> Result<&mut Open, Failure> {
        if self.open.is_none() {
            let url = &self.endpoint.url;
            let tls = url.scheme() == "mqtts";
            let port = url.port().unwrap_or(if tls { 8883 } else { 1883 });
            let mut options = MqttOptions::new(
                format!("hookrelay-{}", self.name),
                url.host_str().unwrap_or_default(),
                port,
            );
            options
                .set_keep_alive(Duration::from_secs(30))
                .set_connection_timeout(CONNECT_TIMEOUT_S)
                .set_clean_start(true);
            if let Some((user, password)) = self.endpoint.credentials() {
                options.set_credentials(user, password);
            }
            if tls {
                options.set_transport(transport(&self.endpoint)?);
            }
            let (client, events) = AsyncClient::new(options, 16);
            let (tx, told) = mpsc::unbounded_channel();
            let task = tokio::spawn(drive(events, tx));
            self.open = Some(Open { client, told, task });
        }
        self.open
            .as_mut()
            .ok_or_else(|| Failure::Connect("not connected".into()))
    }
}

/// TLS with the CAs of `ca_file`, else the system's roots.
fn transport(endpoint: &Endpoint) -> Result<rumqttc::Transport, Failure> {
    use rumqttc::{TlsConfiguration, Transport};
    if let Some(ca) = &endpoint.ca_pem {
        return Ok(Transport::tls_with_config(TlsConfiguration::Simple {
            ca: ca.clone(),
            alpn: None,
            client_auth: None,
        }));
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Transport::tls_with_config(TlsConfiguration::Rustls(
        std::sync::Arc::new(config),
    )))
}

/// Runs the client's event loop until its connection fails, telling what matters.
async fn drive(mut events: EventLoop, tx: mpsc::UnboundedSender<Told>) {
    loop {
        let told = match events.poll().await {
            Ok(Event::Outgoing(Outgoing::Publish(pkid))) => Told::Sent(pkid),
            Ok(Event::Incoming(Packet::PubAck(ack))) => Told::Acked(ack.pkid, ack.reason),
            Ok(_) => continue,
            Err(e) => {
                let _ = tx.send(Told::Failed(failure(e)));
                return;
            }
        };
        if tx.send(told).is_err() {
            return;
        }
    }
}

fn failure(e: ConnectionError) -> Failure {
    match e {
        ConnectionError::ConnectionRefused(
            code @ (ConnectReturnCode::BadUserNamePassword | ConnectReturnCode::NotAuthorized),
        ) => Failure::Auth(format!("the broker refused the connection: {code:?}")),
        ConnectionError::ConnectionRefused(code) => {
            Failure::Connect(format!("the broker refused the connection: {code:?}"))
        }
        ConnectionError::MqttState(StateError::Deserialization(
            mqttbytes::Error::OutgoingPacketTooLarge { pkt_size, max },
        )) => Failure::TooLarge(format!("{pkt_size} bytes, the broker takes {max}")),
        ConnectionError::Timeout(_) => Failure::Connect("no answer".into()),
        ConnectionError::Io(e) => Failure::Connect(e.to_string()),
        other => Failure::Io(other.to_string()),
    }
}
