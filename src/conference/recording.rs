//! Where a recording is ([`RecordingState`]), and which recording pipeline event moves it
//! where.

use serde::{Deserialize, Serialize};

/// Where a recording is, from the recording pipeline's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordingState {
    /// Recorded and checked (archive, sanity), waiting to be processed: bbb-exporter's
    /// `bbb_recordings_unprocessed` (its `recording/status/sanity` entries).
    Unprocessed,
    Processing,
    /// Processed, not (yet) published: `getRecordings?state=processed`.
    Processed,
    Published,
    Unpublished,
    Deleted,
}

impl RecordingState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unprocessed => "unprocessed",
            Self::Processing => "processing",
            Self::Processed => "processed",
            Self::Published => "published",
            Self::Unpublished => "unpublished",
            Self::Deleted => "deleted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Unprocessed,
            Self::Processing,
            Self::Processed,
            Self::Published,
            Self::Unpublished,
            Self::Deleted,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }

    /// The state an event moves a recording to.
    pub(super) fn after(event_id: &str) -> Option<Self> {
        match event_id {
            "rap-published"
            | "rap-publish-ended"
            | "rap-post-publish-started"
            | "rap-post-publish-ended" => Some(Self::Published),
            "rap-process-ended" | "rap-post-process-started" | "rap-post-process-ended" => {
                Some(Self::Processed)
            }
            "rap-unpublished" => Some(Self::Unpublished),
            "rap-deleted" => Some(Self::Deleted),
            id if id.starts_with("rap-archive-")
                || id.starts_with("rap-sanity-")
                || id.starts_with("rap-post-archive-") =>
            {
                Some(Self::Unprocessed)
            }
            // The events step's post-scripts run apart from processing and publishing, and
            // may end after the recording was published: they change nothing.
            "rap-post-events-started" | "rap-post-events-ended" => None,
            id if id.starts_with("rap-") => Some(Self::Processing),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RecordingState;

    #[test]
    fn the_events_steps_post_scripts_leave_a_published_recording_published() {
        assert_eq!(
            RecordingState::after("rap-post-publish-ended"),
            Some(RecordingState::Published)
        );
        assert_eq!(RecordingState::after("rap-post-events-started"), None);
        assert_eq!(RecordingState::after("rap-post-events-ended"), None);
        assert_eq!(
            RecordingState::after("rap-process-started"),
            Some(RecordingState::Processing)
        );
    }
}
