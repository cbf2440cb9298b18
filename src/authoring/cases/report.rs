//! What a run says: whether a case passed, a readable difference when it did not (a line
//! diff of the JSON), and the case file rewritten with what came out (`--update`).

use std::path::Path;

use serde_json::{Map, Value};

use super::{HookSpec, Input, Outcome, run::CaseResult};
use crate::authoring::AuthoringError;

impl CaseResult {
    /// No expectation, or every outcome as expected.
    pub fn passed(&self) -> bool {
        self.case.expect.as_ref().is_none_or(|e| {
            e.len() == self.actual.len() && e.iter().zip(&self.actual).all(|(e, a)| *e == a.outcome)
        })
    }

    /// What differs, for people: one line per event, and a diff of replaced JSON.
    pub fn describe(&self) -> String {
        let Some(expected) = &self.case.expect else {
            return String::new();
        };
        let mut out = String::new();
        for i in 0..expected.len().max(self.actual.len()) {
            let (e, a) = (expected.get(i), self.actual.get(i));
            if let (Some(e), Some(a)) = (e, a)
                && *e == a.outcome
            {
                continue;
            }
            let id = a.map_or("no event", |a| a.event_id.as_str());
            let shown = |o: Option<&Outcome>| o.map_or_else(|| "nothing".into(), Outcome::short);
            out.push_str(&format!(
                "  event {} ({id}): expected {}, got {}\n",
                i + 1,
                shown(e),
                shown(a.map(|a| &a.outcome))
            ));
            if let (Some(Outcome::Replaced(e)), Some(Outcome::Replaced(a))) =
                (e, a.map(|a| &a.outcome))
            {
                out.push_str(&json_diff(e, a));
            }
        }
        out
    }
}

/// A line diff of two JSON values, pretty-printed: `-` expected, `+` actual.
fn json_diff(expected: &Value, actual: &Value) -> String {
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
    let (e, a) = (pretty(expected), pretty(actual));
    let diff = similar::TextDiff::from_lines(&e, &a);
    let mut out = String::new();
    for group in diff.grouped_ops(2) {
        out.push_str("    ...\n");
        for op in group {
            for change in diff.iter_changes(&op) {
                let sign = match change.tag() {
                    similar::ChangeTag::Delete => '-',
                    similar::ChangeTag::Insert => '+',
                    similar::ChangeTag::Equal => ' ',
                };
                out.push_str(&format!("    {sign} {}", change.value()));
            }
        }
    }
    out
}

/// The file with every line's expectation set to what came out (`--update`): bare bus
/// messages become cases. Written to a temporary file, then renamed over the old one.
///
/// # Errors
/// When the file cannot be written.
pub fn update(path: &Path, results: &[CaseResult]) -> Result<(), AuthoringError> {
    let mut text = String::new();
    for r in results {
        let mut line = Map::new();
        if let Some(name) = &r.case.name {
            line.insert("name".into(), name.clone().into());
        }
        if r.case.hook != HookSpec::default() {
            line.insert(
                "hook".into(),
                serde_json::to_value(&r.case.hook).unwrap_or_default(),
            );
        }
        match &r.case.input {
            Input::Message(m) => line.insert(
                "message".into(),
                serde_json::from_str(m).unwrap_or_else(|_| Value::String(m.to_string())),
            ),
            Input::Event(e) => line.insert("event".into(), e.clone()),
        };
        let expect = r.actual.iter().map(|a| a.outcome.to_json()).collect();
        line.insert("expect".into(), Value::Array(expect));
        text.push_str(&Value::Object(line).to_string());
        text.push('\n');
    }
    let tmp = path.with_extension("jsonl.tmp");
    std::fs::write(&tmp, text).map_err(|e| AuthoringError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| AuthoringError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authoring::cases::{parse_line, run::Actual};

    #[test]
    fn a_failure_names_the_event_and_diffs_the_json() {
        let case = parse_line(
            1,
            r#"{"message":{},"expect":[{"replaced":{"a":1,"b":2}},"dropped"]}"#,
        )
        .expect("case");
        let result = CaseResult {
            case,
            actual: vec![Actual {
                event_id: "user-joined".into(),
                outcome: Outcome::Replaced(serde_json::json!({"b": 2, "a": 3})),
            }],
        };
        assert!(!result.passed());
        let text = result.describe();
        assert!(
            text.contains("event 1 (user-joined): expected replaced, got replaced"),
            "{text}"
        );
        assert!(
            text.contains("-   \"a\": 1") && text.contains("+   \"a\": 3"),
            "{text}"
        );
        assert!(
            text.contains("event 2 (no event): expected dropped, got nothing"),
            "{text}"
        );
        // JSON objects compare without regard to key order.
        let same = CaseResult {
            case: parse_line(1, r#"{"message":{},"expect":[{"replaced":{"a":1,"b":2}}]}"#)
                .expect("case"),
            actual: vec![Actual {
                event_id: "x".into(),
                outcome: Outcome::Replaced(serde_json::json!({"b": 2, "a": 1})),
            }],
        };
        assert!(same.passed());
    }
}
