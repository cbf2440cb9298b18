//! A destination's `plugins`: the named plugins of the plugin set in force keep, replace or
//! drop each message before it is published, on the plugins' threads (a plugin may run up to
//! its deadline), as a hook's callback goes through its chain before its first attempt.

use std::sync::Arc;

use super::message::Message;
use crate::{
    base::ids::HookId,
    event::{Event, Payload},
    hooks::Hook,
    plugin_host::{Plugins, Verdict},
};

/// The destination as plugins see it: a hook whose callback URL is `destination:NAME`.
pub(super) fn as_hook(name: &str, raw: bool) -> Hook {
    Hook {
        id: HookId(0),
        callback_url: format!("destination:{name}"),
        meeting_id: None,
        event_ids: None,
        get_raw: raw,
        permanent: true,
        tenant: None,
        disabled: None,
        signing: None,
    }
}

/// What the plugins made of `m`: its body (replaced or not), or `None` when one dropped it.
pub(super) async fn apply(
    plugins: &Plugins,
    names: &[String],
    hook: &Arc<Hook>,
    m: &Message,
) -> Option<String> {
    let extra = m.for_plugins.clone().unwrap_or_default();
    let (processed, raw) = match hook.get_raw {
        true => (extra.other, Some(m.body.clone())),
        false => (m.body.clone(), Some(extra.other).filter(|o| !o.is_empty())),
    };
    let opt = |s: String| (!s.is_empty()).then_some(s);
    let event = Event {
        source: 0,
        id: m.event.clone(),
        internal_meeting_id: opt(extra.internal_meeting),
        external_meeting_id: opt(m.meeting.clone()),
        processed: Arc::new(Payload::new(processed)),
        raw: raw.map(|r| Arc::new(Payload::new(r))),
        meeting: opt(extra.facts).map(Arc::from),
        tenant: None,
        filtered: false,
        named_only: false,
    };
    let set = plugins.current();
    let (names, hook, ts) = (names.to_vec(), hook.clone(), m.queued_ms);
    let made = plugins
        .threads()
        .run(move || {
            let verdict = set.apply_named(&names, &event, &hook, ts);
            match verdict {
                Verdict::Keep => Some(event.payload(hook.get_raw).map(|p| p.text().to_string())),
                Verdict::Replace(p) => Some(Some(p.text().to_string())),
                Verdict::Drop => None,
            }
        })
        .await;
    match made {
        Ok(Some(Some(body))) => Some(body),
        Ok(_) => None,
        Err(e) => {
            // Only a panic outside the chain's own guard gets here: fail closed.
            tracing::error!(event = %m.event, error = %e, "the plugin chain did not finish; the message is dropped");
            None
        }
    }
}
