//! Where Redis' time goes: `INFO commandstats` (calls and microseconds per command), reset
//! before a run and read after it.

use crate::support::redis::TestRedis;

/// One command's calls and microseconds in all since the last reset.
#[derive(Debug, Clone)]
pub(crate) struct Command {
    pub name: String,
    pub calls: f64,
    pub usec: f64,
}

/// Zeroes the server's command statistics (`CONFIG RESETSTAT`).
pub(crate) async fn reset(redis: &TestRedis) {
    if let Some(mut c) = redis.conn().await {
        let _: Result<(), _> = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut c)
            .await;
    }
}

/// Each command's statistics, most microseconds first.
pub(crate) async fn read(redis: &TestRedis) -> Vec<Command> {
    let Some(mut c) = redis.conn().await else {
        return Vec::new();
    };
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut c)
        .await
        .unwrap_or_default();
    let mut out: Vec<Command> = info.lines().filter_map(parse).collect();
    out.sort_by(|a, b| b.usec.total_cmp(&a.usec));
    out
}

/// `cmdstat_xadd:calls=3,usec=12,usec_per_call=4.00,...`
fn parse(line: &str) -> Option<Command> {
    let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
    let field = |key: &str| {
        fields
            .split(',')
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.parse::<f64>().ok())
    };
    Some(Command {
        name: name.to_string(),
        calls: field("calls")?,
        usec: field("usec")?,
    })
}

/// One line: per callback, the calls and microseconds of the commands that cost most.
pub(crate) fn per_callback(stats: &[Command], callbacks: usize) -> String {
    let n = callbacks.max(1) as f64;
    stats
        .iter()
        .take(8)
        .map(|c| format!("{} {:.2}x {:.2}us", c.name, c.calls / n, c.usec / n))
        .collect::<Vec<_>>()
        .join(", ")
}
