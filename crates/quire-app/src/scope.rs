//! The scope a request runs in: the caller's key scope, narrowed to the sources it names.

use quire_core::{SourceId, SourceScope};

use crate::{AppError, Services};

/// The caller's `scope` narrowed to `sourceIds`. Ids that are malformed are
/// [`AppError::Invalid`]; ids that do not exist or lie outside the key's scope are
/// [`AppError::NotFound`] alike, so a key cannot probe for other sources.
pub async fn requested_scope(
    services: &Services,
    scope: &SourceScope,
    source_ids: Option<&[String]>,
) -> Result<SourceScope, AppError> {
    let Some(raw) = source_ids else {
        return Ok(scope.clone());
    };
    if raw.is_empty() {
        return Err(AppError::Invalid(
            "`sourceIds` must not be empty; omit it to search every accessible source".into(),
        ));
    }
    let ids = raw
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.parse::<SourceId>()
                .map_err(|_| AppError::Invalid(format!("`sourceIds[{i}]` is not a UUID: {s:?}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let not_found = |id: SourceId| AppError::NotFound(format!("data source {id} not found"));
    let narrowed = scope
        .narrow(&ids)
        .map_err(|outside| not_found(outside[0]))?;
    let existing = services.store.existing_sources(&ids).await?;
    if let Some(missing) = ids.iter().find(|id| !existing.contains(id)) {
        return Err(not_found(*missing));
    }
    Ok(narrowed)
}
