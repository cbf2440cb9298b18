//! Recording events: bbb-web's published / unpublished / deleted SysMsgs, and the recording
//! pipeline's step messages (`bigbluebutton:from-rap`, header/payload shape).

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{MapError, Mapped, put, with_meeting};
use crate::event::{
    decode::{Message, path, truthy, truthy_str},
    mapping::Mappings,
};

/// RAP step names that are delivered, and their ids.
const STEPS: &[(&str, &str)] = &[
    ("archive_started", "rap-archive-started"),
    ("archive_ended", "rap-archive-ended"),
    ("sanity_started", "rap-sanity-started"),
    ("sanity_ended", "rap-sanity-ended"),
    ("post_archive_started", "rap-post-archive-started"),
    ("post_archive_ended", "rap-post-archive-ended"),
    ("process_started", "rap-process-started"),
    ("process_ended", "rap-process-ended"),
    ("post_process_started", "rap-post-process-started"),
    ("post_process_ended", "rap-post-process-ended"),
    ("publish_started", "rap-publish-started"),
    ("publish_ended", "rap-publish-ended"),
    ("post_publish_started", "rap-post-publish-started"),
    ("post_publish_ended", "rap-post-publish-ended"),
    // The post-scripts of the events step (bbb-webhooks 3.7's own addition).
    ("post_events_started", "rap-post-events-started"),
    ("post_events_ended", "rap-post-events-ended"),
    ("published", "rap-published"),
    ("unpublished", "rap-unpublished"),
    ("deleted", "rap-deleted"),
];

pub(super) fn sys_msg(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    let id = match msg.name.as_str() {
        "PublishedRecordingSysMsg" => "rap-published",
        "UnpublishedRecordingSysMsg" => "rap-unpublished",
        _ => "rap-deleted",
    };
    let mut attributes = with_meeting(msg, m);
    put(&mut attributes, "record-id", msg.body_field("recordId"));
    Ok(Some(Mapped::new(id, attributes)))
}

/// A recording pipeline step; `Ok(None)` for any other message (or an unknown step).
pub(super) fn rap_step(msg: &Message, m: &Mappings) -> Result<Option<Mapped>, MapError> {
    // Only the header/payload shape: an envelope message with a step-like name is not a step.
    if msg.value.contains_key("envelope") || !msg.value.contains_key("payload") {
        return Ok(None);
    }
    let Some(name) = truthy_str(path(&msg.value, &["header", "name"])) else {
        return Ok(None);
    };
    let Some((_, id)) = STEPS.iter().find(|(n, _)| *n == name) else {
        return Ok(None);
    };
    super::needs::check(msg, "recording step", super::needs::RAP_STEP)?;
    let payload = msg.value.get("payload").and_then(Value::as_object);
    let p = |k: &str| payload.and_then(|p| p.get(k));

    let mut meeting = Map::new();
    if let Some(mid) = msg.meeting_id() {
        meeting.insert("internal-meeting-id".into(), mid.into());
    }
    let external = truthy_str(p("external_meeting_id"))
        .or_else(|| msg.meeting_id().and_then(|mid| m.external_meeting(mid)));
    if let Some(e) = external {
        meeting.insert("external-meeting-id".into(), e.into());
    }
    let mut a = Map::new();
    a.insert("meeting".into(), Value::Object(meeting));
    put(&mut a, "record-id", p("record_id"));
    if matches!(*id, "rap-published" | "rap-unpublished" | "rap-deleted") {
        // The reference meant to send the format here but never does (section 9, item 16).
        put(&mut a, "format", p("format"));
    }
    put(&mut a, "success", p("success"));
    put(&mut a, "step-time", p("step_time"));
    if *id == "rap-archive-ended" {
        let recorded = p("recorded").filter(|v| truthy(Some(v))).cloned();
        a.insert("recorded".into(), recorded.unwrap_or(false.into()));
        let duration = p("duration").filter(|v| truthy(Some(v))).cloned();
        a.insert("duration".into(), duration.unwrap_or(0.into()));
    }
    if truthy(p("workflow")) {
        put(&mut a, "workflow", p("workflow"));
    }
    if *id == "rap-publish-ended" {
        let missing = |field| MapError::missing("publish_ended", field);
        let metadata = p("metadata")
            .filter(|v| v.is_object())
            .ok_or(missing("payload.metadata"))?;
        let playback = p("playback")
            .filter(|v| v.is_object())
            .ok_or(missing("payload.playback"))?;
        let mut r = Map::new();
        put(&mut r, "name", metadata.get("meetingName"));
        put(&mut r, "is-breakout", metadata.get("isBreakout"));
        put(&mut r, "start-time", p("start_time"));
        put(&mut r, "end-time", p("end_time"));
        put(&mut r, "size", playback.get("size"));
        put(&mut r, "raw-size", p("raw_size"));
        put(&mut r, "metadata", Some(metadata));
        put(&mut r, "playback", Some(playback));
        put(&mut r, "download", p("download"));
        a.insert("recording".into(), Value::Object(r));
    }
    Ok(Some(Mapped {
        id: Cow::Borrowed(id),
        attributes: a,
        ts: step_ts(msg),
    }))
}

/// The step's time in milliseconds: `header.current_time` is in seconds (the reference sends
/// it as is: section 9, item 17). Missing: the time of processing.
fn step_ts(msg: &Message) -> Option<Value> {
    let t = path(&msg.value, &["header", "current_time"])?;
    let secs = t
        .as_u64()
        .or_else(|| t.as_f64().map(|f| f as u64))
        .or_else(|| t.as_str()?.parse().ok())?;
    // Already milliseconds (after 2286-11-20 in seconds): keep.
    Some(
        if secs >= 10_000_000_000 {
            secs
        } else {
            secs.saturating_mul(1000)
        }
        .into(),
    )
}
