//! Where statements go: the default LRS of `[xapi]`, or a meeting's own, from its
//! `meta_secret-lrs-payload` (OpenSSL `enc` output: `Salted__`, an 8-byte salt, AES-256-CBC
//! with key and IV from PBKDF2-SHA256 of the server's shared secret, 10,000 rounds; base64),
//! a JSON object with `lrs_endpoint` and `lrs_token` or `lrs_username` and `lrs_password`.

use aes::cipher::{BlockModeDecrypt, KeyIvInit, block_padding::Pkcs7};
use base64::Engine as _;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::config::xapi::XapiConfig;

/// Why a meeting's LRS payload cannot be used (never says what it holds).
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub(crate) enum PayloadError {
    #[error("it is not base64")]
    Base64,
    #[error("it is not OpenSSL's salted format")]
    Format,
    #[error("it does not decrypt with the server's secret")]
    Decrypt,
    #[error("what it decrypts to is not a JSON object")]
    Json,
    #[error("it names neither lrs_token nor lrs_username and lrs_password")]
    Credentials,
    #[error("no LRS endpoint: neither it nor [xapi] lrs_endpoint names one")]
    Endpoint,
    /// The endpoint has a query or a fragment, which would swallow `/xAPI/statements`.
    #[error("its lrs_endpoint has a query or a fragment")]
    EndpointForm,
    /// The SSRF guard refuses the endpoint a meeting chose (why).
    #[error("its lrs_endpoint is refused: {0}")]
    Blocked(String),
}

impl PayloadError {
    /// The metric label.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::Base64 | Self::Format => "format",
            Self::Decrypt => "decrypt",
            Self::Json => "json",
            Self::Credentials => "credentials",
            Self::Endpoint | Self::EndpointForm => "endpoint",
            Self::Blocked(_) => "blocked",
        }
    }
}

/// How requests authenticate.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) enum Auth {
    None,
    Basic { user: String, password: String },
    Bearer(String),
}

/// One LRS: where its statements are posted and with which credentials.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Lrs {
    /// `…/xAPI/statements`.
    pub(super) url: String,
    pub(super) auth: Auth,
    /// Chosen by a meeting's payload, not by the operator: sent through the SSRF guard.
    pub(super) guarded: bool,
}

impl std::fmt::Debug for Lrs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lrs")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Lrs {
    /// The default LRS of `[xapi]`; `None` without an endpoint.
    pub(crate) fn default_of(config: &XapiConfig) -> Option<Self> {
        if config.lrs_endpoint.is_empty() {
            return None;
        }
        let auth = if !config.lrs_token.is_empty() {
            Auth::Bearer(config.lrs_token.expose().into())
        } else if !config.lrs_username.is_empty() {
            Auth::Basic {
                user: config.lrs_username.clone(),
                password: config.lrs_password.expose().into(),
            }
        } else {
            Auth::None
        };
        Some(Self {
            url: statements_url(&config.lrs_endpoint),
            auth,
            guarded: false,
        })
    }

    /// A meeting's LRS from its encrypted payload (`secret`: the shared secret of the server
    /// the meeting is on); an endpoint it does not name is the default one's.
    ///
    /// # Errors
    /// When the payload does not decrypt, or lacks credentials or an endpoint.
    pub(crate) fn of_payload(
        payload: &str,
        secret: &str,
        config: &XapiConfig,
    ) -> Result<Self, PayloadError> {
        #[derive(Deserialize)]
        struct Tenant {
            #[serde(default)]
            lrs_endpoint: String,
            #[serde(default)]
            lrs_token: String,
            #[serde(default)]
            lrs_username: String,
            #[serde(default)]
            lrs_password: String,
        }
        let plain = decrypt(payload, secret)?;
        let t: Tenant = serde_json::from_slice(&plain).map_err(|_| PayloadError::Json)?;
        let auth = if !t.lrs_token.is_empty() {
            Auth::Bearer(t.lrs_token)
        } else if !t.lrs_username.is_empty() && !t.lrs_password.is_empty() {
            Auth::Basic {
                user: t.lrs_username,
                password: t.lrs_password,
            }
        } else {
            return Err(PayloadError::Credentials);
        };
        let guarded = !t.lrs_endpoint.is_empty();
        let endpoint = if guarded {
            &t.lrs_endpoint
        } else {
            &config.lrs_endpoint
        };
        let Ok(parsed) = url::Url::parse(endpoint) else {
            return Err(PayloadError::Endpoint);
        };
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(PayloadError::Endpoint);
        }
        if endpoint.contains(['?', '#']) {
            return Err(PayloadError::EndpointForm);
        }
        Ok(Self {
            url: statements_url(endpoint),
            auth,
            guarded,
        })
    }

    /// The name of its queue: a digest of URL and credentials, so that two tenants never
    /// share one (and the key shows neither).
    pub(crate) fn key(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.url.as_bytes());
        match &self.auth {
            Auth::None => h.update(b"\0none"),
            Auth::Basic { user, password } => {
                h.update(b"\0basic\0");
                h.update(user.as_bytes());
                h.update(b"\0");
                h.update(password.as_bytes());
            }
            Auth::Bearer(t) => {
                h.update(b"\0bearer\0");
                h.update(t.as_bytes());
            }
        }
        hex::encode(&h.finalize()[..12])
    }

    /// The host (and port), for metric labels.
    pub(crate) fn host(&self) -> String {
        url::Url::parse(&self.url)
            .ok()
            .and_then(|u| {
                u.host_str().map(|h| {
                    u.port()
                        .map_or_else(|| h.to_string(), |p| format!("{h}:{p}"))
                })
            })
            .unwrap_or_default()
    }
}

/// `endpoint` without a trailing `/xapi`, `/xapi/statements` (any case, with or without a
/// slash after), then `/xAPI/statements`: a path before it is kept (the reference drops it).
pub(crate) fn statements_url(endpoint: &str) -> String {
    let mut base = endpoint.trim_end_matches('/');
    let lower = base.to_ascii_lowercase();
    for suffix in ["/xapi/statements", "/xapistatements", "/xapi"] {
        if lower.ends_with(suffix) {
            base = &base[..base.len() - suffix.len()];
            break;
        }
    }
    format!("{}/xAPI/statements", base.trim_end_matches('/'))
}

/// Decrypts OpenSSL `enc -aes-256-cbc -pbkdf2 -a` output.
fn decrypt(payload: &str, secret: &str) -> Result<Vec<u8>, PayloadError> {
    let compact: String = payload.chars().filter(|c| !c.is_whitespace()).collect();
    let raw = base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|_| PayloadError::Base64)?;
    if raw.len() < 32 || &raw[..8] != b"Salted__" || (raw.len() - 16) % 16 != 0 {
        return Err(PayloadError::Format);
    }
    let (salt, cipher) = (&raw[8..16], &raw[16..]);
    let mut key_iv = [0u8; 48];
    pbkdf2::pbkdf2_hmac::<Sha256>(secret.as_bytes(), salt, 10_000, &mut key_iv);
    let mut buf = cipher.to_vec();
    let plain = cbc::Decryptor::<aes::Aes256>::new_from_slices(&key_iv[..32], &key_iv[32..])
        .map_err(|_| PayloadError::Decrypt)?
        .decrypt_padded::<Pkcs7>(&mut buf)
        .map_err(|_| PayloadError::Decrypt)?;
    Ok(plain.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> XapiConfig {
        XapiConfig {
            lrs_endpoint: "https://default.example/lrs".into(),
            ..XapiConfig::default()
        }
    }

    #[test]
    fn the_reference_readmes_payload_decrypts() {
        // The example of bbb-webhooks' xapi README (secret and value as published there).
        let payload = "U2FsdGVkX18fLg33ChrHbHyIvbcdDwU6+4yX2yTb4gbDKOKSG3hhsd2+TS0ZK15fZlo4G1SQqaxm1OGo1fIsoji82T4SD4y5p1G2g9E9gAKzZC2Z5R454rw7/xGvX7uYGd/fbJcZraMYmafX1Zg3qA==";
        let lrs = Lrs::of_payload(payload, "bab3fd92bcd7d464", &config()).expect("decrypts");
        assert_eq!(lrs.url, "https://lrs1.example.com/xAPI/statements");
        assert!(lrs.auth == Auth::Bearer("AAF32423SDF5345".into()));
        assert!(matches!(
            Lrs::of_payload(payload, "another-secret", &config()),
            Err(PayloadError::Decrypt | PayloadError::Json)
        ));
    }

    #[test]
    fn bad_payloads_are_named_without_their_content() {
        let c = config();
        assert_eq!(
            Lrs::of_payload("%%%", "s", &c).err(),
            Some(PayloadError::Base64)
        );
        assert_eq!(
            Lrs::of_payload("aGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd29ybGQ=", "s", &c).err(),
            Some(PayloadError::Format)
        );
    }

    #[test]
    fn basic_credentials_and_a_path_prefix() {
        // Made with `openssl aes-256-cbc -pass pass:tenant-secret -pbkdf2 -a -A`.
        let payload = "U2FsdGVkX19KdHyj2yYTT4rsYrBvhOeCXYJsSDJW10NRBpQLmVFNdjWCpoOctoJYBFO6743wTRxuJXvulI8MCtpvIZhQCNhCeWsWtn8QQJV5v0nxyP5vgkJaYz/f+THiyhytN9Iz0by92UKjrpMA6g==";
        let lrs = Lrs::of_payload(payload, "tenant-secret", &config()).expect("decrypts");
        assert_eq!(lrs.url, "http://127.0.0.1:9/tenant/xAPI/statements");
        assert!(
            lrs.auth
                == Auth::Basic {
                    user: "u1".into(),
                    password: "p1".into()
                }
        );
        assert_eq!(lrs.host(), "127.0.0.1:9");
    }

    #[test]
    fn endpoints_keep_their_path() {
        for (given, url) in [
            ("https://lrs.example", "https://lrs.example/xAPI/statements"),
            ("https://h/xAPI/statements/", "https://h/xAPI/statements"),
            ("https://h/prefix/", "https://h/prefix/xAPI/statements"),
            ("https://h/prefix", "https://h/prefix/xAPI/statements"),
            (
                "https://h/lrs/xapi/statements",
                "https://h/lrs/xAPI/statements",
            ),
            ("https://h/lrs/XAPI", "https://h/lrs/xAPI/statements"),
        ] {
            assert_eq!(statements_url(given), url, "{given}");
        }
    }

    #[test]
    fn queues_differ_by_credentials() {
        let a = Lrs {
            url: "https://h/xAPI/statements".into(),
            auth: Auth::Bearer("a".into()),
            guarded: false,
        };
        let b = Lrs {
            auth: Auth::Bearer("b".into()),
            ..a.clone()
        };
        assert_ne!(a.key(), b.key());
        assert_eq!(a.key(), a.clone().key());
        assert!(!format!("{a:?}").contains('a') || !format!("{a:?}").contains("Bearer"));
    }
}
