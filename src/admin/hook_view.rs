//! How `hookrelay hooks show` prints one hook: its state, signing, receiver, filter, queue and
//! last attempts, one line each.

use serde_json::Value;

use super::status::text;

/// `hooks show ID`: one hook, a fact a line.
pub(super) fn print_hook(h: &Value) {
    let id = h["id"].as_u64().unwrap_or_default();
    println!("hook {id}: {}", text(h, "callback_url").unwrap_or(""));
    let row = |name: &str, value: String| println!("  {name:<14}{value}");
    row("state:", state_of(h));
    if let Some(t) = text(h, "disabled_since") {
        row("disabled:", format!("since {t}"));
    }
    if h["own_secret"] == true {
        row(
            "signing:",
            match text(h, "previous_secret_until") {
                Some(t) => format!("its own secret (the previous one signs too until {t})"),
                None => "its own secret".to_string(),
            },
        );
    }
    if h["receiver_circuit"] == "open" {
        row(
            "receiver:",
            "unreachable: its circuit is open, its callbacks wait while one probe at a time tries it"
                .to_string(),
        );
    }
    row("filter:", filter_of(h));
    let queued = h["queued"].as_u64().unwrap_or(0);
    row(
        "queued:",
        match (text(h, "oldest_queued"), h["oldest_queued_age_s"].as_f64()) {
            (Some(t), Some(age)) if queued > 0 => {
                format!("{queued}, the oldest made {age:.1} s ago ({t})")
            }
            _ => queued.to_string(),
        },
    );
    row(
        "last success:",
        text(h, "last_success").unwrap_or("never").to_string(),
    );
    row(
        "last failure:",
        match (text(h, "last_failure"), text(h, "last_error")) {
            (Some(t), Some(e)) => format!("{t}: {e}"),
            (Some(t), None) => t.to_string(),
            _ => "never".to_string(),
        },
    );
    if let Some(t) = text(h, "removal_due") {
        match text(h, "disabled_reason") {
            Some("tenant_unknown") => row(
                "removal due:",
                format!("{t}, if its tenant does not come back"),
            ),
            _ => row("removal due:", format!("{t}, if the failures go on")),
        }
    }
    if let Some(t) = text(h, "removed") {
        row("removed:", format!("{t}, after its callbacks kept failing"));
    }
    if let Some(i) = text(h, "delivered_by") {
        row("delivered by:", i.to_string());
    }
}

/// The trace ids of a hook's last attempts (`GET /v1/hooks/{id}/deliveries`), newest first;
/// nothing when none was traced.
pub(super) fn print_traces(deliveries: &Value) {
    let Some(list) = deliveries["deliveries"].as_array() else {
        return;
    };
    let mut label = "traces:";
    for a in list {
        let Some(trace) = text(a, "trace_id") else {
            continue;
        };
        let result = match (a["ok"].as_bool(), a["status"].as_u64()) {
            (Some(true), Some(s)) => s.to_string(),
            (_, Some(s)) => format!("failed {s}"),
            _ => "failed".to_string(),
        };
        println!(
            "  {label:<14}{trace}  {} {} try {} {result}",
            text(a, "at").unwrap_or(""),
            text(a, "event_id").unwrap_or(""),
            a["attempt"].as_u64().unwrap_or(0),
        );
        label = "";
    }
}

/// A hook's state, in words.
fn state_of(h: &Value) -> String {
    let state = text(h, "state").unwrap_or("?");
    let failures = h["failures_in_row"].as_u64().unwrap_or(0);
    match (state, failures, text(h, "disabled_reason")) {
        ("failing", n, _) => format!("failing ({n} failed attempts in a row)"),
        ("disabled", _, Some("tenant_unknown")) => {
            "disabled (tenant_unknown): its tenant is not known; enabled again when it is back"
                .to_string()
        }
        ("disabled", _, Some(why)) => format!("disabled ({why})"),
        (s, _, _) => s.to_string(),
    }
}

/// What a hook gets: its meeting, its events and its kind.
fn filter_of(h: &Value) -> String {
    let events = h["event_ids"].as_array().map_or("(all)".to_string(), |a| {
        a.iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(",")
    });
    let kind = match (h["permanent"].as_bool(), h["get_raw"].as_bool()) {
        (Some(true), Some(true)) => "permanent, raw",
        (Some(true), _) => "permanent, processed",
        (_, Some(true)) => "raw",
        _ => "processed",
    };
    format!(
        "meeting {}, events {events}, {kind}",
        text(h, "meeting_id").unwrap_or("(all)")
    )
}
