//! How SQLite runs the shared logic's neutral statements: ids as TEXT, times as Unix
//! milliseconds, lists of ids and scopes as JSON arrays of ids.

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Row, Sqlite, SqliteConnection};
use uuid::Uuid;

use crate::shared::{Arg, Cells, Query, Sql};
use crate::{StoreError, StoreResult};

/// `query` with its values bound in SQLite's types.
fn bound(query: &Query) -> sqlx::query::Query<'_, Sqlite, SqliteArguments<'_>> {
    query
        .args
        .iter()
        .fold(sqlx::query(&query.sql), |q, arg| match arg {
            Arg::Id(id) => q.bind(id.hyphenated().to_string()),
            Arg::OptId(id) => q.bind(id.map(|id| id.hyphenated().to_string())),
            Arg::Ids(ids) => q.bind(ids_json(ids)),
            Arg::Scope(ids) => q.bind(ids.as_deref().map(ids_json)),
            Arg::Time(t) => q.bind(t.timestamp_millis()),
            Arg::OptTime(t) => q.bind(t.map(|t| t.timestamp_millis())),
            Arg::Text(text) => q.bind(text.as_deref()),
            Arg::LongText(text) => q.bind(text.as_str()),
            Arg::Int(n) => q.bind(*n),
            Arg::Bool(b) => q.bind(*b),
        })
}

/// A list of ids as SQLite keeps it: a JSON array of their text, which `json_each` reads.
fn ids_json(ids: &[Uuid]) -> String {
    Value::Array(
        ids.iter()
            .map(|id| id.hyphenated().to_string().into())
            .collect(),
    )
    .to_string()
}

#[async_trait]
impl Sql for SqliteConnection {
    type Row = SqliteRow;

    async fn execute(&mut self, query: Query) -> StoreResult<u64> {
        Ok(bound(&query).execute(self).await?.rows_affected())
    }

    async fn fetch_all(&mut self, query: Query) -> StoreResult<Vec<SqliteRow>> {
        Ok(bound(&query).fetch_all(self).await?)
    }

    async fn fetch_optional(&mut self, query: Query) -> StoreResult<Option<SqliteRow>> {
        Ok(bound(&query).fetch_optional(self).await?)
    }
}

/// A time stored as Unix milliseconds.
pub(super) fn time(ms: i64) -> StoreResult<DateTime<Utc>> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .ok_or_else(|| StoreError::Corrupt(format!("timestamp {ms} out of range")))
}

/// An id stored as text.
fn uuid(raw: &str) -> StoreResult<Uuid> {
    Uuid::parse_str(raw).map_err(|_| StoreError::Corrupt(format!("bad id {raw:?}")))
}

impl Cells for SqliteRow {
    fn opt_text(&self, column: &str) -> StoreResult<Option<String>> {
        Ok(self.try_get(column)?)
    }

    fn long_text(&self, column: &str) -> StoreResult<String> {
        Ok(self.try_get(column)?)
    }

    fn opt_int(&self, column: &str) -> StoreResult<Option<i64>> {
        Ok(self.try_get(column)?)
    }

    fn bool(&self, column: &str) -> StoreResult<bool> {
        Ok(self.try_get(column)?)
    }

    fn uuid(&self, column: &str) -> StoreResult<Uuid> {
        uuid(&self.try_get::<String, _>(column)?)
    }

    fn opt_uuid(&self, column: &str) -> StoreResult<Option<Uuid>> {
        self.try_get::<Option<String>, _>(column)?
            .map(|raw| uuid(&raw))
            .transpose()
    }

    fn opt_time(&self, column: &str) -> StoreResult<Option<DateTime<Utc>>> {
        self.try_get::<Option<i64>, _>(column)?
            .map(time)
            .transpose()
    }

    fn opt_ids(&self, column: &str) -> StoreResult<Option<Vec<Uuid>>> {
        let Some(json) = self.try_get::<Option<String>, _>(column)? else {
            return Ok(None);
        };
        let ids: Vec<String> = serde_json::from_str(&json)
            .map_err(|e| StoreError::Corrupt(format!("{column} {json:?}: {e}")))?;
        ids.iter()
            .map(|id| uuid(id))
            .collect::<StoreResult<_>>()
            .map(Some)
    }
}
