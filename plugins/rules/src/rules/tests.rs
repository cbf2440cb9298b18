//! Reading rules (errors name the rule and the key) and deciding events.

use serde_json::json;

use super::{Decision, Rules, View};

const JOINED: &str = r#"{"data":{"type":"event","id":"user-joined","attributes":{"meeting":{"internal-meeting-id":"int-1","external-meeting-id":"ext-1"},"user":{"internal-user-id":"w_1","external-user-id":"u1","name":"Ann","role":"MODERATOR","presenter":false}},"event":{"ts":1}}}"#;
const AUDIO: &str = r#"{"data":{"type":"event","id":"user-audio-voice-enabled","attributes":{"meeting":{"internal-meeting-id":"int-1","external-meeting-id":"ext-1"}},"event":{"ts":2}}}"#;

fn rules(default: Option<&str>, rules: serde_json::Value) -> Result<Rules, String> {
    Rules::from_config(default, Some(&rules.to_string()))
}

/// Decides with `meeting` as the facts of a meeting of its own (each call's internal meeting
/// id is new, so the cache never answers).
fn decide(r: &Rules, processed: &str, url: &str, meeting: Option<&str>) -> Decision {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let id = format!(
        "m{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let meeting = meeting.map(String::from);
    let ask = move || meeting.clone();
    r.decide(&View {
        processed,
        hook_id: 7,
        callback_url: url,
        meeting_id: None,
        get_raw: false,
        internal_meeting_id: Some(&id),
        meeting: &ask,
    })
}

#[test]
fn a_meetings_facts_are_asked_for_once() {
    let r = rules(
        None,
        json!([{"action": "drop", "pattern": {"meeting": {"is-breakout": [true]}}}]),
    )
    .expect("valid");
    let asked = std::cell::Cell::new(0);
    let ask = || {
        asked.set(asked.get() + 1);
        Some(r#"{"is-breakout":true}"#.to_string())
    };
    let unknown = || {
        asked.set(asked.get() + 1);
        None
    };
    for (id, ask) in [
        ("a", &ask as &dyn Fn() -> Option<String>),
        ("a", &ask),
        ("b", &unknown),
        ("b", &unknown),
    ] {
        let view = View {
            processed: JOINED,
            hook_id: 1,
            callback_url: "http://x/",
            meeting_id: None,
            get_raw: false,
            internal_meeting_id: Some(id),
            meeting: ask,
        };
        let keep = id == "b";
        assert_eq!(
            r.decide(&view) == (Decision::Default { keep: true }),
            keep,
            "{id}"
        );
    }
    assert_eq!(asked.get(), 3, "once for a, each time for the unknown b");
}

#[test]
fn the_first_matching_rule_decides_else_the_default() {
    let r = rules(
        Some("drop"),
        json!([
            {"name": "no-audio", "action": "drop", "pattern": {"data": {"id": [{"prefix": "user-audio-"}]}}},
            {"action": "keep", "pattern": {"data": {"id": ["user-joined", "user-audio-voice-enabled"]}}},
        ]),
    )
    .expect("valid");
    assert_eq!(
        decide(&r, AUDIO, "http://x/", None),
        Decision::Rule {
            index: 0,
            keep: false
        }
    );
    assert_eq!(
        decide(&r, JOINED, "http://x/", None),
        Decision::Rule {
            index: 1,
            keep: true
        }
    );
    assert_eq!(r.name(0), "no-audio");
    assert_eq!(r.name(1), "rule-2", "a rule without a name");
    let other = JOINED.replace("user-joined", "user-left");
    assert_eq!(
        decide(&r, &other, "http://x/", None),
        Decision::Default { keep: false }
    );
}

#[test]
fn patterns_see_the_hook_and_the_meeting() {
    let r = rules(
        None,
        json!([
            {"name": "tenant", "action": "drop", "pattern": {
                "hook": {"callback-url": [{"prefix": "https://acme.example/"}]},
                "meeting": {"metadata": {"tenant": [{"anything-but": "acme"}]}}
            }},
            {"name": "breakouts", "action": "drop", "pattern": {"meeting": {"is-breakout": [true]}}},
        ]),
    )
    .expect("valid");
    let acme = r#"{"metadata":{"tenant":"acme"},"is-breakout":false}"#;
    let other = r#"{"metadata":{"tenant":"globex"},"is-breakout":false}"#;
    let breakout = r#"{"metadata":{"tenant":"acme"},"is-breakout":true}"#;
    let url = "https://acme.example/hook";
    assert_eq!(
        decide(&r, JOINED, url, Some(acme)),
        Decision::Default { keep: true }
    );
    assert_eq!(
        decide(&r, JOINED, url, Some(other)),
        Decision::Rule {
            index: 0,
            keep: false
        }
    );
    assert_eq!(
        decide(&r, JOINED, "https://globex.example/", Some(other)),
        Decision::Default { keep: true },
        "another hook"
    );
    assert_eq!(
        decide(&r, JOINED, url, Some(breakout)),
        Decision::Rule {
            index: 1,
            keep: false
        }
    );
    assert_eq!(
        decide(&r, JOINED, url, None),
        Decision::Default { keep: true },
        "a meeting the relay does not know matches no meeting field"
    );
}

#[test]
fn errors_name_the_rule_and_the_key() {
    let cases = [
        (json!([{"action": "keep"}]), "rule 1: `pattern` is missing"),
        (
            json!([{"name": "a", "action": "keep", "pattern": {"data": {"id": ["x"]}}}, {"name": "b", "action": "send", "pattern": {"data": {"id": ["x"]}}}]),
            "rule 2 (\"b\"): `action` is \"keep\" or \"drop\"",
        ),
        (
            json!([{"name": "c", "action": "drop", "patern": {}}]),
            "rule 1 (\"c\"): unknown key `patern`",
        ),
        (
            json!([{"name": "d", "action": "drop", "pattern": {"data": {"id": [{"prefx": "user-"}]}}}]),
            "rule 1 (\"d\"): `pattern.data.id",
        ),
        (
            json!([{"action": "drop", "pattern": {"data": {"id": "user-joined"}}}]),
            "rule 1: `pattern.data.id",
        ),
        (json!({"action": "drop"}), "`rules` is a list of tables"),
    ];
    for (config, said) in cases {
        let err = rules(None, config.clone()).err().unwrap_or_default();
        assert!(
            err.starts_with(said),
            "{config}: {err:?} should start with {said:?}"
        );
    }
    let err = Rules::from_config(Some("maybe"), None)
        .err()
        .unwrap_or_default();
    assert!(err.contains("`default`"), "{err}");
}

#[test]
fn no_rules_keep_everything_by_default() {
    let r = Rules::from_config(None, None).expect("valid");
    assert_eq!(
        decide(&r, JOINED, "http://x/", None),
        Decision::Default { keep: true }
    );
    assert!(r.summary().contains("0 rule(s)"));
}
