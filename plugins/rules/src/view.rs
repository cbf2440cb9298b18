//! Reading only what the rules look at: the union of the fields their patterns name, as a
//! tree, and a JSON reader that keeps those fields and skips the rest without building them
//! (a 1 KiB event becomes the few values the rules compare).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The fields some pattern names: `Whole` for a field a pattern compares (its whole value is
/// kept), `Fields` for an object whose named fields are.
#[derive(Debug, Clone, PartialEq)]
pub enum Wanted {
    Whole,
    Fields(BTreeMap<String, Wanted>),
}

impl Default for Wanted {
    fn default() -> Self {
        Self::Fields(BTreeMap::new())
    }
}

impl Wanted {
    /// Adds the fields pattern `pattern` (a JSON object) names; `$or` branches count too.
    pub fn add(&mut self, pattern: &Value) {
        let Value::Object(obj) = pattern else {
            *self = Self::Whole;
            return;
        };
        for (key, value) in obj {
            if key == "$or" {
                if let Value::Array(branches) = value {
                    for b in branches {
                        self.add(b);
                    }
                }
                continue;
            }
            let Self::Fields(fields) = self else {
                return;
            };
            let child = fields.entry(key.clone()).or_default();
            match value {
                Value::Object(_) => child.add(value),
                _ => *child = Self::Whole,
            }
        }
    }

    /// The wanted part of a top-level field (`None` when no pattern names it).
    pub fn field(&self, key: &str) -> Option<&Wanted> {
        match self {
            Self::Whole => Some(self),
            Self::Fields(fields) => fields.get(key),
        }
    }

    /// Reads `json`, keeping only the wanted fields; `None` when it is not JSON.
    pub fn read(&self, json: &str) -> Option<Value> {
        let mut de = serde_json::Deserializer::from_str(json);
        self.deserialize(&mut de).ok()
    }
}

impl<'de> DeserializeSeed<'de> for &Wanted {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        match self {
            Wanted::Whole => serde::Deserialize::deserialize(de),
            Wanted::Fields(_) => de.deserialize_any(Pruning(self)),
        }
    }
}

/// Reads a value keeping the fields of `self.0` (in objects, and in each element of arrays).
struct Pruning<'a>(&'a Wanted);

impl<'de> Visitor<'de> for Pruning<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match self.0.field(&key) {
                Some(wanted) => {
                    let value = map.next_value_seed(wanted)?;
                    kept.insert(key.into_owned(), value);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(kept))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.0)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    // Scalars where an object was expected: kept, so that patterns see them as they are.
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Wanted;

    #[test]
    fn keeps_the_named_fields_in_objects_and_arrays_and_skips_the_rest() {
        let mut w = Wanted::default();
        w.add(&json!({"data": {"id": ["a"], "attributes": {"user": {"role": ["MODERATOR"]}}}}));
        w.add(&json!({"$or": [{"data": {"tags": {"k": ["v"]}}}, {"meeting": {"metadata": {"x": [{"exists": true}]}}}]}));
        let event = json!({
            "data": {"type": "event", "id": "user-joined",
                     "attributes": {"user": {"role": "VIEWER", "name": "long name"}, "meeting": {"a": 1}},
                     "tags": [{"k": "v", "other": 1}, {"z": 2}, 3]},
            "meeting": {"metadata": {"x": {"deep": [1, 2]}, "y": 2}, "name": "n"},
        });
        let read = w.read(&event.to_string()).expect("JSON");
        assert_eq!(
            read,
            json!({
                "data": {"id": "user-joined", "attributes": {"user": {"role": "VIEWER"}},
                         "tags": [{"k": "v"}, {}, 3]},
                "meeting": {"metadata": {"x": {"deep": [1, 2]}}},
            })
        );
        assert_eq!(w.read("{not json"), None);
    }

    #[test]
    fn a_pattern_on_a_whole_field_keeps_it_whole() {
        let mut w = Wanted::default();
        w.add(&json!({"data": {"attributes": {"user": {"name": ["x"]}}}}));
        w.add(&json!({"data": {"attributes": ["not an object pattern"]}}));
        let event = json!({"data": {"attributes": {"user": {"name": "x", "role": "r"}, "k": 1}, "id": "i"}});
        assert_eq!(
            w.read(&event.to_string()).expect("JSON"),
            json!({"data": {"attributes": {"user": {"name": "x", "role": "r"}, "k": 1}}})
        );
    }
}
