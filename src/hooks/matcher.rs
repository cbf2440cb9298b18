//! Which hooks get an event: every global hook, plus every hook bound to the event's external
//! meeting id, each limited by its eventID filter. Pure.

use std::sync::Arc;

use super::{Hook, Snapshot};

/// The hooks that should receive event `event_id` of external meeting `external_meeting_id`.
pub fn matching<'a>(
    snapshot: &'a Snapshot,
    event_id: &'a str,
    external_meeting_id: Option<&str>,
) -> impl Iterator<Item = &'a Arc<Hook>> + 'a {
    let bound = external_meeting_id
        .map(|m| snapshot.bound_to(m))
        .into_iter()
        .flatten();
    snapshot
        .globals()
        .chain(bound)
        .filter(move |h| h.wants(event_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::HookId;
    use crate::hooks::Registry;

    fn hook(id: u64, meeting: Option<&str>, ids: Option<&[&str]>) -> Hook {
        Hook {
            id: HookId(id),
            callback_url: format!("http://h/{id}"),
            meeting_id: meeting.map(String::from),
            event_ids: ids.map(|v| v.iter().map(|s| s.to_string()).collect()),
            get_raw: false,
            permanent: false,
        }
    }

    #[test]
    fn globals_meeting_and_filters() {
        let r = Registry::default();
        r.replace_all([
            hook(1, None, None),
            hook(2, Some("m1"), None),
            hook(3, Some("m2"), None),
            hook(4, Some("m1"), Some(&["meeting-ended"])),
            hook(5, None, Some(&["user-joined", "user-left"])),
        ]);
        let s = r.load();
        let ids = |ev, m| matching(&s, ev, m).map(|h| h.id).collect::<Vec<_>>();
        assert_eq!(
            ids("user-joined", Some("m1")),
            vec![HookId(1), HookId(5), HookId(2)]
        );
        assert_eq!(
            ids("meeting-ended", Some("m1")),
            vec![HookId(1), HookId(2), HookId(4)]
        );
        assert_eq!(ids("meeting-ended", Some("m2")), vec![HookId(1), HookId(3)]);
        assert_eq!(ids("user-left", None), vec![HookId(1), HookId(5)]);
        assert_eq!(ids("meeting-created", Some("nobody")), vec![HookId(1)]);
    }
}
