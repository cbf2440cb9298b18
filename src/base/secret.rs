//! Values that must never reach a log line, a `Debug` print or a serialized configuration: the
//! shared secret, and URLs that may carry a password (`redis://:pw@host`).

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

/// What a hidden value is shown as.
const REDACTED: &str = "***";

/// The shared secret (or any secret string): shown and serialized as `***`.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself: only for hashing and for the `Authorization` header of bearer mode.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({REDACTED})")
    }
}

/// Serialized as `***` when set, so that a dumped configuration carries no secret (an unset one
/// stays empty, so that a dump still shows it is missing).
impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if self.0.is_empty() { "" } else { REDACTED })
    }
}

/// A URL whose password, if any, is hidden in `Debug`, `Display` and serialized output.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct SecretUrl(String);

impl SecretUrl {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The URL as configured, password included: only for connecting.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The URL with its password (and a user name standing alone, which Redis treats as the
    /// password) replaced by `***`; text that is not a URL is hidden whole when it has an `@`.
    pub fn redacted(&self) -> String {
        match url::Url::parse(&self.0) {
            Ok(mut u) => {
                if u.password().is_some() {
                    let _ = u.set_password(Some(REDACTED));
                } else if !u.username().is_empty() {
                    let _ = u.set_username(REDACTED);
                }
                u.to_string()
            }
            Err(_) if self.0.contains('@') => REDACTED.to_string(),
            Err(_) => self.0.clone(),
        }
    }
}

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.redacted())
    }
}

impl fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl Serialize for SecretUrl {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.redacted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_show() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"***\"");
        assert_eq!(serde_json::to_string(&Secret::default()).unwrap(), "\"\"");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn url_passwords_never_show() {
        for (url, shown) in [
            ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
            ("redis://user:pw@h", "redis://user:***@h"),
            ("redis://pw@h", "redis://***@h"),
            ("redis://h:6379", "redis://h:6379"),
            ("not a url with pw@h", "***"),
        ] {
            let u = SecretUrl::new(url);
            assert_eq!(u.redacted(), shown, "{url}");
            assert!(!format!("{u:?}{u}").contains("pw"), "{url}");
            assert!(!serde_json::to_string(&u).unwrap().contains("pw"), "{url}");
        }
    }
}
