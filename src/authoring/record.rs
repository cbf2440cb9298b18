//! `hookrelay record`: writes what one source's bus carries, one message a line, to a file
//! that `replay` and `plugin test` read. It only subscribes: nothing is written to that Redis.

use std::{io::Write, path::Path, time::Duration};

use futures_util::StreamExt;

use super::AuthoringError;
use crate::{
    config::{Config, SourceConfig},
    redis_conn::redis_client_verified,
};

/// When to stop (whichever comes first; with neither, at Ctrl-C or SIGTERM).
#[derive(Clone, Copy, Debug, Default)]
pub struct Until {
    pub duration: Option<Duration>,
    pub count: Option<u64>,
}

/// What was recorded.
#[derive(Debug, Default)]
pub struct Recorded {
    pub messages: u64,
    /// Messages that were not JSON, not written.
    pub skipped: u64,
    pub source: String,
    pub channels: usize,
}

/// Subscribes to `source`'s channels (the first source when `None`), writes each JSON
/// message as one line of `out` (flushed line by line, so a stopped recording is complete to
/// its last line), and returns when `until` is reached. `ready` is called once subscribed.
///
/// # Errors
/// An unknown source, a Redis that cannot be reached, or a file that cannot be written.
pub async fn record(
    config: &Config,
    source: Option<&str>,
    out: &Path,
    until: Until,
    ready: impl FnOnce(&str, usize),
) -> Result<Recorded, AuthoringError> {
    let sources = config.effective_sources();
    let chosen = chosen_source(&sources, source)?;
    let fail = |e: redis::RedisError| {
        AuthoringError::Record(format!(
            "cannot subscribe at {}: {e}",
            chosen.url.redacted()
        ))
    };
    let client =
        redis_client_verified(chosen.url.expose(), chosen.ca_file.as_deref()).map_err(fail)?;
    let mut pubsub = tokio::time::timeout(Duration::from_secs(5), client.get_async_pubsub())
        .await
        .map_err(|_| {
            AuthoringError::Record(format!("{} did not answer in 5 s", chosen.url.redacted()))
        })?
        .map_err(fail)?;
    pubsub.subscribe(&chosen.channels).await.map_err(fail)?;
    let mut file = std::io::LineWriter::new(create_private(out)?);
    ready(&chosen.name, chosen.channels.len());
    let mut recorded = Recorded {
        source: chosen.name.clone(),
        channels: chosen.channels.len(),
        ..Recorded::default()
    };
    let deadline = until.duration.map(|d| tokio::time::Instant::now() + d);
    let mut messages = pubsub.into_on_message();
    let stop = crate::shutdown::Shutdown::new();
    stop.on_signals();
    while until.count.is_none_or(|n| recorded.messages < n) {
        let next = async {
            match deadline {
                Some(d) => tokio::time::timeout_at(d, messages.next()).await.ok(),
                None => Some(messages.next().await),
            }
        };
        let message = tokio::select! {
            m = next => m,
            () = stop.token().cancelled() => None,
        };
        let Some(Some(message)) = message else {
            break;
        };
        let Some(line) = line_of(&message) else {
            recorded.skipped += 1;
            continue;
        };
        writeln!(file, "{line}").map_err(|e| AuthoringError::io(out, e))?;
        recorded.messages += 1;
    }
    file.flush().map_err(|e| AuthoringError::io(out, e))?;
    Ok(recorded)
}

/// The source `source` names, or the first one.
fn chosen_source<'s>(
    sources: &'s [SourceConfig],
    source: Option<&str>,
) -> Result<&'s SourceConfig, AuthoringError> {
    let chosen = match source {
        None => sources.first(),
        Some(name) => sources.iter().find(|s| s.name == name),
    };
    chosen.ok_or_else(|| {
        let names: Vec<&str> = sources.iter().map(|s| s.name.as_str()).collect();
        AuthoringError::Usage(format!(
            "no source {:?}: the configuration has {}",
            source.unwrap_or_default(),
            names.join(", ")
        ))
    })
}

/// The line a bus message is recorded as: as it came unless it spans lines; `None` (skipped)
/// when it is not JSON text.
fn line_of(message: &redis::Msg) -> Option<String> {
    let payload: String = message.get_payload().ok()?;
    match serde_json::from_str::<serde_json::Value>(&payload) {
        Ok(_) if !payload.contains('\n') => Some(payload),
        Ok(v) => Some(v.to_string()),
        Err(_) => {
            tracing::warn!(
                channel = message.get_channel_name(),
                "a message that is not JSON is not recorded"
            );
            None
        }
    }
}

/// Creates (or empties) the file `out` readable by its owner only: bus messages hold meeting
/// passwords, join tokens and chat (an existing file is made so too).
fn create_private(out: &Path) -> Result<std::fs::File, AuthoringError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(out)
        .map_err(|e| AuthoringError::io(out, e))?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(|e| AuthoringError::io(out, e))?;
    Ok(file)
}
