//! Optional seeding and reconciliation from BBB's own API: with `bbb.api_url` set, a
//! `getMeetings` call when the bus is subscribed (at start and after every reconnect) and every
//! `bbb.reconcile_interval_s` replaces the meetings' state with what the server reports, so that
//! a relay started or reconnected mid-meeting is right at once, and meetings BBB no longer has
//! (a crash of BBB) or joins and leaves the bus lost are corrected. With
//! `bbb.reconcile_recordings`, `getRecordings` by state counts the recordings too. Every call's
//! time goes to `bbb_api_latency{endpoint,parameters}`, and whether the last one was answered
//! to `bbb_api_up`. The unique counters are left as they are.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::{Origin, RecordingState, Room, SharedConference};
use crate::{
    base::{digest::Algorithm, secret::Secret, time::now_ms},
    metrics::{Metrics, SourceResultLabels},
};

/// Why a seeding failed (the state is then left as it was).
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// Nothing answers at the address (its text has no URL: the URL carries the checksum).
    #[error("cannot connect: {0}")]
    Unreachable(String),
    /// Its text has no URL: the URL carries the checksum, a credential of the whole API.
    #[error("request failed: {0}")]
    Request(String),
    #[error("answered HTTP {0}")]
    Status(u16),
    #[error("not a getMeetings answer: {0}")]
    Xml(#[from] quick_xml::DeError),
    #[error("BBB answered {0}")]
    Failed(String),
}

impl From<reqwest::Error> for SeedError {
    fn from(e: reqwest::Error) -> Self {
        let connect = e.is_connect();
        let text = crate::base::error_text(&e.without_url());
        if connect {
            Self::Unreachable(text)
        } else {
            Self::Request(text)
        }
    }
}

#[derive(Debug, Deserialize)]
struct Response {
    returncode: String,
    #[serde(default)]
    meetings: Meetings,
}

#[derive(Debug, Default, Deserialize)]
struct Meetings {
    #[serde(default)]
    meeting: Vec<Meeting>,
}

#[derive(Debug, Deserialize)]
struct Meeting {
    #[serde(rename = "internalMeetingID")]
    internal_id: String,
    #[serde(rename = "isBreakout", default)]
    breakout: bool,
    #[serde(default)]
    attendees: Attendees,
    #[serde(default)]
    metadata: HashMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
struct Attendees {
    #[serde(default)]
    attendee: Vec<Attendee>,
}

#[derive(Debug, Deserialize)]
struct Attendee {
    #[serde(rename = "userID")]
    user_id: String,
    #[serde(rename = "clientType", default)]
    client_type: String,
    #[serde(rename = "isListeningOnly", default)]
    listening_only: bool,
    #[serde(rename = "hasJoinedVoice", default)]
    voice: bool,
    #[serde(rename = "hasVideo", default)]
    video: bool,
}

/// The rooms a `getMeetings` answer describes. A camera is known only as "has video": it is
/// kept as a stream named `seeded:<user>`, which the user's next camera stop removes.
///
/// # Errors
/// When the XML is not a SUCCESS answer of `getMeetings`.
pub fn parse(xml: &str) -> Result<HashMap<String, Room>, SeedError> {
    let response: Response = quick_xml::de::from_str(xml)?;
    if response.returncode != "SUCCESS" {
        return Err(SeedError::Failed(response.returncode));
    }
    Ok(response
        .meetings
        .meeting
        .into_iter()
        .map(|m| {
            let metadata = &m.metadata;
            let mut room = Room {
                breakout: m.breakout,
                origin: Origin::from_metadata(|k| metadata.get(k).map(String::as_str)),
                ..Room::default()
            };
            for a in m.attendees.attendee {
                let client = super::client_type(Some(&a.client_type.as_str().into()));
                if a.listening_only {
                    room.listeners.insert(a.user_id.clone());
                } else if a.voice {
                    room.voice.insert(a.user_id.clone());
                }
                if a.video {
                    room.streams
                        .insert(format!("seeded:{}", a.user_id), a.user_id.clone());
                }
                room.users.insert(a.user_id, client);
            }
            (m.internal_id, room)
        })
        .collect())
}

/// Calls `call` of the API at `api_url` (its base, ending in `/api`) with `query`, signed
/// with `secret`; the answer's text.
///
/// # Errors
/// When the call fails or is not answered with 2xx.
async fn call(
    client: &reqwest::Client,
    api_url: &str,
    secret: &Secret,
    call: &str,
    query: &str,
) -> Result<String, SeedError> {
    let checksum = Algorithm::Sha1.hex_digest(&[
        call.as_bytes(),
        query.as_bytes(),
        secret.expose().as_bytes(),
    ]);
    let separator = if query.is_empty() { "" } else { "&" };
    let url = format!(
        "{}/{call}?{query}{separator}checksum={checksum}",
        api_url.trim_end_matches('/')
    );
    let response = client.get(url).send().await?;
    if !response.status().is_success() {
        return Err(SeedError::Status(response.status().as_u16()));
    }
    Ok(response.text().await?)
}

/// Calls `getMeetings` at `api_url` (the API's base, ending in `/api`).
///
/// # Errors
/// When the call fails or its answer is not a SUCCESS.
pub async fn fetch(
    client: &reqwest::Client,
    api_url: &str,
    secret: &Secret,
) -> Result<HashMap<String, Room>, SeedError> {
    parse(&call(client, api_url, secret, "getMeetings", "").await?)
}

#[derive(Debug, Deserialize)]
struct RecordingsResponse {
    returncode: String,
    #[serde(default)]
    recordings: Recordings,
}

#[derive(Debug, Default, Deserialize)]
struct Recordings {
    #[serde(default)]
    recording: Vec<RecordingEntry>,
}

#[derive(Debug, Deserialize)]
struct RecordingEntry {
    #[serde(rename = "recordID")]
    record_id: String,
}

/// The record ids a `getRecordings` answer lists.
///
/// # Errors
/// When the XML is not a SUCCESS answer of `getRecordings`.
pub fn parse_recordings(xml: &str) -> Result<Vec<String>, SeedError> {
    let response: RecordingsResponse = quick_xml::de::from_str(xml)?;
    if response.returncode != "SUCCESS" {
        return Err(SeedError::Failed(response.returncode));
    }
    Ok(response
        .recordings
        .recording
        .into_iter()
        .map(|r| r.record_id)
        .collect())
}

/// The states `getRecordings` is asked for, as bbb-exporter asks.
const LISTED: [RecordingState; 5] = [
    RecordingState::Processing,
    RecordingState::Processed,
    RecordingState::Published,
    RecordingState::Unpublished,
    RecordingState::Deleted,
];

/// One source's link to its BBB API.
pub struct Reconciler {
    pub(crate) source: Arc<str>,
    /// The API's addresses, tried in order until one is reached (bbb-web on this host, then
    /// the server's public address).
    pub(crate) api_urls: Vec<String>,
    pub(crate) secret: Secret,
    pub(crate) conference: SharedConference,
    pub(crate) metrics: Arc<Metrics>,
    /// 0: only when the bus is (re)subscribed.
    pub(crate) interval: Duration,
    /// Count the recordings with `getRecordings` too.
    pub(crate) recordings: bool,
}

impl Reconciler {
    /// Calls `call` with `query`, timing it into `bbb_api_latency`.
    async fn timed(
        &self,
        client: &reqwest::Client,
        name: &str,
        query: &str,
    ) -> Result<String, SeedError> {
        let started = Instant::now();
        let mut answer = Err(SeedError::Unreachable("no API address".into()));
        for url in &self.api_urls {
            answer = call(client, url, &self.secret, name, query).await;
            if !matches!(answer, Err(SeedError::Unreachable(_))) {
                break;
            }
        }
        self.metrics
            .observe_api_call(name, query, started.elapsed().as_secs_f64());
        answer
    }

    /// One reconciliation: the meetings, then (if asked) the recordings.
    async fn once(&self, client: &reqwest::Client) -> Result<usize, SeedError> {
        let rooms = parse(&self.timed(client, "getMeetings", "").await?)?;
        let meetings = rooms.len();
        self.conference
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .seed(rooms, now_ms());
        if self.recordings {
            let mut listed = HashMap::new();
            for state in LISTED {
                let query = format!("state={}", state.as_str());
                let xml = self.timed(client, "getRecordings", &query).await?;
                listed.extend(parse_recordings(&xml)?.into_iter().map(|id| (id, state)));
            }
            self.conference
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .reconcile_recordings(listed);
        }
        Ok(meetings)
    }

    /// Seeds the state each time the bus is subscribed (`subscribed` changes) and every
    /// `interval`, until the relay stops. A failure is logged once, and its end.
    pub async fn run(
        self,
        mut subscribed: tokio::sync::watch::Receiver<u64>,
        token: CancellationToken,
    ) {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = match reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
        {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "cannot build the HTTP client for getMeetings: no seeding");
                return;
            }
        };
        let period = if self.interval.is_zero() {
            Duration::from_secs(365 * 24 * 3600)
        } else {
            self.interval
        };
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let source = &self.source;
        loop {
            let seeding = tokio::select! {
                changed = subscribed.changed() => if changed.is_err() { return } else { true },
                _ = tick.tick() => false,
                () = token.cancelled() => return,
            };
            // A BBB API that never answers must not hold the relay's stop up for the calls'
            // timeouts (10 s each, getMeetings then getRecordings).
            let result = tokio::select! {
                r = self.once(&client) => r,
                () = token.cancelled() => return,
            };
            let up = result.is_ok();
            let was = self
                .conference
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .api_up
                .replace(up);
            match &result {
                Ok(meetings) if seeding => {
                    tracing::info!(%source, meetings, "conference state seeded from getMeetings");
                }
                Ok(meetings) if was == Some(false) => {
                    tracing::info!(%source, meetings, "BBB's API answers again: conference state reconciled");
                }
                Ok(_) => {}
                Err(e) if was != Some(false) => {
                    tracing::warn!(%source, error = %e, "cannot read the conference state from BBB's API (bbb_api_up 0 until it answers)");
                }
                Err(e) => tracing::debug!(%source, error = %e, "BBB's API still does not answer"),
            }
            self.metrics
                .conference_seeds
                .get_or_create(&SourceResultLabels {
                    source: source.to_string(),
                    result: if up { "ok" } else { "error" }.into(),
                })
                .inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_get_meetings_answer_becomes_rooms() {
        let xml = "<response><returncode>SUCCESS</returncode><meetings>\
            <meeting><meetingName>A</meetingName><internalMeetingID>m1</internalMeetingID>\
            <isBreakout>false</isBreakout><participantCount>3</participantCount>\
            <metadata><bbb-origin>Moodle</bbb-origin><bbb-origin-server-name>LMS.example</bbb-origin-server-name><bbb-context-id>7</bbb-context-id></metadata><attendees>\
            <attendee><userID>u1</userID><clientType>HTML5</clientType><isListeningOnly>false</isListeningOnly><hasJoinedVoice>true</hasJoinedVoice><hasVideo>true</hasVideo></attendee>\
            <attendee><userID>u2</userID><clientType>HTML5</clientType><isListeningOnly>true</isListeningOnly><hasJoinedVoice>false</hasJoinedVoice><hasVideo>false</hasVideo></attendee>\
            <attendee><userID>v3</userID><clientType>DIAL-IN</clientType><isListeningOnly>false</isListeningOnly><hasJoinedVoice>true</hasJoinedVoice><hasVideo>false</hasVideo></attendee>\
            </attendees></meeting>\
            <meeting><internalMeetingID>b1</internalMeetingID><isBreakout>true</isBreakout><attendees/></meeting>\
            </meetings></response>";
        let rooms = parse(xml).unwrap();
        let m1 = &rooms["m1"];
        assert_eq!(m1.users.len(), 3);
        assert_eq!(m1.users["v3"], "dial-in");
        assert_eq!(m1.listeners.iter().collect::<Vec<_>>(), ["u2"]);
        assert_eq!(m1.voice.len(), 2);
        assert_eq!(m1.streams.len(), 1);
        assert_eq!(
            m1.origin,
            Some(Origin {
                server: "lms.example".into(),
                name: "moodle".into()
            })
        );
        assert!(rooms["b1"].breakout && rooms["b1"].users.is_empty());
        assert_eq!(rooms["b1"].origin, None);
        let none = "<response><returncode>SUCCESS</returncode><meetings/><messageKey>noMeetings</messageKey></response>";
        assert!(parse(none).unwrap().is_empty());
        let failed = "<response><returncode>FAILED</returncode><messageKey>checksumError</messageKey></response>";
        assert!(matches!(parse(failed), Err(SeedError::Failed(_))));
        assert!(parse("not xml").is_err());
    }

    #[test]
    fn a_get_recordings_answer_lists_its_record_ids() {
        let xml = "<response><returncode>SUCCESS</returncode><recordings>\
            <recording><recordID>r1</recordID><meetingID>x</meetingID><state>published</state>\
            <playback><format><type>presentation</type></format></playback></recording>\
            <recording><recordID>r2</recordID></recording></recordings></response>";
        assert_eq!(parse_recordings(xml).unwrap(), ["r1", "r2"]);
        let none = "<response><returncode>SUCCESS</returncode><recordings></recordings><messageKey>noRecordings</messageKey></response>";
        assert!(parse_recordings(none).unwrap().is_empty());
        let failed = "<response><returncode>FAILED</returncode></response>";
        assert!(parse_recordings(failed).is_err());
    }
}
