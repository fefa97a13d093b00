//! `POST /api/v1/search`.

use axum::Json;
use axum::extract::State;
use quire_core::{SearchLimit, SearchQuery, SourceId, SourceScope};
use serde::Deserialize;

use crate::auth::{Principal, Read, Require};
use crate::extract::ApiJson;
use crate::wire::SearchResponseJson;
use crate::{ApiError, AppState};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SearchBody {
    query: String,
    source_ids: Option<Vec<String>>,
    limit: Option<i64>,
}

pub(super) async fn search(
    State(state): State<AppState>,
    Require(caller, _): Require<Read>,
    ApiJson(body): ApiJson<SearchBody>,
) -> Result<Json<SearchResponseJson>, ApiError> {
    let query = SearchQuery::parse(&body.query).map_err(|e| ApiError::BadRequest(e.0))?;
    let limit = body
        .limit
        .map(SearchLimit::parse)
        .transpose()
        .map_err(|e| ApiError::BadRequest(e.0))?
        .unwrap_or_default();
    let scope = requested_scope(&state, &caller, body.source_ids.as_deref()).await?;
    let outcome = crate::search::search(&state, &scope, query.as_str(), limit.get(), None).await?;
    Ok(Json(SearchResponseJson {
        results: outcome.results,
    }))
}

/// The caller's scope narrowed to `sourceIds`. Ids that are malformed answer 400; ids that do
/// not exist or lie outside the key's scope answer 404 alike, so a key cannot probe for other
/// sources.
pub(crate) async fn requested_scope(
    state: &AppState,
    caller: &Principal,
    source_ids: Option<&[String]>,
) -> Result<SourceScope, ApiError> {
    let Some(raw) = source_ids else {
        return Ok(caller.scope().clone());
    };
    if raw.is_empty() {
        return Err(ApiError::BadRequest(
            "`sourceIds` must not be empty; omit it to search every accessible source".into(),
        ));
    }
    let ids = raw
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.parse::<SourceId>()
                .map_err(|_| ApiError::BadRequest(format!("`sourceIds[{i}]` is not a UUID: {s:?}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let not_found = |id: SourceId| ApiError::NotFound(format!("data source {id} not found"));
    let narrowed = caller
        .scope()
        .narrow(&ids)
        .map_err(|outside| not_found(outside[0]))?;
    let existing = state.store.existing_sources(&ids).await?;
    if let Some(missing) = ids.iter().find(|id| !existing.contains(id)) {
        return Err(not_found(*missing));
    }
    Ok(narrowed)
}
