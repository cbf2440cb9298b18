//! The connection of one destination to its broker (or file): [`Link::publish`] sends one
//! message and returns once the broker confirmed it; a failure says why ([`Failure`]), and
//! [`Link::reset`] drops the connection so that the next try makes a new one.

mod amqp;
mod file;
mod mqtt;
mod nats;

use std::path::PathBuf;

use super::Message;
use crate::config::destinations::{DestinationConfig, DestinationKind};

/// Why a publish failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("the broker refused the credentials: {0}")]
    Auth(String),
    #[error("{0}")]
    NotFound(String),
    #[error("no confirmation within publish_timeout_ms")]
    Timeout,
    #[error("the broker did not take the message: {0}")]
    Nack(String),
    #[error("{0}")]
    Io(String),
    /// Over the broker's limit: the message can never be published.
    #[error("larger than the broker takes: {0}")]
    TooLarge(String),
}

impl Failure {
    /// The `reason` label of the failure.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::Connect(_) => "connect",
            Self::Auth(_) => "auth",
            Self::NotFound(_) => "not_found",
            Self::Timeout => "timeout",
            Self::Nack(_) => "nack",
            Self::Io(_) => "io",
            Self::TooLarge(_) => "too_large",
        }
    }
}

/// Why a destination cannot be set up at all.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SetupError {
    #[error("url: {0}")]
    Url(String),
    #[error("cannot read {path}: {error}")]
    File {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// Where a broker is and how to prove who the relay is: its URL with the password of
/// `password_file` put in, and the CAs of `ca_file`.
pub(crate) struct Endpoint {
    pub(crate) url: url::Url,
    pub(crate) ca_file: Option<PathBuf>,
    pub(crate) ca_pem: Option<Vec<u8>>,
}

impl Endpoint {
    fn of(config: &DestinationConfig) -> Result<Self, SetupError> {
        let mut url =
            url::Url::parse(config.url.expose()).map_err(|e| SetupError::Url(e.to_string()))?;
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|error| SetupError::File {
                path: path.clone(),
                error,
            })
        };
        if let Some(path) = &config.password_file {
            let text = String::from_utf8_lossy(&read(path)?)
                .trim_end_matches(['\n', '\r'])
                .to_string();
            url.set_password(Some(&text))
                .map_err(|()| SetupError::Url("cannot hold a password".into()))?;
        }
        let ca_pem = config.ca_file.as_ref().map(read).transpose()?;
        Ok(Self {
            url,
            ca_file: config.ca_file.clone(),
            ca_pem,
        })
    }

    /// The user name and password, percent-decoded.
    pub(crate) fn credentials(&self) -> Option<(String, String)> {
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        (!self.url.username().is_empty()).then(|| {
            (
                decode(self.url.username()),
                decode(self.url.password().unwrap_or_default()),
            )
        })
    }
}

/// `value` fit for a header: control characters (line ends) become spaces.
pub(crate) fn header_value(value: &str) -> String {
    value
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// One destination's link.
pub(crate) enum Link {
    File(file::FileLink),
    Nats(nats::NatsLink),
    Amqp(amqp::AmqpLink),
    Mqtt(mqtt::MqttLink),
}

impl Link {
    /// The link of a (validated) destination; it connects on its first publish.
    ///
    /// # Errors
    /// When its URL is unusable or its password or CA file cannot be read.
    pub(crate) fn new(config: &DestinationConfig) -> Result<Self, SetupError> {
        let endpoint = Endpoint::of(config)?;
        Ok(match config.kind() {
            Some(DestinationKind::File) => Self::File(file::FileLink::new(
                endpoint
                    .url
                    .to_file_path()
                    .map_err(|()| SetupError::Url("not a file's path".into()))?,
            )),
            Some(DestinationKind::Nats) => Self::Nats(nats::NatsLink::new(endpoint, &config.name)),
            Some(DestinationKind::Amqp) => Self::Amqp(amqp::AmqpLink::new(endpoint, &config.name)),
            Some(DestinationKind::Mqtt) => Self::Mqtt(mqtt::MqttLink::new(endpoint, &config.name)),
            None => return Err(SetupError::Url("an unknown scheme".into())),
        })
    }

    /// Publishes `m`; `Ok` once the broker confirmed it.
    pub(crate) async fn publish(&mut self, m: &Message) -> Result<(), Failure> {
        match self {
            Self::File(l) => l.publish(m).await,
            Self::Nats(l) => l.publish(m).await,
            Self::Amqp(l) => l.publish(m).await,
            Self::Mqtt(l) => l.publish(m).await,
        }
    }

    /// Drops the connection: the next publish makes a new one.
    pub(crate) async fn reset(&mut self) {
        match self {
            Self::File(l) => l.reset(),
            Self::Nats(l) => l.reset(),
            Self::Amqp(l) => l.reset().await,
            Self::Mqtt(l) => l.reset(),
        }
    }
}
