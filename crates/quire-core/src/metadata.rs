//! A document's metadata: what the caller says a document is (department, customer, product
//! version, language, date), as a flat JSON object that search filters can test. Parsed and
//! bounded here, once, for every adapter; see `docs/api.md` for the limits.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::InputError;

/// Most keys one document's metadata holds.
pub const MAX_KEYS: usize = 64;
/// Longest key, in characters.
pub const MAX_KEY_CHARS: usize = 64;
/// Longest string value (also each string of an array), in characters.
pub const MAX_STRING_CHARS: usize = 1_024;
/// Most strings in one array value.
pub const MAX_ARRAY_ITEMS: usize = 64;
/// Largest metadata, as compact JSON, in bytes.
pub const MAX_JSON_BYTES: usize = 16 * 1024;

/// One metadata value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MetadataValue {
    /// A string (also how dates are given: ISO 8601).
    Text(String),
    /// A number, kept as written (an integer stays an integer).
    Number(serde_json::Number),
    /// A boolean.
    Bool(bool),
    /// An array of strings (tags).
    List(Vec<String>),
}

impl MetadataValue {
    /// The number, for comparisons.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Number(n) => n.as_f64(),
            _ => None,
        }
    }
}

/// A document's metadata: keys of letters, digits, `_`, `-` and `.`, each with a
/// [`MetadataValue`]; empty when the caller gave none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Metadata(BTreeMap<String, MetadataValue>);

impl Metadata {
    /// Metadata from a JSON object, checked against the rules and limits; the error names the
    /// offending key.
    pub fn from_json(value: &Value) -> Result<Self, InputError> {
        let Value::Object(object) = value else {
            return Err(InputError(
                "`metadata` must be a JSON object of keys and values".into(),
            ));
        };
        let mut entries = BTreeMap::new();
        for (key, value) in object {
            entries.insert(check_key(key)?, parse_value(key, value)?);
        }
        Self(entries).checked()
    }

    /// Metadata from the text of a `metadata` form field (a JSON object).
    pub fn parse(text: &str) -> Result<Self, InputError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| InputError(format!("`metadata` is not valid JSON: {e}")))?;
        Self::from_json(&value)
    }

    /// This metadata changed by `patch`, a JSON merge patch (RFC 7396): a key set to `null`
    /// is removed, any other value replaces the key's; the result is checked as a whole.
    pub fn merged(&self, patch: &Value) -> Result<Self, InputError> {
        let Value::Object(changes) = patch else {
            return Err(InputError(
                "`metadata` must be a JSON object (a merge patch: `null` removes a key)".into(),
            ));
        };
        let mut entries = self.0.clone();
        for (key, value) in changes {
            if value.is_null() {
                entries.remove(key);
            } else {
                entries.insert(check_key(key)?, parse_value(key, value)?);
            }
        }
        Self(entries).checked()
    }

    /// The merge patch that turns this metadata into `wanted`: every key of `wanted`, and
    /// `null` for each key of this one that `wanted` leaves out.
    pub fn patch_to(&self, wanted: &Metadata) -> Value {
        let mut patch: serde_json::Map<String, Value> =
            self.0.keys().map(|k| (k.clone(), Value::Null)).collect();
        for (key, value) in &wanted.0 {
            patch.insert(
                key.clone(),
                serde_json::to_value(value).unwrap_or(Value::Null),
            );
        }
        Value::Object(patch)
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&MetadataValue> {
        self.0.get(key)
    }

    /// Every key and value, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &MetadataValue)> {
        self.0.iter()
    }

    /// True when no key is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The compact JSON form (what the store keeps).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_else(|_| "{}".into())
    }

    /// Metadata read back from its stored JSON, trusted as written by [`Metadata::to_json`].
    pub fn from_stored(json: &str) -> Result<Self, InputError> {
        serde_json::from_str(json)
            .map(Self)
            .map_err(|e| InputError(format!("stored metadata is not readable: {e}")))
    }

    fn checked(self) -> Result<Self, InputError> {
        if self.0.len() > MAX_KEYS {
            return Err(InputError(format!(
                "`metadata` has {} keys; at most {MAX_KEYS} are allowed",
                self.0.len()
            )));
        }
        let size = self.to_json().len();
        if size > MAX_JSON_BYTES {
            return Err(InputError(format!(
                "`metadata` takes {size} bytes as JSON; at most {MAX_JSON_BYTES} are allowed"
            )));
        }
        Ok(self)
    }
}

fn check_key(key: &str) -> Result<String, InputError> {
    let chars = key.chars().count();
    if chars == 0 || chars > MAX_KEY_CHARS {
        return Err(InputError(format!(
            "metadata key {key:?} must have 1 to {MAX_KEY_CHARS} characters"
        )));
    }
    if !key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(InputError(format!(
            "metadata key {key:?} may hold only letters, digits, `_`, `-` and `.`"
        )));
    }
    Ok(key.to_owned())
}

fn parse_value(key: &str, value: &Value) -> Result<MetadataValue, InputError> {
    let text = |s: &str, what: &str| {
        if s.chars().count() > MAX_STRING_CHARS {
            Err(InputError(format!(
                "metadata key {key:?}: {what} is longer than {MAX_STRING_CHARS} characters"
            )))
        } else {
            Ok(s.to_owned())
        }
    };
    match value {
        Value::String(s) => Ok(MetadataValue::Text(text(s, "the string")?)),
        Value::Number(n) => Ok(MetadataValue::Number(n.clone())),
        Value::Bool(b) => Ok(MetadataValue::Bool(*b)),
        Value::Array(items) => {
            if items.len() > MAX_ARRAY_ITEMS {
                return Err(InputError(format!(
                    "metadata key {key:?}: an array holds at most {MAX_ARRAY_ITEMS} strings"
                )));
            }
            items
                .iter()
                .map(|item| match item {
                    Value::String(s) => text(s, "a string of the array"),
                    _ => Err(InputError(format!(
                        "metadata key {key:?}: arrays may hold only strings"
                    ))),
                })
                .collect::<Result<_, _>>()
                .map(MetadataValue::List)
        }
        Value::Null => Err(InputError(format!(
            "metadata key {key:?}: null is not a value (leave the key out, or send null in a \
             PATCH to remove it)"
        ))),
        Value::Object(_) => Err(InputError(format!(
            "metadata key {key:?}: values are a string, a number, a boolean or an array of \
             strings, not an object"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn metadata_of_every_kind_round_trips() {
        let metadata = Metadata::from_json(&json!({
            "department": "legal",
            "year": 2024,
            "ratio": 0.5,
            "public": false,
            "tags": ["policy", "hr"],
            "effective.date": "2025-01-01",
        }))
        .unwrap();
        assert_eq!(
            metadata.get("tags"),
            Some(&MetadataValue::List(vec!["policy".into(), "hr".into()]))
        );
        assert_eq!(
            metadata.get("year"),
            Some(&MetadataValue::Number(2024.into()))
        );
        let stored = metadata.to_json();
        assert_eq!(Metadata::from_stored(&stored).unwrap(), metadata);
        assert_eq!(
            serde_json::to_value(&metadata).unwrap()["public"],
            json!(false)
        );
    }

    #[test]
    fn bad_metadata_names_the_offending_key() {
        for (value, needle) in [
            (json!([1]), "JSON object"),
            (json!({"a b": 1}), "\"a b\""),
            (json!({"": 1}), "1 to 64"),
            (json!({"k".repeat(65): 1}), "1 to 64"),
            (json!({"nested": {"x": 1}}), "\"nested\""),
            (json!({"mixed": ["a", 1]}), "\"mixed\""),
            (json!({"nothing": null}), "\"nothing\""),
            (json!({"long": "x".repeat(1025)}), "\"long\""),
        ] {
            let error = Metadata::from_json(&value).unwrap_err().0;
            assert!(error.contains(needle), "{value}: {error}");
        }
        let many: serde_json::Map<String, Value> =
            (0..65).map(|i| (format!("k{i}"), json!(i))).collect();
        assert!(Metadata::from_json(&Value::Object(many)).is_err());
        assert!(Metadata::parse("{not json").is_err());
    }

    #[test]
    fn a_merge_patch_sets_replaces_and_removes() {
        let metadata = Metadata::from_json(&json!({"a": 1, "b": "x", "c": true})).unwrap();
        let patched = metadata
            .merged(&json!({"a": 2, "b": null, "d": ["t"]}))
            .unwrap();
        assert_eq!(
            serde_json::to_value(&patched).unwrap(),
            json!({"a": 2, "c": true, "d": ["t"]})
        );
        assert!(metadata.merged(&json!("x")).is_err());
        assert!(metadata.merged(&json!({"bad key": 1})).is_err());
        assert_eq!(metadata.merged(&json!({})).unwrap(), metadata);
    }

    #[test]
    fn the_patch_to_another_metadata_makes_it() {
        let old = Metadata::from_json(&json!({"a": 1, "b": "x"})).unwrap();
        let new = Metadata::from_json(&json!({"b": "y", "c": ["t"]})).unwrap();
        assert_eq!(old.patch_to(&new), json!({"a": null, "b": "y", "c": ["t"]}));
        assert_eq!(old.merged(&old.patch_to(&new)).unwrap(), new);
    }
}
