//! The gauge histograms' text, and the whole exposition parsed as OpenMetrics.

use super::*;
use crate::conference::{Origin, Room};

#[test]
fn a_gauge_histogram_counts_rooms_per_bound_and_writes_gcount_and_gsum() {
    let mut out = String::new();
    gauge_histogram(
        &mut out,
        ("x", "help"),
        &MEDIA_BUCKETS,
        &[(None, vec![0, 3, 200])],
    );
    let want = "# HELP x help\n# TYPE x gaugehistogram\n\
        x_bucket{le=\"0\"} 1\nx_bucket{le=\"1\"} 1\nx_bucket{le=\"5\"} 2\n\
        x_bucket{le=\"15\"} 2\nx_bucket{le=\"30\"} 2\nx_bucket{le=\"60\"} 2\n\
        x_bucket{le=\"90\"} 2\nx_bucket{le=\"120\"} 2\nx_bucket{le=\"+Inf\"} 3\n\
        x_gcount 3\nx_gsum 203\n";
    assert_eq!(out, want);
}

/// The relay's whole exposition with the conference in it parses as OpenMetrics (the
/// merged endpoint parses it too), with no meeting and with one.
#[test]
fn the_exposition_parses_as_openmetrics_empty_or_not() {
    let state: SharedConference = Default::default();
    let m = crate::metrics::Metrics::with_exports(|m| {
        ConferenceExport {
            states: vec![(Arc::from("default"), state.clone())],
            connected: m.bus.connected.clone(),
            holder: None,
            per_server: false,
            joined: Default::default(),
        }
        .exports()
    });
    // Before the state is read back, none of it shows: not an empty server.
    assert!(!m.render().contains("bbb_"), "{}", m.render());
    (state.lock().unwrap()).restore(
        Default::default(),
        Default::default(),
        &Default::default(),
        1,
    );
    assert!(m.render().contains("\nbbb_meetings 0\n"), "{}", m.render());
    let parse = |text: &str| {
        openmetrics_parser::openmetrics::parse_openmetrics(text)
            .unwrap_or_else(|e| panic!("{e:?}\n{text}"))
    };
    let empty = parse(&m.render());
    assert!(
        !empty
            .families
            .contains_key("bbb_meetings_participants_origin")
    );
    let mut room = Room {
        origin: Some(Origin {
            server: "lms".into(),
            name: "moodle".into(),
        }),
        ..Default::default()
    };
    room.users.insert("u".into(), "html5".into());
    state.lock().unwrap().rooms.insert("m".into(), room);
    let text = m.render();
    let parsed = parse(&text);
    assert!(parsed.families.contains_key("bbb_room_participants"));
    assert!(text.contains("bbb_room_participants_gcount 1\n"));
    assert!(text.contains(r#"bbb_meetings_participants_origin{server="lms",name="moodle"} 1"#));
    assert!(text.ends_with("# EOF\n"));
}

/// With `[[sources]]`, each series is one per server, labelled `server`, and still parses as
/// OpenMetrics; the origins stay summed (their `server` label is the meeting's origin).
#[test]
fn per_server_series_carry_the_server_label() {
    let (a, b): (SharedConference, SharedConference) = Default::default();
    let m = crate::metrics::Metrics::with_exports(|m| {
        ConferenceExport {
            states: vec![
                (Arc::from("bbb1"), a.clone()),
                (Arc::from("bbb2"), b.clone()),
            ],
            connected: m.bus.connected.clone(),
            holder: None,
            per_server: true,
            joined: Default::default(),
        }
        .exports()
    });
    for s in [&a, &b] {
        (s.lock().unwrap()).restore(
            Default::default(),
            Default::default(),
            &Default::default(),
            1,
        );
    }
    let mut room = Room {
        origin: Some(Origin {
            server: "lms".into(),
            name: "moodle".into(),
        }),
        ..Default::default()
    };
    room.users.insert("u".into(), "html5".into());
    a.lock().unwrap().rooms.insert("m".into(), room);
    let text = m.render();
    openmetrics_parser::openmetrics::parse_openmetrics(&text)
        .unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    for line in [
        "bbb_meetings{server=\"bbb1\"} 1\n",
        "bbb_meetings{server=\"bbb2\"} 0\n",
        "bbb_meetings_participant_clients{server=\"bbb1\",type=\"html5\"} 1\n",
        "bbb_room_participants_bucket{server=\"bbb1\",le=\"1\"} 1\n",
        "bbb_room_participants_gcount{server=\"bbb2\"} 0\n",
        // Neither bus is subscribed in this test.
        "bbb_api_up{server=\"bbb1\"} 0\n",
        "bbb_meetings_participants_origin{server=\"lms\",name=\"moodle\"} 1\n",
    ] {
        assert!(text.contains(line), "{line}{text}");
    }
    assert!(!text.contains("\nbbb_meetings "), "{text}");
}
