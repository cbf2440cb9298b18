use serde_json::json;

use super::*;

#[test]
fn every_id_has_a_schema_of_draft_2020_12() {
    let ids: Vec<&str> = ids().collect();
    assert_eq!(ids.len(), OUTPUT_IDS.len() + ABOUT_HOOKS.len());
    for id in ids {
        let schema = of(id).expect(id);
        assert!(
            jsonschema::meta::is_valid(&schema),
            "{id}: not a valid schema"
        );
        assert_eq!(schema["$schema"], DIALECT);
        assert_eq!(
            schema["properties"]["data"]["properties"]["id"]["const"],
            id
        );
        let description = schema["description"].as_str().unwrap_or_default();
        assert!(description.ends_with('.'), "{id}: no description");
        // Every reference names a part the file holds.
        let text = schema.to_string();
        for (i, _) in text.match_indices("#/$defs/") {
            let name: String = text[i + 8..].chars().take_while(|c| *c != '"').collect();
            assert!(
                schema["$defs"].get(&name).is_some(),
                "{id}: no $defs/{name}"
            );
        }
    }
    assert_eq!(of("no-such-event"), None);
}

#[test]
fn the_index_refers_to_every_file_and_tells_events_apart() {
    let mut registry = jsonschema::Registry::new();
    for id in ids() {
        registry = registry
            .add(
                format!("file:///schemas/{}", file_name(id)),
                of(id).expect(id),
            )
            .expect("uri");
    }
    let registry = registry.prepare().expect("registry");
    let index = index();
    assert!(jsonschema::meta::is_valid(&index));
    let validator = jsonschema::options()
        .with_base_uri(format!("file:///schemas/{INDEX_FILE}"))
        .with_registry(&registry)
        .build(&index)
        .expect("index");
    let ended = json!({"data": {"type": "event", "id": "meeting-ended", "attributes": {"meeting": {"internal-meeting-id": "m", "external-meeting-id": "e"}}, "event": {"ts": 1}}});
    assert!(validator.is_valid(&ended));
    let mut unknown = ended.clone();
    unknown["data"]["id"] = "meeting-exploded".into();
    assert!(!validator.is_valid(&unknown));
    assert_eq!(files().len(), ids().count() + 1);
}

#[test]
fn a_field_of_another_type_fails() {
    let joined = json!({"data": {"type": "event", "id": "user-joined", "attributes": {
        "meeting": {"internal-meeting-id": "m", "external-meeting-id": "e"},
        "user": {"internal-user-id": "u", "external-user-id": "x", "name": "Ann", "role": "VIEWER", "presenter": false, "guest": false}},
        "event": {"ts": 1}}});
    assert_eq!(check(&joined), Ok(()));
    for (pointer, value) in [
        ("/data/attributes/user/presenter", json!("false")),
        ("/data/attributes/user/guest", json!(null)),
        ("/data/attributes/meeting/internal-meeting-id", json!(7)),
        ("/data/event/ts", json!("1")),
        ("/data/type", json!("events")),
    ] {
        let mut bad = joined.clone();
        *bad.pointer_mut(pointer).expect(pointer) = value;
        assert!(check(&bad).is_err(), "{pointer} of another type passed");
    }
    let mut no_user = joined.clone();
    no_user["data"]["attributes"]
        .as_object_mut()
        .unwrap()
        .remove("user");
    assert!(check(&no_user).is_err());
}
