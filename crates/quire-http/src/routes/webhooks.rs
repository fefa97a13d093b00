//! `GET/POST /api/v1/webhooks`, `GET/DELETE /api/v1/webhooks/{id}` and the delivery log at
//! `GET /api/v1/webhooks/{id}/deliveries`: admin keys only, each within its scope (see
//! `quire_app::webhooks`).

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use quire_app::records::{DeliveryAttempt, WebhookRecord};
use quire_core::WebhookId;
use quire_core::wire_timestamp as iso;
use quire_core::{SourceScope, WebhookEvent};
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{Array, ArrayBuilder, ObjectBuilder, Type};
use utoipa::{IntoParams, ToSchema};

use crate::auth::{Admin, Require};
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiPath};
use crate::{ApiError, AppState};

/// `/webhooks/{id}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub(super) struct WebhookPath {
    /// The webhook's id.
    #[param(value_type = String, format = Uuid)]
    id: WebhookId,
}

/// A new webhook.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct CreateWebhook {
    /// Absolute `http(s)://` URL without credentials; internal addresses are refused.
    #[schema(value_type = String, required = true)]
    url: Option<String>,
    /// One or more events (duplicates dropped).
    #[schema(value_type = Vec<String>, required = true, schema_with = event_names)]
    events: Option<Vec<String>>,
    /// Narrows the webhook to these sources (within the key's scope); omitted: the key's scope.
    #[serde(rename = "sourceIds")]
    #[schema(value_type = Option<Vec<uuid::Uuid>>)]
    source_ids: Option<Vec<String>>,
}

/// The schema of a list of event names: `WebhookEvent::ALL`'s wire names.
pub(super) fn event_names() -> Array {
    let names = WebhookEvent::ALL.map(WebhookEvent::as_str);
    ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(names)),
        )
        .min_items(Some(1))
        .build()
}

/// A webhook as listed: never with its secret.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Webhook)]
pub(super) struct WebhookJson {
    /// The webhook's id.
    #[schema(format = Uuid)]
    id: String,
    /// Where events are posted.
    url: String,
    /// The events it receives.
    #[schema(schema_with = event_names)]
    events: Vec<&'static str>,
    /// The sources whose events it receives; `null` for every source.
    source_ids: Option<Vec<String>>,
    /// When it was registered.
    #[schema(format = DateTime)]
    created_at: String,
    /// The signing secret (`whsec_…`): only in the answer to the registration.
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
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Delivery)]
pub(super) struct DeliveryJson {
    /// The event's id (the `webhook-id` header).
    #[schema(format = Uuid)]
    event_id: String,
    /// The event's name.
    #[schema(value_type = String)]
    event: &'static str,
    /// When the attempt was made.
    #[schema(format = DateTime)]
    attempted_at: String,
    /// The receiver's status; null when no answer came.
    status_code: Option<u16>,
    /// Why it failed; null on success.
    error: Option<String>,
    /// How long the attempt took.
    latency_ms: u64,
    /// A 2xx came back.
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

/// Every webhook; admin keys only.
#[utoipa::path(get, path = "/api/v1/webhooks", tag = "webhooks",
    responses(
        (status = 200, description = "The webhooks, without secrets", body = [WebhookJson]),
        (status = 403, description = "Not an admin key", body = ErrorBody),
    ))]
pub(super) async fn list(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
) -> Result<Json<Vec<WebhookJson>>, ApiError> {
    let webhooks = quire_app::webhooks::list(&state, caller.scope()).await?;
    Ok(Json(webhooks.iter().map(WebhookJson::of).collect()))
}

/// One webhook; admin keys only.
#[utoipa::path(get, path = "/api/v1/webhooks/{id}", tag = "webhooks", params(WebhookPath),
    responses(
        (status = 200, description = "The webhook, without its secret", body = WebhookJson),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No such webhook", body = ErrorBody),
    ))]
pub(super) async fn get(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
    ApiPath(path): ApiPath<WebhookPath>,
) -> Result<Json<WebhookJson>, ApiError> {
    let webhook = quire_app::webhooks::get(&state, caller.scope(), path.id).await?;
    Ok(Json(WebhookJson::of(&webhook)))
}

/// Registers a webhook; admin keys only. The answer is the only place its secret is shown.
#[utoipa::path(post, path = "/api/v1/webhooks", tag = "webhooks", request_body = CreateWebhook,
    responses(
        (status = 201, description = "Registered", body = WebhookJson,
            headers(("Location" = String, description = "`/api/v1/webhooks/{id}`"))),
        (status = 400, description = "Malformed, non-http(s) or internal URL; unknown event; malformed JSON", body = ErrorBody),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "A source in `sourceIds` does not exist or is outside the key's scope", body = ErrorBody),
        (status = 413, description = "Body over `limits.max_json_bytes`", body = ErrorBody),
        (status = 415, description = "Not `application/json`", body = ErrorBody),
    ))]
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
    let registered =
        quire_app::webhooks::register(&state, &caller.actor(), scope, &raw_url, events).await?;
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

/// Deletes a webhook; admin keys only.
#[utoipa::path(delete, path = "/api/v1/webhooks/{id}", tag = "webhooks", params(WebhookPath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No such webhook", body = ErrorBody),
    ))]
pub(super) async fn delete(
    State(state): State<AppState>,
    Require(caller, _): Require<Admin>,
    ApiPath(path): ApiPath<WebhookPath>,
) -> Result<StatusCode, ApiError> {
    quire_app::webhooks::delete(&state, &caller.actor(), path.id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `?limit=` of the delivery log.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct DeliveriesQuery {
    /// At most this many attempts (clamped to 1..=1000); 100 when left out.
    #[param(minimum = 0, maximum = 4294967295_u64)]
    limit: Option<u32>,
}

/// A webhook's delivery attempts, newest first; admin keys only.
#[utoipa::path(get, path = "/api/v1/webhooks/{id}/deliveries", tag = "webhooks",
    params(WebhookPath, DeliveriesQuery),
    responses(
        (status = 200, description = "Its delivery attempts", body = [DeliveryJson]),
        (status = 400, description = "The id is not a UUID, or `limit` is not a number", body = ErrorBody),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No such webhook", body = ErrorBody),
    ))]
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
