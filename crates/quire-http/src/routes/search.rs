//! `POST /api/v1/search`.

use axum::Json;
use axum::extract::State;
use quire_app::scope::requested_scope;
use quire_core::{Filter, SearchLimit, SearchQuery};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::auth::{Read, Require};
use crate::error::ErrorBody;
use crate::extract::ApiJson;
use crate::wire::SearchResponseJson;
use crate::{ApiError, AppState};

/// A search.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct SearchBody {
    /// The search text.
    #[schema(min_length = 1, max_length = 4000)]
    query: String,
    /// Only these sources (all must be in the key's scope); all the key's sources when left out.
    #[schema(value_type = Vec<String>, format = Uuid)]
    source_ids: Option<Vec<String>>,
    /// At most this many results, 1 to 100; 10 when left out.
    #[schema(value_type = i64, minimum = 1, maximum = 100)]
    limit: Option<i64>,
    /// Only documents whose metadata (and `documentId`, `createdAt`) match, in the filter
    /// language of Pinecone and Chroma: `{"department": "hr", "year": {"$gte": 2024}}`,
    /// `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`, `$in`, `$nin`, `$exists`, `$and`, `$or`;
    /// see docs/api.md.
    #[schema(value_type = Option<Object>)]
    filter: Option<serde_json::Value>,
}

/// Hybrid (keyword and semantic) search over the key's sources; rate-limited.
#[utoipa::path(post, path = "/api/v1/search", tag = "search", request_body = SearchBody,
    responses(
        (status = 200, description = "Results, best first", body = SearchResponseJson),
        (status = 400, description = "Empty or too long query, bad limit or source id, a malformed `filter` (the message names the offending part), malformed JSON", body = ErrorBody),
        (status = 404, description = "A source in `sourceIds` is not in the key's scope", body = ErrorBody),
        (status = 413, description = "Body over `limits.max_json_bytes`", body = ErrorBody),
        (status = 415, description = "Not `application/json`", body = ErrorBody),
        (status = 429, description = "The key's search rate limit is used up", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds until the window ends"))),
    ))]
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
    let filter = body
        .filter
        .as_ref()
        .map(Filter::parse)
        .transpose()
        .map_err(|e| ApiError::BadRequest(e.0))?;
    let scope = requested_scope(&state, caller.scope(), body.source_ids.as_deref()).await?;
    let outcome = quire_app::search::find(&state, &scope, &query, limit, filter.as_ref()).await?;
    Ok(Json(SearchResponseJson {
        results: outcome.results,
    }))
}
