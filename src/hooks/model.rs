//! The hook record and the rules for its fields.

/// Longest callback URL accepted.
pub const MAX_CALLBACK_URL_LEN: usize = 2048;

/// One registered hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// Allocated by Redis `INCR`, never reused.
    pub id: u64,
    /// Exactly as registered: the callback checksum covers this text.
    pub callback_url: String,
    /// External meeting id the hook is bound to; `None` for a global hook.
    pub meeting_id: Option<String>,
    /// Lowercase event ids the hook wants; `None` for all.
    pub event_ids: Option<Vec<String>>,
    /// Send the bus message unchanged instead of the processed event.
    pub get_raw: bool,
    /// Comes from the configuration: never removed by failures or `hooks/destroy`.
    pub permanent: bool,
}

impl Hook {
    /// Whether the hook's eventID filter lets `event_id` through (case-insensitive).
    pub fn wants(&self, event_id: &str) -> bool {
        match &self.event_ids {
            None => true,
            Some(ids) => ids.iter().any(|id| id.eq_ignore_ascii_case(event_id)),
        }
    }
}

/// Checks that a callback URL is an absolute http(s) URL with a host.
///
/// # Errors
/// Says what is wrong, for the API's answer.
pub fn validate_callback_url(url: &str) -> Result<(), &'static str> {
    if url.len() > MAX_CALLBACK_URL_LEN {
        return Err("callbackURL is too long (at most 2048 characters).");
    }
    let parsed =
        url::Url::parse(url).map_err(|_| "callbackURL must be an absolute http or https URL.")?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("callbackURL must be an absolute http or https URL.");
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("callbackURL must name a host.");
    }
    Ok(())
}

/// Parses an `eventID` parameter: comma-separated, trimmed, lowercased, empty items dropped.
/// `None` when no id remains.
pub fn parse_event_ids(value: &str) -> Option<Vec<String>> {
    let ids: Vec<String> = value
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    (!ids.is_empty()).then_some(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_trimmed_and_lowercased() {
        assert_eq!(
            parse_event_ids(" User-Joined ,meeting-ended,,"),
            Some(vec!["user-joined".to_string(), "meeting-ended".to_string()])
        );
        assert_eq!(parse_event_ids(" , "), None);
    }

    #[test]
    fn wants_is_case_insensitive() {
        let hook = Hook {
            id: 1,
            callback_url: "http://h/".into(),
            meeting_id: None,
            event_ids: Some(vec!["user-joined".into()]),
            get_raw: false,
            permanent: false,
        };
        assert!(hook.wants("USER-JOINED"));
        assert!(!hook.wants("user-left"));
    }

    #[test]
    fn callback_urls() {
        assert!(validate_callback_url("http://example.com/cb?x=1").is_ok());
        assert!(validate_callback_url("https://10.0.0.1:8080/").is_ok());
        for bad in [
            "",
            "example.com/cb",
            "ftp://h/x",
            "javascript:alert(1)",
            "http://",
        ] {
            assert!(validate_callback_url(bad).is_err(), "{bad}");
        }
        assert!(validate_callback_url(&format!("http://h/{}", "a".repeat(2100))).is_err());
    }
}
