//! Data sources: listed and read within the caller's scope, created by callers that see every
//! source. The rule that a key limited to some sources cannot create one lives here, once, for
//! every adapter.

use quire_core::{
    DocumentRecord, NewSource, SourceDescription, SourceId, SourceName, SourceRecord, SourceScope,
    SourceType,
};

use crate::{Actor, AppError, Ledger, audit};

/// A source to create, already validated.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    /// Its name.
    pub name: SourceName,
    /// Its description (may be empty).
    pub description: SourceDescription,
    /// Its kind.
    pub source_type: SourceType,
}

/// The sources in `scope`, oldest first.
pub async fn list(ledger: &Ledger, scope: &SourceScope) -> Result<Vec<SourceRecord>, AppError> {
    Ok(ledger.store().list_sources(scope).await?)
}

/// Source `id`; [`AppError::NotFound`] alike for a missing source and one outside `scope`.
pub async fn get(
    ledger: &Ledger,
    scope: &SourceScope,
    id: SourceId,
) -> Result<SourceRecord, AppError> {
    ledger
        .store()
        .get_source(scope, id)
        .await?
        .ok_or_else(|| not_found(id))
}

/// Source `id` with its documents, newest first.
pub async fn get_with_documents(
    ledger: &Ledger,
    scope: &SourceScope,
    id: SourceId,
) -> Result<(SourceRecord, Vec<DocumentRecord>), AppError> {
    let source = get(ledger, scope, id).await?;
    let documents = ledger
        .store()
        .list_documents(scope, id)
        .await?
        .ok_or_else(|| not_found(id))?;
    Ok((source, documents))
}

/// Creates a source and records it in the audit log. [`AppError::Forbidden`] for a key limited
/// to some sources: a source it created would lie outside its own scope.
pub async fn create(
    ledger: &Ledger,
    actor: &Actor,
    spec: SourceSpec,
) -> Result<SourceRecord, AppError> {
    if !matches!(actor.scope(), SourceScope::All) {
        return Err(AppError::Forbidden(
            "this key is limited to specific sources and cannot create new ones".into(),
        ));
    }
    let source = ledger
        .store()
        .create_source(NewSource {
            id: SourceId::new(),
            name: spec.name,
            description: spec.description,
            source_type: spec.source_type,
            created_at: ledger.now(),
        })
        .await?;
    audit::record(
        ledger,
        actor,
        "source.created",
        format!("{} ({})", source.name, source.id),
    )
    .await?;
    Ok(source)
}

fn not_found(id: SourceId) -> AppError {
    AppError::NotFound(format!("data source {id} not found"))
}
