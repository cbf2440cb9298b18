//! The kept callbacks of a round for one URL, written as a few stream entries instead of one
//! each: each entry's `g` is a JSON array of callbacks, each an object of its fields, up to
//! [`GROUP_BYTES`]. An entry a callback cost Redis a command a callback (its arguments parsed,
//! its id made, the entry appended); a group costs one command for many (BENCHMARKS.md, issue
//! 63). JSON, so that an operator reading the store sees what is kept.

use std::collections::HashMap;

use serde::ser::{Serialize, SerializeMap, Serializer};

/// About the most bytes of JSON one group entry holds: a redelivery of one callback reads its
/// whole group.
const GROUP_BYTES: usize = 64 * 1024;

/// One group entry's values.
pub(super) struct Group {
    /// The callbacks, a JSON array.
    pub(super) json: Vec<u8>,
    /// The oldest callback timestamp among them (`t`).
    pub(super) oldest: u64,
    pub(super) count: usize,
    /// Their sizes' sum, as the trim counts them (`z`).
    pub(super) bytes: usize,
}

/// A round's groups for one URL, filled a callback at a time.
#[derive(Default)]
pub(super) struct Groups {
    done: Vec<Group>,
    open: Option<Group>,
    bytes: usize,
}

/// A callback's fields, written as one JSON object with its size (`z`) last.
struct Callback<'a> {
    fields: &'a [(&'a str, &'a str)],
    size: &'a str,
}

impl Serialize for Callback<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.fields.len() + 1))?;
        for (k, v) in self.fields {
            map.serialize_entry(k, v)?;
        }
        map.serialize_entry("z", self.size)?;
        map.end()
    }
}

impl Groups {
    /// Adds the callback of timestamp `ts` with `fields`. Its size is counted as an entry
    /// alone's was: its fields' bytes and 64.
    pub(super) fn push(&mut self, ts: u64, fields: &[(&str, &str)]) {
        let size = fields.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() + 64;
        let g = self.open.get_or_insert_with(|| Group {
            json: Vec::with_capacity(GROUP_BYTES / 4),
            oldest: ts,
            count: 0,
            bytes: 0,
        });
        let before = g.json.len();
        g.json.push(if g.count == 0 { b'[' } else { b',' });
        let one = Callback {
            fields,
            size: &size.to_string(),
        };
        // Strings into a buffer: serde_json has no error to give; should it, the callback is
        // left out of what is kept (it was delivered), not the group.
        if let Err(e) = serde_json::to_writer(&mut g.json, &one) {
            g.json.truncate(before);
            tracing::warn!(error = %e, "a sent callback cannot be kept for redelivery");
            return;
        }
        g.count += 1;
        g.bytes += size;
        g.oldest = g.oldest.min(ts);
        self.bytes += size;
        if g.json.len() >= GROUP_BYTES {
            self.close();
        }
    }

    /// The bytes of every callback pushed, as the trim counts them.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The groups, oldest first.
    pub(super) fn finish(mut self) -> Vec<Group> {
        self.close();
        self.done
    }

    fn close(&mut self) {
        if let Some(mut g) = self.open.take().filter(|g| g.count > 0) {
            g.json.push(b']');
            self.done.push(g);
        }
    }
}

/// The callbacks of a group entry's `g`, each as its fields.
///
/// # Errors
/// When `json` is not an array of objects of strings.
pub(super) fn decode(json: &[u8]) -> Result<Vec<HashMap<String, String>>, serde_json::Error> {
    serde_json::from_slice(json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callbacks_come_back_as_they_went_in_a_group_at_most_its_bytes_long() {
        let payload = format!(
            r#"{{"data":{{"name":"Zoë \"quoted\" 😀","pad":"{}"}}}}"#,
            "x".repeat(900)
        );
        let mut groups = Groups::default();
        let n = 200;
        for i in 0..n {
            let ts = (1000 + i).to_string();
            let fields = [("e", "user-joined"), ("p", payload.as_str()), ("r", &ts)];
            groups.push(1000 + i as u64, &fields);
        }
        let pushed = groups.bytes();
        let done = groups.finish();
        assert!(done.len() > 2, "{} groups", done.len());
        assert!(done.iter().all(|g| g.json.len() < GROUP_BYTES + 2048));
        assert_eq!(done.iter().map(|g| g.bytes).sum::<usize>(), pushed);
        let mut next = 1000u64;
        for g in &done {
            assert_eq!(g.oldest, next);
            let back = decode(&g.json).expect("decodes");
            assert_eq!(back.len(), g.count);
            for c in back {
                assert_eq!(c["p"], payload);
                assert_eq!(c["e"], "user-joined");
                assert_eq!(c["r"], next.to_string());
                assert_eq!(c["z"], (12 + 1 + payload.len() + 5 + 64).to_string());
                next += 1;
            }
        }
        assert_eq!(next, 1000 + n as u64);
    }

    #[test]
    fn nothing_pushed_writes_no_group() {
        assert!(Groups::default().finish().is_empty());
    }
}
