//! A span's place in its trace, as W3C Trace Context writes it
//! (`00-<trace id>-<span id>-<flags>`): what a queued callback keeps of the span that queued
//! it, so that its attempts join the message's trace after a restart or on another instance,
//! and what a callback's `traceparent` header carries. Pure.

use std::fmt;

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

/// A span's trace id, span id and flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub(crate) trace_id: u128,
    pub(crate) span_id: u64,
    /// Bit 0: sampled.
    pub(crate) flags: u8,
}

impl TraceParent {
    /// Of an OpenTelemetry span; `None` for an invalid one (a span of no trace).
    pub(crate) fn of(cx: &SpanContext) -> Option<Self> {
        cx.is_valid().then(|| Self {
            trace_id: u128::from_be_bytes(cx.trace_id().to_bytes()),
            span_id: u64::from_be_bytes(cx.span_id().to_bytes()),
            flags: cx.trace_flags().to_u8(),
        })
    }

    /// As OpenTelemetry's remote parent.
    pub(crate) fn span_context(&self) -> SpanContext {
        SpanContext::new(
            TraceId::from_bytes(self.trace_id.to_be_bytes()),
            SpanId::from_bytes(self.span_id.to_be_bytes()),
            TraceFlags::new(self.flags),
            true,
            TraceState::default(),
        )
    }

    /// Whether its trace is exported.
    pub(crate) fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// Its trace id as logs, `hooks show` and the collectors write it: 32 hex digits.
    pub(crate) fn trace_id_hex(&self) -> String {
        format!("{:032x}", self.trace_id)
    }

    /// Reads `00-<32 hex>-<16 hex>-<2 hex>` (a later version's extra fields are ignored, as the
    /// W3C recommendation says); `None` for anything else, or all-zero ids.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let mut parts = text.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let hex = |s: &str, n: usize| {
            s.len() == n
                && s.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        };
        if !hex(version, 2) || version == "ff" || (version == "00" && parts.next().is_some()) {
            return None;
        }
        if !hex(trace, 32) || !hex(span, 16) || !hex(flags, 2) {
            return None;
        }
        let parsed = Self {
            trace_id: u128::from_str_radix(trace, 16).ok()?,
            span_id: u64::from_str_radix(span, 16).ok()?,
            flags: u8::from_str_radix(flags, 16).ok()?,
        };
        (parsed.trace_id != 0 && parsed.span_id != 0).then_some(parsed)
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{:032x}-{:016x}-{:02x}",
            self.trace_id, self.span_id, self.flags
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_and_read_as_the_w3c_recommendation_says() {
        // The recommendation's own example.
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let tp = TraceParent::parse(text).expect("valid");
        assert_eq!(tp.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(tp.span_id, 0x00f067aa0ba902b7);
        assert!(tp.sampled());
        assert_eq!(tp.to_string(), text);
        assert_eq!(tp.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let cx = tp.span_context();
        assert_eq!(TraceParent::of(&cx), Some(tp));
        assert!(cx.is_remote());
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-xyz92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
        // A later version may add fields.
        assert!(
            TraceParent::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xx")
                .is_some()
        );
    }
}
