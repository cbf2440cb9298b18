//! Drops every event whose id is not in the `allow` list of the plugin's `[config]`.
//!
//! Only the typed `event.id` is read, so the plugin behaves the same for raw hooks.

wit_bindgen::generate!({ world: "plugin", path: "../../wit" });

use bbb::relay::host::{get_config, log};
// Event, Hook, Action and Level. (A glob: the world re-exports the first three at the crate
// root too, and an explicit import of those names would clash with that.)
use bbb::relay::types::*;
use std::collections::HashSet;
use std::sync::OnceLock;

/// The allow-list, read once per instance by `init`.
static ALLOW: OnceLock<HashSet<String>> = OnceLock::new();

/// Reads `allow`: a TOML array (handed over as JSON text) or a comma-separated string.
fn load_allow() -> Result<HashSet<String>, String> {
    let raw = get_config("allow").ok_or_else(|| {
        "event-filter needs an allow-list: add `allow = [\"meeting-created\", ...]` \
         to the [config] table of its NAME.toml"
            .to_string()
    })?;
    let trimmed = raw.trim();
    let ids: Vec<String> = if trimmed.starts_with('[') {
        serde_json::from_str::<Vec<String>>(trimmed).map_err(|e| {
            format!("event-filter: `allow` must be an array of event id strings ({e})")
        })?
    } else {
        trimmed
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let set: HashSet<String> = ids
        .into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if set.is_empty() {
        return Err(
            "event-filter: `allow` is empty, which would drop every event; \
                    list at least one event id (or remove the plugin)"
                .to_string(),
        );
    }
    Ok(set)
}

struct EventFilter;

impl Guest for EventFilter {
    fn init() -> Result<Vec<String>, String> {
        let allow = load_allow()?;
        let mut listed: Vec<&str> = allow.iter().map(String::as_str).collect();
        listed.sort_unstable();
        log(
            Level::Info,
            &format!("event-filter: letting through {}", listed.join(", ")),
        );
        let _ = ALLOW.set(allow);
        // An empty list: the plugin must see every event to drop the ones not allowed.
        Ok(Vec::new())
    }

    fn on_event(event: Event, _hook: Hook) -> Action {
        let allowed = match ALLOW.get() {
            Some(allow) => allow.contains(&event.id),
            // `init` always runs first; should it not have, fail open rather than lose events.
            None => true,
        };
        if allowed { Action::Keep } else { Action::Drop }
    }
}

export!(EventFilter);
