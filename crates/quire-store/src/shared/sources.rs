//! Sources.

use quire_core::{NewSource, SourceId, SourceRecord, SourceScope};

use super::records::{self, SOURCE_COLUMNS};
use super::sql::{Arg, Cells, Query, Sql};
use super::{Backend, Conn};
use crate::StoreResult;

/// [`crate::Store::create_source`].
pub(crate) async fn create<B: Backend>(store: &B, source: NewSource) -> StoreResult<SourceRecord> {
    insert::<B>(&mut *store.write().await?, &source).await
}

/// Inserts `source` on the caller's connection.
pub(crate) async fn insert<B: Backend>(
    conn: &mut Conn<B>,
    source: &NewSource,
) -> StoreResult<SourceRecord> {
    conn.execute(
        Query::new(
            "INSERT INTO sources (id, name, description, source_type, created_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(source.id)
        .bind(source.name.as_str())
        .bind(source.description.as_str())
        .bind(source.source_type.as_str())
        .bind(source.created_at),
    )
    .await?;
    Ok(SourceRecord {
        id: source.id,
        name: source.name.as_str().to_owned(),
        description: source.description.as_str().to_owned(),
        source_type: source.source_type.as_str().to_owned(),
        document_count: 0,
        created_at: source.created_at,
    })
}

/// [`crate::Store::list_sources`].
pub(crate) async fn list<B: Backend>(
    store: &B,
    scope: &SourceScope,
) -> StoreResult<Vec<SourceRecord>> {
    let query = Query::new(format!(
        "SELECT {SOURCE_COLUMNS} FROM sources s WHERE {} ORDER BY s.created_at, s.{}",
        B::in_scope("s.id", "$1"),
        B::SEQ
    ))
    .bind(Arg::scope(scope));
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter().map(records::source).collect()
}

/// [`crate::Store::get_source`].
pub(crate) async fn get<B: Backend>(
    store: &B,
    scope: &SourceScope,
    id: SourceId,
) -> StoreResult<Option<SourceRecord>> {
    if !scope.allows(id) {
        return Ok(None);
    }
    let query = Query::new(format!(
        "SELECT {SOURCE_COLUMNS} FROM sources s WHERE s.id = $1"
    ))
    .bind(id);
    let row = store.read().await?.fetch_optional(query).await?;
    row.as_ref().map(records::source).transpose()
}

/// [`crate::Store::existing_sources`].
pub(crate) async fn existing<B: Backend>(
    store: &B,
    ids: &[SourceId],
) -> StoreResult<Vec<SourceId>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let query = Query::new(format!(
        "SELECT id FROM sources WHERE {}",
        B::in_ids("id", "$1")
    ))
    .bind(Arg::ids(ids.iter().map(|id| id.0)));
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter().map(|row| row.id("id")).collect()
}
