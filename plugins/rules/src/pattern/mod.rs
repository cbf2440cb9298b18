//! Event patterns in the dialect of Amazon EventBridge (whose matcher is aws/event-ruler),
//! compiled once and matched against `serde_json::Value` events.
//!
//! A pattern is an object shaped like the events it selects: its fields must all match, the
//! values in a field's array are alternatives, and `$or` takes two or more sub-patterns of
//! which one must match. Values are strings, numbers (`300` matches `300.0`), booleans, `null`
//! and operators: `prefix`, `suffix` (both also `{"equals-ignore-case": ..}`),
//! `equals-ignore-case`, `wildcard`, `anything-but`, `numeric`, `exists` and `cidr`.
//!
//! As in EventBridge: a value matches only values of its own JSON type; where the event holds
//! an array, a field matches when any element does, and an object pattern must match within one
//! element of an array of objects (event-ruler's array consistency); `exists` and the other
//! operators only see leaf values, so an object or an empty array does not exist;
//! `anything-but` matches any leaf value it does not exclude (`null`, or a number when it
//! excludes strings; on an array, any such element), never a missing field.
//!
//! Left out: EventBridge's size limits (1000 `$or` combinations, wildcard "complexity"),
//! event-ruler's folding of dotted keys (`"a.b"` is not `{"a": {"b": ..}}` here), its IP
//! normalisation of plain string values, and its undocumented `exactly` operator.

mod compile;

use serde_json::{Map, Number, Value};
use std::fmt;
use std::net::IpAddr;

use compile::{compile_node, fail};

/// A compiled pattern.
#[derive(Debug)]
pub struct Pattern {
    root: Node,
}

/// Why a pattern is invalid; `path` names the key (dotted, e.g. `data.id[1].prefix`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternError {
    /// Keys joined by `.`, array positions as `[i]`; empty for the pattern as a whole.
    pub path: String,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.path, self.message)
    }
}

impl std::error::Error for PatternError {}

impl Pattern {
    /// Compiles a pattern given as JSON (the TOML table converted to JSON by the caller).
    pub fn compile(pattern: &Value) -> Result<Pattern, PatternError> {
        let Value::Object(obj) = pattern else {
            return fail("", "an event pattern must be a JSON object");
        };
        let root = compile_node(obj, "", false)?;
        Ok(Pattern { root })
    }

    /// Whether `event` matches.
    pub fn matches(&self, event: &Value) -> bool {
        self.root.eval(Some(event)) != Outcome::No
    }
}

/// How a (sub-)pattern fared, from worst to best. `Absent`: it held only because fields it
/// wants missing are missing. Over an array of objects that must hold for every element, while
/// one element's `Yes` suffices: so `exists: false` looks at the element the other fields
/// matched in, or at the whole array when nothing pins an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    No,
    Absent,
    Yes,
}

/// An object of the pattern: its fields, and the branches of its `$or` (empty without one).
#[derive(Debug, Default)]
struct Node {
    fields: Vec<(String, Field)>,
    any_of: Vec<Node>,
}

#[derive(Debug)]
enum Field {
    Leaf(Leaf),
    Node(Node),
}

/// A field's array of values; `absent_ok` records an `{"exists": false}` among them.
#[derive(Debug, Default)]
struct Leaf {
    matchers: Vec<Matcher>,
    absent_ok: bool,
}

#[derive(Debug)]
enum Matcher {
    Null,
    Bool(bool),
    Num(Number),
    Str(String),
    Text(Text),
    /// `numeric`: lower and upper bound, each with whether it is included.
    Range((f64, bool), (f64, bool)),
    Cidr(Cidr),
    /// `{"exists": true}`: any leaf value.
    Exists,
    /// Any value none of these matches.
    AnythingBut(Vec<Matcher>),
}

/// Operators on strings; the `*Fold` operands are lowercased.
#[derive(Debug)]
enum Text {
    Prefix(String),
    Suffix(String),
    PrefixFold(String),
    SuffixFold(String),
    EqFold(String),
    /// The literal pieces around the `*`s, escapes resolved: one more than there are `*`s.
    Wildcard(Vec<String>),
}

/// A CIDR block; IPv4 addresses sit in the top 32 bits.
#[derive(Debug)]
struct Cidr {
    v6: bool,
    net: u128,
    mask: u128,
}

impl Node {
    fn eval(&self, value: Option<&Value>) -> Outcome {
        match value {
            Some(Value::Array(items)) => {
                let mut all_absent = true;
                for item in items {
                    match self.eval(Some(item)) {
                        Outcome::Yes => return Outcome::Yes,
                        Outcome::No => all_absent = false,
                        Outcome::Absent => {}
                    }
                }
                match all_absent {
                    true => self.eval(None),
                    false => Outcome::No,
                }
            }
            Some(Value::Object(obj)) => self.eval_fields(Some(obj)),
            _ => self.eval_fields(None), // a scalar has no fields, like a missing value
        }
    }

    fn eval_fields(&self, obj: Option<&Map<String, Value>>) -> Outcome {
        let mut outcome = Outcome::Absent;
        for (key, field) in &self.fields {
            let value = obj.and_then(|obj| obj.get(key.as_str()));
            let field_outcome = match field {
                Field::Leaf(leaf) => leaf.eval(value),
                Field::Node(node) => node.eval(value),
            };
            if field_outcome == Outcome::No {
                return Outcome::No;
            }
            outcome = outcome.max(field_outcome);
        }
        if !self.any_of.is_empty() {
            let mut best = Outcome::No;
            for branch in &self.any_of {
                best = best.max(branch.eval_fields(obj));
                if best == Outcome::Yes {
                    break;
                }
            }
            if best == Outcome::No {
                return Outcome::No;
            }
            outcome = outcome.max(best);
        }
        outcome
    }
}

impl Leaf {
    fn eval(&self, value: Option<&Value>) -> Outcome {
        let mut seen = false;
        if value.is_some_and(|value| self.any(value, &mut seen)) {
            Outcome::Yes
        } else if !seen && self.absent_ok {
            Outcome::Absent
        } else {
            Outcome::No
        }
    }

    /// Whether a leaf value in `value` (itself, or an element of its arrays at any depth)
    /// matches; `seen` records whether there was a leaf value at all.
    fn any(&self, value: &Value, seen: &mut bool) -> bool {
        match value {
            Value::Object(_) => false,
            Value::Array(items) => items.iter().any(|item| self.any(item, seen)),
            _ => {
                *seen = true;
                self.matchers.iter().any(|matcher| matcher.hit(value))
            }
        }
    }
}

impl Matcher {
    /// Whether the leaf value `value` (never an object or an array) matches.
    fn hit(&self, value: &Value) -> bool {
        match (self, value) {
            (Matcher::Exists, _) | (Matcher::Null, Value::Null) => true,
            (Matcher::Bool(b), Value::Bool(v)) => b == v,
            (Matcher::Num(n), Value::Number(v)) => same_number(n, v),
            (Matcher::Str(s), Value::String(v)) => s == v,
            (Matcher::Text(text), Value::String(v)) => text.hit(v),
            (Matcher::Range(lo, hi), Value::Number(v)) => v.as_f64().is_some_and(|x| {
                (x > lo.0 || (lo.1 && x == lo.0)) && (x < hi.0 || (hi.1 && x == hi.0))
            }),
            (Matcher::Cidr(cidr), Value::String(v)) => match v.parse::<IpAddr>() {
                Ok(ip) => ip.is_ipv6() == cidr.v6 && (ip_bits(ip) & cidr.mask) == cidr.net,
                Err(_) => false,
            },
            (Matcher::AnythingBut(excluded), _) => !excluded.iter().any(|m| m.hit(value)),
            _ => false,
        }
    }
}

/// Numeric equality: integers compare exactly (long account numbers), the rest as `f64`.
fn same_number(a: &Number, b: &Number) -> bool {
    if let (Some(a), Some(b)) = (a.as_i64(), b.as_i64()) {
        return a == b;
    }
    if let (Some(a), Some(b)) = (a.as_u64(), b.as_u64()) {
        return a == b;
    }
    a.as_f64() == b.as_f64()
}

impl Text {
    fn hit(&self, s: &str) -> bool {
        match self {
            Text::Prefix(p) => s.starts_with(p.as_str()),
            Text::Suffix(p) => s.ends_with(p.as_str()),
            Text::EqFold(p) => lowered(s).eq(p.chars()),
            Text::PrefixFold(p) => {
                let mut chars = lowered(s);
                p.chars().all(|c| chars.next() == Some(c))
            }
            Text::SuffixFold(p) => {
                let mut chars = lowered(s).rev();
                p.chars().rev().all(|c| chars.next() == Some(c))
            }
            Text::Wildcard(parts) => wildcard_hit(parts, s),
        }
    }
}

fn lowered(s: &str) -> impl DoubleEndedIterator<Item = char> {
    s.chars().flat_map(char::to_lowercase)
}

/// The first piece anchors the start, the last the end, and those between are found
/// leftmost-first, in order, in what lies between.
fn wildcard_hit(parts: &[String], s: &str) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return s == first;
    };
    if s.len() < first.len() + last.len()
        || !s.starts_with(first.as_str())
        || !s.ends_with(last.as_str())
    {
        return false;
    }
    let mut hay = &s[first.len()..s.len() - last.len()];
    for part in middle {
        let Some(at) = hay.find(part.as_str()) else {
            return false;
        };
        hay = &hay[at + part.len()..];
    }
    true
}

fn ip_bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)) << 96,
        IpAddr::V6(v6) => u128::from(v6),
    }
}

#[cfg(test)]
mod tests;
