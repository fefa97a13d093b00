//! `GET/POST /api/v1/sources` and `GET /api/v1/sources/{id}`.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use quire_core::{NewSource, SourceDescription, SourceId, SourceName, SourceScope, SourceType};
use serde::Deserialize;

use super::SourcePath;
use crate::auth::{Read, ReadWrite, Require};
use crate::extract::{ApiJson, ApiPath};
use crate::wire::{SourceDetailJson, SourceJson};
use crate::{ApiError, AppState};

#[derive(Debug, Deserialize)]
pub(super) struct CreateSource {
    name: Option<String>,
    description: Option<String>,
    #[serde(rename = "type")]
    source_type: Option<String>,
}

pub(super) async fn list(
    State(state): State<AppState>,
    Require(caller, _): Require<Read>,
) -> Result<Json<Vec<SourceJson>>, ApiError> {
    let sources = state.store.list_sources(caller.scope()).await?;
    Ok(Json(sources.iter().map(SourceJson::from).collect()))
}

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
    if !matches!(caller.scope(), SourceScope::All) {
        return Err(ApiError::Forbidden(
            "this key is limited to specific sources and cannot create new ones".into(),
        ));
    }
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
    let source = state
        .store
        .create_source(NewSource {
            id: SourceId::new(),
            name,
            description,
            source_type,
            created_at: state.clock.now(),
        })
        .await?;
    let location = format!("/api/v1/sources/{}", source.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(SourceJson::from(&source)),
    ))
}

pub(super) async fn get(
    State(state): State<AppState>,
    Require(caller, _): Require<Read>,
    ApiPath(SourcePath { id }): ApiPath<SourcePath>,
) -> Result<Json<SourceDetailJson>, ApiError> {
    let not_found = || ApiError::NotFound(format!("data source {id} not found"));
    let source = state
        .store
        .get_source(caller.scope(), id)
        .await?
        .ok_or_else(not_found)?;
    let documents = state
        .store
        .list_documents(caller.scope(), id)
        .await?
        .ok_or_else(not_found)?;
    Ok(Json(SourceDetailJson::new(&source, &documents)))
}
