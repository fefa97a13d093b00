//! Search filters in the language of Pinecone and Chroma, parsed once from a request's JSON
//! `filter` into a typed [`Filter`] and tested against one document at a time
//! ([`FilterTarget`]). See ARCHITECTURE.md, "Filters without the filter trap": the search
//! turns a filter into the set of matching documents before ranking, never after top-k.
//!
//! The language:
//! - `{"field": value}` is equality; an object of several fields is their `$and`.
//! - `{"field": {"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": value}}`,
//!   `{"field": {"$in"|"$nin": [values]}}`, `{"field": {"$exists": true|false}}`; several
//!   operators in one field object are their `$and`.
//! - `{"$and": [filters]}`, `{"$or": [filters]}` (non-empty arrays).
//! - Fields are metadata keys, plus the built-ins `externalId`, `documentId` and `createdAt`
//!   (a metadata key spelled like a built-in is shadowed by it).
//! - `{}` as the whole filter matches every document (the same as sending no filter); an
//!   empty object anywhere inside is an error, since it there is almost always a generated
//!   filter that lost a part.
//!
//! Bounds: nesting at most [`MAX_DEPTH`] levels, at most [`MAX_CONDITIONS`] conditions, `$in`
//! and `$nin` lists of at most [`MAX_IN_VALUES`] values.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::{Map, Number, Value};
use uuid::Uuid;

use crate::metadata::MAX_KEY_CHARS;
use crate::{DocumentId, InputError, Metadata, MetadataValue};

/// Deepest nesting: the whole filter is level 1, each `$and`/`$or` element one more.
pub const MAX_DEPTH: usize = 8;
/// Most conditions (one field and one operator each) in a whole filter.
pub const MAX_CONDITIONS: usize = 64;
/// Most values in one `$in` or `$nin` list.
pub const MAX_IN_VALUES: usize = 1_024;

/// A parsed, bounded filter over documents; build one with [`Filter::parse`].
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Every document (the filter `{}`).
    All,
    /// Documents every part matches (`$and`, or an object of several fields).
    And(Vec<Filter>),
    /// Documents some part matches (`$or`).
    Or(Vec<Filter>),
    /// One condition on one field.
    Test(Field, Condition),
}

/// The field a condition reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    /// A metadata key.
    Metadata(String),
    /// The caller's own key for the document (`externalId`); absent when none was given.
    ExternalId,
    /// The document's id (`documentId`), always present.
    DocumentId,
    /// When the document was created (`createdAt`), always present, compared as a date.
    CreatedAt,
}

/// One operator and its value(s).
///
/// Against an array-of-strings metadata value (tags), `$eq` matches when the array contains
/// the value (like Chroma's `$contains`) and `$in` when any element is in the set; `$ne` and
/// `$nin` are always the exact negations of `$eq` and `$in`, so a missing field matches them.
/// The orderings (`$gt`…) match only numbers with numbers and dates with dates; anything else
/// (a list, a boolean, a string that is not a date, a missing field) is no match.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// `$eq`: equal to the value (a list: contains it).
    Eq(Scalar),
    /// `$ne`: not `$eq`.
    Ne(Scalar),
    /// `$gt`: greater than the bound.
    Gt(Bound),
    /// `$gte`: greater than or equal to the bound.
    Gte(Bound),
    /// `$lt`: less than the bound.
    Lt(Bound),
    /// `$lte`: less than or equal to the bound.
    Lte(Bound),
    /// `$in`: equal to one of the values (a list: shares an element with them).
    In(ValueSet),
    /// `$nin`: not `$in`.
    Nin(ValueSet),
    /// `$exists`: the field is present (`true`) or absent (`false`).
    Exists(bool),
}

/// A value compared for equality.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// A string, compared exactly (for `documentId`: the UUID, hyphenated and lowercase).
    Text(String),
    /// A number, compared by value (`2024` equals `2024.0`).
    Number(Number),
    /// A boolean.
    Bool(bool),
}

/// The value an ordering compares with.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    /// A number: matches number values.
    Number(Number),
    /// An ISO 8601 date or date-time (a bare date is its midnight UTC): matches `createdAt`
    /// and metadata strings that parse as dates.
    Date(DateTime<Utc>),
}

/// The values of an `$in` or `$nin`, grouped by kind so a lookup need not scan them all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValueSet {
    texts: BTreeSet<String>,
    numbers: Vec<Number>,
    bools: Vec<bool>,
}

impl ValueSet {
    /// The strings of the set.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.texts.iter().map(String::as_str)
    }

    /// The numbers of the set.
    pub fn numbers(&self) -> &[Number] {
        &self.numbers
    }

    /// The booleans of the set.
    pub fn bools(&self) -> &[bool] {
        &self.bools
    }

    /// How many distinct strings and booleans, plus numbers, the set holds.
    pub fn len(&self) -> usize {
        self.texts.len() + self.numbers.len() + self.bools.len()
    }

    /// True when the set holds no value (then `$in` matches nothing, `$nin` everything).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn insert(&mut self, value: Scalar) {
        match value {
            Scalar::Text(s) => {
                self.texts.insert(s);
            }
            Scalar::Number(n) => {
                if !self.numbers.iter().any(|m| number_eq(m, &n)) {
                    self.numbers.push(n);
                }
            }
            Scalar::Bool(b) => {
                if !self.bools.contains(&b) {
                    self.bools.push(b);
                }
            }
        }
    }

    fn contains_text(&self, s: &str) -> bool {
        self.texts.contains(s)
    }

    fn contains_value(&self, value: &MetadataValue) -> bool {
        match value {
            MetadataValue::Text(s) => self.contains_text(s),
            MetadataValue::Number(n) => self.numbers.iter().any(|m| number_eq(m, n)),
            MetadataValue::Bool(b) => self.bools.contains(b),
            MetadataValue::List(items) => items.iter().any(|s| self.contains_text(s)),
        }
    }
}

/// One document as a filter sees it.
#[derive(Debug, Clone, Copy)]
pub struct FilterTarget<'a> {
    /// The document's metadata.
    pub metadata: &'a Metadata,
    /// The document's external id, if it has one.
    pub external_id: Option<&'a str>,
    /// The document's id.
    pub document_id: DocumentId,
    /// When the document was created.
    pub created_at: DateTime<Utc>,
}

impl Filter {
    /// Parses a request's `filter` value; the error names the offending part by its path,
    /// as in ``filter.$or[1].year: unknown operator `$gtt` ``.
    pub fn parse(value: &Value) -> Result<Self, InputError> {
        let Value::Object(object) = value else {
            return Err(error("filter", "expects an object of fields and operators"));
        };
        if object.is_empty() {
            return Ok(Self::All);
        }
        let mut parser = Parser { conditions: 0 };
        parser.object(object, "filter", 1)
    }

    /// True for the filter that matches every document (`{}`), so a search can skip it.
    pub fn is_all(&self) -> bool {
        matches!(self, Self::All)
    }

    /// Whether the document matches.
    pub fn matches(&self, target: &FilterTarget<'_>) -> bool {
        match self {
            Self::All => true,
            Self::And(parts) => parts.iter().all(|part| part.matches(target)),
            Self::Or(parts) => parts.iter().any(|part| part.matches(target)),
            Self::Test(field, condition) => condition.matches(field, target),
        }
    }

    /// The metadata keys the filter reads (not the built-in fields), in order.
    pub fn fields(&self) -> BTreeSet<&str> {
        let mut keys = BTreeSet::new();
        self.collect_fields(&mut keys);
        keys
    }

    fn collect_fields<'a>(&'a self, keys: &mut BTreeSet<&'a str>) {
        match self {
            Self::All => {}
            Self::And(parts) | Self::Or(parts) => {
                parts.iter().for_each(|part| part.collect_fields(keys));
            }
            Self::Test(Field::Metadata(key), _) => {
                keys.insert(key);
            }
            Self::Test(..) => {}
        }
    }
}

impl Condition {
    fn matches(&self, field: &Field, target: &FilterTarget<'_>) -> bool {
        match field {
            Field::Metadata(key) => self.matches_value(target.metadata.get(key)),
            Field::ExternalId => {
                // Parsing admits only string operands here, so other kinds cannot occur.
                let id = target.external_id;
                match self {
                    Self::Eq(Scalar::Text(s)) => id == Some(s.as_str()),
                    Self::Ne(Scalar::Text(s)) => id != Some(s.as_str()),
                    Self::In(set) => id.is_some_and(|id| set.contains_text(id)),
                    Self::Nin(set) => !id.is_some_and(|id| set.contains_text(id)),
                    Self::Exists(present) => id.is_some() == *present,
                    _ => false,
                }
            }
            Field::DocumentId => {
                // Encoded on the stack: parsing stored the operands in this same form.
                let mut buffer = Uuid::encode_buffer();
                let id = target
                    .document_id
                    .as_uuid()
                    .hyphenated()
                    .encode_lower(&mut buffer);
                match self {
                    Self::Eq(Scalar::Text(s)) => s == id,
                    Self::Ne(Scalar::Text(s)) => s != id,
                    Self::In(set) => set.contains_text(id),
                    Self::Nin(set) => !set.contains_text(id),
                    Self::Exists(present) => *present,
                    _ => false,
                }
            }
            Field::CreatedAt => match self {
                Self::Exists(present) => *present,
                Self::Gt(bound) | Self::Gte(bound) | Self::Lt(bound) | Self::Lte(bound) => {
                    match bound {
                        Bound::Date(date) => self.accepts(target.created_at.cmp(date)),
                        Bound::Number(_) => false,
                    }
                }
                _ => false,
            },
        }
    }

    fn matches_value(&self, value: Option<&MetadataValue>) -> bool {
        match (self, value) {
            (Self::Exists(present), _) => value.is_some() == *present,
            // The negations match a missing field, so `$ne` is exactly `not $eq`.
            (Self::Ne(operand), _) => !value.is_some_and(|value| equals(value, operand)),
            (Self::Nin(set), _) => !value.is_some_and(|value| set.contains_value(value)),
            (_, None) => false,
            (Self::Eq(operand), Some(value)) => equals(value, operand),
            (Self::In(set), Some(value)) => set.contains_value(value),
            (
                Self::Gt(bound) | Self::Gte(bound) | Self::Lt(bound) | Self::Lte(bound),
                Some(value),
            ) => compare(value, bound).is_some_and(|ordering| self.accepts(ordering)),
        }
    }

    /// Whether an ordering of the field against the bound satisfies this operator.
    fn accepts(&self, ordering: Ordering) -> bool {
        match self {
            Self::Gt(_) => ordering == Ordering::Greater,
            Self::Gte(_) => ordering != Ordering::Less,
            Self::Lt(_) => ordering == Ordering::Less,
            Self::Lte(_) => ordering != Ordering::Greater,
            _ => false,
        }
    }
}

fn equals(value: &MetadataValue, operand: &Scalar) -> bool {
    match (value, operand) {
        (MetadataValue::Text(s), Scalar::Text(t)) => s == t,
        (MetadataValue::Number(n), Scalar::Number(m)) => number_eq(n, m),
        (MetadataValue::Bool(b), Scalar::Bool(c)) => b == c,
        (MetadataValue::List(items), Scalar::Text(t)) => items.iter().any(|s| s == t),
        _ => false,
    }
}

fn compare(value: &MetadataValue, bound: &Bound) -> Option<Ordering> {
    match (value, bound) {
        (MetadataValue::Number(n), Bound::Number(m)) => number_cmp(n, m),
        (MetadataValue::Text(s), Bound::Date(date)) => parse_date(s).map(|d| d.cmp(date)),
        _ => None,
    }
}

/// Orders two JSON numbers exactly when both are integers, else as floats.
fn number_cmp(a: &Number, b: &Number) -> Option<Ordering> {
    if let (Some(a), Some(b)) = (a.as_i64(), b.as_i64()) {
        return Some(a.cmp(&b));
    }
    if let (Some(a), Some(b)) = (a.as_u64(), b.as_u64()) {
        return Some(a.cmp(&b));
    }
    a.as_f64()?.partial_cmp(&b.as_f64()?)
}

fn number_eq(a: &Number, b: &Number) -> bool {
    number_cmp(a, b) == Some(Ordering::Equal)
}

/// An RFC 3339 date-time, or a `YYYY-MM-DD` date taken as its midnight UTC.
fn parse_date(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Some(time.with_timezone(&Utc));
    }
    // Checked by hand: chrono's `%Y-%m-%d` also takes `2025-1-5` and signed years.
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let digits = |range: std::ops::Range<usize>| {
        let part = &text[range];
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse::<u32>().ok())
            .flatten()
    };
    let year = i32::try_from(digits(0..4)?).ok()?;
    let date = NaiveDate::from_ymd_opt(year, digits(5..7)?, digits(8..10)?)?;
    Some(date.and_hms_opt(0, 0, 0)?.and_utc())
}

fn error(path: &str, message: impl std::fmt::Display) -> InputError {
    InputError(format!("{path}: {message}"))
}

/// Tracks the bounds across one parse.
struct Parser {
    conditions: usize,
}

impl Parser {
    fn object(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Result<Filter, InputError> {
        if depth > MAX_DEPTH {
            return Err(error(
                "filter",
                format!("nested deeper than {MAX_DEPTH} levels"),
            ));
        }
        if object.is_empty() {
            return Err(error(
                path,
                "an empty object matches everything; leave it out (only the whole filter may \
                 be `{}`)",
            ));
        }
        let mut parts = Vec::new();
        for (key, value) in object {
            match key.as_str() {
                "$and" | "$or" => {
                    let here = format!("{path}.{key}");
                    let Value::Array(items) = value else {
                        return Err(error(&here, "expects a non-empty array of filters"));
                    };
                    if items.is_empty() {
                        return Err(error(&here, "expects a non-empty array of filters"));
                    }
                    let mut children = Vec::with_capacity(items.len());
                    for (i, item) in items.iter().enumerate() {
                        let here = format!("{here}[{i}]");
                        let Value::Object(child) = item else {
                            return Err(error(&here, "expects an object"));
                        };
                        children.push(self.object(child, &here, depth + 1)?);
                    }
                    parts.push(if key == "$and" {
                        Filter::And(children)
                    } else {
                        Filter::Or(children)
                    });
                }
                _ if key.starts_with('$') => {
                    return Err(error(path, format!("unknown operator `{key}`")));
                }
                _ => {
                    let field = parse_field(key, path)?;
                    let here = format!("{path}.{key}");
                    parts.extend(self.field(&field, value, &here)?);
                }
            }
        }
        Ok(if parts.len() == 1 {
            parts.pop().unwrap_or(Filter::All)
        } else {
            Filter::And(parts)
        })
    }

    /// The conditions of one field: a shorthand value or an object of operators.
    fn field(
        &mut self,
        field: &Field,
        value: &Value,
        path: &str,
    ) -> Result<Vec<Filter>, InputError> {
        let Value::Object(operators) = value else {
            let operand = equality_operand(field, value, path)?;
            self.count()?;
            return Ok(vec![Filter::Test(field.clone(), Condition::Eq(operand))]);
        };
        if operators.is_empty() {
            return Err(error(path, "expects a value or an object of operators"));
        }
        let mut tests = Vec::with_capacity(operators.len());
        for (operator, operand) in operators {
            let here = format!("{path}.{operator}");
            let condition = match operator.as_str() {
                "$eq" => Condition::Eq(equality_operand(field, operand, &here)?),
                "$ne" => Condition::Ne(equality_operand(field, operand, &here)?),
                "$gt" => Condition::Gt(bound(field, operator, operand, path)?),
                "$gte" => Condition::Gte(bound(field, operator, operand, path)?),
                "$lt" => Condition::Lt(bound(field, operator, operand, path)?),
                "$lte" => Condition::Lte(bound(field, operator, operand, path)?),
                "$in" => Condition::In(value_set(field, operand, &here)?),
                "$nin" => Condition::Nin(value_set(field, operand, &here)?),
                "$exists" => match operand {
                    Value::Bool(present) => Condition::Exists(*present),
                    _ => return Err(error(&here, "expects true or false")),
                },
                _ if operator.starts_with('$') => {
                    return Err(error(path, format!("unknown operator `{operator}`")));
                }
                _ => {
                    return Err(error(
                        path,
                        format!(
                            "`{operator}` is not an operator; a field's object holds operators \
                             such as `$eq` or `$in` (fields do not nest)"
                        ),
                    ));
                }
            };
            self.count()?;
            tests.push(Filter::Test(field.clone(), condition));
        }
        Ok(tests)
    }

    fn count(&mut self) -> Result<(), InputError> {
        self.conditions += 1;
        if self.conditions > MAX_CONDITIONS {
            return Err(error(
                "filter",
                format!("more than {MAX_CONDITIONS} conditions"),
            ));
        }
        Ok(())
    }
}

fn parse_field(key: &str, path: &str) -> Result<Field, InputError> {
    match key {
        "externalId" => return Ok(Field::ExternalId),
        "documentId" => return Ok(Field::DocumentId),
        "createdAt" => return Ok(Field::CreatedAt),
        _ => {}
    }
    let chars = key.chars().count();
    let allowed = key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if chars == 0 || chars > MAX_KEY_CHARS || !allowed {
        return Err(error(
            path,
            format!(
                "{key:?} is not a field: fields are `externalId`, `documentId`, `createdAt` \
                 or metadata keys of 1 to {MAX_KEY_CHARS} letters, digits, `_`, `-` and `.`"
            ),
        ));
    }
    Ok(Field::Metadata(key.to_owned()))
}

/// The value of `$eq`, `$ne` or the shorthand, checked against the field's type.
fn equality_operand(field: &Field, value: &Value, path: &str) -> Result<Scalar, InputError> {
    match field {
        Field::Metadata(_) => match value {
            Value::String(s) => Ok(Scalar::Text(s.clone())),
            Value::Number(n) => Ok(Scalar::Number(n.clone())),
            Value::Bool(b) => Ok(Scalar::Bool(*b)),
            Value::Array(_) => Err(error(
                path,
                "expects a string, number or boolean (for several values use `$in`)",
            )),
            _ => Err(error(path, "expects a string, number or boolean")),
        },
        Field::ExternalId => match value {
            Value::String(s) => Ok(Scalar::Text(s.clone())),
            _ => Err(error(path, "expects a string (`externalId` is a string)")),
        },
        Field::DocumentId => match value.as_str().map(Uuid::parse_str) {
            Some(Ok(id)) => Ok(Scalar::Text(id.hyphenated().to_string())),
            _ => Err(error(path, "expects a document id (a UUID string)")),
        },
        Field::CreatedAt => Err(error(
            path,
            "`createdAt` is compared with `$gt`, `$gte`, `$lt` or `$lte`, not for equality",
        )),
    }
}

fn bound(field: &Field, operator: &str, value: &Value, path: &str) -> Result<Bound, InputError> {
    let here = format!("{path}.{operator}");
    let date = |s: &str| {
        parse_date(s).map(Bound::Date).ok_or_else(|| {
            error(
                &here,
                format!("{s:?} is not an ISO 8601 date (`2025-01-31` or `2025-01-31T12:00:00Z`)"),
            )
        })
    };
    match (field, value) {
        (Field::Metadata(_), Value::Number(n)) => Ok(Bound::Number(n.clone())),
        (Field::Metadata(_) | Field::CreatedAt, Value::String(s)) => date(s),
        (Field::Metadata(_), _) => Err(error(
            &here,
            "expects a number or an ISO 8601 date as a string",
        )),
        (Field::CreatedAt, _) => Err(error(&here, "expects an ISO 8601 date as a string")),
        (Field::ExternalId | Field::DocumentId, _) => Err(error(
            path,
            format!("`{operator}` does not apply to this field (it orders numbers and dates)"),
        )),
    }
}

fn value_set(field: &Field, value: &Value, path: &str) -> Result<ValueSet, InputError> {
    let what = match field {
        Field::Metadata(_) => "an array of strings, numbers or booleans",
        Field::ExternalId => "an array of strings",
        Field::DocumentId => "an array of document ids (UUID strings)",
        Field::CreatedAt => {
            return Err(error(
                path,
                "`createdAt` is compared with `$gt`, `$gte`, `$lt` or `$lte`, not for equality",
            ));
        }
    };
    let Value::Array(items) = value else {
        return Err(error(path, format!("expects {what}")));
    };
    if items.len() > MAX_IN_VALUES {
        return Err(error(
            path,
            format!(
                "holds {} values; at most {MAX_IN_VALUES} are allowed",
                items.len()
            ),
        ));
    }
    let mut set = ValueSet::default();
    for item in items {
        if matches!(item, Value::Array(_) | Value::Object(_) | Value::Null) {
            return Err(error(path, format!("expects {what}")));
        }
        let scalar = equality_operand(field, item, path)
            .map_err(|_| error(path, format!("expects {what}")))?;
        set.insert(scalar);
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn doc_id() -> DocumentId {
        "3f2b1c4d-0000-4000-8000-00000000abcd".parse().unwrap()
    }

    fn created() -> DateTime<Utc> {
        parse_date("2025-03-15T10:00:00Z").unwrap()
    }

    fn metadata() -> Metadata {
        Metadata::from_json(&json!({
            "department": "legal",
            "year": 2024,
            "ratio": 0.5,
            "public": false,
            "tags": ["policy", "hr"],
            "effective": "2025-01-01",
            "reviewed": "2025-02-10T08:30:00+01:00",
            "title": "not a date",
        }))
        .unwrap()
    }

    /// Whether `filter` matches the standard test document (with an external id).
    fn check(filter: Value) -> bool {
        let metadata = metadata();
        let target = FilterTarget {
            metadata: &metadata,
            external_id: Some("docs/policy.pdf"),
            document_id: doc_id(),
            created_at: created(),
        };
        Filter::parse(&filter)
            .unwrap_or_else(|e| panic!("{filter}: {e}"))
            .matches(&target)
    }

    fn parse_error(filter: Value) -> String {
        match Filter::parse(&filter) {
            Ok(parsed) => panic!("{filter} parsed as {parsed:?}"),
            Err(e) => e.0,
        }
    }

    #[test]
    fn the_empty_object_matches_everything_only_as_the_whole_filter() {
        let filter = Filter::parse(&json!({})).unwrap();
        assert!(filter.is_all());
        assert!(check(json!({})));
        assert!(parse_error(json!({"$and": [{}]})).starts_with("filter.$and[0]: an empty object"));
        assert!(parse_error(json!({"year": {}})).starts_with("filter.year: expects a value"));
    }

    #[test]
    fn equality_on_every_kind() {
        for (filter, expected) in [
            (json!({"department": "legal"}), true),
            (json!({"department": "Legal"}), false),
            (json!({"year": 2024}), true),
            (json!({"year": 2024.0}), true),
            (json!({"year": 2023}), false),
            (json!({"ratio": 0.5}), true),
            (json!({"public": false}), true),
            (json!({"public": true}), false),
            (json!({"year": "2024"}), false),
            (json!({"public": "false"}), false),
            (json!({"department": {"$eq": "legal"}}), true),
            (json!({"department": {"$ne": "legal"}}), false),
            (json!({"year": {"$ne": 2023}}), true),
            (json!({"year": {"$ne": "2024"}}), true),
            (json!({"missing": "x"}), false),
            (json!({"missing": {"$ne": "x"}}), true),
        ] {
            assert_eq!(check(filter.clone()), expected, "{filter}");
        }
    }

    #[test]
    fn lists_match_when_they_contain_the_value() {
        for (filter, expected) in [
            (json!({"tags": "policy"}), true),
            (json!({"tags": "hr"}), true),
            (json!({"tags": "finance"}), false),
            (json!({"tags": {"$ne": "policy"}}), false),
            (json!({"tags": {"$ne": "finance"}}), true),
            (json!({"tags": {"$in": ["finance", "hr"]}}), true),
            (json!({"tags": {"$in": ["finance", 1, true]}}), false),
            (json!({"tags": {"$nin": ["finance", "hr"]}}), false),
            (json!({"tags": {"$nin": ["finance"]}}), true),
            (json!({"tags": 1}), false),
            (json!({"tags": {"$gt": 1}}), false),
            (json!({"tags": {"$exists": true}}), true),
            (json!({"tags": "policy", "department": "legal"}), true),
        ] {
            assert_eq!(check(filter.clone()), expected, "{filter}");
        }
    }

    #[test]
    fn in_and_nin_on_every_kind() {
        for (filter, expected) in [
            (json!({"department": {"$in": ["hr", "legal"]}}), true),
            (json!({"department": {"$in": ["hr"]}}), false),
            (json!({"department": {"$nin": ["hr"]}}), true),
            (json!({"year": {"$in": [2023, 2024.0]}}), true),
            (json!({"year": {"$in": ["2024"]}}), false),
            (json!({"year": {"$nin": [2024]}}), false),
            (json!({"public": {"$in": [false]}}), true),
            (json!({"public": {"$in": [true, "false", 0]}}), false),
            (json!({"department": {"$in": []}}), false),
            (json!({"department": {"$nin": []}}), true),
            (json!({"missing": {"$in": ["x"]}}), false),
            (json!({"missing": {"$nin": ["x"]}}), true),
        ] {
            assert_eq!(check(filter.clone()), expected, "{filter}");
        }
    }

    #[test]
    fn orderings_compare_numbers_with_numbers() {
        for (filter, expected) in [
            (json!({"year": {"$gt": 2023}}), true),
            (json!({"year": {"$gt": 2024}}), false),
            (json!({"year": {"$gte": 2024}}), true),
            (json!({"year": {"$lt": 2024}}), false),
            (json!({"year": {"$lte": 2024}}), true),
            (json!({"year": {"$lt": 2024.5}}), true),
            (json!({"ratio": {"$gt": 0.25, "$lt": 1}}), true),
            (json!({"ratio": {"$gt": -1}}), true),
            (json!({"year": {"$gt": 18446744073709551615_u64}}), false),
            (json!({"year": {"$gte": "2020-01-01"}}), false),
            (json!({"department": {"$gt": 1}}), false),
            (json!({"public": {"$lt": 1}}), false),
            (json!({"missing": {"$gt": 1}}), false),
            (json!({"missing": {"$lte": 1}}), false),
        ] {
            assert_eq!(check(filter.clone()), expected, "{filter}");
        }
    }

    #[test]
    fn orderings_compare_dates_with_dates() {
        for (filter, expected) in [
            (json!({"effective": {"$gte": "2025-01-01"}}), true),
            (json!({"effective": {"$gt": "2025-01-01"}}), false),
            (json!({"effective": {"$gt": "2024-12-31T23:59:59Z"}}), true),
            (json!({"effective": {"$lt": "2025-01-01T00:00:01Z"}}), true),
            // 08:30 at +01:00 is 07:30 UTC.
            (json!({"reviewed": {"$gt": "2025-02-10T07:29:59Z"}}), true),
            (json!({"reviewed": {"$lte": "2025-02-10T07:30:00Z"}}), true),
            (json!({"reviewed": {"$lt": "2025-02-10"}}), false),
            (json!({"title": {"$gt": "2000-01-01"}}), false),
            (json!({"title": {"$lt": "2100-01-01"}}), false),
            (json!({"effective": {"$gt": 1}}), false),
            (json!({"createdAt": {"$gte": "2025-03-15"}}), true),
            (json!({"createdAt": {"$lt": "2025-03-15T10:00:00Z"}}), false),
            (
                json!({"createdAt": {"$lte": "2025-03-15T11:00:00+01:00"}}),
                true,
            ),
            (
                json!({"createdAt": {"$gt": "2025-03-15T09:00:00Z", "$lt": "2025-03-16"}}),
                true,
            ),
            (json!({"createdAt": {"$exists": true}}), true),
            (json!({"createdAt": {"$exists": false}}), false),
        ] {
            assert_eq!(check(filter.clone()), expected, "{filter}");
        }
    }

    #[test]
    fn dates_are_rfc_3339_or_a_plain_calendar_date() {
        assert!(parse_date("2025-01-31").is_some());
        assert!(parse_date("2025-01-31T12:00:00Z").is_some());
        assert!(parse_date("2025-01-31T12:00:00.5-05:00").is_some());
        for bad in [
            "2025-1-31",
            "2025-02-30",
            "+2025-01-3",
            "20250131",
            "2025-01-31T12:00",
            "",
        ] {
            assert!(parse_date(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn exists_tests_presence() {
        assert!(check(json!({"year": {"$exists": true}})));
        assert!(!check(json!({"year": {"$exists": false}})));
        assert!(check(json!({"missing": {"$exists": false}})));
        assert!(!check(json!({"missing": {"$exists": true}})));
    }

    #[test]
    fn built_in_fields() {
        let id = doc_id().to_string();
        for (filter, expected) in [
            (json!({"externalId": "docs/policy.pdf"}), true),
            (json!({"externalId": {"$ne": "docs/policy.pdf"}}), false),
            (
                json!({"externalId": {"$in": ["a", "docs/policy.pdf"]}}),
                true,
            ),
            (json!({"externalId": {"$nin": ["a"]}}), true),
            (json!({"externalId": {"$exists": true}}), true),
            (json!({"documentId": id}), true),
            (json!({"documentId": id.to_uppercase()}), true),
            (json!({"documentId": {"$ne": id}}), false),
            (json!({"documentId": {"$in": [id]}}), true),
            (json!({"documentId": {"$nin": [id]}}), false),
            (json!({"documentId": {"$exists": true}}), true),
            (
                json!({"documentId": "00000000-0000-4000-8000-000000000000"}),
                false,
            ),
        ] {
            assert_eq!(check(filter.clone()), expected, "{filter}");
        }

        let metadata = Metadata::default();
        let anonymous = FilterTarget {
            metadata: &metadata,
            external_id: None,
            document_id: doc_id(),
            created_at: created(),
        };
        for (filter, expected) in [
            (json!({"externalId": "x"}), false),
            (json!({"externalId": {"$ne": "x"}}), true),
            (json!({"externalId": {"$in": ["x"]}}), false),
            (json!({"externalId": {"$nin": ["x"]}}), true),
            (json!({"externalId": {"$exists": false}}), true),
            (json!({"externalId": {"$exists": true}}), false),
        ] {
            assert_eq!(
                Filter::parse(&filter).unwrap().matches(&anonymous),
                expected,
                "{filter}"
            );
        }
    }

    #[test]
    fn and_or_nest() {
        for (filter, expected) in [
            (
                json!({"$and": [{"department": "legal"}, {"year": 2024}]}),
                true,
            ),
            (
                json!({"$and": [{"department": "legal"}, {"year": 2023}]}),
                false,
            ),
            (json!({"$or": [{"department": "hr"}, {"year": 2024}]}), true),
            (
                json!({"$or": [{"department": "hr"}, {"year": 2023}]}),
                false,
            ),
            (json!({"department": "legal", "year": 2023}), false),
            (
                json!({"$or": [
                    {"$and": [{"tags": "finance"}, {"public": false}]},
                    {"$and": [{"tags": "hr"}, {"year": {"$gte": 2020, "$lt": 2030}}]},
                ]}),
                true,
            ),
            (
                json!({"department": "legal", "$or": [{"public": true}, {"missing": {"$exists": true}}]}),
                false,
            ),
        ] {
            assert_eq!(check(filter.clone()), expected, "{filter}");
        }
    }

    #[test]
    fn parsing_builds_the_expected_tree() {
        let filter =
            Filter::parse(&json!({"year": {"$gte": 2020, "$lt": 2025}, "tags": "hr"})).unwrap();
        let Filter::And(parts) = &filter else {
            panic!("{filter:?}");
        };
        assert_eq!(parts.len(), 3);
        assert!(parts.contains(&Filter::Test(
            Field::Metadata("tags".into()),
            Condition::Eq(Scalar::Text("hr".into()))
        )));
        assert_eq!(
            Filter::parse(&json!({"year": 2024})).unwrap(),
            Filter::Test(
                Field::Metadata("year".into()),
                Condition::Eq(Scalar::Number(2024.into()))
            )
        );
        let set = match Filter::parse(&json!({"k": {"$in": ["a", "a", 1, 1.0, true]}})).unwrap() {
            Filter::Test(_, Condition::In(set)) => set,
            other => panic!("{other:?}"),
        };
        assert_eq!(set.texts().collect::<Vec<_>>(), ["a"]);
        assert_eq!(set.numbers().len(), 1);
        assert_eq!(set.bools(), [true]);
        assert_eq!(set.len(), 3);
        assert!(!set.is_empty());
    }

    #[test]
    fn fields_lists_the_metadata_keys_read() {
        let filter = Filter::parse(&json!({
            "year": {"$gt": 1},
            "$or": [{"tags": "a"}, {"year": 3}, {"externalId": "x"}, {"createdAt": {"$gt": "2025-01-01"}}],
        }))
        .unwrap();
        assert_eq!(
            filter.fields().into_iter().collect::<Vec<_>>(),
            ["tags", "year"]
        );
        assert!(Filter::All.fields().is_empty());
    }

    #[test]
    fn malformed_filters_name_the_offending_part() {
        for (filter, expected) in [
            (json!([]), "filter: expects an object"),
            (json!("year"), "filter: expects an object"),
            (
                json!({"$or": [{"a": 1}, {"year": {"$gtt": 1}}]}),
                "filter.$or[1].year: unknown operator `$gtt`",
            ),
            (json!({"$not": {"a": 1}}), "filter: unknown operator `$not`"),
            (
                json!({"year": {"$in": "x"}}),
                "filter.year.$in: expects an array of strings, numbers or booleans",
            ),
            (
                json!({"year": {"$in": [[1]]}}),
                "filter.year.$in: expects an array of strings, numbers or booleans",
            ),
            (
                json!({"year": {"$in": [null]}}),
                "filter.year.$in: expects an array",
            ),
            (
                json!({"year": {"$nin": {"a": 1}}}),
                "filter.year.$nin: expects an array",
            ),
            (
                json!({"year": {"$gt": true}}),
                "filter.year.$gt: expects a number or an ISO 8601 date",
            ),
            (
                json!({"year": {"$lte": null}}),
                "filter.year.$lte: expects a number or an ISO 8601 date",
            ),
            (
                json!({"year": {"$lt": "soon"}}),
                "filter.year.$lt: \"soon\" is not an ISO 8601 date",
            ),
            (
                json!({"year": {"$exists": 1}}),
                "filter.year.$exists: expects true or false",
            ),
            (
                json!({"year": null}),
                "filter.year: expects a string, number or boolean",
            ),
            (
                json!({"year": [1, 2]}),
                "filter.year: expects a string, number or boolean (for several values use `$in`)",
            ),
            (
                json!({"year": {"$eq": {"a": 1}}}),
                "filter.year.$eq: expects a string, number or boolean",
            ),
            (
                json!({"year": {"$ne": [1]}}),
                "filter.year.$ne: expects a string",
            ),
            (
                json!({"year": {"gt": 1}}),
                "filter.year: `gt` is not an operator",
            ),
            (
                json!({"year": {"$and": [{"a": 1}]}}),
                "filter.year: unknown operator `$and`",
            ),
            (
                json!({"$and": []}),
                "filter.$and: expects a non-empty array of filters",
            ),
            (
                json!({"$or": {"a": 1}}),
                "filter.$or: expects a non-empty array of filters",
            ),
            (
                json!({"$and": [{"a": 1}, 3]}),
                "filter.$and[1]: expects an object",
            ),
            (
                json!({"$and": [{"$or": [{"a b": 1}]}]}),
                "filter.$and[0].$or[0]: \"a b\" is not a field",
            ),
            (json!({"": 1}), "filter: \"\" is not a field"),
            (json!({"k".repeat(65): 1}), "filter: \"kkkkkkkk"),
            (
                json!({"externalId": 5}),
                "filter.externalId: expects a string",
            ),
            (
                json!({"externalId": {"$gt": "a"}}),
                "filter.externalId: `$gt` does not apply",
            ),
            (
                json!({"externalId": {"$in": ["a", 1]}}),
                "filter.externalId.$in: expects an array of strings",
            ),
            (
                json!({"documentId": "nope"}),
                "filter.documentId: expects a document id",
            ),
            (
                json!({"documentId": {"$in": ["nope"]}}),
                "filter.documentId.$in: expects an array of document ids",
            ),
            (
                json!({"documentId": {"$lt": "x"}}),
                "filter.documentId: `$lt` does not apply",
            ),
            (
                json!({"createdAt": "2025-01-01"}),
                "filter.createdAt: `createdAt` is compared with",
            ),
            (
                json!({"createdAt": {"$in": ["2025-01-01"]}}),
                "filter.createdAt.$in: `createdAt` is compared with",
            ),
            (
                json!({"createdAt": {"$gt": 5}}),
                "filter.createdAt.$gt: expects an ISO 8601 date",
            ),
            (
                json!({"createdAt": {"$gt": "yesterday"}}),
                "filter.createdAt.$gt: \"yesterday\" is not",
            ),
        ] {
            let message = parse_error(filter.clone());
            assert!(message.starts_with(expected), "{filter}: {message}");
        }
    }

    #[test]
    fn bounds_are_enforced() {
        // Depth 8 is accepted, 9 refused.
        let mut deep = json!({"a": 1});
        for _ in 1..MAX_DEPTH {
            deep = json!({"$and": [deep]});
        }
        assert!(Filter::parse(&deep).is_ok());
        let deeper = json!({"$or": [deep]});
        assert_eq!(parse_error(deeper), "filter: nested deeper than 8 levels");

        let conditions: Map<String, Value> = (0..MAX_CONDITIONS)
            .map(|i| (format!("k{i}"), json!(i)))
            .collect();
        assert!(Filter::parse(&Value::Object(conditions.clone())).is_ok());
        let mut too_many = conditions;
        too_many.insert("extra".into(), json!({"$gt": 1}));
        assert_eq!(
            parse_error(Value::Object(too_many)),
            "filter: more than 64 conditions"
        );
        let spread = json!({"$or": (0..65).map(|i| json!({"k": i})).collect::<Vec<_>>()});
        assert_eq!(parse_error(spread), "filter: more than 64 conditions");

        let values: Vec<Value> = (0..MAX_IN_VALUES).map(|i| json!(i)).collect();
        assert!(Filter::parse(&json!({"k": {"$in": values}})).is_ok());
        let values: Vec<Value> = (0..=MAX_IN_VALUES).map(|i| json!(i)).collect();
        assert_eq!(
            parse_error(json!({"k": {"$nin": values}})),
            "filter.k.$nin: holds 1025 values; at most 1024 are allowed"
        );
    }

    /// A small deterministic generator (SplitMix64), so the property test needs no new crate
    /// and fails the same way on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        /// A value from a small pool, so that equal values are frequent.
        fn scalar(&mut self) -> Value {
            match self.below(5) {
                0 => json!(["a", "b", "c"][self.below(3)]),
                1 => json!(self.below(4)),
                2 => json!(self.below(4) as f64 + 0.5),
                3 => json!(self.below(2) == 0),
                _ => json!(["2025-01-01", "2025-06-01T12:00:00Z"][self.below(2)]),
            }
        }

        fn metadata_value(&mut self) -> Value {
            if self.below(5) == 0 {
                let items: Vec<&str> = (0..self.below(3))
                    .map(|_| ["a", "b", "c"][self.below(3)])
                    .collect();
                json!(items)
            } else {
                self.scalar()
            }
        }

        /// A condition, or (at most `depth` times nested) an `$or` of two.
        fn leaf(&mut self, depth: usize) -> Value {
            let key = ["k0", "k1", "k2"][self.below(3)];
            let operand = self.scalar();
            match self.below(if depth == 0 { 5 } else { 6 }) {
                0 => json!({key: operand}),
                1 => json!({key: {"$ne": operand}}),
                2 => json!({key: {["$gt", "$gte", "$lt", "$lte"][self.below(4)]: match operand {
                    Value::Bool(_) => json!(1),
                    Value::String(_) => json!("2025-03-01"),
                    other => other,
                }}}),
                3 => {
                    let values: Vec<Value> = (0..self.below(4)).map(|_| self.scalar()).collect();
                    json!({key: {["$in", "$nin"][self.below(2)]: values}})
                }
                4 => json!({key: {"$exists": self.below(2) == 0}}),
                _ => json!({"$or": [self.leaf(depth - 1), self.leaf(depth - 1)]}),
            }
        }
    }

    #[test]
    fn negations_and_conjunctions_agree_with_their_definitions() {
        let mut rng = Rng(0x5eed);
        // How often `$eq`, `$in`, `a` and `b` matched and did not: both must be common, or
        // the property would hold vacuously.
        let mut outcomes = [[0_usize; 2]; 3];
        for _ in 0..2_000 {
            let mut object = Map::new();
            for key in ["k0", "k1", "k2"] {
                if rng.below(4) != 0 {
                    object.insert(key.to_owned(), rng.metadata_value());
                }
            }
            let metadata = Metadata::from_json(&Value::Object(object)).unwrap();
            let target = FilterTarget {
                metadata: &metadata,
                external_id: None,
                document_id: doc_id(),
                created_at: created(),
            };
            let matches = |filter: &Value| Filter::parse(filter).unwrap().matches(&target);

            let key = ["k0", "k1", "k2"][rng.below(3)];
            let operand = rng.scalar();
            let eq = matches(&json!({key: {"$eq": operand}}));
            assert_eq!(eq, matches(&json!({key: operand})));
            assert_eq!(
                !eq,
                matches(&json!({key: {"$ne": operand}})),
                "{metadata:?} {key} {operand}"
            );
            let values: Vec<Value> = (0..rng.below(4)).map(|_| rng.scalar()).collect();
            let inside = matches(&json!({key: {"$in": values}}));
            assert_eq!(
                !inside,
                matches(&json!({key: {"$nin": values}})),
                "{metadata:?} {key}"
            );
            // `$in` is the `$or` of equalities.
            let any = values.iter().any(|v| matches(&json!({key: v})));
            assert_eq!(inside, any, "{metadata:?} {key} {values:?}");

            let (a, b) = (rng.leaf(3), rng.leaf(3));
            let (ma, mb) = (matches(&a), matches(&b));
            outcomes[0][usize::from(eq)] += 1;
            outcomes[1][usize::from(inside)] += 1;
            outcomes[2][usize::from(ma)] += 1;
            assert_eq!(matches(&json!({"$and": [a, b]})), ma && mb, "{a} {b}");
            assert_eq!(matches(&json!({"$or": [a, b]})), ma || mb, "{a} {b}");
        }
        assert!(
            outcomes.iter().flatten().all(|&n| n >= 50),
            "too one-sided: {outcomes:?}"
        );
    }
}
