//! Which hooks get an event: every global hook, plus every hook bound to the event's external
//! meeting id, each limited by its eventID filter and its owner (a tenant's hook gets its own
//! tenant's meetings only). An event beyond the reference's catalogue goes only to hooks
//! whose eventID names it, unless the operator sends those to all. Pure.

use std::sync::Arc;

use super::{Hook, Snapshot};

/// What an event is matched by.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    pub event_id: &'a str,
    /// Only hooks whose eventID names it ([`crate::event::Event::named_only`]).
    pub named_only: bool,
    pub external_meeting_id: Option<&'a str>,
    /// The tenant of its meeting (an id; `None`: of no tenant the relay knows).
    pub tenant: Option<&'a str>,
}

impl<'a> Wanted<'a> {
    /// What `event` is matched by, its meeting of tenant `tenant`.
    pub fn of(event: &'a crate::event::Event, tenant: Option<&'a str>) -> Self {
        Self {
            event_id: &event.id,
            named_only: event.named_only,
            external_meeting_id: event.external_meeting_id.as_deref(),
            tenant,
        }
    }
}

/// The hooks that should receive the event `w` describes.
pub fn matching<'a>(
    snapshot: &'a Snapshot,
    w: Wanted<'a>,
) -> impl Iterator<Item = &'a Arc<Hook>> + 'a {
    let Wanted {
        event_id,
        named_only,
        external_meeting_id,
        tenant,
    } = w;
    let bound = external_meeting_id
        .map(|m| snapshot.bound_to(m))
        .into_iter()
        .flatten();
    snapshot.globals().chain(bound).filter(move |h| {
        let asked = if named_only {
            h.names(event_id)
        } else {
            h.wants(event_id)
        };
        asked && h.owns(tenant)
    })
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
            tenant: None,
            disabled: None,
            signing: None,
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
        let ids = |ev, m| {
            let w = Wanted {
                event_id: ev,
                named_only: false,
                external_meeting_id: m,
                tenant: None,
            };
            matching(&s, w).map(|h| h.id).collect::<Vec<_>>()
        };
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

    #[test]
    fn a_tenants_hook_gets_its_own_tenants_meetings_only() {
        let of = |id, tenant: Option<&str>, meeting| Hook {
            tenant: tenant.map(String::from),
            ..hook(id, meeting, None)
        };
        let r = Registry::default();
        r.replace_all([
            of(1, None, None),
            of(2, Some("t1"), None),
            of(3, Some("t2"), None),
            of(4, Some("t2"), Some("m1")),
        ]);
        let s = r.load();
        let ids = |m, t| {
            let w = Wanted {
                event_id: "user-joined",
                named_only: false,
                external_meeting_id: m,
                tenant: t,
            };
            matching(&s, w).map(|h| h.id.0).collect::<Vec<_>>()
        };
        assert_eq!(ids(Some("m1"), Some("t1")), [1, 2]);
        // A tenant's hook bound to another tenant's meeting gets nothing of it.
        assert_eq!(ids(Some("m1"), Some("t2")), [1, 3, 4]);
        assert_eq!(ids(Some("m1"), None), [1]);
        assert_eq!(ids(None, None), [1]);
        assert_eq!(ids(Some("m1"), Some("t3")), [1]);
    }

    #[test]
    fn an_event_for_named_hooks_only_skips_hooks_without_event_ids() {
        let r = Registry::default();
        r.replace_all([
            hook(1, None, None),
            hook(2, None, Some(&["Breakout-Room-Started"])),
            hook(
                3,
                Some("m1"),
                Some(&["breakout-room-started", "user-joined"]),
            ),
            hook(4, Some("m1"), Some(&["user-joined"])),
            hook(5, Some("m1"), None),
        ]);
        let s = r.load();
        let ids = |named_only| {
            let w = Wanted {
                event_id: "breakout-room-started",
                named_only,
                external_meeting_id: Some("m1"),
                tenant: None,
            };
            matching(&s, w).map(|h| h.id.0).collect::<Vec<_>>()
        };
        assert_eq!(ids(true), [2, 3]);
        assert_eq!(ids(false), [1, 2, 3, 5]);
    }
}
