//! `GET/POST /api/v1/webhooks`, `GET/DELETE /api/v1/webhooks/{id}` and the delivery log at
//! `GET /api/v1/webhooks/{id}/deliveries`: admin keys only, each within its scope (see
//! `quire_app::webhooks`).

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use quire_core::SourceScope;
use quire_core::WebhookId;
use quire_core::wire_timestamp as iso;
use quire_store::{DeliveryAttempt, WebhookRecord};
use serde::{Deserialize, Serialize};

use crate::auth::{Admin, Require};
use crate::extract::{ApiJson, ApiPath};
use crate::{ApiError, AppState};

/// `/webhooks/{id}`.
#[derive(Debug, Deserialize)]
pub(super) struct WebhookPath {
    id: WebhookId,
}

#[derive(Debug, Deserialize)]
pub(super) struct CreateWebhook {
    url: Option<String>,
    events: Option<Vec<String>>,
    /// Narrows the webhook to these sources (within the key's scope); omitted: the key's scope.
    #[serde(rename = "sourceIds")]
    source_ids: Option<Vec<String>>,
}

/// A webhook as listed: never with its secret.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WebhookJson {
    id: String,
    url: String,
    events: Vec<&'static str>,
    /// The sources whose events it receives; `null` for every source.
    source_ids: Option<Vec<String>>,
    created_at: String,
    /// Only in the answer to the registration.
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

impl WebhookJson {
    fn of(webhook: &WebhookRecord) -> Self {
        Self {
            id: webhook.id.to_string(),
            url: webhook.url.clone(),
            events: webhook.events.iter().map(|e| e.as_str()).collect(),
            source_ids: match &webhook.scope {
                SourceScope::All => None,
                SourceScope::Only(ids) => Some(ids.iter().map(|id| id.to_string()).collect()),
            },
            created_at: iso(webhook.created_at),
            secret: None,
        }
    }
}

/// One delivery attempt in the log.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DeliveryJson {
    event_id: String,
    event: &'static str,
    attempted_at: String,
    status_code: Option<u16>,
    error: Option<String>,
    latency_ms: u64,
    success: bool,
}

impl From<&DeliveryAttempt> for DeliveryJson {
    fn from(a: &DeliveryAttempt) -> Self {
        Self {
            event_id: a.event_id.to_string(),
            event: a.event.as_str(),
            attempted_at: iso(a.attempted_at),
            status_code: a.status_code,
            error: a.error.clone(),
            latency_ms: a.latency_ms,
            success: a.error.is_none() && a.status_code.is_some_and(|s| (200..300).contains(&s)),
        }
    }
}

pub(super) async fn list(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
) -> Result<Json<Vec<WebhookJson>>, ApiError> {
    let webhooks = quire_app::webhooks::list(&state, caller.scope()).await?;
    Ok(Json(webhooks.iter().map(WebhookJson::of).collect()))
}

pub(super) async fn get(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
    ApiPath(path): ApiPath<WebhookPath>,
) -> Result<Json<WebhookJson>, ApiError> {
    let webhook = quire_app::webhooks::get(&state, caller.scope(), path.id).await?;
    Ok(Json(WebhookJson::of(&webhook)))
}

pub(super) async fn create(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
    ApiJson(body): ApiJson<CreateWebhook>,
) -> Result<
    (
        StatusCode,
        [(header::HeaderName, String); 1],
        Json<WebhookJson>,
    ),
    ApiError,
> {
    let raw_url = body
        .url
        .ok_or_else(|| ApiError::BadRequest("`url` is required".into()))?;
    let names = body
        .events
        .ok_or_else(|| ApiError::BadRequest("`events` is required".into()))?;
    let events = quire_app::webhooks::parse_events(&names)?;
    let scope =
        quire_app::scope::requested_scope(&state, caller.scope(), body.source_ids.as_deref())
            .await?;
    let registered = quire_app::webhooks::register(&state, scope, &raw_url, events).await?;
    let mut json = WebhookJson::of(&registered.webhook);
    json.secret = Some(registered.secret);
    Ok((
        StatusCode::CREATED,
        [(
            header::LOCATION,
            format!("/api/v1/webhooks/{}", registered.webhook.id),
        )],
        Json(json),
    ))
}

pub(super) async fn delete(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
    ApiPath(path): ApiPath<WebhookPath>,
) -> Result<StatusCode, ApiError> {
    quire_app::webhooks::delete(&state, caller.scope(), path.id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
pub(super) struct DeliveriesQuery {
    limit: Option<u32>,
}

pub(super) async fn deliveries(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
    ApiPath(path): ApiPath<WebhookPath>,
    Query(query): Query<DeliveriesQuery>,
) -> Result<Json<Vec<DeliveryJson>>, ApiError> {
    let limit = query.limit.unwrap_or(100).clamp(1, 1000);
    let attempts = quire_app::webhooks::deliveries(&state, caller.scope(), path.id, limit).await?;
    Ok(Json(attempts.iter().map(DeliveryJson::from).collect()))
}
