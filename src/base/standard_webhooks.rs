//! Standard Webhooks signatures (<https://www.standardwebhooks.com>), sent beside the BBB
//! checksum when configured: `webhook-id`, `webhook-timestamp` and `webhook-signature` headers,
//! the signature an HMAC-SHA256 of `id.timestamp.body`, base64, prefixed `v1,`; one signature
//! per configured secret, so that receivers keep verifying while a secret is rotated.

use crate::base::ids::HookId;

use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::base::secret::Secret;

/// The prefix of a Standard Webhooks secret; the rest is the key, base64.
const SECRET_PREFIX: &str = "whsec_";

/// A configured secret that is not a Standard Webhooks secret.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("secret {0} is not base64 (whsec_ followed by the key in base64)")]
    NotBase64(usize),
    #[error("secret {0} is empty")]
    Empty(usize),
}

/// The headers of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Headers {
    pub id: String,
    pub timestamp: String,
    pub signature: String,
}

/// Signs with every configured key.
#[derive(Clone)]
pub struct StandardSigner {
    keys: Vec<Vec<u8>>,
}

impl std::fmt::Debug for StandardSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StandardSigner({} keys)", self.keys.len())
    }
}

/// The key bytes of a secret (`whsec_` is optional, as in the reference libraries).
///
/// # Errors
/// When the text after the prefix is not base64 or is empty; `n` numbers the secret.
pub fn key_of(secret: &str, n: usize) -> Result<Vec<u8>, KeyError> {
    let b64 = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    let key = STANDARD.decode(b64).map_err(|_| KeyError::NotBase64(n))?;
    if key.is_empty() {
        return Err(KeyError::Empty(n));
    }
    Ok(key)
}

/// `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
pub fn signature(key: &[u8], id: &str, timestamp: u64, body: &[u8]) -> String {
    // HMAC takes a key of any length.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// Whether one of the space-separated signatures of `header` is `key`'s signature of the
/// message (compared in constant time; other versions than `v1` are skipped).
pub fn verify(key: &[u8], id: &str, timestamp: u64, body: &[u8], header: &str) -> bool {
    let expected = signature(key, id, timestamp, body);
    header
        .split(' ')
        .filter(|s| s.starts_with("v1,"))
        .any(|s| bool::from(s.as_bytes().ct_eq(expected.as_bytes())))
}

impl StandardSigner {
    /// `None` when no secret is configured.
    ///
    /// # Errors
    /// When a secret is not a Standard Webhooks secret.
    pub fn new(secrets: &[Secret]) -> Result<Option<Self>, KeyError> {
        if secrets.is_empty() {
            return Ok(None);
        }
        let keys = secrets
            .iter()
            .enumerate()
            .map(|(i, s)| key_of(s.expose(), i + 1))
            .collect::<Result<_, _>>()?;
        Ok(Some(Self { keys }))
    }

    /// A signer of several raw keys, one signature each (a tenant's new and old secret).
    pub fn of_raw_keys<'k>(keys: impl IntoIterator<Item = &'k [u8]>) -> Self {
        Self {
            keys: keys.into_iter().map(<[u8]>::to_vec).collect(),
        }
    }

    /// This signer's keys followed by `other`'s (a hook's own secrets, then the ones it would
    /// be signed with otherwise).
    pub fn and(mut self, other: &StandardSigner) -> Self {
        self.keys.extend(other.keys.iter().cloned());
        self
    }

    /// The headers of one attempt at callback `ts` of hook `hook`: the id is the same for every
    /// attempt (and after a restart), the timestamp is the attempt's (receivers refuse old ones).
    pub fn headers(&self, hook: HookId, ts: u64, now_s: u64, body: &[u8]) -> Headers {
        let id = message_id(hook, ts);
        let signature = self
            .keys
            .iter()
            .map(|k| signature(k, &id, now_s, body))
            .collect::<Vec<_>>()
            .join(" ");
        Headers {
            id,
            timestamp: now_s.to_string(),
            signature,
        }
    }
}

/// A new signing secret: `whsec_` and 32 random bytes (the operating system's generator) in
/// base64, as Standard Webhooks secrets are written.
///
/// # Errors
/// When the operating system gives no random bytes.
pub fn new_secret() -> Result<Secret, getrandom::Error> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key)?;
    Ok(Secret::new(format!(
        "{SECRET_PREFIX}{}",
        STANDARD.encode(key)
    )))
}

/// `msg_<hook>_<timestamp>`: one callback's id, unique per hook (timestamps strictly increase).
pub fn message_id(hook: HookId, ts: u64) -> String {
    format!("msg_{hook}_{ts}")
}

#[cfg(test)]
mod tests {
    use super::*;

    // The test vectors of the Standard Webhooks libraries.
    const SECRET_A: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID_A: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const BODY_A: &str = r#"{"test": 2432232314}"#;

    #[test]
    fn matches_the_specification_test_vectors() {
        let key = key_of(SECRET_A, 1).unwrap();
        assert_eq!(
            signature(&key, ID_A, 1_614_265_330, BODY_A.as_bytes()),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        let key = key_of("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", 1).unwrap();
        assert_eq!(
            signature(
                &key,
                "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
                1_649_367_553,
                br#"{"email":"test@example.com","username":"test_user"}"#
            ),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
        // Without the prefix, as the libraries accept it.
        assert_eq!(
            key_of(&SECRET_A[6..], 1).unwrap(),
            key_of(SECRET_A, 1).unwrap()
        );
    }

    #[test]
    fn verify_accepts_any_listed_v1_signature_and_nothing_else() {
        let key = key_of(SECRET_A, 1).unwrap();
        let ok = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        let v = |h: &str| verify(&key, ID_A, 1_614_265_330, BODY_A.as_bytes(), h);
        assert!(v(ok));
        assert!(v(&format!(
            "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= {ok}"
        )));
        assert!(!v("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="));
        assert!(!v("v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="));
        assert!(!v("v1,"));
        assert!(!v(&ok.replace("v1,", "v2,")));
        assert!(!verify(&key, ID_A, 1_614_265_331, BODY_A.as_bytes(), ok));
    }

    #[test]
    fn one_signature_per_secret_and_a_stable_id() {
        let signer = StandardSigner::new(&[
            Secret::new(SECRET_A),
            Secret::new("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"),
        ])
        .unwrap()
        .unwrap();
        let a = signer.headers(HookId(7), 1_700_000_000_123, 1_700_000_000, b"event=x");
        let b = signer.headers(HookId(7), 1_700_000_000_123, 1_700_000_060, b"event=x");
        assert_eq!(a.id, "msg_7_1700000000123");
        assert_eq!(a.id, b.id, "retries keep the id");
        assert_ne!(a.signature, b.signature, "and sign their own timestamp");
        let sigs: Vec<&str> = a.signature.split(' ').collect();
        assert_eq!(sigs.len(), 2);
        for (i, secret) in [SECRET_A, "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"]
            .iter()
            .enumerate()
        {
            let key = key_of(secret, 1).unwrap();
            assert_eq!(sigs[i], signature(&key, &a.id, 1_700_000_000, b"event=x"));
        }
        assert!(StandardSigner::new(&[]).unwrap().is_none());
        assert!(matches!(
            StandardSigner::new(&[Secret::new("whsec_not base64!")]),
            Err(KeyError::NotBase64(1))
        ));
        assert!(matches!(
            StandardSigner::new(&[Secret::new(SECRET_A), Secret::new("whsec_")]),
            Err(KeyError::Empty(2))
        ));
    }
}
