//! One message for a destination: the event's JSON (one event a message), what it is about,
//! where it goes (the target with its placeholders filled in) and an id the broker can
//! deduplicate on.

use crate::{config::destinations::DestinationKind, event::Event};

use super::route::Route;

/// The namespace of the messages' ids (a UUID v5 of the destination and the body: the same
/// message queued twice, after a crash, has the same id).
const ID_NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6b1e_3f0c_9a52_4c2e_8f1d_2a7b_5c90_e4d3);

/// What stands for a placeholder whose value is unknown (an event of no meeting or tenant).
const NONE: &str = "_";

/// A queued message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Message {
    /// The event JSON, or the bus message for a `raw` destination.
    pub(crate) body: String,
    /// The event id (`user-joined`).
    pub(crate) event: String,
    /// The external meeting id; empty for none.
    pub(crate) meeting: String,
    /// The source (conference server) that sent it.
    pub(crate) server: String,
    /// The meeting's tenant; empty for none.
    pub(crate) tenant: String,
    /// The subject, `exchange/routing key` or topic, placeholders filled in.
    pub(crate) target: String,
    /// The id the broker deduplicates on.
    pub(crate) id: String,
    /// When it was queued (ms since the epoch).
    pub(crate) queued_ms: u64,
    /// For plugins: what they read besides the body, when the destination has plugins.
    pub(crate) for_plugins: Option<ForPlugins>,
    /// Its `enqueue` span's place in its bus message's trace (`[tracing]`; stored as `tp`).
    pub(crate) trace: Option<crate::traces::TraceParent>,
}

/// What a destination's plugins read of an event besides its body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ForPlugins {
    pub(crate) internal_meeting: String,
    /// The meeting's facts (JSON), as plugins' `meeting` import answers; empty: none.
    pub(crate) facts: String,
    /// The other payload: the bus message for a destination of processed events, the
    /// processed event for a raw one.
    pub(crate) other: String,
}

impl Message {
    /// The message of `event` for `route`, with `body` (its chosen payload).
    pub(super) fn of(
        route: &Route,
        event: &Event,
        body: &crate::event::Payload,
        server: &str,
    ) -> Self {
        let meeting = event.external_meeting_id.clone().unwrap_or_default();
        let tenant = event
            .tenant
            .as_ref()
            .and_then(|t| t.name.clone().or_else(|| t.id.clone()))
            .unwrap_or_default();
        let for_plugins = route.plugins.then(|| ForPlugins {
            internal_meeting: event.internal_meeting_id.clone().unwrap_or_default(),
            facts: event.meeting.as_deref().unwrap_or_default().to_string(),
            other: event
                .payload(!route.raw())
                .map(|p| p.text().to_string())
                .unwrap_or_default(),
        });
        let body = body.text().to_string();
        let target = fill(
            route.kind,
            &route.target,
            &[
                ("{event}", &event.id),
                ("{meeting}", &meeting),
                ("{tenant}", &tenant),
                ("{server}", server),
            ],
        );
        let mut named = Vec::with_capacity(route.name.len() + 1 + body.len());
        named.extend_from_slice(route.name.as_bytes());
        named.push(0);
        named.extend_from_slice(body.as_bytes());
        Self {
            id: uuid::Uuid::new_v5(&ID_NAMESPACE, &named).to_string(),
            body,
            event: event.id.clone(),
            meeting,
            server: server.to_string(),
            tenant,
            target,
            queued_ms: crate::base::time::now_ms(),
            for_plugins,
            trace: None,
        }
    }
}

impl Message {
    /// The headers (NATS), headers (AMQP) or user properties (MQTT) every message carries
    /// besides its id and content type: the event, its meeting, server and tenant (those
    /// known).
    pub(crate) fn headers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("BBB-Event", self.event.as_str()),
            ("BBB-Meeting", self.meeting.as_str()),
            ("BBB-Server", self.server.as_str()),
            ("BBB-Tenant", self.tenant.as_str()),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
    }
}

/// `target` with each placeholder replaced by its value, made safe for `kind`'s names: the
/// characters that separate or match levels (`.` `*` `>` in NATS, `/` `+` `#` in MQTT, `.`
/// `*` `#` `/` in AMQP) and white space become `_`, and so does an empty value.
fn fill(kind: DestinationKind, target: &str, values: &[(&str, &str)]) -> String {
    let special: &[char] = match kind {
        DestinationKind::Nats => &['.', '*', '>'],
        DestinationKind::Mqtt => &['/', '+', '#'],
        DestinationKind::Amqp => &['.', '*', '#', '/'],
        DestinationKind::File => &[],
    };
    let mut out = target.to_string();
    for (name, value) in values {
        if !out.contains(name) {
            continue;
        }
        let safe: String = if value.is_empty() {
            NONE.into()
        } else {
            value
                .chars()
                .map(|c| {
                    if c.is_whitespace() || c.is_control() || special.contains(&c) {
                        '_'
                    } else {
                        c
                    }
                })
                .collect()
        };
        out = out.replace(name, &safe);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_safely_for_each_kind() {
        let values = [
            ("{event}", "user-joined"),
            ("{meeting}", "a.b/c #1"),
            ("{tenant}", ""),
            ("{server}", "bbb1"),
        ];
        assert_eq!(
            fill(
                DestinationKind::Nats,
                "bbb.{server}.{meeting}.{event}.{tenant}",
                &values
            ),
            "bbb.bbb1.a_b/c_#1.user-joined._"
        );
        assert_eq!(
            fill(DestinationKind::Mqtt, "bbb/{meeting}/{event}", &values),
            "bbb/a.b_c__1/user-joined"
        );
        assert_eq!(
            fill(DestinationKind::Amqp, "x/{meeting}.{event}", &values),
            "x/a_b_c__1.user-joined"
        );
    }
}
