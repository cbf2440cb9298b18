//! Replaces meeting and recording events with a short chat message that a Slack (or
//! Mattermost, Rocket.Chat, ...) incoming webhook accepts:
//!
//! ```json
//! {"text":"Meeting \"Math 101\" was created","channel":"#classes","event":"meeting-created","meeting":"math-101"}
//! ```
//!
//! `init` returns the ids handled here, so every other event passes the plugin untouched.
//! The message is built from the processed event, also for hooks that asked for raw events.
//! Config: `channel` (optional), added as `"channel"` when set.

wit_bindgen::generate!({ world: "plugin", path: "../../wit" });

use bbb::relay::host::{get_config, log};
// Event, Hook, Action and Level. (A glob: the world re-exports the first three at the crate
// root too, and an explicit import of those names would clash with that.)
use bbb::relay::types::*;
use serde_json::{Map, Value};
use std::sync::OnceLock;

/// Meeting events turned into a message.
const MEETING_EVENTS: &[&str] = &[
    "meeting-created",
    "meeting-ended",
    "meeting-recording-started",
    "meeting-recording-stopped",
    "meeting-screenshare-started",
    "meeting-screenshare-stopped",
    "meeting-presentation-changed",
];

/// Recording pipeline steps (`rap-<step>-started` / `rap-<step>-ended`) and how to say them.
const RAP_STEPS: &[(&str, &str)] = &[
    ("archive", "archiving"),
    ("sanity", "sanity check"),
    ("post-archive", "post-archive scripts"),
    ("process", "processing"),
    ("post-process", "post-processing scripts"),
    ("publish", "publishing"),
    ("post-publish", "post-publish scripts"),
];

/// Recording state changes announced by bbb-web or the recording scripts.
const RAP_CHANGES: &[(&str, &str)] = &[
    ("rap-published", "was published"),
    ("rap-unpublished", "was unpublished"),
    ("rap-deleted", "was deleted"),
];

/// The `channel` setting, read by `init`.
static CHANNEL: OnceLock<Option<String>> = OnceLock::new();

fn handled_ids() -> Vec<String> {
    let mut ids: Vec<String> = MEETING_EVENTS.iter().map(|id| id.to_string()).collect();
    for (step, _) in RAP_STEPS {
        ids.push(format!("rap-{step}-started"));
        ids.push(format!("rap-{step}-ended"));
    }
    ids.extend(RAP_CHANGES.iter().map(|(id, _)| id.to_string()));
    ids
}

/// `value` at `path`, if every step is an object member.
fn at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| v.get(*key))
}

fn non_empty_str(value: Option<&Value>) -> Option<&str> {
    value
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// Slack treats `&`, `<` and `>` in message text as markup; user-chosen names are escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The best human label of the meeting: its name, else its external id, else the internal one.
fn meeting_label(event: &Event, attrs: Option<&Value>) -> String {
    let from_json = attrs.and_then(|a| {
        non_empty_str(at(a, &["meeting", "name"]))
            .or_else(|| non_empty_str(at(a, &["recording", "name"])))
            .or_else(|| non_empty_str(at(a, &["meeting", "external-meeting-id"])))
    });
    let label = from_json
        .or(event.external_meeting_id.as_deref())
        .or(event.internal_meeting_id.as_deref());
    match label {
        Some(label) => format!("\"{}\"", escape(label)),
        None => "(unknown)".to_string(),
    }
}

/// "Recording <record id>", or a generic wording when the id is missing.
fn recording_label(attrs: Option<&Value>) -> String {
    match attrs.and_then(|a| non_empty_str(a.get("record-id"))) {
        Some(id) => format!("Recording {}", escape(id)),
        None => "A recording".to_string(),
    }
}

/// The sentence for one event, or None for an id this plugin does not know.
fn sentence(event: &Event, attrs: Option<&Value>) -> Option<String> {
    let id = event.id.as_str();
    let m = meeting_label(event, attrs);
    let text = match id {
        "meeting-created" => format!("Meeting {m} was created"),
        "meeting-ended" => format!("Meeting {m} ended"),
        "meeting-recording-started" => format!("Recording started in meeting {m}"),
        "meeting-recording-stopped" => format!("Recording stopped in meeting {m}"),
        "meeting-screenshare-started" => format!("Screen sharing started in meeting {m}"),
        "meeting-screenshare-stopped" => format!("Screen sharing stopped in meeting {m}"),
        "meeting-presentation-changed" => format!("The presentation changed in meeting {m}"),
        _ => {
            if let Some((_, what)) = RAP_CHANGES.iter().find(|(rap, _)| *rap == id) {
                return Some(format!("{} of meeting {m} {what}", recording_label(attrs)));
            }
            return rap_step_sentence(id, &m, attrs);
        }
    };
    Some(text)
}

/// "Recording X of meeting "Y": processing (presentation) finished".
fn rap_step_sentence(id: &str, meeting: &str, attrs: Option<&Value>) -> Option<String> {
    let rest = id.strip_prefix("rap-")?;
    let (step, started) = if let Some(step) = rest.strip_suffix("-started") {
        (step, true)
    } else {
        (rest.strip_suffix("-ended")?, false)
    };
    let (_, step_name) = RAP_STEPS.iter().find(|(s, _)| *s == step)?;
    let failed = attrs
        .and_then(|a| a.get("success"))
        .and_then(Value::as_bool)
        == Some(false);
    let outcome = match (started, failed) {
        (true, _) => "started",
        (false, false) => "finished",
        (false, true) => "failed",
    };
    let workflow = match attrs.and_then(|a| non_empty_str(a.get("workflow"))) {
        Some(w) => format!(" ({})", escape(w)),
        None => String::new(),
    };
    let mut text = format!(
        "{} of meeting {meeting}: {step_name}{workflow} {outcome}",
        recording_label(attrs)
    );
    if id == "rap-archive-ended"
        && attrs
            .and_then(|a| a.get("recorded"))
            .and_then(Value::as_bool)
            == Some(false)
    {
        text.push_str(" (nothing was recorded)");
    }
    if id == "rap-publish-ended"
        && let Some(link) =
            attrs.and_then(|a| non_empty_str(at(a, &["recording", "playback", "link"])))
    {
        text.push_str(&format!(": {link}"));
    }
    Some(text)
}

struct SlackFormat;

impl Guest for SlackFormat {
    fn init() -> Result<Vec<String>, String> {
        let channel = get_config("channel")
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty());
        let _ = CHANNEL.set(channel);
        Ok(handled_ids())
    }

    fn on_event(event: Event, _hook: Hook) -> Action {
        // Always the processed form: for a raw hook `processed` is still there, and the
        // message replaces the raw payload just the same.
        let parsed: Option<Value> = match serde_json::from_str(&event.processed) {
            Ok(value) => Some(value),
            Err(e) => {
                log(
                    Level::Warn,
                    &format!(
                        "slack-format: {} is not valid JSON ({e}); using the typed fields",
                        event.id
                    ),
                );
                None
            }
        };
        let attrs = parsed.as_ref().and_then(|v| at(v, &["data", "attributes"]));
        let Some(text) = sentence(&event, attrs) else {
            return Action::Keep;
        };

        let mut message = Map::new();
        message.insert("text".into(), Value::String(text));
        if let Some(Some(channel)) = CHANNEL.get() {
            message.insert("channel".into(), Value::String(channel.clone()));
        }
        message.insert("event".into(), Value::String(event.id.clone()));
        let external = event.external_meeting_id.clone().or_else(|| {
            attrs
                .and_then(|a| non_empty_str(at(a, &["meeting", "external-meeting-id"])))
                .map(str::to_string)
        });
        if let Some(external) = external {
            message.insert("meeting".into(), Value::String(external));
        }
        match serde_json::to_string(&Value::Object(message)) {
            Ok(json) => Action::Replace(json),
            Err(_) => Action::Keep,
        }
    }
}

export!(SlackFormat);
