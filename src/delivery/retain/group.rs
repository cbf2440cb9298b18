//! The kept callbacks of a round for one URL, written as a few stream entries instead of one
//! each: each entry's `l` is a JSON array of callbacks, each an object of its fields, up to
//! [`GROUP_BYTES`] or a quarter of what the URL may keep ([`most_bytes`]), LZ4-packed with its
//! size first. An entry a callback cost Redis a command a callback (its arguments parsed, its id
//! made, the entry appended); a group costs one command for many. A meeting's events repeat
//! much of each other: packed, a group is about a fifth of its JSON (the reference's events of a
//! meeting: 0.18), which Redis reads and stores (BENCHMARKS.md, issue 63). The bytes counted
//! against `retain_max_mib` (`z`) are the callbacks' own, before packing. Groups written as
//! plain JSON (`g`) are read too.

use std::collections::HashMap;

use serde::ser::{Serialize, SerializeMap, Serializer};

/// About the most bytes of JSON one group entry holds: a redelivery of one callback reads its
/// whole group.
const GROUP_BYTES: usize = 64 * 1024;

/// About the most bytes of JSON a group holds for a URL that keeps at most `share` bytes: a
/// quarter of it, so that the trim, which removes whole groups, keeps three quarters of the
/// share or more (with 10,000 URLs in the default 256 MiB, a group is 6 KiB).
pub(super) fn most_bytes(share: u64) -> usize {
    usize::try_from(share / 4).map_or(GROUP_BYTES, |q| q.clamp(1, GROUP_BYTES))
}

/// A round's callbacks for one URL, written into a pipeline a group entry at a time: one
/// group's JSON is held at once, then copied into the pipeline.
pub(super) struct Groups<'a> {
    pipe: &'a mut redis::Pipeline,
    stream: &'a str,
    /// About the most bytes of JSON in one group ([`most_bytes`]).
    most: usize,
    /// The open group: its callbacks, a JSON array being written.
    json: Vec<u8>,
    /// The oldest callback timestamp in the open group (`t`).
    oldest: u64,
    count: usize,
    /// The open group's bytes, as the trim counts them (`z`).
    group_bytes: usize,
    /// The bytes of every callback pushed.
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

impl<'a> Groups<'a> {
    /// Groups of about `most` bytes at most, to be added to `pipe` for the kept stream
    /// `stream`, of about `hint` bytes in all.
    pub(super) fn new(
        pipe: &'a mut redis::Pipeline,
        stream: &'a str,
        most: usize,
        hint: usize,
    ) -> Self {
        Self {
            pipe,
            stream,
            most,
            // One group's buffer, used for each in turn.
            json: Vec::with_capacity((hint + hint / 4).min(most + most / 8)),
            oldest: u64::MAX,
            count: 0,
            group_bytes: 0,
            bytes: 0,
        }
    }

    /// Adds the callback of timestamp `ts` with `fields`. Its size is counted as an entry
    /// alone's was: its fields' bytes and 64.
    pub(super) fn push(&mut self, ts: u64, fields: &[(&str, &str)]) {
        let size = fields.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() + 64;
        let before = self.json.len();
        self.json.push(if self.count == 0 { b'[' } else { b',' });
        let one = Callback {
            fields,
            size: &size.to_string(),
        };
        // Strings into a buffer: serde_json has no error to give; should it, the callback is
        // left out of what is kept (it was delivered), not the group.
        if let Err(e) = serde_json::to_writer(&mut self.json, &one) {
            self.json.truncate(before);
            tracing::warn!(error = %e, "a sent callback cannot be kept for redelivery");
            return;
        }
        self.count += 1;
        self.group_bytes += size;
        self.oldest = self.oldest.min(ts);
        self.bytes += size;
        if self.json.len() >= self.most {
            self.close();
        }
    }

    /// Adds the last group; the bytes of every callback pushed, as the trim counts them.
    pub(super) fn finish(mut self) -> usize {
        self.close();
        self.bytes
    }

    /// Adds the open group's entry to the pipeline, and opens the next.
    fn close(&mut self) {
        if self.count == 0 {
            return;
        }
        self.json.push(b']');
        let packed = lz4_flex::block::compress_prepend_size(&self.json);
        // Sized at once: grown by doubling, the command's buffer left a trail of freed
        // blocks as large as the group (peak RSS, BENCHMARKS.md).
        let mut xadd = redis::Cmd::with_capacity(11, packed.len() + self.stream.len() + 64);
        xadd.arg("XADD")
            .arg(self.stream)
            .arg("*")
            .arg("l")
            .arg(&packed)
            .arg("t")
            .arg(self.oldest)
            .arg("n")
            .arg(self.count)
            .arg("z")
            .arg(self.group_bytes);
        self.pipe.add_command(xadd).ignore();
        self.json.clear();
        (self.oldest, self.count, self.group_bytes) = (u64::MAX, 0, 0);
    }
}

/// The JSON of a group entry's `l` (LZ4, its size first); `None` when it does not unpack or
/// says it is larger than a group can be.
pub(super) fn unpack(packed: &[u8]) -> Option<Vec<u8>> {
    let (size, rest) = lz4_flex::block::uncompressed_size(packed).ok()?;
    // No more than Redis takes in one value (its `proto-max-bulk-len`, 512 MiB by default):
    // a corrupt size is refused, not allocated.
    if size > 512 << 20 {
        return None;
    }
    lz4_flex::block::decompress(rest, size).ok()
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

    /// The `XADD`s' values of `pipe`: for each, its fields by name.
    fn entries(pipe: &redis::Pipeline) -> Vec<HashMap<String, Vec<u8>>> {
        pipe.cmd_iter()
            .map(|cmd| {
                let args: Vec<Vec<u8>> = cmd
                    .args_iter()
                    .map(|a| match a {
                        redis::Arg::Simple(b) => b.to_vec(),
                        _ => Vec::new(),
                    })
                    .collect();
                assert_eq!(args[..3], [b"XADD".to_vec(), b"k".to_vec(), b"*".to_vec()]);
                args[3..]
                    .chunks(2)
                    .map(|kv| {
                        (
                            String::from_utf8(kv[0].clone()).expect("name"),
                            kv[1].clone(),
                        )
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn callbacks_come_back_as_they_went_in_a_group_at_most_its_bytes_long() {
        let payload = format!(
            r#"{{"data":{{"name":"Zoë \"quoted\" 😀","pad":"{}"}}}}"#,
            "x".repeat(900)
        );
        let mut pipe = redis::pipe();
        let mut groups = Groups::new(&mut pipe, "k", GROUP_BYTES, 1000);
        let n = 200;
        for i in 0..n {
            let ts = (1000 + i).to_string();
            let fields = [("e", "user-joined"), ("p", payload.as_str()), ("r", &ts)];
            groups.push(1000 + i as u64, &fields);
        }
        let pushed = groups.finish();
        let done = entries(&pipe);
        assert!(done.len() > 2, "{} groups", done.len());
        let text =
            |g: &HashMap<String, Vec<u8>>, k: &str| String::from_utf8(g[k].clone()).expect("text");
        let json = |g: &HashMap<String, Vec<u8>>| unpack(&g["l"]).expect("unpacks");
        assert!(done.iter().all(|g| json(g).len() < GROUP_BYTES + 2048));
        let counted: usize = done
            .iter()
            .map(|g| text(g, "z").parse::<usize>().expect("z"))
            .sum();
        assert_eq!(counted, pushed);
        let mut next = 1000u64;
        for g in &done {
            assert_eq!(text(g, "t"), next.to_string());
            let back = decode(&json(g)).expect("decodes");
            assert_eq!(text(g, "n"), back.len().to_string());
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
    fn a_small_share_makes_small_groups() {
        assert_eq!(most_bytes(256 << 20), GROUP_BYTES);
        assert_eq!(most_bytes((256 << 20) / 10_000), 6710);
        assert_eq!(most_bytes(2), 1);
        let mut pipe = redis::pipe();
        let mut groups = Groups::new(&mut pipe, "k", most_bytes(2000), 0);
        for i in 0..10u64 {
            groups.push(i, &[("e", "user-joined"), ("p", &"y".repeat(300))]);
        }
        groups.finish();
        let counts: Vec<usize> = (entries(&pipe).iter())
            .map(|g| {
                decode(&unpack(&g["l"]).expect("unpacks"))
                    .expect("decodes")
                    .len()
            })
            .collect();
        assert_eq!(
            counts,
            [2, 2, 2, 2, 2],
            "500 bytes a group, at most: two callbacks"
        );
    }

    /// The reference's events of a meeting, kept for one URL: packed, a group is a fraction of
    /// its JSON (what Redis reads and stores for `retain`).
    #[test]
    fn the_reference_events_pack_to_a_fraction_of_their_json() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/bbb-webhooks/mapped-events.json"
        );
        let text = std::fs::read_to_string(path).expect("the fixtures");
        let mut pipe = redis::pipe();
        let mut groups = Groups::new(&mut pipe, "k", GROUP_BYTES, 0);
        let (mut json, mut n) = (0, 0);
        for (i, line) in text.lines().enumerate() {
            let v: serde_json::Value = serde_json::from_str(line).expect("an event");
            let id = v
                .pointer("/data/id")
                .and_then(|i| i.as_str())
                .expect("an id");
            let ts = (1_700_000_000_000 + i as u64).to_string();
            groups.push(
                1_700_000_000_000 + i as u64,
                &[("e", id), ("p", line), ("r", &ts)],
            );
            json +=
                serde_json::to_string(&[("e", id), ("p", line), ("r", &ts)]).map_or(0, |s| s.len());
            n += 1;
        }
        groups.finish();
        let packed: usize = entries(&pipe).iter().map(|g| g["l"].len()).sum();
        let ratio = packed as f64 / json as f64;
        println!("{n} events: {json} bytes of JSON, {packed} packed ({ratio:.3})");
        assert!(n > 20 && ratio < 0.35, "{ratio}");
    }

    #[test]
    fn nothing_pushed_writes_no_group() {
        let mut pipe = redis::pipe();
        assert_eq!(Groups::new(&mut pipe, "k", GROUP_BYTES, 1000).finish(), 0);
        assert!(pipe.is_empty());
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest::proptest! {
        /// Whatever the fields hold (quotes, escapes, any Unicode), each callback's fields come
        /// back as they went, in their groups, in order.
        #[test]
        fn any_fields_come_back_whole(
            callbacks in proptest::collection::vec(("\\PC{0,40}", any::<String>(), 0u64..u64::MAX), 1..40),
            most in 1usize..4096,
        ) {
            let mut pipe = redis::pipe();
            let mut groups = Groups::new(&mut pipe, "k", most, 0);
            for (e, p, ts) in &callbacks {
                let r = ts.to_string();
                groups.push(*ts, &[("e", e.as_str()), ("p", p.as_str()), ("r", &r)]);
            }
            groups.finish();
            let mut back = Vec::new();
            for cmd in pipe.cmd_iter() {
                let args: Vec<&[u8]> = cmd
                    .args_iter()
                    .filter_map(|a| match a {
                        redis::Arg::Simple(b) => Some(b),
                        _ => None,
                    })
                    .collect();
                prop_assert_eq!(args[3], b"l");
                back.extend(decode(&unpack(args[4]).expect("unpacks")).expect("decodes"));
            }
            prop_assert_eq!(back.len(), callbacks.len());
            for (c, (e, p, ts)) in back.iter().zip(&callbacks) {
                prop_assert_eq!(&c["e"], e);
                prop_assert_eq!(&c["p"], p);
                prop_assert_eq!(&c["r"], &ts.to_string());
            }
        }
    }
}
