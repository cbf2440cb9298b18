//! The same plugin (the `plugin new` template) in Rust, Python and JavaScript: the cost of a
//! call that keeps and of one that parses and replaces a 1 KiB event, and the time from a warm
//! compile cache to the first call. `scripts/bench-plugin-languages.sh` builds the three and
//! runs this; the plugins are read from `$HOOKRELAY_LANG_PLUGINS` (default
//! `target/plugin-languages`), `LANG/build/bench-LANG.wasm`, and a language not built there is
//! skipped.

use std::{path::PathBuf, sync::Arc};

mod common;

use common::hook;
use criterion::{Criterion, criterion_group, criterion_main};
use hookrelay::{Event, Host, Payload, Plugin, PluginSet};

/// The template's settings: `site` set (user-joined is replaced), chat kept.
const SETTINGS: &str =
    "timeout_ms = 1000\nmemory_mib = 64\n[config]\nsite = \"bbb.example.org\"\nkeep_chat = true\n";

/// An event of `id` whose processed JSON is 1 KiB.
fn event(id: &str) -> Event {
    let processed = format!(
        r#"{{"data":{{"type":"event","id":"{id}","attributes":{{"meeting":{{"internal-meeting-id":"183f0bf3a0982a127bdb8161e0c44eb696b3e75c-1700000000000","external-meeting-id":"course-42"}},"user":{{"internal-user-id":"w_abcdefgh","external-user-id":"w_abcdefgh","name":"{}","role":"VIEWER","presenter":false}}}},"event":{{"ts":1700000000000}}}}}}"#,
        "x".repeat(700)
    );
    Event {
        source: 0,
        id: id.into(),
        internal_meeting_id: Some("183f0bf3a0982a127bdb8161e0c44eb696b3e75c-1700000000000".into()),
        external_meeting_id: Some("course-42".into()),
        processed: Arc::new(Payload::new(processed)),
        raw: None,
        meeting: None,
        tenant: None,
        filtered: false,
        named_only: false,
    }
}

fn built() -> Vec<(&'static str, Vec<u8>)> {
    let root = std::env::var_os("HOOKRELAY_LANG_PLUGINS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/plugin-languages"),
        PathBuf::from,
    );
    ["rust", "python", "js"]
        .into_iter()
        .filter_map(|lang| {
            let path = root.join(format!("bench-{lang}/build/bench-{lang}.wasm"));
            match std::fs::read(&path) {
                Ok(bytes) => Some((lang, bytes)),
                Err(_) => {
                    eprintln!("{lang}: {} not built, skipped", path.display());
                    None
                }
            }
        })
        .collect()
}

fn start(host: &Host, lang: &str, bytes: &[u8]) -> Plugin {
    common::start(host, lang, bytes, Some(SETTINGS)).0
}

fn languages(c: &mut Criterion) {
    let cache = tempfile::tempdir().expect("temp dir");
    let host = Host::new(Some(cache.path().to_path_buf())).expect("engine");
    let (keep, replace, hook) = (
        event("chat-group-message-sent"),
        event("user-joined"),
        hook(),
    );
    for (lang, bytes) in built() {
        let set = PluginSet {
            plugins: vec![Arc::new(start(&host, lang, &bytes))],
        };
        c.bench_function(&format!("{lang}: keep, 1 KiB event"), |b| {
            b.iter(|| set.apply(&keep, &hook, 1))
        });
        c.bench_function(&format!("{lang}: parse and replace, 1 KiB event"), |b| {
            b.iter(|| set.apply(&replace, &hook, 1))
        });
        let mut group = c.benchmark_group(format!("{lang}: warm cache to first call"));
        group.sample_size(10);
        group.bench_function("load from the cache, instantiate, init, one call", |b| {
            b.iter(|| {
                let set = PluginSet {
                    plugins: vec![Arc::new(start(&host, lang, &bytes))],
                };
                set.apply(&replace, &hook, 1)
            })
        });
        group.finish();
    }
}

criterion_group!(benches, languages);
criterion_main!(benches);
