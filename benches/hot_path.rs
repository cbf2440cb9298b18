//! Micro-benchmarks of the per-event hot path: processing a bus message (decode, map, state),
//! matching it against many hooks, and building and signing one callback body.

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use hookrelay::{
    EventFilter, Hook, Mappings, Processor, Registry,
    base::{digest::Algorithm, form::form_encode},
    callback_checksum, matcher, signed_url, spec_body,
};

fn fixture(line: usize) -> String {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/bbb-webhooks/raw-events.json"
    );
    std::fs::read_to_string(p)
        .expect("fixture")
        .lines()
        .nth(line - 1)
        .expect("line")
        .to_string()
}

fn process(c: &mut Criterion) {
    let mut p = Processor::new(Mappings::new(86_400_000, false), EventFilter::default());
    // Meeting and both users known, as in a running meeting.
    for line in [1, 2, 6] {
        p.process(&Arc::from(fixture(line).as_str()), 1)
            .expect("fixture maps");
    }
    let muted: Arc<str> = fixture(8).into();
    c.bench_function("process user-audio-muted (decode, map, state)", |b| {
        b.iter(|| p.process(&muted, 2).expect("maps"))
    });
    let created: Arc<str> = fixture(1).into();
    c.bench_function("process meeting-created (3 KiB message)", |b| {
        b.iter(|| p.process(&created, 2).expect("maps"))
    });
}

fn matching(c: &mut Criterion) {
    let registry = Registry::default();
    registry.replace_all((0..1000).map(|i| Hook {
        id: hookrelay::base::ids::HookId(i),
        callback_url: format!("https://h.example/{i}"),
        meeting_id: (i % 2 == 0).then(|| format!("meeting-{}", i % 100)),
        event_ids: (i % 3 == 0).then(|| vec!["user-joined".to_string()]),
        get_raw: false,
        permanent: false,
        tenant: None,
        disabled: None,
        signing: None,
    }));
    let snapshot = registry.load();
    c.bench_function("match among 1,000 hooks", |b| {
        let wanted = matcher::Wanted {
            event_id: "user-joined",
            named_only: false,
            external_meeting_id: Some("meeting-42"),
            tenant: None,
        };
        b.iter(|| matcher::matching(&snapshot, wanted).count())
    });
}

fn signing(c: &mut Criterion) {
    let json = r#"{"data":{"type":"event","id":"user-joined","attributes":{"meeting":{"internal-meeting-id":"8043c8452ae9830aac14c517adff3839dbd9228f-1698771157700","external-meeting-id":"random-9019868"},"user":{"internal-user-id":"w_xfsb9gxtlfom","external-user-id":"w_xfsb9gxtlfom","name":"John Doe","role":"MODERATOR","presenter":false,"guest":false}},"event":{"ts":1708381133689}}}"#;
    let encoded = form_encode(json);
    c.bench_function("form-encode a 400-byte event (once per event)", |b| {
        b.iter(|| form_encode(json))
    });
    c.bench_function("body + sha1 checksum + URL (per callback)", |b| {
        b.iter(|| {
            let body = spec_body(&encoded, 1_700_000_000_000);
            let sum =
                callback_checksum(Algorithm::Sha1, "https://h.example/cb?x=1", &body, "secret");
            signed_url("https://h.example/cb?x=1", &sum)
        })
    });
}

criterion_group!(benches, process, matching, signing);
criterion_main!(benches);
