//! The processing stage's part in traces (`[tracing]`): for each message of a batch its root
//! span, its `process` and `route` steps (from the router's timings), and one `enqueue` span
//! per callback, whose context the callback keeps in the store, so that its attempts join the
//! message's trace wherever and whenever they are made. The spans close once the batch's
//! transaction is written (or not).

use std::time::SystemTime;

use opentelemetry::{Array, KeyValue, StringValue, Value};

use crate::{
    base::sources::SourceTable,
    bus::BusMessage,
    route::Routed,
    traces::{MessageTrace, Receipt, TraceParent, Traces, end_enqueue},
};

/// A batch's open spans.
pub(super) struct BatchSpans {
    /// By message; `None` for a message whose trace is not sampled.
    messages: Vec<Option<MessageTrace>>,
    enqueues: Vec<opentelemetry_sdk::trace::Span>,
    /// The message of each event of the batch, by event index.
    event_message: Vec<usize>,
}

/// When a message that arrived `elapsed` ago arrived, by the wall clock.
fn arrival(m: &BusMessage, now: SystemTime) -> SystemTime {
    now.checked_sub(m.arrived.elapsed()).unwrap_or(now)
}

/// Opens the spans of `batch`, routed as `routed` (with its timings), and gives each sampled
/// callback its trace context.
pub(super) fn open(
    traces: &Traces,
    batch: &[BusMessage],
    routed: &mut Routed,
    sources: &SourceTable,
    destinations: Option<&crate::destinations::Output>,
) -> BatchSpans {
    let now = SystemTime::now();
    let mut messages = Vec::with_capacity(batch.len());
    for (i, m) in batch.iter().enumerate() {
        let server = sources.name(m.source);
        let mut trace = traces.message(&Receipt {
            channel: &m.channel,
            server: &server,
            size: m.payload.len(),
            arrived: arrival(m, now),
        });
        if !trace.sampled() {
            messages.push(None);
            continue;
        }
        if let Some(name) = crate::event::message_name(&m.payload) {
            trace.set(KeyValue::new("bbb.message.name", name));
        }
        if let Some((_, skip)) = routed.skipped.iter().find(|(k, _)| *k == i) {
            trace.set(KeyValue::new("hookrelay.skipped", skip.reason()));
        }
        if let Some(t) = routed.timings.get(i) {
            let events = routed.events.get(t.events.clone()).unwrap_or_default();
            if let Some(e) = events.first() {
                if let Some(id) = &e.internal_meeting_id {
                    trace.set(KeyValue::new("bbb.meeting.internal_id", id.clone()));
                }
                if let Some(id) = &e.external_meeting_id {
                    trace.set(KeyValue::new("bbb.meeting.id", id.clone()));
                }
            }
            let ids: Vec<StringValue> = events.iter().map(|e| e.id.clone().into()).collect();
            trace.step(
                traces,
                "process",
                (t.started, t.processed),
                vec![
                    KeyValue::new("hookrelay.events", ids.len() as i64),
                    KeyValue::new("hookrelay.event.ids", Value::Array(Array::String(ids))),
                ],
            );
            let destinations = destinations.map_or(0, |d| {
                events
                    .iter()
                    .filter(|e| !e.filtered)
                    .map(|e| d.matching(e))
                    .sum::<usize>()
            });
            trace.step(
                traces,
                "route",
                (t.processed, t.matched),
                vec![
                    KeyValue::new("hookrelay.hooks.matched", t.callbacks as i64),
                    KeyValue::new("hookrelay.destinations.matched", destinations as i64),
                ],
            );
        }
        messages.push(Some(trace));
    }
    let mut enqueues = Vec::new();
    for c in &mut routed.callbacks {
        let Some(Some(trace)) = messages.get(c.message) else {
            continue;
        };
        let start = routed.timings.get(c.message).map_or(now, |t| t.matched);
        let (span, parent) = trace.enqueue(traces, c.hook.id.0, &c.event.id, start);
        c.trace = parent;
        enqueues.push(span);
    }
    let mut event_message = vec![usize::MAX; routed.events.len()];
    for (i, t) in routed.timings.iter().enumerate() {
        for e in t.events.clone() {
            if let Some(m) = event_message.get_mut(e) {
                *m = i;
            }
        }
    }
    BatchSpans {
        messages,
        enqueues,
        event_message,
    }
}

impl BatchSpans {
    /// The trace id of message `i`, when it is traced.
    pub(super) fn trace_id(&self, i: usize) -> Option<String> {
        self.messages.get(i)?.as_ref().map(MessageTrace::trace_id)
    }

    /// Opens the `enqueue` span of an output's item (a destination's message, an xAPI
    /// statement) made of event `event` (its index in the batch): the context it keeps, when
    /// its message is traced.
    pub(super) fn output(
        &mut self,
        traces: &Traces,
        event: usize,
        attributes: Vec<KeyValue>,
    ) -> Option<TraceParent> {
        let message = *self.event_message.get(event)?;
        let trace = self.messages.get(message)?.as_ref()?;
        let (span, parent) = trace.enqueue_with(traces, attributes, SystemTime::now());
        self.enqueues.push(span);
        parent
    }

    /// Ends every span: the batch's callbacks are stored, or not.
    pub(super) fn close(self, stored: bool) {
        for span in self.enqueues {
            end_enqueue(span, stored);
        }
        for trace in self.messages.into_iter().flatten() {
            trace.end(stored);
        }
    }
}
