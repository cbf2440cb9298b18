//! Histogram bucket bounds (`le`) spelled as the exposition they came from spelled them. The
//! exposition parser reads a bound as a number and writes it back its own way (`1` for `1.0`),
//! and Prometheus 2 keeps `le="1"` and `le="1.0"` as two series: a text format written from a
//! parsed exposition takes each bound's spelling back from the exposition, so that a scraper
//! of either format, or of `/metrics/all`, holds the same series.

use std::collections::HashMap;

/// Bound spellings by bucket series name and value, of one exposition.
#[derive(Debug, Default)]
pub(crate) struct Spellings(HashMap<(String, u64), String>);

impl Spellings {
    /// Notes the bound spellings of `exposition` (either format); a spelling noted first wins.
    pub(crate) fn note(&mut self, exposition: &str) {
        for (name, spelled, _) in exposition.lines().filter_map(bound) {
            if let Some(v) = value(spelled) {
                self.0
                    .entry((name.to_string(), v.to_bits()))
                    .or_insert_with(|| spelled.to_string());
            }
        }
    }

    /// `text` (a histogram family's, written from the same exposition) with each bound spelled
    /// as noted; bounds never noted are left as they are.
    pub(crate) fn respell(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() + text.len() / 32);
        for line in text.lines() {
            let noted = bound(line).and_then(|(name, spelled, at)| {
                let v = value(spelled)?;
                let noted = self.0.get(&(name.to_string(), v.to_bits()))?;
                (noted != spelled).then_some((noted, spelled, at))
            });
            match noted {
                Some((noted, spelled, at)) => {
                    out.push_str(&line[..at]);
                    out.push_str(noted);
                    out.push_str(&line[at + spelled.len()..]);
                }
                None => out.push_str(line),
            }
            out.push('\n');
        }
        out
    }
}

/// A bucket sample line's series name (`<name>_bucket`) and its `le` label's value, with where
/// that value starts.
fn bound(line: &str) -> Option<(&str, &str, usize)> {
    if line.starts_with('#') {
        return None;
    }
    let name = &line[..line.find('{')?];
    if !name.ends_with("_bucket") {
        return None;
    }
    let at = ["{le=\"", ",le=\""]
        .iter()
        .filter_map(|p| line.find(p).map(|i| i + p.len()))
        .min()?;
    let len = line[at..].find('"')?;
    Some((name, &line[at..at + len], at))
}

/// A bound's value (`+Inf` included).
fn value(spelled: &str) -> Option<f64> {
    match spelled {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        s => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::Spellings;

    #[test]
    fn bounds_take_back_the_spelling_of_their_exposition() {
        let mut s = Spellings::default();
        s.note(
            "# TYPE lat histogram\nlat_bucket{le=\"0.005\"} 0\nlat_bucket{le=\"1.0\"} 1\n\
             lat_bucket{le=\"+Inf\"} 2\n# TYPE room gaugehistogram\nroom_bucket{le=\"1\"} 1\n",
        );
        let written = "# HELP lat x\nlat_bucket{source=\"own\",le=\"0.005\"} 0\n\
                       lat_bucket{source=\"own\",le=\"1\"} 1\nlat_bucket{source=\"own\",le=\"+Inf\"} 2\n\
                       room_bucket{le=\"1\"} 1\nother_bucket{le=\"1\"} 3\nlat_sum 3.5\n";
        assert_eq!(
            s.respell(written),
            "# HELP lat x\nlat_bucket{source=\"own\",le=\"0.005\"} 0\n\
             lat_bucket{source=\"own\",le=\"1.0\"} 1\nlat_bucket{source=\"own\",le=\"+Inf\"} 2\n\
             room_bucket{le=\"1\"} 1\nother_bucket{le=\"1\"} 3\nlat_sum 3.5\n"
        );
    }

    #[test]
    fn a_label_named_like_le_is_not_a_bound() {
        let mut s = Spellings::default();
        s.note("x_bucket{le=\"2.0\"} 1\n");
        let written = "x_bucket{handle=\"2\",le=\"2\"} 1\n";
        assert_eq!(s.respell(written), "x_bucket{handle=\"2\",le=\"2.0\"} 1\n");
        // Only buckets' bounds: another series' `le` label is its own.
        s.note("x:rate5m{le=\"2.0\"} 1\n");
        assert_eq!(
            s.respell("x:rate5m{le=\"2\"} 1\n"),
            "x:rate5m{le=\"2\"} 1\n"
        );
    }
}
