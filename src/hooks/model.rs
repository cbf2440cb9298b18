//! The hook record and the rules for its fields.

use crate::base::ids::HookId;

/// One registered hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// Allocated by Redis `INCR`, never reused.
    pub id: HookId,
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
            id: HookId(1),
            callback_url: "http://h/".into(),
            meeting_id: None,
            event_ids: Some(vec!["user-joined".into()]),
            get_raw: false,
            permanent: false,
        };
        assert!(hook.wants("USER-JOINED"));
        assert!(!hook.wants("user-left"));
    }
}
