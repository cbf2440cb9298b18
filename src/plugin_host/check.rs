//! `hookrelay plugin check`: loads one plugin file the way the relay would (interface, WASI
//! sandbox, limits, `init`), runs it over a recorded meeting and says what it found and how
//! long a call takes.

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use super::{
    PluginError,
    chain::{self, Verdict},
    engine::{Host, wasm_digest},
    plugin::Plugin,
    settings::{Defaults, Settings, read_beside},
};
use crate::{
    base::ids::HookId,
    event::{EventFilter, Mappings, Processor},
    hooks::Hook,
    metrics::Metrics,
};

/// A recorded meeting's bus messages (the project's fixtures: created, joins, chat, leaves,
/// end), one JSON message a line.
const SAMPLE: &str = include_str!("sample-meeting.jsonl");

/// How the plugin did on the sample meeting, for one processed hook that gets every event.
#[derive(Debug, Default)]
pub struct CallTimes {
    /// Events the plugin was called for (those `init` asked for).
    pub calls: usize,
    total: Duration,
    pub slowest: Duration,
    pub kept: usize,
    pub replaced: usize,
    /// Dropped, by the plugin or by its `on_error` policy after a failure.
    pub dropped: usize,
}

impl CallTimes {
    /// The mean time of one call.
    pub fn mean(&self) -> Duration {
        self.total / u32::try_from(self.calls.max(1)).unwrap_or(u32::MAX)
    }
}

/// What a successful check found.
#[derive(Debug)]
pub struct CheckReport {
    pub name: String,
    /// Event ids `init` asked for; empty for all.
    pub wants: Vec<String>,
    pub compile_ms: u128,
    pub init_ms: u128,
    /// Whether a `NAME.toml` was read beside the file.
    pub has_settings: bool,
    pub times: CallTimes,
    /// Linear memory of one instance after the run, in bytes.
    pub instance_memory: usize,
}

/// Compiles `wasm`, links it against `bbb:relay/plugin`, and runs `init` under the default
/// limits (or those of the `NAME.toml` beside it).
///
/// # Errors
/// Says what is wrong: unreadable file, invalid settings, not a component, wrong interface, or
/// `init` failing.
pub fn check_file(wasm: &Path, defaults: &Defaults) -> Result<CheckReport, PluginError> {
    let bytes = std::fs::read(wasm)
        .map_err(|e| PluginError::Io(wasm.display().to_string(), e.to_string()))?;
    let toml = read_beside(wasm)?;
    let settings = Settings::parse(toml.as_deref(), defaults)?;
    let has_settings = toml.is_some();
    let name = wasm
        .file_stem()
        .map_or_else(|| "plugin".into(), |s| s.to_string_lossy().into_owned());
    let host = Host::new(None)?;
    let started = Instant::now();
    let digest = wasm_digest(&bytes);
    let (component, _) = host.compile(&bytes, &digest)?;
    let compile_ms = started.elapsed().as_millis();
    let started = Instant::now();
    // The source digest only tells reloads apart: none here.
    let plugin = Plugin::load(
        &host,
        &name,
        &component,
        settings,
        [0; 32],
        digest,
        Metrics::new(),
    )?;
    let init_ms = started.elapsed().as_millis();
    let plugin = Arc::new(plugin);
    Ok(CheckReport {
        name,
        wants: plugin.wanted(),
        compile_ms,
        init_ms,
        has_settings,
        times: time_calls(&plugin),
        instance_memory: plugin.instance_memory().unwrap_or(0),
    })
}

/// Runs `plugin` over the sample meeting's events, as the relay would for one processed hook
/// that gets them all, timing each call.
fn time_calls(plugin: &Arc<Plugin>) -> CallTimes {
    let mut processor = Processor::new(Mappings::new(u64::MAX, false), EventFilter::default());
    let hook = Hook {
        id: HookId(1),
        callback_url: "https://app.example/bbb".into(),
        meeting_id: None,
        event_ids: None,
        get_raw: false,
        permanent: false,
        tenant: None,
        disabled: None,
        signing: None,
    };
    let stages = std::slice::from_ref(plugin);
    let mut times = CallTimes::default();
    for (i, line) in SAMPLE.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let now = crate::base::time::now_ms();
        let Ok(events) = processor.process(&Arc::from(line), now) else {
            continue;
        };
        for event in events {
            if !plugin.wants(&event.id) {
                continue;
            }
            let started = Instant::now();
            let verdict = chain::run::<Plugin>(stages, &event, &hook, now + i as u64);
            let took = started.elapsed();
            times.calls += 1;
            times.total += took;
            times.slowest = times.slowest.max(took);
            match verdict {
                Verdict::Keep => times.kept += 1,
                Verdict::Replace(_) => times.replaced += 1,
                Verdict::Drop => times.dropped += 1,
            }
        }
    }
    times
}
