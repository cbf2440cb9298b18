//! What the plugin benchmarks share: the hook the events go to.

use hookrelay::Hook;

/// A hook for every meeting and event, getting processed events.
pub fn hook() -> Hook {
    Hook {
        id: hookrelay::base::ids::HookId(1),
        callback_url: "https://lms.example/bbb/callback".into(),
        meeting_id: None,
        event_ids: None,
        get_raw: false,
        permanent: false,
    }
}
