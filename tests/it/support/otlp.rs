//! A real OTLP trace collector for the tests: `otlp_receiver.py`, which decodes what the
//! relay exports with OpenTelemetry's own protobuf messages (PyPI's opentelemetry-proto,
//! installed by `scripts/ensure-otlp.sh`), over HTTP or gRPC, and prints each span as a JSON
//! line that [`Collector::spans`] gives back.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
};

use serde_json::Value;

/// How the collector answers.
#[derive(Clone, Copy)]
pub(crate) enum Answer {
    Ok,
    /// 503 (HTTP) or UNAVAILABLE (gRPC) to every export.
    Refuse,
    /// Never answers.
    Hang,
}

pub(crate) struct Collector {
    child: Child,
    port: u16,
    spans: Arc<Mutex<Vec<Value>>>,
}

impl Collector {
    /// A collector over `transport` (`http` or `grpc`) answering as `answer` says.
    pub(crate) fn start(transport: &str, answer: Answer) -> Self {
        let mode = match answer {
            Answer::Ok => "ok",
            Answer::Refuse => "refuse",
            Answer::Hang => "hang",
        };
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/it/support/otlp_receiver.py"
        );
        let mut child = Command::new("python3")
            .args([script, transport, mode])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 otlp_receiver.py (scripts/ensure-otlp.sh installs what it needs)");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let first = lines
            .next()
            .and_then(Result::ok)
            .expect("the collector says where it listens");
        let port = first
            .strip_prefix("listening ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("collector: {first}"));
        let spans = Arc::new(Mutex::new(Vec::new()));
        let sink = spans.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    sink.lock().unwrap_or_else(|e| e.into_inner()).push(v);
                }
            }
        });
        Self { child, port, spans }
    }

    /// Its base endpoint, as `otlp_endpoint` and `OTEL_EXPORTER_OTLP_ENDPOINT` take it.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every span received so far.
    pub(crate) fn spans(&self) -> Vec<Value> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until the spans received satisfy `done`; gives them.
    pub(crate) async fn wait(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        super::wait::until(what, async || {
            let spans = self.spans();
            match done(&spans) {
                true => Ok(spans),
                false => Err(spans.len()),
            }
        })
        .await
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The spans of `trace`.
pub(crate) fn of_trace<'a>(spans: &'a [Value], trace: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["trace_id"] == trace).collect()
}

/// The spans named `name`.
pub(crate) fn named<'a>(spans: &[&'a Value], name: &str) -> Vec<&'a Value> {
    spans
        .iter()
        .copied()
        .filter(|s| s["name"] == name)
        .collect()
}

/// Attribute `key` of `span`.
pub(crate) fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}
