//! The plugin chain for one (event, hook) pair: the plugins in scope run in file-name order,
//! a `replace` feeds the next plugin, the first `drop` ends it, and a failure applies the
//! failing plugin's `on_error` policy.

use std::sync::Arc;

use super::{
    plugin::{Action, Failure, Plugin, WitEvent, WitHook},
    settings::OnError,
};
use crate::{
    event::{Event, Payload},
    hooks::Hook,
};

/// What the chain decided for one (event, hook) pair.
#[derive(Debug)]
pub enum Verdict {
    /// Send the hook's payload unchanged.
    Keep,
    /// Send this payload instead.
    Replace(Arc<Payload>),
    /// Send nothing to this hook.
    Drop,
}

impl Verdict {
    /// The payload to send to `hook` for `event`; `None` when the chain dropped it.
    pub fn payload(self, event: &Event, hook: &Hook) -> Option<Arc<Payload>> {
        match self {
            Self::Keep => event.payload(hook.get_raw).cloned(),
            Self::Replace(p) => Some(p),
            Self::Drop => None,
        }
    }
}

/// One link of the chain; [`Plugin`] in the relay, simple fakes in unit tests.
pub(crate) trait Stage {
    /// Whether the stage sees this pair at all (scope and `init`'s event list).
    fn applies(&self, event: &Event, hook: &Hook) -> bool;
    fn on_error(&self) -> OnError;
    /// Calls the stage; `meeting` is what the plugin's `meeting` import answers.
    fn call(
        &self,
        event: &WitEvent,
        hook: &WitHook,
        meeting: Option<&Arc<str>>,
    ) -> Result<Action, Failure>;
}

impl Stage for Plugin {
    fn applies(&self, event: &Event, hook: &Hook) -> bool {
        self.wants(&event.id)
            && self
                .settings
                .scope
                .matches(hook, event.external_meeting_id.as_deref())
    }

    fn on_error(&self) -> OnError {
        Plugin::on_error(self)
    }

    fn call(
        &self,
        event: &WitEvent,
        hook: &WitHook,
        meeting: Option<&Arc<str>>,
    ) -> Result<Action, Failure> {
        Plugin::call(self, event, hook, meeting)
    }
}

/// Runs `stages` for `event` going to `hook`, the callback being timestamped `ts`.
pub(crate) fn run<S: Stage>(
    stages: &[impl AsRef<S>],
    event: &Event,
    hook: &Hook,
    ts: u64,
) -> Verdict {
    let mut applicable = stages
        .iter()
        .map(AsRef::as_ref)
        .filter(|s| s.applies(event, hook))
        .peekable();
    if applicable.peek().is_none() {
        return Verdict::Keep;
    }
    let mut wit_event = WitEvent {
        id: event.id.clone(),
        internal_meeting_id: event.internal_meeting_id.clone(),
        external_meeting_id: event.external_meeting_id.clone(),
        timestamp: ts,
        processed: event.processed.text().to_string(),
        raw: event
            .raw
            .as_ref()
            .map_or_else(String::new, |r| r.text().to_string()),
    };
    let wit_hook = WitHook {
        id: hook.id.0,
        callback_url: hook.callback_url.clone(),
        meeting_id: hook.meeting_id.clone(),
        get_raw: hook.get_raw,
    };
    let mut replaced = false;
    for stage in applicable {
        match stage.call(&wit_event, &wit_hook, event.meeting.as_ref()) {
            Ok(Action::Keep) => {}
            Ok(Action::Drop) => return Verdict::Drop,
            Ok(Action::Replace(json)) => {
                replaced = true;
                if hook.get_raw {
                    wit_event.raw = json;
                } else {
                    wit_event.processed = json;
                }
            }
            Err(_) => match stage.on_error() {
                OnError::Drop => return Verdict::Drop,
                OnError::Pass => {}
            },
        }
    }
    if !replaced {
        return Verdict::Keep;
    }
    let text = if hook.get_raw {
        wit_event.raw
    } else {
        wit_event.processed
    };
    Verdict::Replace(Arc::new(Payload::new(text)))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::base::ids::HookId;

    /// A stage that returns scripted results and records what it was given.
    struct Fake {
        result: Result<Action, Failure>,
        on_error: OnError,
        only_hook: Option<HookId>,
        seen: Mutex<Vec<String>>,
    }

    impl Fake {
        fn new(result: Result<Action, Failure>) -> Box<Self> {
            Box::new(Self {
                result,
                on_error: OnError::Drop,
                only_hook: None,
                seen: Mutex::new(Vec::new()),
            })
        }
        fn seen(&self) -> Vec<String> {
            self.seen.lock().expect("lock").clone()
        }
    }

    impl Stage for Fake {
        fn applies(&self, _: &Event, hook: &Hook) -> bool {
            self.only_hook.is_none_or(|id| id == hook.id)
        }
        fn on_error(&self) -> OnError {
            self.on_error
        }
        fn call(
            &self,
            event: &WitEvent,
            hook: &WitHook,
            _meeting: Option<&Arc<str>>,
        ) -> Result<Action, Failure> {
            let payload = if hook.get_raw {
                &event.raw
            } else {
                &event.processed
            };
            self.seen.lock().expect("lock").push(payload.clone());
            self.result.clone()
        }
    }

    fn event() -> Event {
        Event {
            source: 0,
            id: "user-joined".into(),
            internal_meeting_id: Some("int".into()),
            external_meeting_id: Some("ext".into()),
            processed: Arc::new(Payload::new(r#"{"p":1}"#)),
            raw: Some(Arc::new(Payload::new(r#"{"r":1}"#))),
            meeting: None,
            tenant: None,
            filtered: false,
            named_only: false,
        }
    }

    fn hook(id: u64, get_raw: bool) -> Hook {
        Hook {
            id: HookId(id),
            callback_url: "http://127.0.0.1/cb".into(),
            meeting_id: None,
            event_ids: None,
            get_raw,
            permanent: false,
            tenant: None,
            disabled: None,
            signing: None,
        }
    }

    fn text(v: Verdict) -> Option<String> {
        match v {
            Verdict::Keep => Some("keep".into()),
            Verdict::Replace(p) => Some(p.text().to_string()),
            Verdict::Drop => None,
        }
    }

    #[test]
    fn replace_feeds_the_next_stage_in_order() {
        let stages = vec![
            Fake::new(Ok(Action::Replace(r#"{"a":1}"#.into()))),
            Fake::new(Ok(Action::Keep)),
            Fake::new(Ok(Action::Replace(r#"{"b":2}"#.into()))),
        ];
        let v = run::<Fake>(&stages, &event(), &hook(1, false), 7);
        assert_eq!(text(v).as_deref(), Some(r#"{"b":2}"#));
        assert_eq!(stages[0].seen(), [r#"{"p":1}"#]);
        assert_eq!(stages[1].seen(), [r#"{"a":1}"#]);
        assert_eq!(stages[2].seen(), [r#"{"a":1}"#]);
    }

    #[test]
    fn raw_hooks_get_the_raw_json_through_the_chain() {
        let stages = vec![
            Fake::new(Ok(Action::Replace(r#"{"r":2}"#.into()))),
            Fake::new(Ok(Action::Keep)),
        ];
        let v = run::<Fake>(&stages, &event(), &hook(1, true), 7);
        assert_eq!(text(v).as_deref(), Some(r#"{"r":2}"#));
        assert_eq!(stages[0].seen(), [r#"{"r":1}"#]);
        assert_eq!(stages[1].seen(), [r#"{"r":2}"#]);
    }

    #[test]
    fn first_drop_stops_the_chain() {
        let stages = vec![Fake::new(Ok(Action::Drop)), Fake::new(Ok(Action::Keep))];
        assert!(text(run::<Fake>(&stages, &event(), &hook(1, false), 7)).is_none());
        assert!(stages[1].seen().is_empty());
    }

    #[test]
    fn failures_follow_the_failing_stage_policy() {
        let mut pass = Fake::new(Err(Failure::Timeout));
        pass.on_error = OnError::Pass;
        let stages = vec![pass, Fake::new(Ok(Action::Keep))];
        let v = run::<Fake>(&stages, &event(), &hook(1, false), 7);
        assert_eq!(text(v).as_deref(), Some("keep"));
        assert_eq!(stages[1].seen().len(), 1);

        let stages = vec![Fake::new(Err(Failure::Trap)), Fake::new(Ok(Action::Keep))];
        assert!(text(run::<Fake>(&stages, &event(), &hook(1, false), 7)).is_none());
        assert!(stages[1].seen().is_empty());
    }

    #[test]
    fn out_of_scope_stages_are_skipped_and_no_stage_means_keep() {
        let mut other = Fake::new(Ok(Action::Drop));
        other.only_hook = Some(HookId(2));
        let stages = vec![other];
        let v = run::<Fake>(&stages, &event(), &hook(1, false), 7);
        assert_eq!(text(v).as_deref(), Some("keep"));
        assert!(stages[0].seen().is_empty());
        let none: Vec<Box<Fake>> = Vec::new();
        assert_eq!(
            text(run::<Fake>(&none, &event(), &hook(1, false), 7)).as_deref(),
            Some("keep")
        );
    }
}
