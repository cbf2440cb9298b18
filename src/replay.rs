//! `hookrelay replay`: runs recorded raw bus messages through the relay's own
//! [`route`](crate::route) (decode, mappings, catalogue, matcher, plugin chain, timestamps),
//! without Redis, and collects per hook the callbacks the relay would send. Plugin authors test
//! with it; `--send` also POSTs them.

use std::sync::Arc;

use bytes::Bytes;

use crate::{
    delivery::{CallbackClient, CallbackHeaders, Signer},
    event::{EventFilter, Mappings, Payload, Processor},
    hooks::{Hook, Registry},
    plugin_host::PluginSet,
    route::MessageRouter,
};

/// Why the input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("line {line}: not JSON: {error}")]
    Line { line: usize, error: String },
    #[error("not a JSON array of bus messages: {0}")]
    Array(String),
}

/// One callback that would be sent.
#[derive(Debug, Clone)]
pub struct Callback {
    pub(crate) ts: u64,
    pub event_id: String,
    pub payload: Arc<Payload>,
}

/// What one hook would get.
#[derive(Debug)]
pub struct HookOutput {
    pub hook: Arc<Hook>,
    pub callbacks: Vec<Callback>,
    /// Callbacks the plugin chain dropped.
    pub dropped: usize,
}

/// The result of a replay.
#[derive(Debug)]
pub struct Replay {
    pub hooks: Vec<HookOutput>,
    pub messages: usize,
    /// Messages that made no event (unknown, malformed, or filtered).
    pub skipped: usize,
    pub events: usize,
}

/// Reads bus messages: one JSON value per line (blank lines ignored), or one JSON array.
///
/// # Errors
/// Names the first line (or the array) that is not JSON.
pub fn read_messages(text: &str) -> Result<Vec<Arc<str>>, ReplayError> {
    if text.trim_start().starts_with('[') {
        let values: Vec<serde_json::Value> =
            serde_json::from_str(text).map_err(|e| ReplayError::Array(e.to_string()))?;
        return Ok(values.iter().map(|v| Arc::from(v.to_string())).collect());
    }
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str::<serde::de::IgnoredAny>(l).map_err(|e| ReplayError::Line {
                line: i + 1,
                error: e.to_string(),
            })?;
            Ok(Arc::from(l.trim()))
        })
        .collect()
}

/// Hooks for a replay: `urls` (processed payloads) then `raw_urls` (raw), numbered from 1, all
/// global. With none, one global hook at `http://localhost/`.
pub fn hooks(urls: &[String], raw_urls: &[String]) -> Vec<Hook> {
    let mut all: Vec<(String, bool)> = urls.iter().map(|u| (u.clone(), false)).collect();
    all.extend(raw_urls.iter().map(|u| (u.clone(), true)));
    if all.is_empty() {
        all.push(("http://localhost/".into(), false));
    }
    all.into_iter()
        .zip(1..)
        .map(|((callback_url, get_raw), id)| Hook {
            id: crate::base::ids::HookId(id),
            callback_url,
            meeting_id: None,
            event_ids: None,
            get_raw,
            permanent: false,
            tenant: None,
            disabled: None,
            signing: None,
        })
        .collect()
}

/// Runs `messages` in order through the pipeline's processing stages and `plugins`.
pub fn run(
    messages: &[Arc<str>],
    hooks: Vec<Hook>,
    plugins: &PluginSet,
    filter: EventFilter,
) -> Replay {
    let registry = Registry::default();
    registry.replace_all(hooks);
    let snapshot = registry.load();
    let mut outputs: Vec<HookOutput> = snapshot
        .all()
        .map(|h| HookOutput {
            hook: h.clone(),
            callbacks: Vec::new(),
            dropped: 0,
        })
        .collect();
    let mut router = MessageRouter::new(Processor::new(Mappings::new(u64::MAX, false), filter));
    let routed = router.route(messages, &snapshot, plugins);
    for id in routed.dropped {
        if let Some(out) = outputs.iter_mut().find(|o| o.hook.id == id) {
            out.dropped += 1;
        }
    }
    for c in routed.callbacks {
        if let Some(out) = outputs.iter_mut().find(|o| o.hook.id == c.hook.id) {
            out.callbacks.push(Callback {
                ts: c.ts,
                event_id: c.event.id.clone(),
                payload: c.payload,
            });
        }
    }
    let (skipped, events) = (routed.skipped.len(), routed.events.len());
    Replay {
        hooks: outputs,
        messages: messages.len(),
        skipped,
        events,
    }
}

/// POSTs every hook's callbacks, signed as the relay signs them, one at a time in order (no
/// retries). Returns, per hook, one line per callback: the HTTP status or the error.
pub async fn send(replay: &Replay, signer: &Signer, client: &CallbackClient) -> Vec<Vec<String>> {
    let mut results = Vec::with_capacity(replay.hooks.len());
    for out in &replay.hooks {
        let mut lines = Vec::with_capacity(out.callbacks.len());
        let receiver = client.receiver(&out.hook.callback_url);
        for cb in &out.callbacks {
            // A replayed file is one server's bus: the first source's.
            let now = crate::base::time::now_ms();
            let (signed, keys) = match signer.sign_attempt(&out.hook, &cb.payload, (cb.ts, 0), now)
            {
                Ok(signed) => signed,
                Err(unknown) => {
                    lines.push(format!("{} {}: not sent: {unknown}", cb.ts, cb.event_id));
                    continue;
                }
            };
            let standard = keys.standard_headers(out.hook.id, cb.ts, signed.body.as_bytes());
            let result = receiver
                .post(
                    &signed.url,
                    Bytes::from(signed.body),
                    signed.content_type,
                    CallbackHeaders {
                        bearer: keys.bearer(),
                        standard: standard.as_ref(),
                        domain: &signer.sources().domain(0),
                        redelivery: false,
                        timestamp: signed.timestamp_header,
                        traceparent: None,
                    },
                )
                .await;
            lines.push(match result {
                Ok(status) => format!("{} {}: {status}", cb.ts, cb.event_id),
                Err(e) => format!("{} {}: failed: {e}", cb.ts, cb.event_id),
            });
        }
        results.push(lines);
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lines_and_arrays_and_names_bad_lines() {
        let lines = read_messages("{\"a\":1}\n\n {\"b\":2} \n").expect("lines");
        assert_eq!(
            lines.iter().map(|s| &**s).collect::<Vec<_>>(),
            ["{\"a\":1}", "{\"b\":2}"]
        );
        let array = read_messages("[{\"a\":1},{\"b\":[2]}]").expect("array");
        assert_eq!(
            array.iter().map(|s| &**s).collect::<Vec<_>>(),
            ["{\"a\":1}", "{\"b\":[2]}"]
        );
        let err = read_messages("{\"a\":1}\n{oops\n").expect_err("bad line");
        assert!(err.to_string().starts_with("line 2:"), "{err}");
    }

    #[test]
    fn hooks_are_numbered_processed_first_with_a_default() {
        let h = hooks(&["http://a/".into()], &["http://b/".into()]);
        assert_eq!(
            (h[0].id, h[0].get_raw, h[1].id, h[1].get_raw),
            (
                crate::base::ids::HookId(1),
                false,
                crate::base::ids::HookId(2),
                true
            )
        );
        assert_eq!(hooks(&[], &[])[0].callback_url, "http://localhost/");
    }
}
