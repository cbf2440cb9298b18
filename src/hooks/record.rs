//! One hook's record in Redis: its hash's fields as the reference names them (read in the
//! reference's forms too), written with its id in the hooks' set.

use crate::base::ids::HookId;

use std::collections::HashMap;

use super::{
    Hook,
    model::{Disabled, DisabledReason, HookSecrets},
};
use crate::{
    base::{
        redis_keys::{HOOKS_SET, hook_key},
        secret::Secret,
    },
    store_conn::StoreConn,
};

/// The fields of a disabled hook (`disabled`, why and since when).
pub(super) fn disabled_fields(d: &Disabled) -> [(&'static str, String); 3] {
    [
        ("disabled", "true".into()),
        ("disabledReason", d.reason.as_str().into()),
        ("disabledAt", d.since.to_string()),
    ]
}

/// The fields of a hook's own signing secrets.
pub(super) fn signing_fields(s: &HookSecrets) -> Vec<(&'static str, String)> {
    let mut fields = vec![("signingSecret", s.current.expose().to_string())];
    if let Some((previous, until)) = &s.previous {
        fields.push(("previousSigningSecret", previous.expose().to_string()));
        fields.push(("previousSigningUntil", until.to_string()));
    }
    fields
}

/// Every field [`disabled_fields`] may write, to remove them.
pub(super) const DISABLED_FIELDS: [&str; 3] = ["disabled", "disabledReason", "disabledAt"];

/// A storage failure; the API turns it into `createHookError` / `destroyHookError`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// A new signing secret could not be made.
    #[error("no random bytes for a signing secret: {0}")]
    Random(#[from] getrandom::Error),
}

/// A hook's stored fields but its id, as the reference names them.
pub(super) fn fields(h: &Hook) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        ("callbackURL", h.callback_url.clone()),
        ("permanent", h.permanent.to_string()),
        ("getRaw", h.get_raw.to_string()),
    ];
    if let Some(m) = &h.meeting_id {
        fields.push(("externalMeetingID", m.clone()));
    }
    if let Some(ids) = &h.event_ids {
        fields.push(("eventID", ids.join(",")));
    }
    if let Some(t) = &h.tenant {
        fields.push(("tenantID", t.clone()));
    }
    if let Some(d) = &h.disabled {
        fields.extend(disabled_fields(d));
    }
    if let Some(s) = &h.signing {
        fields.extend(signing_fields(s));
    }
    fields
}

pub(super) async fn write_hook(conn: &mut StoreConn, h: &Hook) -> Result<(), StoreError> {
    let key = hook_key(h.id);
    let mut fields = fields(h);
    fields.push(("id", h.id.to_string()));
    let mut pipe = redis::pipe();
    pipe.atomic()
        .del(&key)
        .ignore()
        .hset_multiple(&key, &fields)
        .ignore()
        .sadd(HOOKS_SET, h.id)
        .ignore();
    pipe.query_async::<()>(conn).await?;
    Ok(())
}

/// The numeric id of a stored hook; `None` for the reference's UUID ids.
pub(super) fn stored_id(member: &str, f: &HashMap<String, String>) -> Option<HookId> {
    f.get("id")
        .or_else(|| f.get("hookID"))
        .map_or(member, String::as_str)
        .parse()
        .ok()
}

/// Reads a stored hook (id 0: see [`stored_id`]); accepts the reference's forms too (`hookID`,
/// eventID as JSON array).
pub(super) fn parse_hook(f: &HashMap<String, String>) -> Option<Hook> {
    let callback_url = f.get("callbackURL")?.clone();
    let event_ids = f
        .get("eventID")
        .and_then(|v| match serde_json::from_str::<Vec<String>>(v) {
            Ok(list) => super::model::parse_event_ids(&list.join(",")),
            Err(_) => super::model::parse_event_ids(v),
        });
    Some(Hook {
        id: HookId(0),
        callback_url,
        meeting_id: f.get("externalMeetingID").cloned(),
        event_ids,
        get_raw: f.get("getRaw").is_some_and(|v| v == "true"),
        permanent: f.get("permanent").is_some_and(|v| v == "true"),
        tenant: f.get("tenantID").filter(|t| !t.is_empty()).cloned(),
        disabled: f
            .get("disabled")
            .filter(|v| *v == "true")
            .map(|_| Disabled {
                reason: DisabledReason::parse(f.get("disabledReason").map_or("", String::as_str)),
                since: f
                    .get("disabledAt")
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(0),
            }),
        signing: f
            .get("signingSecret")
            .filter(|s| !s.is_empty())
            .map(|current| HookSecrets {
                current: Secret::new(current.as_str()),
                previous: f
                    .get("previousSigningSecret")
                    .zip(
                        f.get("previousSigningUntil")
                            .and_then(|t| t.parse::<u64>().ok()),
                    )
                    .map(|(s, until)| (Secret::new(s.as_str()), until)),
            }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_event_id_forms() {
        let mut f = HashMap::new();
        f.insert("callbackURL".to_string(), "http://h/".to_string());
        f.insert(
            "eventID".to_string(),
            r#"["user-joined","meeting-ended"]"#.to_string(),
        );
        assert_eq!(stored_id("7", &f), Some(HookId(7)));
        let h = parse_hook(&f).unwrap();
        assert_eq!(
            h.event_ids,
            Some(vec!["user-joined".into(), "meeting-ended".into()])
        );
        f.insert(
            "eventID".to_string(),
            "user-joined,meeting-ended".to_string(),
        );
        f.insert("hookID".to_string(), "9".to_string());
        assert_eq!(stored_id("x", &f), Some(HookId(9)));
        let h = parse_hook(&f).unwrap();
        assert_eq!(
            h.event_ids,
            Some(vec!["user-joined".into(), "meeting-ended".into()])
        );
        assert!(parse_hook(&HashMap::new()).is_none());
        assert_eq!(
            stored_id("3416336b-8c9e-5362-a2be-e2dd12b8523c", &HashMap::new()),
            None
        );
    }
}
