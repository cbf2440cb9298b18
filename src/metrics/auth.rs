//! Access control for the metrics endpoints (`[metrics.auth]`): an optional bearer token and an
//! optional basic-auth pair, either accepted, compared in constant time. None configured: open
//! (the listener binds to localhost by default).

use std::sync::Arc;

use axum::{
    extract::{Request, State},
    http::{StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use base64::Engine;
use subtle::ConstantTimeEq;

use crate::config::MetricsAuth;

/// The `Authorization` header values that are let in.
#[derive(Clone, Default)]
pub(crate) struct Access {
    accepted: Vec<Vec<u8>>,
    /// What a refused request is told to send (`Bearer` and/or `Basic`).
    challenge: String,
    /// The body of a refusal.
    refusal: &'static str,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("accepted", &self.accepted.len())
            .finish()
    }
}

impl Access {
    pub(crate) fn new(auth: &MetricsAuth) -> Self {
        let mut access = Self::default();
        let mut challenges = Vec::new();
        if !auth.bearer_token.is_empty() {
            let value = format!("Bearer {}", auth.bearer_token.expose());
            access.accepted.push(value.into_bytes());
            challenges.push("Bearer realm=\"hookrelay\"");
        }
        if !auth.basic_user.is_empty() {
            let pair = format!("{}:{}", auth.basic_user, auth.basic_password.expose());
            let value = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            );
            access.accepted.push(value.into_bytes());
            challenges.push("Basic realm=\"hookrelay\"");
        }
        access.challenge = challenges.join(", ");
        access.refusal = "metrics need credentials\n";
        access
    }

    /// Access for calls with `Authorization: Bearer <token>`, or for a browser basic auth as
    /// user `admin` with the token as password (open when `token` is empty), telling a refused
    /// call `refusal`.
    pub(crate) fn bearer(token: &crate::config::Secret, refusal: &'static str) -> Self {
        let user = if token.is_empty() { "" } else { "admin" };
        let mut access = Self::new(&MetricsAuth {
            bearer_token: token.clone(),
            basic_user: user.into(),
            basic_password: token.clone(),
        });
        access.refusal = refusal;
        access
    }

    /// Whether no credentials are required.
    pub(crate) fn is_open(&self) -> bool {
        self.accepted.is_empty()
    }

    /// Whether a request with this `Authorization` header may read the metrics.
    pub(crate) fn allows(&self, authorization: Option<&[u8]>) -> bool {
        if self.is_open() {
            return true;
        }
        let Some(given) = authorization else {
            return false;
        };
        // Every accepted value is compared, so the time does not tell which one came close.
        self.accepted.iter().fold(false, |ok, want| {
            ok | bool::from(want.as_slice().ct_eq(given))
        })
    }
}

/// Axum middleware: 401 with a challenge unless [`Access::allows`] the request.
pub(crate) async fn require_access(
    State(access): State<Arc<Access>>,
    req: Request,
    next: Next,
) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    if access.allows(given) {
        return next.run(req).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, access.challenge.clone())],
        access.refusal,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    fn access(token: &str, user: &str, password: &str) -> Access {
        Access::new(&MetricsAuth {
            bearer_token: Secret::new(token),
            basic_user: user.into(),
            basic_password: Secret::new(password),
        })
    }

    #[test]
    fn open_without_credentials_configured() {
        let a = access("", "", "");
        assert!(a.is_open());
        assert!(a.allows(None));
    }

    #[test]
    fn bearer_and_basic_each_let_in_and_nothing_else_does() {
        let a = access("t0ken", "prom", "pa:ss");
        assert!(a.allows(Some(b"Bearer t0ken")));
        // "prom:pa:ss" in base64.
        assert!(a.allows(Some(b"Basic cHJvbTpwYTpzcw==")));
        for bad in [
            &b"Bearer t0ke"[..],
            b"Bearer t0kenn",
            b"bearer t0ken",
            b"Basic cHJvbTpwYTpzcx==",
            b"",
        ] {
            assert!(!a.allows(Some(bad)), "{}", String::from_utf8_lossy(bad));
        }
        assert!(!a.allows(None));
        assert_eq!(
            a.challenge,
            "Bearer realm=\"hookrelay\", Basic realm=\"hookrelay\""
        );
    }
}
