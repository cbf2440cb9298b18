//! Optional seeding from BBB's own API: with `bbb.api_url` set, one `getMeetings` call when the
//! bus is subscribed (at start and after every reconnect) replaces the meetings' state with what
//! the server reports, so that a relay started or reconnected mid-meeting is right at once. The
//! recordings and the unique counters are left as they are.

use std::{collections::HashMap, sync::Arc, time::Duration};

use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::{Room, SharedConference};
use crate::{
    base::{digest::Algorithm, secret::Secret, time::now_ms},
    metrics::{Metrics, SourceResultLabels},
};

/// Why a seeding failed (the state is then left as it was).
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    #[error("request failed: {0}")]
    Request(#[from] reqwest::Error),
    #[error("answered HTTP {0}")]
    Status(u16),
    #[error("not a getMeetings answer: {0}")]
    Xml(#[from] quick_xml::DeError),
    #[error("getMeetings answered {0}")]
    Failed(String),
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
            let mut room = Room {
                breakout: m.breakout,
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

/// Calls `getMeetings` at `api_url` (the API's base, ending in `/api`).
///
/// # Errors
/// When the call fails or its answer is not a SUCCESS.
pub async fn fetch(
    client: &reqwest::Client,
    api_url: &str,
    secret: &Secret,
) -> Result<HashMap<String, Room>, SeedError> {
    let checksum = Algorithm::Sha1.hex_digest(&[b"getMeetings", secret.expose().as_bytes()]);
    let url = format!(
        "{}/getMeetings?checksum={checksum}",
        api_url.trim_end_matches('/')
    );
    let response = client.get(url).send().await?;
    if !response.status().is_success() {
        return Err(SeedError::Status(response.status().as_u16()));
    }
    parse(&response.text().await?)
}

/// Seeds the state each time the bus is subscribed (`subscribed` changes), until the relay
/// stops.
pub async fn run(
    source: Arc<str>,
    api_url: String,
    secret: Secret,
    conference: SharedConference,
    mut subscribed: tokio::sync::watch::Receiver<u64>,
    metrics: Arc<Metrics>,
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
    loop {
        tokio::select! {
            changed = subscribed.changed() => if changed.is_err() { return },
            () = token.cancelled() => return,
        }
        let result = match fetch(&client, &api_url, &secret).await {
            Ok(rooms) => {
                tracing::info!(
                    %source,
                    meetings = rooms.len(),
                    "conference state seeded from getMeetings"
                );
                conference
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .seed(rooms, now_ms());
                "ok"
            }
            Err(e) => {
                tracing::warn!(%source, error = %e, "cannot seed the conference state from getMeetings");
                "error"
            }
        };
        metrics
            .conference_seeds
            .get_or_create(&SourceResultLabels {
                source: source.to_string(),
                result: result.into(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_get_meetings_answer_becomes_rooms() {
        let xml = "<response><returncode>SUCCESS</returncode><meetings>\
            <meeting><meetingName>A</meetingName><internalMeetingID>m1</internalMeetingID>\
            <isBreakout>false</isBreakout><participantCount>3</participantCount><attendees>\
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
        assert!(rooms["b1"].breakout && rooms["b1"].users.is_empty());
        let none = "<response><returncode>SUCCESS</returncode><meetings/><messageKey>noMeetings</messageKey></response>";
        assert!(parse(none).unwrap().is_empty());
        let failed = "<response><returncode>FAILED</returncode><messageKey>checksumError</messageKey></response>";
        assert!(matches!(parse(failed), Err(SeedError::Failed(_))));
        assert!(parse("not xml").is_err());
    }
}
