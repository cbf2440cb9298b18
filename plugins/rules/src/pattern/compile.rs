//! Compiling a pattern: checking every key as EventBridge does (errors name the key's path)
//! and precomputing what matching needs (lowercased operands, wildcard segments, numeric
//! bounds, CIDR masks).

use serde_json::{Map, Value};
use std::net::IpAddr;

use super::*;

/// Names event-ruler refuses as fields inside `$or`, where they would be misplaced operators.
const RESERVED_IN_OR: &str = "exactly equals-ignore-case prefix suffix anything-but exists \
    wildcard numeric cidr = < <= > >= regex not-wildcard not-equals-ignore-case date-after \
    date-on-or-after date-before date-on-or-before in-date-range ip-address-in-range \
    ip-address-not-in-range";

pub(super) fn fail<T>(path: &str, message: impl Into<String>) -> Result<T, PatternError> {
    let (path, message) = (path.to_owned(), message.into());
    Err(PatternError { path, message })
}

pub(super) fn compile_node(
    obj: &Map<String, Value>,
    path: &str,
    in_or: bool,
) -> Result<Node, PatternError> {
    if obj.is_empty() {
        return fail(path, "an empty object is not allowed");
    }
    let mut node = Node::default();
    for (key, value) in obj {
        let here = match path {
            "" => key.clone(),
            _ => format!("{path}.{key}"),
        };
        if key == "$or" {
            node.any_of = compile_or(value, &here)?;
            continue;
        }
        if in_or && RESERVED_IN_OR.split_whitespace().any(|name| name == key) {
            return fail(&here, "an operator name cannot be a field in `$or`");
        }
        let field = match value {
            Value::Array(items) => Field::Leaf(compile_leaf(items, &here)?),
            Value::Object(inner) => Field::Node(compile_node(inner, &here, in_or)?),
            _ => {
                return fail(
                    &here,
                    "must be an array (of values or operators) or an object",
                );
            }
        };
        node.fields.push((key.clone(), field));
    }
    Ok(node)
}

fn compile_or(value: &Value, path: &str) -> Result<Vec<Node>, PatternError> {
    let Some(branches) = value.as_array().filter(|branches| branches.len() >= 2) else {
        return fail(path, "`$or` takes an array of at least two objects");
    };
    let compile = |(i, branch): (usize, &Value)| match branch {
        Value::Object(obj) => compile_node(obj, &format!("{path}[{i}]"), true),
        _ => fail(&format!("{path}[{i}]"), "must be an object"),
    };
    branches.iter().enumerate().map(compile).collect()
}

fn compile_leaf(items: &[Value], path: &str) -> Result<Leaf, PatternError> {
    if items.is_empty() {
        return fail(path, "an empty array of values is not allowed");
    }
    let mut leaf = Leaf::default();
    for (i, item) in items.iter().enumerate() {
        let here = format!("{path}[{i}]");
        let matcher = match item {
            Value::Null => Matcher::Null,
            Value::Bool(b) => Matcher::Bool(*b),
            Value::Number(n) => Matcher::Num(n.clone()),
            Value::String(s) => Matcher::Str(s.clone()),
            Value::Array(_) => return fail(&here, "a value cannot be an array"),
            Value::Object(op) => match compile_operator(op, &here)? {
                Some(matcher) => matcher,
                None => {
                    leaf.absent_ok = true;
                    continue;
                }
            },
        };
        leaf.matchers.push(matcher);
    }
    Ok(leaf)
}

/// The only key of an operator object, its value, and the path to it.
fn single<'a>(
    obj: &'a Map<String, Value>,
    path: &str,
) -> Result<(&'a str, &'a Value, String), PatternError> {
    let mut entries = obj.iter();
    match (entries.next(), entries.next()) {
        (Some((key, value)), None) => Ok((key.as_str(), value, format!("{path}.{key}"))),
        _ => fail(path, "an operator object must have exactly one key"),
    }
}

fn string<'a>(value: &'a Value, path: &str) -> Result<&'a str, PatternError> {
    match value.as_str() {
        Some(s) => Ok(s),
        None => fail(path, "must be a string"),
    }
}

/// Compiles `{operator: argument}`; `None` stands for `{"exists": false}`.
fn compile_operator(op: &Map<String, Value>, path: &str) -> Result<Option<Matcher>, PatternError> {
    let (name, arg, here) = single(op, path)?;
    let here = here.as_str();
    Ok(Some(match (name, arg) {
        ("exists", Value::Bool(exists)) => return Ok(exists.then_some(Matcher::Exists)),
        ("exists", _) => return fail(here, "must be true or false"),
        ("prefix", Value::String(s)) => Matcher::Text(Text::Prefix(s.clone())),
        ("prefix", _) => Matcher::Text(Text::PrefixFold(ignore_case(arg, here)?)),
        ("suffix", Value::String(s)) => Matcher::Text(Text::Suffix(s.clone())),
        ("suffix", _) => Matcher::Text(Text::SuffixFold(ignore_case(arg, here)?)),
        ("equals-ignore-case", _) => {
            Matcher::Text(Text::EqFold(lowered(string(arg, here)?).collect()))
        }
        ("wildcard", _) => Matcher::Text(Text::Wildcard(wildcard(string(arg, here)?, here)?)),
        ("anything-but", _) => Matcher::AnythingBut(compile_anything_but(arg, here)?),
        ("numeric", _) => compile_numeric(arg, here)?,
        ("cidr", _) => compile_cidr(string(arg, here)?, here)?,
        _ => return fail(here, format!("unknown operator `{name}`")),
    }))
}

/// The `{"equals-ignore-case": "..."}` operand of `prefix` and `suffix`, lowercased.
fn ignore_case(arg: &Value, path: &str) -> Result<String, PatternError> {
    if let Value::Object(obj) = arg
        && let ("equals-ignore-case", Value::String(s), _) = single(obj, path)?
    {
        return Ok(lowered(s).collect());
    }
    fail(path, "must be a string or {\"equals-ignore-case\": ..}")
}

/// Splits a wildcard at its unescaped `*`s; `\*` is a literal `*`, `\\` a literal `\`.
fn wildcard(pattern: &str, path: &str) -> Result<Vec<String>, PatternError> {
    let (mut parts, mut piece, mut chars) = (vec![], String::new(), pattern.chars().peekable());
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => return fail(path, "has consecutive `*`"),
            '*' => parts.push(std::mem::take(&mut piece)),
            '\\' => match chars.next() {
                Some(escaped @ ('*' | '\\')) => piece.push(escaped),
                _ => return fail(path, "`\\` may only escape `*` or `\\`"),
            },
            _ => piece.push(c),
        }
    }
    parts.push(piece);
    Ok(parts)
}

/// A string, a number, a non-empty list of only strings or only numbers, or an object
/// `{prefix|suffix|equals-ignore-case|wildcard: a string or a non-empty list of strings}`.
fn compile_anything_but(arg: &Value, path: &str) -> Result<Vec<Matcher>, PatternError> {
    let items = match arg {
        Value::Array(items) => items.as_slice(),
        Value::Object(obj) => return anything_but_text(obj, path),
        _ => std::slice::from_ref(arg),
    };
    let all = |kind: fn(&Value) -> bool| !items.is_empty() && items.iter().all(kind);
    if !all(Value::is_string) && !all(Value::is_number) {
        return fail(path, "must be strings only, numbers only, or an object");
    }
    let literal = |item: &Value| match item {
        Value::String(s) => Some(Matcher::Str(s.clone())),
        _ => item.as_number().map(|n| Matcher::Num(n.clone())),
    };
    Ok(items.iter().filter_map(literal).collect())
}

fn anything_but_text(obj: &Map<String, Value>, path: &str) -> Result<Vec<Matcher>, PatternError> {
    let (name, arg, here) = single(obj, path)?;
    if !["prefix", "suffix", "equals-ignore-case", "wildcard"].contains(&name) {
        return fail(&here, "is not supported inside anything-but");
    }
    let operands = match arg {
        Value::Array(items) if !items.is_empty() => items.as_slice(),
        Value::Array(_) => return fail(&here, "an empty array is not allowed"),
        _ => std::slice::from_ref(arg),
    };
    let mut texts = Vec::with_capacity(operands.len());
    for (i, operand) in operands.iter().enumerate() {
        let at = match arg {
            Value::Array(_) => format!("{here}[{i}]"),
            _ => here.clone(),
        };
        let s = string(operand, &at)?;
        texts.push(Matcher::Text(match name {
            "prefix" | "suffix" if s.is_empty() => return fail(&at, "must not be empty"),
            "prefix" => Text::Prefix(s.to_owned()),
            "suffix" => Text::Suffix(s.to_owned()),
            "equals-ignore-case" => Text::EqFold(lowered(s).collect()),
            _ => Text::Wildcard(wildcard(s, &at)?),
        }));
    }
    Ok(texts)
}

/// `["=", x]`, `[">" or ">=", x]`, `["<" or "<=", x]` or `[">" or ">=", x, "<" or "<=", y]`
/// with x < y.
fn compile_numeric(arg: &Value, path: &str) -> Result<Matcher, PatternError> {
    let Some(items) = arg.as_array() else {
        return fail(path, "must be an array such as [\">\", 0, \"<=\", 5]");
    };
    let op = |i: usize| items.get(i).and_then(Value::as_str);
    let num = |i: usize, included: bool| match items.get(i).and_then(Value::as_f64) {
        Some(x) => Ok((x, included)),
        None => fail(&format!("{path}[{i}]"), "must be a number"),
    };
    let (mut lo, mut hi) = ((f64::NEG_INFINITY, false), (f64::INFINITY, false));
    let len = match (op(0), op(2)) {
        (Some("="), _) => {
            (lo, hi) = (num(1, true)?, num(1, true)?);
            2
        }
        (Some(">" | ">="), Some("<" | "<=")) => {
            (lo, hi) = (num(1, op(0) == Some(">="))?, num(3, op(2) == Some("<="))?);
            if lo.0 >= hi.0 {
                return fail(path, "the lower bound must be below the upper bound");
            }
            4
        }
        (Some(">" | ">="), _) if items.len() <= 2 => {
            lo = num(1, op(0) == Some(">="))?;
            2
        }
        (Some(">" | ">="), _) => return fail(&format!("{path}[2]"), "must be `<` or `<=`"),
        (Some("<" | "<="), _) => {
            hi = num(1, op(0) == Some("<="))?;
            2
        }
        _ => return fail(&format!("{path}[0]"), "must be `=`, `<`, `<=`, `>` or `>=`"),
    };
    if items.len() > len {
        return fail(path, "has too many elements");
    }
    Ok(Matcher::Range(lo, hi))
}

fn compile_cidr(block: &str, path: &str) -> Result<Matcher, PatternError> {
    let bad = |why: &str| fail(path, format!("`{block}` {why}"));
    let Some((ip, bits)) = block.split_once('/') else {
        return bad("is not a CIDR block such as 10.0.0.0/24");
    };
    let (Ok(ip), Ok(bits)) = (ip.parse::<IpAddr>(), bits.parse::<u32>()) else {
        return bad("has a malformed address or prefix length");
    };
    let width = if ip.is_ipv6() { 128 } else { 32 };
    if bits > width {
        return bad("has too long a prefix length");
    }
    let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
    let (v6, net) = (ip.is_ipv6(), ip_bits(ip) & mask);
    Ok(Matcher::Cidr(Cidr { v6, net, mask }))
}
