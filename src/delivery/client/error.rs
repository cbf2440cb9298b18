//! Why one attempt failed: each way a callback can fail, its metric label and what the retry
//! schedule reads of it.

use std::time::Duration;

/// Why one attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("receiver answered HTTP {0}")]
    Status(u16),
    /// Not tried: the receiver's circuit is open ([`super::super::circuit`]); look again after this.
    #[error("not tried: the receiver is unreachable, its circuit is open (next look in {} s)", retry_in.as_secs_f64())]
    CircuitOpen { retry_in: Duration },
    /// A 429 or 503 whose `Retry-After` asked for this wait.
    #[error("receiver answered HTTP {status} and asked to wait {} s", retry_after.as_secs_f64())]
    AskedToWait { status: u16, retry_after: Duration },
    #[error("no answer within the request timeout")]
    Timeout,
    #[error("could not connect: {0}")]
    Connect(String),
    #[error("request failed: {0}")]
    Request(String),
    /// The SSRF guard refused the callback's address.
    #[error("{0}")]
    Blocked(String),
}

impl DeliveryError {
    /// Every failure is retried by the schedule; kept as a method so that a future non-retryable
    /// case has one place to go.
    pub fn should_retry(&self) -> bool {
        true
    }

    /// A bounded metric label.
    pub fn reason(&self) -> String {
        match self {
            Self::Status(code) | Self::AskedToWait { status: code, .. } => code.to_string(),
            Self::Timeout => "timeout".into(),
            Self::Connect(_) => "connect".into(),
            Self::Request(_) => "request".into(),
            Self::Blocked(_) => "blocked".into(),
            Self::CircuitOpen { .. } => "circuit_open".into(),
        }
    }

    /// The HTTP status it was, if any.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Status(code) | Self::AskedToWait { status: code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether it says the receiver could not be reached (for its circuit).
    pub(super) fn unreachable(&self) -> bool {
        matches!(self, Self::Timeout | Self::Connect(_) | Self::Request(_))
    }

    /// The wait a busy receiver asked for (`Retry-After` of a 429 or 503).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::AskedToWait { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    pub(super) fn from_reqwest(e: &reqwest::Error) -> Self {
        let chain = crate::base::error_text(e);
        if e.is_timeout() {
            Self::Timeout
        } else if let Some(i) = chain.find("blocked: ") {
            Self::Blocked(chain[i..].to_string())
        } else if e.is_connect() {
            Self::Connect(crate::base::error_text(e))
        } else {
            Self::Request(crate::base::error_text(e))
        }
    }
}
