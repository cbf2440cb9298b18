//! The CPU cost of the conference metrics' reconciliation with BBB's API, without the
//! network: parsing a `getMeetings` answer and replacing the state with it (what a relay does
//! every `bbb.reconcile_interval_s`), and rendering the `bbb_*` series at a scrape.

use std::{hint::black_box, sync::Arc};

use criterion::{Criterion, criterion_group, criterion_main};
use hookrelay::{ConferenceExport, Metrics, SharedConference, seed};

/// A `getMeetings` answer of `meetings` meetings with `per_meeting` attendees each (a third
/// on the phone, a third with a camera, half of the others listening only), origin metadata.
fn get_meetings(meetings: usize, per_meeting: usize) -> String {
    let mut out = String::from("<response><returncode>SUCCESS</returncode><meetings>");
    for m in 0..meetings {
        out.push_str(&format!(
            "<meeting><meetingName>Course {m}</meetingName><meetingID>ext-{m}</meetingID>\
             <internalMeetingID>int-{m}-1700000000000</internalMeetingID><isBreakout>false</isBreakout>\
             <participantCount>{per_meeting}</participantCount>\
             <metadata><bbb-origin>Moodle</bbb-origin><bbb-origin-server-name>lms{}.example</bbb-origin-server-name></metadata><attendees>",
            m % 3
        ));
        for a in 0..per_meeting {
            out.push_str(&format!(
                "<attendee><userID>w_{m}_{a}</userID><fullName>User {a}</fullName><role>VIEWER</role>\
                 <isPresenter>false</isPresenter><isListeningOnly>{}</isListeningOnly>\
                 <hasJoinedVoice>{}</hasJoinedVoice><hasVideo>{}</hasVideo><clientType>{}</clientType></attendee>",
                a % 2 == 0,
                a % 2 == 1,
                a % 3 == 0,
                if a % 3 == 1 { "DIAL-IN" } else { "HTML5" }
            ));
        }
        out.push_str("</attendees></meeting>");
    }
    out.push_str("</meetings></response>");
    out
}

fn reconcile(c: &mut Criterion) {
    let mut group = c.benchmark_group("reconcile");
    for (meetings, per_meeting) in [(10, 20), (100, 20), (100, 100)] {
        let xml = get_meetings(meetings, per_meeting);
        let state: SharedConference = Default::default();
        group.bench_function(
            format!(
                "getMeetings {meetings}x{per_meeting} ({} KiB)",
                xml.len() / 1024
            ),
            |b| {
                b.iter(|| {
                    let rooms = seed::parse(black_box(&xml)).expect("parses");
                    let mut c = state.lock().expect("lock");
                    c.seed(rooms, 1);
                    black_box(c.take_changes());
                })
            },
        );
    }
    group.finish();
}

fn scrape(c: &mut Criterion) {
    let state: SharedConference = Default::default();
    let rooms = seed::parse(&get_meetings(100, 20)).expect("parses");
    state.lock().expect("lock").seed(rooms, 1);
    let metrics = Metrics::with_exports(|m| {
        ConferenceExport {
            states: vec![(Arc::from("default"), state.clone())],
            connected: m.bus.connected.clone(),
            holder: None,
            per_server: false,
            joined: Default::default(),
        }
        .exports()
    });
    c.bench_function("scrape with 100 meetings of 20", |b| {
        b.iter(|| black_box(metrics.render()))
    });
}

criterion_group!(benches, reconcile, scrape);
criterion_main!(benches);
