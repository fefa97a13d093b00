//! `GET/POST /api/v1/sources` and `GET /api/v1/sources/{id}`.

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use quire_app::sources::{self, SourceSpec};
use quire_app::syncs;
use quire_core::{SourceDescription, SourceName, SourceType};
use serde::Deserialize;
use utoipa::ToSchema;

use super::SourcePath;
use super::paging::{PageQuery, next_link};
use crate::auth::{Admin, Read, ReadWrite, Require};
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath};
use crate::wire::{SourceDetailJson, SourceJson, SyncRunJson};
use crate::{ApiError, AppState};

/// A new data source.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct CreateSource {
    /// 1 to 200 characters after trimming, no control characters.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 200)]
    name: Option<String>,
    /// At most 2000 characters; empty when left out.
    #[schema(value_type = String, max_length = 2000)]
    description: Option<String>,
    /// `network` (the default: filled by uploads), `folder`, `s3` or `web` (filled by syncing
    /// from an origin; with `sync`, and only with an admin key).
    #[serde(rename = "type")]
    #[schema(value_type = String, example = "network")]
    source_type: Option<String>,
    /// How a `folder`, `s3` or `web` source syncs: `folder`: `{"path"}` (under
    /// `connectors.folder_roots`); `s3`: `{"url": "s3://bucket/prefix/", "endpoint", "region",
    /// "accessKeyId", "secretAccessKey", "allowHttp"}`; `web`: `{"url"` (a sitemap ending in
    /// `.xml`, or a start page), `"maxPages"` (1–10000, default 1000), `"maxDepth"}` (0–20,
    /// default 5); all: `include` and `exclude` (glob patterns over external ids) and
    /// `intervalSeconds` (0: on demand only; default 3600).
    #[schema(value_type = Option<Object>)]
    sync: Option<serde_json::Value>,
}

/// `?limit=` of a source's sync runs.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct RunsQuery {
    /// Runs to list, newest first: 1 to 100 (20 by default).
    limit: Option<u32>,
}

/// The sources the key can see, oldest first.
#[utoipa::path(get, path = "/api/v1/sources", tag = "sources",
    responses((status = 200, description = "The sources in the key's scope", body = [SourceJson])))]
pub(super) async fn list(
    State(state): State<AppState>,
    Require(caller, _): Require<Read>,
) -> Result<Json<Vec<SourceJson>>, ApiError> {
    let sources = sources::list(&state, caller.scope()).await?;
    Ok(Json(sources.iter().map(SourceJson::from).collect()))
}

/// Creates a source; needs `read-write` and a key that covers all sources.
#[utoipa::path(post, path = "/api/v1/sources", tag = "sources", request_body = CreateSource,
    responses(
        (status = 201, description = "Created", body = SourceJson,
            headers(("Location" = String, description = "`/api/v1/sources/{id}`"))),
        (status = 400, description = "Invalid name, description, type or sync (a folder outside the allowed roots, a bad URL or pattern); malformed JSON", body = ErrorBody),
        (status = 403, description = "Permission too low (a syncing source needs an admin key), or the key is limited to some sources", body = ErrorBody),
        (status = 413, description = "Body over `limits.max_json_bytes`", body = ErrorBody),
        (status = 415, description = "Not `application/json`", body = ErrorBody),
    ))]
pub(super) async fn create(
    State(state): State<AppState>,
    Require(caller, _): Require<ReadWrite>,
    ApiJson(body): ApiJson<CreateSource>,
) -> Result<
    (
        StatusCode,
        [(header::HeaderName, String); 1],
        Json<SourceJson>,
    ),
    ApiError,
> {
    let invalid = |e: quire_core::InputError| ApiError::BadRequest(e.0);
    let name = SourceName::parse(
        body.name
            .as_deref()
            .ok_or_else(|| ApiError::BadRequest("`name` is required".into()))?,
    )
    .map_err(invalid)?;
    let description =
        SourceDescription::parse(body.description.as_deref().unwrap_or("")).map_err(invalid)?;
    let source_type = body
        .source_type
        .as_deref()
        .map(SourceType::parse)
        .transpose()
        .map_err(invalid)?
        .unwrap_or_default();
    let spec = SourceSpec {
        name,
        description,
        source_type,
    };
    let (source, sync) =
        syncs::create_source(&state, &caller.actor(), spec, body.sync.as_ref()).await?;
    let location = format!("/api/v1/sources/{}", source.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(SourceJson::from(&source).with_sync(sync.as_ref())),
    ))
}

/// Replaces how a `folder`, `s3` or `web` source syncs: the body is a whole `sync` object of
/// the source's type, as at creation (a stored `secretAccessKey` is kept when none is given;
/// it is never shown). The next run comes at once; documents of items the new settings leave
/// out are deleted by it. Needs `admin`.
#[utoipa::path(patch, path = "/api/v1/sources/{id}/sync", tag = "sources", params(SourcePath),
    request_body(content = Object, description = "The source's new `sync` object (see `POST /api/v1/sources`)"),
    responses(
        (status = 200, description = "The source with its new settings", body = SourceJson),
        (status = 400, description = "Invalid settings, or the source is a network source (which does not sync)", body = ErrorBody),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No such source in the key's scope", body = ErrorBody),
        (status = 415, description = "Not `application/json`", body = ErrorBody),
    ))]
pub(super) async fn change_sync(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
    ApiPath(SourcePath { id }): ApiPath<SourcePath>,
    ApiJson(sync): ApiJson<serde_json::Value>,
) -> Result<Json<SourceJson>, ApiError> {
    let (source, view) = syncs::update(&state, &caller.actor(), caller.scope(), id, &sync).await?;
    Ok(Json(SourceJson::from(&source).with_sync(view.as_ref())))
}

/// Starts a sync run of a `folder`, `s3` or `web` source now; it runs in the background
/// (follow it in `GET …/syncs`). Needs `read-write`.
#[utoipa::path(post, path = "/api/v1/sources/{id}/sync", tag = "sources", params(SourcePath),
    responses(
        (status = 202, description = "Started", body = SyncRunJson),
        (status = 400, description = "The id is not a UUID, or the source is a network source (which does not sync)", body = ErrorBody),
        (status = 403, description = "Permission too low", body = ErrorBody),
        (status = 404, description = "No such source in the key's scope", body = ErrorBody),
        (status = 409, description = "A run of this source runs already", body = ErrorBody),
    ))]
pub(super) async fn sync_now(
    State(state): State<AppState>,
    Require(caller, _): Require<ReadWrite>,
    ApiPath(SourcePath { id }): ApiPath<SourcePath>,
) -> Result<(StatusCode, Json<SyncRunJson>), ApiError> {
    let run = syncs::start(&state, &caller.actor(), id).await?;
    Ok((StatusCode::ACCEPTED, Json(SyncRunJson::from(&run))))
}

/// The sync runs of a `folder`, `s3` or `web` source, newest first.
#[utoipa::path(get, path = "/api/v1/sources/{id}/syncs", tag = "sources",
    params(SourcePath, RunsQuery),
    responses(
        (status = 200, description = "Its runs, newest first (none for a network source)", body = [SyncRunJson]),
        (status = 400, description = "The id is not a UUID, or `limit` is malformed", body = ErrorBody),
        (status = 404, description = "No such source in the key's scope", body = ErrorBody),
    ))]
pub(super) async fn sync_runs(
    State(state): State<AppState>,
    Require(caller, _): Require<Read>,
    ApiPath(SourcePath { id }): ApiPath<SourcePath>,
    Query(query): Query<RunsQuery>,
) -> Result<Json<Vec<SyncRunJson>>, ApiError> {
    let runs = syncs::runs(&state, caller.scope(), id, query.limit.unwrap_or(20)).await?;
    Ok(Json(runs.iter().map(SyncRunJson::from).collect()))
}

/// One source with its documents: all of them, or with `limit` one page and a `Link` header
/// to the next.
#[utoipa::path(get, path = "/api/v1/sources/{id}", tag = "sources", params(SourcePath, PageQuery),
    responses(
        (status = 200, description = "The source and its documents (one page of them with `limit`), newest first", body = SourceDetailJson,
            headers(("Link" = String, description = "`<…>; rel=\"next\"`: the next page of documents, when `limit` was given and more follow"))),
        (status = 400, description = "The id is not a UUID, or `limit` or `cursor` is malformed", body = ErrorBody),
        (status = 404, description = "No such source in the key's scope", body = ErrorBody),
    ))]
pub(super) async fn get(
    State(state): State<AppState>,
    Require(caller, _): Require<Read>,
    ApiPath(SourcePath { id }): ApiPath<SourcePath>,
    Query(query): Query<PageQuery>,
) -> Result<Response, ApiError> {
    let Some(request) = query.parse()? else {
        let (source, documents) = sources::get_with_documents(&state, caller.scope(), id).await?;
        let sync = syncs::view(&state, caller.scope(), id).await?;
        return Ok(Json(SourceDetailJson::new(&source, sync.as_ref(), &documents)).into_response());
    };
    let source = sources::get(&state, caller.scope(), id).await?;
    let sync = syncs::view(&state, caller.scope(), id).await?;
    let page =
        quire_app::documents::list_page(&state, caller.scope(), id, request.after, request.size)
            .await?;
    let body = Json(SourceDetailJson::new(
        &source,
        sync.as_ref(),
        &page.documents,
    ));
    Ok(
        match next_link(&format!("/api/v1/sources/{id}"), request, &page) {
            Some(link) => ([link], body).into_response(),
            None => body.into_response(),
        },
    )
}
