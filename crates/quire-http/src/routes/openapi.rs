//! The OpenAPI 3.1 document of the Agent API, derived from the handlers' `#[utoipa::path]`
//! annotations and the wire types' `ToSchema` derives, and served without a key at
//! `GET /api/v1/openapi.json`. `docs/openapi.json` is a committed copy that a test compares
//! with this one, so every change to the API shows up in review.

use std::sync::LazyLock;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi as Document, Ref, RefOr};
use utoipa::{Modify, OpenApi, ToSchema};

use super::{documents, generate, health, reviews, search, sources, upload, webhooks};
use crate::error::ErrorBody;
use crate::request_id::MAX_REQUEST_ID_LEN;

/// The document's root: every operation and the schemas that are not reached from one.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Quire Agent API",
        description = "Documents, hybrid search and cited answers for AI agents. Every \
            non-2xx response is an `Error` envelope; every response carries `X-Request-Id`. \
            The prose reference is docs/api.md.",
        license(name = "MIT OR Apache-2.0"),
    ),
    paths(
        sources::list, sources::create, sources::get, sources::sync_now, sources::change_sync,
        sources::sync_runs,
        documents::list, documents::get, documents::patch, documents::delete, documents::original,
        upload::single, upload::bulk, upload::version,
        search::search,
        generate::generate,
        reviews::list, reviews::get, reviews::approve, reviews::redact, reviews::reject,
        webhooks::list, webhooks::create, webhooks::get, webhooks::delete, webhooks::deliveries,
        health::version,
        serve,
    ),
    components(schemas(
        generate::QueuedEvent, generate::DeltaEvent, generate::DoneEvent, generate::ErrorEvent,
        DocumentReadyDelivery, DocumentFailedDelivery, DocumentPiiDetectedDelivery,
        DocumentDeletedDelivery, SourceSyncedDelivery,
    )),
    modifiers(&Bearer, &CommonResponses),
    security(("bearer" = [])),
)]
struct ApiDoc;

/// This document, served without a key (clients fetch it to generate their code).
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "health", security(()),
    responses((status = 200, description = "This OpenAPI 3.1 document",
        content_type = "application/json", body = Object)))]
pub(crate) async fn serve() -> Response {
    static JSON: LazyLock<String> = LazyLock::new(openapi_json);
    let mut response = JSON.as_str().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The OpenAPI document as pretty-printed JSON, as served and as `docs/openapi.json` holds it.
pub fn openapi_json() -> String {
    let mut document = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    add_request_id_header(&mut document);
    document["webhooks"] = webhooks_section();
    let mut text = serde_json::to_string_pretty(&document).unwrap_or_default();
    text.push('\n');
    text
}

/// The `Authorization: Bearer <API key>` scheme that every `/api/v1/` operation uses.
struct Bearer;

impl Modify for Bearer {
    fn modify(&self, openapi: &mut Document) {
        let mut scheme = Http::new(HttpAuthScheme::Bearer);
        scheme.description = Some(
            "An API key (`qk_` and 48 hex digits) created with `quire keys create` or in the \
             admin interface."
                .into(),
        );
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme("bearer", SecurityScheme::Http(scheme));
    }
}

/// What every operation that needs a key can answer besides its own statuses: 401 (no valid
/// key), 500 and 503 (the database is down), as shared responses in `components.responses`.
struct CommonResponses;

/// The shared error responses: status, component name, description.
const COMMON_ERRORS: [(&str, &str, &str); 3] = [
    (
        "401",
        "Unauthorized",
        "Missing, malformed, unknown or revoked key (`unauthorized`)",
    ),
    (
        "500",
        "InternalError",
        "A failure inside; the cause is logged (`internal_error`)",
    ),
    (
        "503",
        "Unavailable",
        "The database is unreachable; retry later (`unavailable`)",
    ),
];

impl Modify for CommonResponses {
    fn modify(&self, openapi: &mut Document) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for (_, name, description) in COMMON_ERRORS {
            let response = ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(RefOr::Ref(Ref::from_schema_name(ErrorBody::name()))))
                        .build(),
                )
                .build();
            components.responses.insert(name.into(), RefOr::T(response));
        }
        for (path, item) in openapi.paths.paths.iter_mut() {
            if path == "/api/v1/openapi.json" || !path.starts_with("/api/v1/") {
                continue;
            }
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
                &mut item.patch,
            ];
            for operation in operations.into_iter().flatten() {
                for (status, name, _) in COMMON_ERRORS {
                    operation
                        .responses
                        .responses
                        .entry(status.into())
                        .or_insert_with(|| RefOr::Ref(Ref::from_response_name(name)));
                }
            }
        }
    }
}

/// Documents `X-Request-Id` once in `components.headers` and refers to it from every inline
/// response (the shared ones get it in place). utoipa's types have no header references, so
/// this works on the JSON.
fn add_request_id_header(document: &mut Value) {
    let reference = json!({ "$ref": format!("#/components/headers/{REQUEST_ID}") });
    let add = |response: &mut Value| {
        if let Some(response) = response.as_object_mut()
            && !response.contains_key("$ref")
        {
            let headers = response.entry("headers").or_insert_with(|| json!({}));
            if let Some(headers) = headers.as_object_mut() {
                headers.insert(REQUEST_ID.into(), reference.clone());
            }
        }
    };
    if let Some(paths) = document["paths"].as_object_mut() {
        for item in paths.values_mut() {
            let operations = item.as_object_mut().into_iter().flat_map(|i| i.iter_mut());
            for (_, operation) in operations.filter(|(key, _)| HTTP_METHODS.contains(&key.as_str()))
            {
                if let Some(responses) = operation
                    .get_mut("responses")
                    .and_then(Value::as_object_mut)
                {
                    responses.values_mut().for_each(add);
                }
            }
        }
    }
    if let Some(responses) = document["components"]["responses"].as_object_mut() {
        responses.values_mut().for_each(add);
    }
    document["components"]["headers"] = json!({ REQUEST_ID: {
        "description": "The request's id: the client's `X-Request-Id` when it sent a sane one \
            (1 to 128 letters, digits and `-_.:`), a new UUID otherwise. Error bodies repeat it \
            as `requestId`; the server log records it as `request_id`.",
        "required": true,
        "schema": { "type": "string", "minLength": 1, "maxLength": MAX_REQUEST_ID_LEN },
    }});
}

/// The keys of a path item that are operations.
const HTTP_METHODS: [&str; 5] = ["get", "post", "put", "delete", "patch"];

/// The header's name as documentation writes it.
const REQUEST_ID: &str = "X-Request-Id";

/// The OpenAPI 3.1 `webhooks` section (utoipa has no builder for it): one `POST` per event,
/// with the body schemas below and the Standard Webhooks signature headers.
fn webhooks_section() -> Value {
    let event = |name: &str, schema: &str, summary: &str| {
        json!({ "post": {
            "summary": summary,
            "operationId": format!("webhook_{}", name.replace('.', "_")),
            "tags": ["webhooks"],
            "parameters": [
                signature_header("webhook-id", "The event's id: the same for every attempt at it; de-duplicate on it."),
                signature_header("webhook-timestamp", "Unix seconds when this attempt was sent."),
                signature_header("webhook-signature", "`v1,` and the base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`, keyed with the secret's bytes after `whsec_`."),
            ],
            "requestBody": { "required": true, "content": { "application/json": {
                "schema": { "$ref": format!("#/components/schemas/{schema}") } } } },
            "responses": { "2XX": { "description": "Received; any other answer (or none within `webhooks.timeout_seconds`) is logged as a failure and not retried." } }
        }})
    };
    json!({
        "document.ready": event("document.ready", DocumentReadyDelivery::name().as_ref(), "A document was processed and is searchable"),
        "document.failed": event("document.failed", DocumentFailedDelivery::name().as_ref(), "Processing of a document failed"),
        "document.pii_detected": event("document.pii_detected", DocumentPiiDetectedDelivery::name().as_ref(), "Personal data was found; the document waits for review"),
        "document.deleted": event("document.deleted", DocumentDeletedDelivery::name().as_ref(), "A document was deleted, with every version"),
        "source.synced": event("source.synced", SourceSyncedDelivery::name().as_ref(), "A syncing source's run ended (succeeded, or failed as a whole)"),
    })
}

/// A Standard Webhooks header of a delivery.
fn signature_header(name: &str, description: &str) -> Value {
    json!({ "name": name, "in": "header", "required": true, "description": description,
            "schema": { "type": "string" } })
}

// The webhook bodies as the store writes them (`quire_store`'s outbox, through
// `quire_core::webhook::envelope_body`); these types exist to describe them.

/// The body of a `document.ready` delivery.
#[derive(Serialize, ToSchema)]
struct DocumentReadyDelivery {
    /// `document.ready`.
    #[schema(example = "document.ready")]
    event: String,
    /// When the status changed.
    #[schema(format = DateTime)]
    timestamp: String,
    /// The document.
    data: DocumentReadyData,
}

/// The body of a `document.failed` delivery.
#[derive(Serialize, ToSchema)]
struct DocumentFailedDelivery {
    /// `document.failed`.
    #[schema(example = "document.failed")]
    event: String,
    /// When the status changed.
    #[schema(format = DateTime)]
    timestamp: String,
    /// The document and why it failed.
    data: DocumentFailedData,
}

/// The body of a `document.pii_detected` delivery.
#[derive(Serialize, ToSchema)]
struct DocumentPiiDetectedDelivery {
    /// `document.pii_detected`.
    #[schema(example = "document.pii_detected")]
    event: String,
    /// When the status changed.
    #[schema(format = DateTime)]
    timestamp: String,
    /// The document and what was found.
    data: DocumentPiiDetectedData,
}

/// `data` of `document.ready`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DocumentReadyData {
    #[schema(format = Uuid)]
    document_id: String,
    document_name: String,
    #[schema(format = Uuid)]
    data_source_id: String,
    data_source_name: String,
    /// Searchable passages.
    chunk_count: u64,
    /// The version that became ready (and live).
    version: u32,
}

/// The body of a `source.synced` delivery.
#[derive(Serialize, ToSchema)]
struct SourceSyncedDelivery {
    /// `source.synced`.
    #[schema(example = "source.synced")]
    event: String,
    /// When the run ended.
    #[schema(format = DateTime)]
    timestamp: String,
    /// The source and its run.
    data: SourceSyncedData,
}

/// `data` of `source.synced`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct SourceSyncedData {
    #[schema(format = Uuid)]
    data_source_id: String,
    data_source_name: String,
    /// The run, as `GET /api/v1/sources/{id}/syncs` lists it.
    run: crate::wire::SyncRunJson,
}

/// The body of a `document.deleted` delivery.
#[derive(Serialize, ToSchema)]
struct DocumentDeletedDelivery {
    /// `document.deleted`.
    #[schema(example = "document.deleted")]
    event: String,
    /// When it was deleted.
    #[schema(format = DateTime)]
    timestamp: String,
    /// The document as it was.
    data: DocumentDeletedData,
}

/// `data` of `document.deleted`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DocumentDeletedData {
    #[schema(format = Uuid)]
    document_id: String,
    document_name: String,
    #[schema(format = Uuid)]
    data_source_id: String,
    data_source_name: String,
    /// Its live version when it was deleted.
    version: u32,
}

/// `data` of `document.failed`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DocumentFailedData {
    #[schema(format = Uuid)]
    document_id: String,
    document_name: String,
    #[schema(format = Uuid)]
    data_source_id: String,
    data_source_name: String,
    /// Why processing failed.
    error: String,
    /// The version that failed (when another version is live, it stays live).
    version: u32,
}

/// `data` of `document.pii_detected`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DocumentPiiDetectedData {
    #[schema(format = Uuid)]
    document_id: String,
    document_name: String,
    #[schema(format = Uuid)]
    data_source_id: String,
    data_source_name: String,
    /// Kinds of personal data found.
    pii_types: Vec<String>,
}
