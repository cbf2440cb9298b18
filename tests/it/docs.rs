//! `docs/events.md`, the integrators' event catalogue, is made from the test fixtures by the
//! relay's own mapping, so that it cannot go stale: this test fails when the file differs from
//! what the code makes now (`UPDATE_DOCS=1 cargo test --test it docs` writes it again).

use std::{collections::BTreeMap, sync::Arc};

use hookrelay::{EventFilter, Hook, OUTPUT_IDS, PluginSet, replay};
use serde_json::{Value, json};

use crate::support::bbb3;

const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/events.md");

const MID: &str = "8043c8452ae9830aac14c517adff3839dbd9228f-1698771157700";
const UID: &str = "w_xfsb9gxtlfom";

/// An akka-apps message of the recorded meeting, from its user `UID`.
fn akka(name: &str, body: Value) -> Value {
    json!({
        "envelope": {"name": name, "routing": {"msgType": "BROADCAST_TO_MEETING", "meetingId": MID, "userId": UID}, "timestamp": 1_698_771_250_000u64},
        "core": {"header": {"name": name, "meetingId": MID, "userId": UID}, "body": body}
    })
}

/// Messages for the meeting-time ids the recorded meeting has no example of, shaped as in
/// bbb-events.md section 2.
fn more_messages() -> Vec<Value> {
    vec![
        akka(
            "RecordingStatusChangedEvtMsg",
            json!({"recording": true, "setBy": UID}),
        ),
        akka(
            "RecordingStatusChangedEvtMsg",
            json!({"recording": false, "setBy": UID}),
        ),
        akka(
            "RecordingStatusChangedEvtMsg",
            json!({"recording": "true", "setBy": UID}),
        ),
        akka(
            "SetCurrentPresentationEvtMsg",
            json!({"podId": "DEFAULT_PRESENTATION_POD", "presentationId": "a1b2c3-1698771250000"}),
        ),
        akka(
            "PresenterUnassignedEvtMsg",
            json!({"intId": UID, "name": "John Doe", "assignedBy": UID}),
        ),
        akka(
            "UserMutedVoiceEvtMsg",
            json!({"voiceConf": "71347", "intId": UID, "voiceUserId": UID}),
        ),
        akka(
            "PadContentEvtMsg",
            json!({"padId": "notes", "externalId": "shared-notes", "rev": 3, "start": 0, "end": 5, "text": "Hello"}),
        ),
        akka(
            "TranscriptUpdatedEvtMsg",
            json!({"transcriptId": "t-1", "transcript": "hello everyone", "locale": "en-US", "result": true}),
        ),
    ]
}

/// The recording's processing steps after the meeting (from-rap), then bbb-web's messages.
fn recording_messages() -> Vec<Value> {
    let mut out: Vec<Value> = [
        "archive_started", "archive_ended", "sanity_started", "sanity_ended",
        "post_archive_started", "post_archive_ended", "process_started", "process_ended",
        "post_process_started", "post_process_ended", "publish_started", "publish_ended",
        "post_publish_started", "post_publish_ended",
    ]
    .iter()
    .map(|step| {
        json!({
            "header": {"timestamp": 1_698_771_400u64, "name": step, "current_time": 1_698_771_400u64, "version": "0.0.1"},
            "payload": {"meeting_id": MID, "record_id": MID, "workflow": "presentation", "success": true, "step_time": 812,
                        "recorded": true, "duration": 95_000,
                        "metadata": {"meetingName": "random-9019868", "isBreakout": "false", "meetingId": "random-9019868"},
                        "playback": {"format": "presentation", "link": "https://bbb.example.com/playback/presentation/2.3/8043c845", "processing_time": 7000, "duration": 95_000, "size": 1_048_576},
                        "download": null}
        })
    })
    .collect();
    out.extend(bbb3::POST_EVENTS.map(bbb3::message));
    for name in [
        "PublishedRecordingSysMsg",
        "UnpublishedRecordingSysMsg",
        "DeletedRecordingSysMsg",
    ] {
        out.push(json!({
            "envelope": {"name": name, "routing": {"sender": "bbb-web"}, "timestamp": 1_698_771_500_000u64},
            "core": {"header": {"name": name}, "body": {"recordId": MID}}
        }));
    }
    out
}

/// The catalogue as Markdown: one example per event id the fixtures hold, in catalogue order.
fn render() -> String {
    let raw = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/bbb-webhooks/raw-events.json"
    ))
    .expect("fixture");
    let mut messages: Vec<Arc<str>> = replay::read_messages(&raw).expect("messages");
    // Before the users leave (the last three lines): the ids the recorded meeting lacks.
    let end = messages.split_off(messages.len() - 3);
    messages.extend(more_messages().iter().map(|m| Arc::from(m.to_string())));
    messages.extend(
        bbb3::MESSAGES
            .iter()
            .map(|n| Arc::from(bbb3::message(n).to_string())),
    );
    messages.extend(end);
    messages.extend(
        recording_messages()
            .iter()
            .map(|m| Arc::from(m.to_string())),
    );
    let hook = Hook {
        id: hookrelay::base::ids::HookId(1),
        callback_url: "https://app.example/bbb".into(),
        meeting_id: None,
        event_ids: None,
        get_raw: false,
        permanent: false,
        tenant: None,
        disabled: None,
        signing: None,
    };
    let out = replay::run(
        &messages,
        vec![hook],
        &PluginSet::default(),
        // The events beyond the reference too, for their examples.
        EventFilter {
            beyond_reference: true,
            ..EventFilter::default()
        },
    );
    let mut examples: BTreeMap<&str, Value> = BTreeMap::new();
    for cb in &out.hooks[0].callbacks {
        crate::support::schema::assert_meets_schema(
            &serde_json::from_str(cb.payload.text()).expect("json"),
        );
        let id = OUTPUT_IDS
            .iter()
            .find(|i| **i == cb.event_id)
            .expect("a catalogue id");
        examples.entry(id).or_insert_with(|| {
            let mut v: Value = serde_json::from_str(cb.payload.text()).expect("json");
            // The time the relay processed the message: different on every run.
            v["data"]["event"]["ts"] = Value::from(1_698_771_157_700u64);
            v
        });
    }
    let mut md = String::from(
        "# Event catalogue\n\n\
         <!-- Generated by tests/it/docs.rs from tests/fixtures/bbb-webhooks/raw-events.json \
         (real bus messages of one meeting) and the messages that test adds for the ids the \
         meeting lacks, through hookrelay's own mapping; do not edit. -->\n\n\
         Every callback's `event` field holds one of these (in bbb-webhooks' form, which a \
         server that took over from bbb-webhooks sends: a one-element array of it; with \
         `body = \"json\"`, the whole body). `data.event.ts` is when the relay processed the bus message \
         (fixed here). Field by field, the events follow the reference service \
         (`bbb-events.md`); [differences.md](differences.md) lists where \
         hookrelay deliberately differs.\n\n\
         Beyond the reference's catalogue, hookrelay maps BigBlueButton 3.x's breakout rooms, \
         why a meeting ends, role and away changes and the timer (their bus messages, built \
         from BigBlueButton's case classes, are in `tests/fixtures/bbb-3x/`, whose README cites \
         the sources). A receiver that did not ask sees nothing new: these go only to hooks \
         whose `eventID` names them, unless the operator sets `[events] beyond_reference = \
         true` (then to every matching hook, raw hooks included, like the others). \
         `rap-post-events-started` and `rap-post-events-ended` are the reference 3.7's own, \
         and go to every matching hook. Every id has a JSON Schema (draft 2020-12) in \
         [schemas/](schemas/) (`hookrelay events schema ID` prints it; the package installs \
         them in `/usr/share/hookrelay/schemas/`); [integrators.md](integrators.md) shows how \
         to generate types from them.\n\n",
    );
    md.push_str("| event id | who gets it | example | schema |\n| --- | --- | --- | --- |\n");
    for id in OUTPUT_IDS {
        let cell = if examples.contains_key(id) {
            format!("[below](#{id})")
        } else {
            "no example: the fixtures have no such message".to_string()
        };
        let audience = hookrelay::event_schema::audience(id);
        let schema = hookrelay::event_schema::file_name(id);
        md.push_str(&format!(
            "| `{id}` | {audience} | {cell} | [{schema}](schemas/{schema}) |\n"
        ));
    }
    for id in OUTPUT_IDS {
        if let Some(v) = examples.get(id) {
            let json = serde_json::to_string_pretty(v).expect("json");
            md.push_str(&format!("\n## {id}\n\n```json\n{json}\n```\n"));
        }
    }
    md
}

#[test]
fn the_event_catalogue_in_docs_is_current() {
    let now = render();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(FILE, &now).expect("write docs/events.md");
    }
    let on_disk = std::fs::read_to_string(FILE).unwrap_or_default();
    assert!(
        on_disk == now,
        "docs/events.md is stale: run UPDATE_DOCS=1 cargo test --test it docs"
    );
    let missing: Vec<&&str> = OUTPUT_IDS
        .iter()
        .filter(|id| !now.contains(&format!("\n## {id}\n")))
        .collect();
    assert!(missing.is_empty(), "no example of {missing:?}");
}

/// `docs/schemas/` holds what `hookrelay events schema --out` writes, file for file.
#[test]
fn the_schemas_in_docs_are_current() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/schemas");
    let files = hookrelay::event_schema::files();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(dir).expect("docs/schemas");
        for (name, text) in &files {
            std::fs::write(format!("{dir}/{name}"), text).expect("write a schema");
        }
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    on_disk.sort();
    let mut names: Vec<String> = files.iter().map(|(n, _)| n.clone()).collect();
    names.sort();
    assert_eq!(
        on_disk, names,
        "docs/schemas: run UPDATE_DOCS=1 cargo test --test it docs"
    );
    for (name, text) in &files {
        let disk = std::fs::read_to_string(format!("{dir}/{name}")).unwrap_or_default();
        assert!(
            &disk == text,
            "docs/schemas/{name} is stale: run UPDATE_DOCS=1 cargo test --test it docs"
        );
    }
}

/// A clone in any folder passes its tests: nothing the tests, benches, examples, fuzz targets or
/// scripts read lies outside the project (the specification beside it is for reading only).
#[test]
fn nothing_reads_outside_the_clone() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut offenders = Vec::new();
    let mut dirs: Vec<_> = [
        "src", "tests", "benches", "examples", "fuzz", "scripts", ".ci",
    ]
    .iter()
    .map(|d| root.join(d))
    .collect();
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if !path.ends_with("target") && !path.ends_with("node_modules") {
                    dirs.push(path);
                }
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for (n, line) in text.lines().enumerate() {
                if line.contains("../shared/") || line.contains("\"/../") {
                    offenders.push(format!("{}:{}: {line}", path.display(), n + 1));
                }
            }
        }
    }
    // This test's own patterns are the one allowed mention.
    offenders.retain(|o| !o.contains("tests/it/docs.rs"));
    assert!(offenders.is_empty(), "{offenders:#?}");
}
