//! `POST /api/v1/search`.

use axum::Json;
use axum::extract::State;
use quire_app::scope::requested_scope;
use quire_core::{SearchLimit, SearchQuery};
use serde::Deserialize;

use crate::auth::{Read, Require};
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
    let scope = requested_scope(&state, caller.scope(), body.source_ids.as_deref()).await?;
    let outcome =
        quire_app::search::search(&state, &scope, query.as_str(), limit.get(), None).await?;
    Ok(Json(SearchResponseJson {
        results: outcome.results,
    }))
}
