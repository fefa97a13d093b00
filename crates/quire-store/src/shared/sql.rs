//! The neutral statement: SQL text with `$n` placeholders (both dialects read them) and its
//! values in neutral form, which each dialect binds in its own column types, and the row
//! accessors that read those columns back.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use quire_core::{
    ChunkId, ConversationId, DocumentId, EventId, JobId, KeyId, MessageId, SourceId, SourceScope,
    WebhookId,
};
use uuid::Uuid;

use crate::{StoreError, StoreResult};

/// One value bound to a statement; each dialect stores it in its own column type.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    /// An id: TEXT in SQLite, UUID in PostgreSQL.
    Id(Uuid),
    /// An id or NULL, in the same column types as [`Arg::Id`].
    OptId(Option<Uuid>),
    /// A list of ids for [`super::Backend::in_ids`]: a JSON array in SQLite, UUID[] in
    /// PostgreSQL.
    Ids(Vec<Uuid>),
    /// A scope for [`super::Backend::in_scope`] or a webhook's sources: NULL for every
    /// source, else its ids as [`Arg::Ids`].
    Scope(Option<Vec<Uuid>>),
    /// A point in time: Unix milliseconds in SQLite, TIMESTAMPTZ in PostgreSQL.
    Time(DateTime<Utc>),
    /// A point in time or NULL, in the same column types as [`Arg::Time`].
    OptTime(Option<DateTime<Utc>>),
    /// Short text, or NULL.
    Text(Option<String>),
    /// Text that may hold U+0000: TEXT in SQLite, BYTEA in PostgreSQL (whose TEXT cannot).
    LongText(String),
    /// An integer, or NULL.
    Int(Option<i64>),
    /// A boolean.
    Bool(bool),
}

/// Ids of every kind bind as [`Arg::Id`].
macro_rules! id_args {
    ($($id:ty),*) => {
        $(impl From<$id> for Arg {
            fn from(id: $id) -> Self {
                Self::Id(id.0)
            }
        })*
    };
}
id_args!(
    SourceId,
    DocumentId,
    KeyId,
    ChunkId,
    JobId,
    ConversationId,
    MessageId,
    WebhookId,
    EventId
);

impl From<Option<DocumentId>> for Arg {
    fn from(id: Option<DocumentId>) -> Self {
        Self::OptId(id.map(|id| id.0))
    }
}

impl From<Uuid> for Arg {
    fn from(id: Uuid) -> Self {
        Self::Id(id)
    }
}

impl From<DateTime<Utc>> for Arg {
    fn from(t: DateTime<Utc>) -> Self {
        Self::Time(t)
    }
}

impl From<Option<DateTime<Utc>>> for Arg {
    fn from(t: Option<DateTime<Utc>>) -> Self {
        Self::OptTime(t)
    }
}

impl From<&str> for Arg {
    fn from(s: &str) -> Self {
        Self::Text(Some(s.to_owned()))
    }
}

impl From<&String> for Arg {
    fn from(s: &String) -> Self {
        Self::Text(Some(s.clone()))
    }
}

impl From<Option<&str>> for Arg {
    fn from(s: Option<&str>) -> Self {
        Self::Text(s.map(str::to_owned))
    }
}

impl From<&Option<String>> for Arg {
    fn from(s: &Option<String>) -> Self {
        Self::Text(s.clone())
    }
}

impl From<i64> for Arg {
    fn from(n: i64) -> Self {
        Self::Int(Some(n))
    }
}

impl From<u32> for Arg {
    fn from(n: u32) -> Self {
        Self::Int(Some(i64::from(n)))
    }
}

impl From<u64> for Arg {
    fn from(n: u64) -> Self {
        Self::Int(Some(i64::try_from(n).unwrap_or(i64::MAX)))
    }
}

impl From<usize> for Arg {
    fn from(n: usize) -> Self {
        Self::Int(Some(i64::try_from(n).unwrap_or(i64::MAX)))
    }
}

impl From<Option<u64>> for Arg {
    fn from(n: Option<u64>) -> Self {
        Self::Int(n.map(|n| i64::try_from(n).unwrap_or(i64::MAX)))
    }
}

impl From<bool> for Arg {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}

impl Arg {
    /// A list of ids.
    pub(crate) fn ids(ids: impl IntoIterator<Item = Uuid>) -> Self {
        Self::Ids(ids.into_iter().collect())
    }

    /// A scope: NULL for every source, else its ids.
    pub(crate) fn scope(scope: &SourceScope) -> Self {
        Self::Scope(
            scope
                .source_ids()
                .map(|ids| ids.iter().map(|id| id.0).collect()),
        )
    }
}

/// A statement with its values, in order: `$1` is the first.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    /// The SQL text.
    pub(crate) sql: String,
    /// The values of `$1`, `$2`, ….
    pub(crate) args: Vec<Arg>,
}

impl Query {
    /// A statement without values yet.
    pub(crate) fn new(sql: impl Into<String>) -> Self {
        Self {
            sql: sql.into(),
            args: Vec::new(),
        }
    }

    /// Adds the value of the next placeholder.
    pub(crate) fn bind(mut self, arg: impl Into<Arg>) -> Self {
        self.args.push(arg.into());
        self
    }
}

/// A connection of either dialect that runs neutral statements.
#[async_trait]
pub(crate) trait Sql: Send {
    /// The rows it returns.
    type Row: Cells + Send + Sync;
    /// Runs a statement; returns how many rows it changed.
    async fn execute(&mut self, query: Query) -> StoreResult<u64>;
    /// Every row a statement returns.
    async fn fetch_all(&mut self, query: Query) -> StoreResult<Vec<Self::Row>>;
    /// The first row a statement returns, if any.
    async fn fetch_optional(&mut self, query: Query) -> StoreResult<Option<Self::Row>>;

    /// The one row a statement must return.
    async fn fetch_one(&mut self, query: Query) -> StoreResult<Self::Row> {
        self.fetch_optional(query)
            .await?
            .ok_or(StoreError::Database(sqlx::Error::RowNotFound))
    }

    /// Whether a statement returns any row.
    async fn exists(&mut self, query: Query) -> StoreResult<bool> {
        Ok(self.fetch_optional(query).await?.is_some())
    }
}

/// A row of either dialect, read in neutral types.
pub(crate) trait Cells {
    /// A text column.
    fn text(&self, column: &str) -> StoreResult<String> {
        self.opt_text(column)?
            .ok_or_else(|| StoreError::Corrupt(format!("{column} is NULL")))
    }
    /// A text column that may be NULL.
    fn opt_text(&self, column: &str) -> StoreResult<Option<String>>;
    /// A column written as [`Arg::LongText`].
    fn long_text(&self, column: &str) -> StoreResult<String>;
    /// An integer column that may be NULL.
    fn opt_int(&self, column: &str) -> StoreResult<Option<i64>>;
    /// A boolean column.
    fn bool(&self, column: &str) -> StoreResult<bool>;
    /// An id column.
    fn uuid(&self, column: &str) -> StoreResult<Uuid>;
    /// An id column that may be NULL.
    fn opt_uuid(&self, column: &str) -> StoreResult<Option<Uuid>>;
    /// A time column that may be NULL.
    fn opt_time(&self, column: &str) -> StoreResult<Option<DateTime<Utc>>>;
    /// A column written as [`Arg::Scope`].
    fn opt_ids(&self, column: &str) -> StoreResult<Option<Vec<Uuid>>>;

    /// An integer column.
    fn int(&self, column: &str) -> StoreResult<i64> {
        self.opt_int(column)?
            .ok_or_else(|| StoreError::Corrupt(format!("{column} is NULL")))
    }
    /// A time column.
    fn time(&self, column: &str) -> StoreResult<DateTime<Utc>> {
        self.opt_time(column)?
            .ok_or_else(|| StoreError::Corrupt(format!("{column} is NULL")))
    }
    /// An id column as a typed id.
    fn id<T: From<Uuid>>(&self, column: &str) -> StoreResult<T> {
        self.uuid(column).map(T::from)
    }
    /// An id column that may be NULL, as a typed id.
    fn opt_id<T: From<Uuid>>(&self, column: &str) -> StoreResult<Option<T>> {
        Ok(self.opt_uuid(column)?.map(T::from))
    }
    /// A count or size; never negative, so the conversion cannot lose anything real.
    fn count(&self, column: &str) -> StoreResult<u64> {
        Ok(count(self.int(column)?))
    }
    /// A small number (an ordinal, a page, an attempt).
    fn small(&self, column: &str) -> StoreResult<u32> {
        Ok(u32::try_from(self.int(column)?).unwrap_or(u32::MAX))
    }
}

/// A stored count as `u64` (a negative one, which cannot be, as 0).
pub(crate) fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}
