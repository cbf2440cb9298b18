//! The three kinds of number the relay names things by, each its own type so that one cannot
//! be passed for another: a hook's id, a callback's id in its hook's queue (its timestamp), and
//! a reference to a shared payload record.

use std::{fmt, num::ParseIntError, str::FromStr};

/// Declares each id type, with what every one of them has: shown, parsed, stored and sent to
/// Redis as its number.
macro_rules! number {
    ($($(#[$doc:meta])* $t:ident;)*) => {$(
        $(#[$doc])*
        #[derive(
            Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash,
            serde::Serialize, serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $t(pub u64);

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $t {
            type Err = ParseIntError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                s.parse().map(Self)
            }
        }

        impl From<u64> for $t {
            fn from(n: u64) -> Self {
                Self(n)
            }
        }

        impl redis::ToRedisArgs for $t {
            fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
                self.0.write_redis_args(out);
            }
        }

        impl redis::ToSingleRedisArg for $t {}

        impl redis::FromRedisValue for $t {
            fn from_redis_value(v: redis::Value) -> Result<Self, redis::ParsingError> {
                u64::from_redis_value(v).map(Self)
            }
        }
    )*};
}

number! {
    /// A hook's id: allocated by Redis `INCR` on create, never reused. Shown and parsed as its
    /// number (`hookID` in the API's XML, `hook_id` in logs).
    HookId;
    /// A callback's id in its hook's queue: its `timestamp` in milliseconds, also its Redis
    /// stream entry id (`<ms>-0`). Strictly increasing per hook.
    StreamId;
    /// A shared payload record's number: the record is the hash `{PAYLOAD_PREFIX}<n>`, holding a
    /// payload that several queued callbacks refer to.
    RecordRef;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_show_and_parse_as_their_numbers() {
        assert_eq!(HookId(42).to_string(), "42");
        assert_eq!("42".parse::<HookId>(), Ok(HookId(42)));
        assert!("x".parse::<StreamId>().is_err());
        assert_eq!(RecordRef::from(3), RecordRef(3));
    }
}
