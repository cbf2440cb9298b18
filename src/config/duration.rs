//! A duration in the configuration, written as people write it: `"1h"`, `"30m"`, `"90s"`
//! (parsed by `humantime`), or a number of seconds.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer};

pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&humantime::format_duration(*d).to_string())
}

pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Text {
        Seconds(u64),
        Words(String),
    }
    match Text::deserialize(d)? {
        Text::Seconds(s) => Ok(Duration::from_secs(s)),
        Text::Words(w) => humantime::parse_duration(w.trim()).map_err(|e| {
            serde::de::Error::custom(format!(
                "`{w}` is not a duration ({e}); write e.g. \"1h\", \"30m\" or \"90s\""
            ))
        }),
    }
}
