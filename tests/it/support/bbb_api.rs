//! `FakeBbbApi`: BBB's `getMeetings` and `getRecordings` on loopback, checksums checked as
//! bbb-web checks them (sha1 of call name + query + secret), answering what the test sets.

use std::sync::{Arc, Mutex};

use axum::extract::{Path, RawQuery};
use hookrelay::base::digest::Algorithm;

use super::SECRET;

#[derive(Default)]
struct Answers {
    meetings: String,
    /// `(record id, state)`.
    recordings: Vec<(String, String)>,
}

pub(crate) struct FakeBbbApi {
    /// The API's base (`http://127.0.0.1:PORT/bigbluebutton/api`), for `api_url`.
    pub url: String,
    answers: Arc<Mutex<Answers>>,
    calls: Arc<Mutex<Vec<String>>>,
}

fn failed(key: &str) -> String {
    format!("<response><returncode>FAILED</returncode><messageKey>{key}</messageKey></response>")
}

impl FakeBbbApi {
    pub(crate) async fn start(meetings_xml: String) -> Self {
        let answers = Arc::new(Mutex::new(Answers {
            meetings: meetings_xml,
            recordings: Vec::new(),
        }));
        let calls = Arc::new(Mutex::new(Vec::new()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (a, c) = (answers.clone(), calls.clone());
        let app = axum::Router::new().route(
            "/bigbluebutton/api/{call}",
            axum::routing::get(move |Path(call): Path<String>, RawQuery(q): RawQuery| {
                let (answers, calls) = (a.clone(), c.clone());
                async move {
                    let q = q.unwrap_or_default();
                    let (query, checksum) = match q.rsplit_once("checksum=") {
                        Some((query, sum)) => (query.trim_end_matches('&').to_string(), sum),
                        None => return failed("checksumError"),
                    };
                    let want = Algorithm::Sha1.hex_digest(&[
                        call.as_bytes(),
                        query.as_bytes(),
                        SECRET.as_bytes(),
                    ]);
                    if checksum != want {
                        return failed("checksumError");
                    }
                    calls.lock().unwrap().push(format!("{call}?{query}"));
                    let answers = answers.lock().unwrap();
                    match call.as_str() {
                        "getMeetings" => answers.meetings.clone(),
                        "getRecordings" => {
                            let state = query.strip_prefix("state=").unwrap_or_default();
                            let listed: String = answers
                                .recordings
                                .iter()
                                .filter(|(_, s)| s == state)
                                .map(|(id, s)| {
                                    format!("<recording><recordID>{id}</recordID><state>{s}</state></recording>")
                                })
                                .collect();
                            format!("<response><returncode>SUCCESS</returncode><recordings>{listed}</recordings></response>")
                        }
                        _ => failed("unsupportedRequest"),
                    }
                }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            url: format!("http://{addr}/bigbluebutton/api"),
            answers,
            calls,
        }
    }

    /// What `getMeetings` answers from now on.
    pub(crate) fn set_meetings(&self, xml: String) {
        self.answers.lock().unwrap().meetings = xml;
    }

    /// The recordings `getRecordings` lists from now on, `(record id, state)`.
    #[allow(dead_code)]
    pub(crate) fn set_recordings(&self, recordings: &[(&str, &str)]) {
        self.answers.lock().unwrap().recordings = recordings
            .iter()
            .map(|(id, s)| (id.to_string(), s.to_string()))
            .collect();
    }

    /// The calls answered so far (`getRecordings?state=published`, ...).
    #[allow(dead_code)]
    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}
