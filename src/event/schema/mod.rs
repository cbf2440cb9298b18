//! JSON Schemas (draft 2020-12) of the processed events, one per event id, for integrators to
//! validate callbacks and generate types from (`docs/schemas/`, `hookrelay events schema`).
//! Built from the same parts for every id ([`attributes`]), so that two events carrying a
//! meeting or a user describe it alike. Pure.

mod attributes;
mod beyond;
mod parts;

use serde_json::{Value, json};

use super::catalogue::{ABOUT_HOOKS, BEYOND_REFERENCE, OUTPUT_IDS};

/// The dialect every schema declares.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The file of the schema that refers to every event's.
pub const INDEX_FILE: &str = "events.schema.json";

/// Every event id that has a schema, in catalogue order: the catalogue's, then the events
/// about hooks.
pub fn ids() -> impl Iterator<Item = &'static str> {
    OUTPUT_IDS.iter().chain(ABOUT_HOOKS.iter()).copied()
}

/// Who gets an event of `id` (`docs/events.md`).
pub fn audience(id: &str) -> &'static str {
    if BEYOND_REFERENCE.contains(&id) {
        "hooks naming it (all with `[events] beyond_reference = true`)"
    } else if ABOUT_HOOKS.contains(&id) {
        "hooks naming it"
    } else {
        "every matching hook"
    }
}

/// The file an event's schema is kept in: `<id>.schema.json`.
pub fn file_name(id: &str) -> String {
    format!("{id}.schema.json")
}

/// The schema of the processed event `id`; `None` for an id no event has.
pub fn of(id: &str) -> Option<Value> {
    let id = ids().find(|i| *i == id)?;
    let (description, attributes) = attributes::of(id).or_else(|| beyond::of(id))?;
    let mut schema = json!({
        "$schema": DIALECT,
        "title": id,
        "description": description,
        "type": "object",
        "required": ["data"],
        "properties": {
            "data": {
                "type": "object",
                "required": ["type", "id", "attributes", "event"],
                "properties": {
                    "type": {"const": "event"},
                    "id": {"const": id},
                    "attributes": attributes,
                    "event": {
                        "type": "object",
                        "required": ["ts"],
                        "properties": {
                            "ts": {
                                "type": "integer",
                                "description": "When the event happened or was processed, in milliseconds since the Unix epoch."
                            }
                        }
                    }
                }
            }
        }
    });
    let defs = parts::defs_used(&schema);
    if !defs.is_empty()
        && let Some(o) = schema.as_object_mut()
    {
        o.insert("$defs".into(), Value::Object(defs));
    }
    Some(schema)
}

/// The schema that refers to every event's file (relative references, so that it is read
/// beside them): an event is one of them.
pub fn index() -> Value {
    let refs: Vec<Value> = ids().map(|id| json!({"$ref": file_name(id)})).collect();
    json!({
        "$schema": DIALECT,
        "title": "hookrelay event",
        "description": "Any processed event hookrelay sends: one of the schemas beside this file, told apart by data.id.",
        "oneOf": refs,
    })
}

/// Every file of `docs/schemas/`: (file name, its text, pretty-printed with a final newline).
pub fn files() -> Vec<(String, String)> {
    let pretty = |v: &Value| {
        let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
        s.push('\n');
        s
    };
    let mut out: Vec<(String, String)> = ids()
        .filter_map(|id| Some((file_name(id), pretty(&of(id)?))))
        .collect();
    out.push((INDEX_FILE.to_string(), pretty(&index())));
    out
}

/// Checks a processed event against its id's schema: the errors, one a line (tests).
#[cfg(test)]
pub(crate) fn check(event: &Value) -> Result<(), String> {
    let id = event["data"]["id"].as_str().unwrap_or_default();
    let schema = of(id).ok_or_else(|| format!("no schema for {id:?}"))?;
    let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
    let errors: Vec<String> = validator
        .iter_errors(event)
        .map(|e| format!("{id}: {} at {}", e, e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

#[cfg(test)]
mod tests;
