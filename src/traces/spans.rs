//! The spans of a bus message's trace, their names and attributes (OpenTelemetry's semantic
//! conventions where they have one: `messaging.*`, `http.*`, `url.full`, `server.*`; the
//! relay's own under `bbb.` and `hookrelay.`):
//! - `receive <channel>` (consumer), the root: the message from its arrival until its
//!   callbacks are in the store;
//! - `process` and `route` under it: the events it made, the hooks and destinations matched;
//! - `enqueue` under it, one per callback: what the callback keeps (its [`TraceParent`]);
//! - under each `enqueue`, whenever they happen: one `plugin <name>` per plugin call and one
//!   `POST` (client) per attempt; for a destination's message one `publish <target>`
//!   (producer) per try, for an xAPI statement one `POST` per try.

use std::time::SystemTime;

use opentelemetry::{
    Context, KeyValue,
    trace::{Span as _, SpanContext, SpanKind, Status, TraceContextExt, Tracer as _},
};
use opentelemetry_sdk::trace::Span;

use super::{TraceParent, Traces};

/// A bus message as it arrived.
pub(crate) struct Receipt<'a> {
    pub(crate) channel: &'a str,
    /// Its conference server (the source's name).
    pub(crate) server: &'a str,
    pub(crate) size: usize,
    pub(crate) arrived: SystemTime,
}

/// The root span of one bus message, open until its callbacks are stored.
pub(crate) struct MessageTrace {
    span: Span,
    /// The context its children start in.
    cx: Context,
}

/// One plugin call made at sending time.
#[derive(Debug, Clone)]
pub(crate) struct PluginCall {
    pub(crate) plugin: std::sync::Arc<str>,
    /// `keep`, `replace`, `drop`, or the failure's kind.
    pub(crate) result: &'static str,
    pub(crate) started: SystemTime,
    pub(crate) ended: SystemTime,
}

/// One attempt's span, open while it is under way.
pub(crate) struct AttemptSpan {
    span: Span,
}

/// `server.address`, `server.port` and `url.full` of `url`, without its query, fragment or
/// credentials (they may carry tokens).
pub(crate) fn url_attributes(url: &str) -> Vec<KeyValue> {
    let mut attributes = Vec::with_capacity(3);
    if let Ok(mut u) = url::Url::parse(url) {
        if let Some(host) = u.host_str() {
            attributes.push(KeyValue::new("server.address", host.to_string()));
        }
        if let Some(port) = u.port_or_known_default() {
            attributes.push(KeyValue::new("server.port", i64::from(port)));
        }
        u.set_query(None);
        u.set_fragment(None);
        let _ = u.set_password(None);
        let _ = u.set_username("");
        attributes.push(KeyValue::new("url.full", u.to_string()));
    }
    attributes
}

fn child_context(parent: &SpanContext) -> Context {
    Context::new().with_remote_span_context(parent.clone())
}

impl Traces {
    /// Opens the root span of a message.
    pub(crate) fn message(&self, r: &Receipt<'_>) -> MessageTrace {
        let span = self
            .tracer
            .span_builder(format!("receive {}", r.channel))
            .with_kind(SpanKind::Consumer)
            .with_start_time(r.arrived)
            .with_attributes([
                KeyValue::new("messaging.system", "redis"),
                KeyValue::new("messaging.operation.type", "receive"),
                KeyValue::new("messaging.destination.name", r.channel.to_string()),
                KeyValue::new("messaging.message.body.size", r.size as i64),
                KeyValue::new("bbb.server", r.server.to_string()),
            ])
            .start_with_context(&self.tracer, &Context::new());
        let cx = child_context(span.span_context());
        MessageTrace { span, cx }
    }

    /// Opens the span of one attempt of a callback queued under `parent`: `retry` earlier
    /// attempts failed.
    pub(crate) fn attempt(
        &self,
        parent: &TraceParent,
        hook: u64,
        url: &str,
        (event, retry): (&str, usize),
    ) -> AttemptSpan {
        let mut attributes = vec![
            KeyValue::new("http.request.method", "POST"),
            KeyValue::new("hookrelay.hook.id", hook as i64),
            KeyValue::new("hookrelay.event.id", event.to_string()),
        ];
        if retry > 0 {
            attributes.push(KeyValue::new("http.request.resend_count", retry as i64));
        }
        attributes.extend(url_attributes(url));
        let span = self
            .tracer
            .span_builder("POST")
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &child_context(&parent.span_context()));
        AttemptSpan { span }
    }

    /// Opens the span of one try of an output other than a hook (a destination's publish, an
    /// xAPI statement's POST), named `name`, of `kind`, under `parent`.
    pub(crate) fn output_attempt(
        &self,
        parent: &TraceParent,
        name: String,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
    ) -> AttemptSpan {
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &child_context(&parent.span_context()));
        AttemptSpan { span }
    }

    /// Records the plugin calls made for a callback queued under `parent`.
    pub(crate) fn plugin_calls(&self, parent: &TraceParent, calls: &[PluginCall]) {
        let cx = child_context(&parent.span_context());
        for call in calls {
            let mut span = self
                .tracer
                .span_builder(format!("plugin {}", call.plugin))
                .with_kind(SpanKind::Internal)
                .with_start_time(call.started)
                .with_attributes([
                    KeyValue::new("hookrelay.plugin", call.plugin.to_string()),
                    KeyValue::new("hookrelay.plugin.result", call.result),
                ])
                .start_with_context(&self.tracer, &cx);
            if !matches!(call.result, "keep" | "replace" | "drop") {
                span.set_status(Status::error(call.result));
            }
            span.end_with_timestamp(call.ended);
        }
    }
}

impl MessageTrace {
    /// Whether the message's trace is exported (its callbacks then keep its context).
    pub(crate) fn sampled(&self) -> bool {
        self.span.span_context().is_sampled()
    }

    /// Its trace id, for log lines.
    pub(crate) fn trace_id(&self) -> String {
        self.span.span_context().trace_id().to_string()
    }

    /// Adds what processing learnt of it (its name, its meeting).
    pub(crate) fn set(&mut self, attribute: KeyValue) {
        self.span.set_attribute(attribute);
    }

    /// A finished step under the message, from `start` to `end`.
    pub(crate) fn step(
        &self,
        traces: &Traces,
        name: &'static str,
        (start, end): (SystemTime, SystemTime),
        attributes: Vec<KeyValue>,
    ) {
        let mut span = traces
            .tracer
            .span_builder(name)
            .with_start_time(start)
            .with_attributes(attributes)
            .start_with_context(&traces.tracer, &self.cx);
        span.end_with_timestamp(end);
    }

    /// Opens the `enqueue` span of one callback to hook `hook`, from `start`: its context is
    /// what the callback keeps.
    pub(crate) fn enqueue(
        &self,
        traces: &Traces,
        hook: u64,
        event: &str,
        start: SystemTime,
    ) -> (Span, Option<TraceParent>) {
        let attributes = vec![
            KeyValue::new("hookrelay.hook.id", hook as i64),
            KeyValue::new("hookrelay.event.id", event.to_string()),
        ];
        self.enqueue_with(traces, attributes, start)
    }

    /// Opens an `enqueue` span with `attributes` (a hook's callback, a destination's message,
    /// an xAPI statement), from `start`: its context is what the queued item keeps.
    pub(crate) fn enqueue_with(
        &self,
        traces: &Traces,
        attributes: Vec<KeyValue>,
        start: SystemTime,
    ) -> (Span, Option<TraceParent>) {
        let span = traces
            .tracer
            .span_builder("enqueue")
            .with_kind(SpanKind::Producer)
            .with_start_time(start)
            .with_attributes(attributes)
            .start_with_context(&traces.tracer, &self.cx);
        let parent = TraceParent::of(span.span_context()).filter(TraceParent::sampled);
        (span, parent)
    }

    /// Ends the message's span: its callbacks are stored (`stored`) or the relay stopped
    /// first.
    pub(crate) fn end(mut self, stored: bool) {
        if !stored {
            self.span
                .set_status(Status::error("not stored: the relay stopped first"));
        }
        self.span.end();
    }
}

/// Ends an `enqueue` span once its callback is stored, or not.
pub(crate) fn end_enqueue(mut span: Span, stored: bool) {
    if !stored {
        span.set_status(Status::error("not stored"));
    }
    span.end();
}

impl AttemptSpan {
    /// What the callback's `traceparent` header carries.
    pub(crate) fn traceparent(&self) -> Option<TraceParent> {
        TraceParent::of(self.span.span_context())
    }

    /// Ends it with the receiver's answer (`status`) or the failure, and the verdict.
    pub(crate) fn finish(
        mut self,
        status: Option<u16>,
        error: Option<(String, String)>,
        verdict: &'static str,
    ) {
        if let Some(code) = status {
            self.span
                .set_attribute(KeyValue::new("http.response.status_code", i64::from(code)));
        }
        self.span
            .set_attribute(KeyValue::new("hookrelay.verdict", verdict));
        if let Some((kind, message)) = error {
            self.span.set_attribute(KeyValue::new("error.type", kind));
            self.span.set_status(Status::error(message));
        }
        self.span.end();
    }
}
