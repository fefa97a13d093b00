//! How PostgreSQL runs the shared logic's neutral statements: ids as UUID, times as
//! TIMESTAMPTZ, lists of ids and scopes as UUID[], long text as BYTEA.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{PgConnection, Postgres, Row};
use uuid::Uuid;

use crate::shared::{Arg, Cells, Query, Sql};
use crate::{StoreError, StoreResult};

/// A stored count or size; never negative, so the conversion cannot lose anything real.
pub(super) fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A limit as a bind value.
pub(super) fn limit(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// `query` with its values bound in PostgreSQL's types.
fn bound(query: &Query) -> sqlx::query::Query<'_, Postgres, PgArguments> {
    query
        .args
        .iter()
        .fold(sqlx::query(&query.sql), |q, arg| match arg {
            Arg::Id(id) => q.bind(*id),
            Arg::OptId(id) => q.bind(*id),
            Arg::Ids(ids) => q.bind(ids.as_slice()),
            Arg::Scope(ids) => q.bind(ids.as_deref()),
            Arg::Time(t) => q.bind(*t),
            Arg::OptTime(t) => q.bind(*t),
            Arg::Text(text) => q.bind(text.as_deref()),
            // TEXT cannot hold U+0000.
            Arg::LongText(text) => q.bind(text.as_bytes()),
            Arg::Int(n) => q.bind(*n),
            Arg::Bool(b) => q.bind(*b),
        })
}

#[async_trait]
impl Sql for PgConnection {
    type Row = PgRow;

    async fn execute(&mut self, query: Query) -> StoreResult<u64> {
        Ok(bound(&query).execute(self).await?.rows_affected())
    }

    async fn fetch_all(&mut self, query: Query) -> StoreResult<Vec<PgRow>> {
        Ok(bound(&query).fetch_all(self).await?)
    }

    async fn fetch_optional(&mut self, query: Query) -> StoreResult<Option<PgRow>> {
        Ok(bound(&query).fetch_optional(self).await?)
    }
}

impl Cells for PgRow {
    fn opt_text(&self, column: &str) -> StoreResult<Option<String>> {
        Ok(self.try_get(column)?)
    }

    fn long_text(&self, column: &str) -> StoreResult<String> {
        String::from_utf8(self.try_get(column)?)
            .map_err(|e| StoreError::Corrupt(format!("{column} is not UTF-8: {e}")))
    }

    /// BIGINT, or INTEGER (an HTTP status).
    fn opt_int(&self, column: &str) -> StoreResult<Option<i64>> {
        match self.try_get::<Option<i64>, _>(column) {
            Ok(n) => Ok(n),
            Err(_) => Ok(self.try_get::<Option<i32>, _>(column)?.map(i64::from)),
        }
    }

    fn bool(&self, column: &str) -> StoreResult<bool> {
        Ok(self.try_get(column)?)
    }

    fn uuid(&self, column: &str) -> StoreResult<Uuid> {
        Ok(self.try_get(column)?)
    }

    fn opt_uuid(&self, column: &str) -> StoreResult<Option<Uuid>> {
        Ok(self.try_get(column)?)
    }

    fn opt_time(&self, column: &str) -> StoreResult<Option<DateTime<Utc>>> {
        Ok(self.try_get(column)?)
    }

    fn opt_ids(&self, column: &str) -> StoreResult<Option<Vec<Uuid>>> {
        Ok(self.try_get(column)?)
    }
}
