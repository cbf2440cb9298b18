//! Constants and message builders shared by the tests (and the load tool).

use std::time::Duration;

/// The shared secret of every test relay.
pub(crate) const SECRET: &str = "test-secret-Zq9";

/// Longest any test waits for something that should happen.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// The program `name` on the PATH, if any.
pub(crate) fn on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A loopback port that was free a moment ago (another process may still take it).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A line of the BBB fixtures (1-based), and the processed event the reference made from it.
pub(crate) fn fixture(line: usize) -> (String, String) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bbb-webhooks/");
    let read = |f: &str| {
        std::fs::read_to_string(format!("{dir}{f}"))
            .expect("fixture file")
            .lines()
            .nth(line - 1)
            .expect("fixture line")
            .to_string()
    };
    (read("raw-events.json"), read("mapped-events.json"))
}

/// Sets `data.event.ts` of a processed event to 0, for comparisons.
pub(crate) fn without_ts(json: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(json).expect("event JSON");
    v["data"]["event"]["ts"] = 0.into();
    v.to_string()
}

/// Where a `scripts/ensure-*.sh` installs tools: `$env` when set, else `hookrelay/name` in
/// `$XDG_CACHE_HOME` or `~/.cache`.
pub(crate) fn tool_dir(env: &str, name: &str) -> std::path::PathBuf {
    if let Ok(v) = std::env::var(env) {
        return v.into();
    }
    let cache = std::env::var("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache")
        });
    cache.join("hookrelay").join(name)
}

/// A `UserJoinedMeetingEvtMsg` of meeting `mid` for user `uid`.
pub(crate) fn user_joined(mid: &str, uid: &str, name: &str) -> String {
    serde_json::json!({
        "envelope": {"name": "UserJoinedMeetingEvtMsg", "routing": {"msgType": "BROADCAST_TO_MEETING", "meetingId": mid, "userId": uid}, "timestamp": 1},
        "core": {"header": {"name": "UserJoinedMeetingEvtMsg", "meetingId": mid, "userId": uid},
                 "body": {"intId": uid, "extId": format!("ext-{uid}"), "name": name, "role": "VIEWER", "guest": false, "presenter": false}}
    })
    .to_string()
}

/// A `MeetingCreatedEvtMsg` for internal id `mid`, external id `ext`.
pub(crate) fn meeting_created(mid: &str, ext: &str) -> String {
    let (raw, _) = fixture(1);
    raw.replace(
        "8043c8452ae9830aac14c517adff3839dbd9228f-1698771157700",
        mid,
    )
    .replace("random-9019868", ext)
}

/// A `MeetingDestroyedEvtMsg` for internal id `mid`.
pub(crate) fn meeting_ended(mid: &str) -> String {
    serde_json::json!({
        "envelope": {"name": "MeetingDestroyedEvtMsg", "routing": {"sender": "bbb-apps-akka"}, "timestamp": 1},
        "core": {"header": {"name": "MeetingDestroyedEvtMsg"}, "body": {"meetingId": mid}}
    })
    .to_string()
}

/// `data.attributes.user.name` of a processed event (the tests number users by name).
pub(crate) fn user_name(event: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(event).expect("event JSON");
    v["data"]["attributes"]["user"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The value of one series in a metrics text (`name{labels}` exactly as exposed); 0 when absent.
pub(crate) fn metric_value(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A `MeetingCreatedEvtMsg` like [`meeting_created`] whose meeting carries `metadata`.
pub(crate) fn meeting_created_with_metadata(
    mid: &str,
    ext: &str,
    metadata: &serde_json::Value,
) -> String {
    meeting_created(mid, ext).replace(
        r#""metadataProp":{"metadata":{}}"#,
        &format!(r#""metadataProp":{{"metadata":{metadata}}}"#),
    )
}

/// Checks a hook's deliveries: every expected name once in order, apart from re-sent callbacks;
/// returns how many were duplicates.
pub(crate) fn check_no_loss(names: &[String], expected: usize) -> usize {
    let mut seen = std::collections::HashSet::new();
    let firsts: Vec<&String> = names.iter().filter(|n| seen.insert(n.as_str())).collect();
    let want: Vec<String> = (0..expected).map(|i| format!("n{i}")).collect();
    assert_eq!(
        firsts.len(),
        expected,
        "lost {}",
        expected - firsts.len().min(expected)
    );
    assert!(
        firsts.iter().zip(&want).all(|(a, b)| *a == b),
        "bus order kept"
    );
    names.len() - firsts.len()
}

/// A bus message of akka-apps' shape (`envelope` and `core`) named `name`.
pub(crate) fn akka(name: &str, mid: &str, uid: &str, body: serde_json::Value) -> String {
    serde_json::json!({
        "envelope": {"name": name, "routing": {"meetingId": mid, "userId": uid}},
        "core": {"header": {"name": name, "meetingId": mid, "userId": uid}, "body": body}
    })
    .to_string()
}

/// A recording pipeline's bus message (`header.name` the step) for `record`.
pub(crate) fn rap(step: &str, record: &str) -> String {
    serde_json::json!({"header": {"name": step}, "payload": {"meeting_id": record, "record_id": record}})
        .to_string()
}
