//! The shapes of xAPI statements (the virtual-classroom profile), as the reference writes them:
//! ids are UUID v5 in the configured namespace, activities live under
//! `https://<server_domain>/xapi/activities/<uuid>`. Pure: no state, no I/O.

use serde_json::{Value, json};
use uuid::Uuid;

pub(crate) const VIRTUAL_CLASSROOM: &str =
    "https://w3id.org/xapi/virtual-classroom/activity-types/virtual-classroom";
pub(crate) const SESSION_ID: &str = "https://w3id.org/xapi/cmi5/context/extensions/sessionid";
pub(crate) const PLANNED_DURATION: &str = "http://id.tincanapi.com/extension/planned-duration";
pub(crate) const EMOJI: &str = "https://w3id.org/xapi/virtual-classroom/extensions/emoji";

/// Where ids and IRIs come from.
#[derive(Debug, Clone)]
pub(crate) struct Ids {
    pub(super) namespace: Uuid,
    pub(super) domain: String,
}

impl Ids {
    /// UUID v5 of `name` in the namespace, as text.
    pub(crate) fn uuid(&self, name: &str) -> String {
        Uuid::new_v5(&self.namespace, name.as_bytes()).to_string()
    }

    /// An activity's IRI.
    pub(crate) fn activity(&self, name: &str) -> String {
        format!(
            "https://{}/xapi/activities/{}",
            self.domain,
            self.uuid(name)
        )
    }

    pub(crate) fn home_page(&self) -> String {
        format!("https://{}", self.domain)
    }
}

/// What every statement of a meeting has in common.
pub(crate) struct Base<'a> {
    pub(super) ids: &'a Ids,
    pub(super) internal_meeting_id: &'a str,
    pub(super) external_meeting_id: &'a str,
    pub(super) meeting_name: &'a str,
    pub(super) registration: &'a str,
}

impl Base<'_> {
    /// The statement as the reference begins it: the actor by display name, the meeting as
    /// object, registration, profile category and session id.
    pub(crate) fn statement(&self, actor: &str, verb: &str, timestamp_ms: u64) -> Value {
        json!({
            "actor": {"account": {"name": actor, "homePage": self.ids.home_page()}},
            "verb": {"id": verb},
            "object": {
                "id": self.ids.activity(self.external_meeting_id),
                "definition": {"type": VIRTUAL_CLASSROOM, "name": {"en": self.meeting_name}},
            },
            "context": {
                "registration": self.registration,
                "contextActivities": {"category": [{
                    "id": "https://w3id.org/xapi/virtual-classroom",
                    "definition": {"type": "http://adlnet.gov/expapi/activities/profile"},
                }]},
                "extensions": {SESSION_ID: self.ids.uuid(self.internal_meeting_id)},
            },
            "timestamp": iso_ms(timestamp_ms),
        })
    }

    /// The meeting as the parent of a statement about something in it.
    pub(crate) fn with_parent(&self, mut statement: Value) -> Value {
        if let Some(ca) = statement.pointer_mut("/context/contextActivities") {
            ca["parent"] = json!([{
                "id": self.ids.activity(self.external_meeting_id),
                "definition": {"type": VIRTUAL_CLASSROOM},
            }]);
        }
        statement
    }
}

/// `yyyy-mm-ddThh:mm:ss.mmmZ` of milliseconds since the epoch (UTC).
pub(crate) fn iso_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// `yyyyMMdd` (UTC) of milliseconds since the epoch: the day part of a registration.
pub(crate) fn day(ms: u64) -> String {
    let (y, m, d) = civil((ms / 1000 / 86_400) as i64);
    format!("{y:04}{m:02}{d:02}")
}

/// Year, month and day of a count of days since 1970-01-01 (proleptic Gregorian).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// An ISO 8601 duration of whole minutes as the reference writes it (`PT90M`, `PT0S`).
pub(crate) fn minutes(n: i64) -> String {
    if n == 0 {
        "PT0S".into()
    } else {
        format!("PT{n}M")
    }
}

/// An ISO 8601 duration of milliseconds in seconds (`PT60S`, `PT9609998.017S`).
pub(crate) fn seconds(ms: u64) -> String {
    let (s, frac) = (ms / 1000, ms % 1000);
    if frac == 0 {
        format!("PT{s}S")
    } else {
        let f = format!("{frac:03}");
        format!("PT{s}.{}S", f.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_durations_as_the_reference_writes_them() {
        assert_eq!(iso_ms(1_708_381_138_695), "2024-02-19T22:18:58.695Z");
        assert_eq!(iso_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(day(1_698_771_157_700), "20231031");
        assert_eq!(day(951_782_400_000), "20000229");
        assert_eq!(minutes(60), "PT60M");
        assert_eq!(minutes(0), "PT0S");
        assert_eq!(seconds(60_000), "PT60S");
        assert_eq!(seconds(9_609_998_017), "PT9609998.017S");
        assert_eq!(seconds(1_500), "PT1.5S");
    }

    #[test]
    fn ids_match_the_references() {
        // Vectors computed with Python's uuid.uuid5 (what the reference's uuid v5 gives).
        let ids = Ids {
            namespace: Uuid::parse_str("01234567-89ab-cdef-0123-456789abcdef").expect("uuid"),
            domain: "myserver.com".into(),
        };
        assert_eq!(
            ids.uuid("random-9019868"),
            "dec67ec8-2d2c-523f-9504-694c20bf9158"
        );
        assert_eq!(
            ids.uuid("8043c8452ae9830aac14c517adff3839dbd9228f-1698771157700"),
            "6c7796b6-cc22-588f-9863-6053b31d310b"
        );
        assert_eq!(
            ids.uuid("random-9019868_20231031"),
            "4a1d0cf8-8bd2-501e-b52b-12e04ea81447"
        );
        assert_eq!(
            ids.activity("w_xfsb9gxtlfom_micro"),
            "https://myserver.com/xapi/activities/5b8fb8b2-5c2c-576c-8d0a-68869f45ec21"
        );
    }
}
