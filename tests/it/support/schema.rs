//! Checks an event a receiver got against the JSON Schema `hookrelay events schema` gives its
//! id (`docs/schemas/`), with the jsonschema crate.

use serde_json::Value;

/// Panics, naming what fails, when `event` does not meet its id's schema.
pub(crate) fn assert_meets_schema(event: &Value) {
    let id = event["data"]["id"].as_str().unwrap_or_default();
    let schema = hookrelay::event_schema::of(id).unwrap_or_else(|| panic!("no schema for {id:?}"));
    let validator = jsonschema::validator_for(&schema).expect("a schema");
    let errors: Vec<String> = validator
        .iter_errors(event)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{id} does not meet its schema:\n{}\n{event}",
        errors.join("\n")
    );
}
