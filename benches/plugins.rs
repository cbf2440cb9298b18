//! Micro-benchmarks of WebAssembly plugins: the per-event cost of the chain for a 1 KiB event
//! (no plugin, a `keep` plugin that reads typed fields only, a plugin that parses and rewrites
//! the JSON, the rules plugin with 1, 10 and 100 rules), and the cost of making a plugin ready
//! with and without the compile cache.

// Only the build helper is used here.
#[allow(dead_code)]
#[path = "../tests/it/support/plugins.rs"]
mod plugins;

use std::sync::Arc;

mod common;

use common::hook;
use criterion::{Criterion, criterion_group, criterion_main};
use hookrelay::{Event, Host, Payload, Plugin, PluginSet};
use plugins::plugin_wasm;

/// A user-joined event whose processed JSON is 1 KiB (the raw message is about as long).
fn event() -> Event {
    let pad = |n: usize| "x".repeat(n);
    let processed = format!(
        r#"{{"data":{{"type":"event","id":"user-joined","attributes":{{"meeting":{{"internal-meeting-id":"183f0bf3a0982a127bdb8161e0c44eb696b3e75c-1700000000000","external-meeting-id":"course-42"}},"user":{{"internal-user-id":"w_abcdefgh","external-user-id":"w_abcdefgh","name":"{}","role":"VIEWER","presenter":false}}}},"event":{{"ts":1700000000000}}}}}}"#,
        pad(700)
    );
    let raw = format!(
        r#"{{"envelope":{{"name":"UserJoinedMeetingEvtMsg","routing":{{"meetingId":"183f0bf3a0982a127bdb8161e0c44eb696b3e75c-1700000000000","userId":"w_abcdefgh"}},"timestamp":1700000000000}},"core":{{"header":{{"name":"UserJoinedMeetingEvtMsg"}},"body":{{"intId":"w_abcdefgh","extId":"w_abcdefgh","name":"{}","role":"VIEWER"}}}}}}"#,
        pad(700)
    );
    assert!(
        (1000..1100).contains(&processed.len()),
        "{}",
        processed.len()
    );
    Event {
        source: 0,
        id: "user-joined".into(),
        internal_meeting_id: Some("183f0bf3a0982a127bdb8161e0c44eb696b3e75c-1700000000000".into()),
        external_meeting_id: Some("course-42".into()),
        processed: Arc::new(Payload::new(processed)),
        raw: Some(Arc::new(Payload::new(raw))),
        meeting: Some(
            r#"{"internal-meeting-id":"183f0bf3a0982a127bdb8161e0c44eb696b3e75c-1700000000000","external-meeting-id":"course-42","name":"Course 42","is-breakout":false,"parent-id":"bbb-none","metadata":{"bbb-origin-server-name":"lms.example","bbb-context-id":"42"}}"#
                .into(),
        ),
        tenant: None,
        filtered: false,
        named_only: false,
    }
}

/// Compiles (or reads from `host`'s cache, as `from_cache` expects) and starts a plugin.
fn ready(host: &Host, name: &str, bytes: &[u8], from_cache: bool) -> Plugin {
    let (plugin, cached) = common::start(host, name, bytes, None);
    assert_eq!(cached, from_cache);
    plugin
}

fn set_of(host: &Host, crate_name: &str) -> PluginSet {
    let bytes = std::fs::read(plugin_wasm(crate_name)).expect("plugin");
    PluginSet {
        plugins: vec![Arc::new(ready(host, crate_name, &bytes, false))],
    }
}

fn per_event(c: &mut Criterion) {
    let host = Host::new(None).expect("engine");
    let (event, hook) = (event(), hook());
    let none = PluginSet::default();
    c.bench_function("plugin chain: no plugin, 1 KiB event", |b| {
        b.iter(|| none.apply(&event, &hook, 1))
    });
    let keep = set_of(&host, "testing_keep_typed");
    c.bench_function("plugin chain: keep on typed fields, 1 KiB event", |b| {
        b.iter(|| keep.apply(&event, &hook, 1))
    });
    let replace = set_of(&host, "testing_replace_json");
    c.bench_function("plugin chain: parse and replace JSON, 1 KiB event", |b| {
        b.iter(|| replace.apply(&event, &hook, 1))
    });
}

/// `n` rules that do not match the event (so that each is tried), on the event's id, on the
/// user's role and on the meeting's metadata in turn; the default keeps.
fn rules_toml(n: usize) -> String {
    let mut toml = String::from("[config]\ndefault = \"keep\"\n");
    for i in 0..n {
        let pattern = match i % 3 {
            0 => format!("pattern.data.id = [{{ prefix = \"nomatch-{i}-\" }}]"),
            1 => format!("pattern.data.attributes.user.role = [\"ROLE-{i}\"]"),
            _ => {
                format!("pattern.meeting.metadata.bbb-origin-server-name = [\"host-{i}.example\"]")
            }
        };
        toml.push_str(&format!(
            "[[config.rules]]\nname = \"r{i}\"\naction = \"drop\"\n{pattern}\n"
        ));
    }
    toml
}

fn rules(c: &mut Criterion) {
    let host = Host::new(None).expect("engine");
    let (event, hook) = (event(), hook());
    let bytes = std::fs::read(plugin_wasm("rules")).expect("plugin");
    for n in [1, 10, 100] {
        let (plugin, _) = common::start(&host, "rules", &bytes, Some(&rules_toml(n)));
        let set = PluginSet {
            plugins: vec![Arc::new(plugin)],
        };
        assert!(
            matches!(set.apply(&event, &hook, 1), hookrelay::Verdict::Keep),
            "no rule matches"
        );
        c.bench_function(
            &format!("plugin chain: rules, {n} rules, 1 KiB event"),
            |b| b.iter(|| set.apply(&event, &hook, 1)),
        );
    }
}

fn loading(c: &mut Criterion) {
    let bytes = std::fs::read(plugin_wasm("redact")).expect("plugin");
    let mut group = c.benchmark_group("plugin load (redact, 117 KB)");
    group.sample_size(10);
    let uncached = Host::new(None).expect("engine");
    group.bench_function("compile and start, no cache", |b| {
        b.iter(|| ready(&uncached, "redact", &bytes, false))
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let cached = Host::new(Some(dir.path().to_path_buf())).expect("engine");
    ready(&cached, "redact", &bytes, false);
    group.bench_function("read from the cache and start", |b| {
        b.iter(|| ready(&cached, "redact", &bytes, true))
    });
    group.finish();
}

criterion_group!(benches, per_event, rules, loading);
criterion_main!(benches);
