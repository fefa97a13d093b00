//! `GET /api/health/version`: unauthenticated, for monitoring. Besides the spec's `version` it
//! says whether semantic search is on. The details (model, engine, chunk counts, why semantic
//! search is off: text that can name internal hosts and paths) are for admin keys only (the
//! chunk count, which covers every source, only for admin keys on every source), and so is
//! whether OCR is on (with the Tesseract version, or why it is off).

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use quire_app::health::{self, OcrHealth, SemanticHealth};
use serde::Serialize;
use utoipa::ToSchema;

use crate::AppState;
use crate::auth::find_key;

/// The running version.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Version)]
pub(super) struct VersionJson {
    /// The crate version, dot-separated numbers.
    #[schema(example = "0.1.0")]
    version: &'static str,
    /// Whether search is hybrid or keyword only.
    semantic_search: SemanticSearchJson,
    /// Whether scanned pages and images are read with OCR (admin keys only).
    #[serde(skip_serializing_if = "Option::is_none")]
    ocr: Option<OcrJson>,
}

/// OCR: whether Tesseract reads scanned pages and images, with its settings or why it is off.
#[derive(Debug, Default, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Ocr)]
pub(super) struct OcrJson {
    /// Whether OCR is on.
    enabled: bool,
    /// Tesseract languages in use (when enabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    languages: Option<Vec<String>>,
    /// Pages read by OCR at most per document (when enabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    max_pages: Option<u32>,
    /// Resolution pages are rendered at for OCR (when enabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    dpi: Option<u32>,
    /// The Tesseract found, with its version (when enabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    /// Why OCR is off and how to turn it on (when disabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// Semantic search: only `enabled` without an admin key; the other fields are for admins.
#[derive(Debug, Default, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = SemanticSearch)]
pub(super) struct SemanticSearchJson {
    /// Whether an embedding model is loaded.
    enabled: bool,
    /// The model's id (admin, when enabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    /// What computes the vectors (admin, when enabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    engine: Option<String>,
    /// Vector dimensions (admin, when enabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<usize>,
    /// Passages with a vector, in every source (admin keys on every source, when enabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    embedded_chunks: Option<usize>,
    /// Documents without vectors are being embedded (admin, when enabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    reembedding: Option<bool>,
    /// Why it is off (admin, when disabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// `true` while the embedding model is being fetched at first start: search is keyword
    /// only until it is there, and documents made ready meanwhile are embedded then. Absent
    /// otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    preparing: bool,
}

/// The version and whether semantic search is on; no key needed (an admin key adds detail).
#[utoipa::path(get, path = "/api/health/version", tag = "health", security(()),
    responses((status = 200, description = "The version", body = VersionJson)))]
pub(super) async fn version(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Json<VersionJson> {
    // Only a key that is sent is looked up (and its use is not recorded); one that is not
    // accepted counts as none.
    let key = if headers.contains_key(axum::http::header::AUTHORIZATION) {
        find_key(&state, &headers).await.ok()
    } else {
        None
    };
    let report = health::report(&state, key.as_ref());
    Json(VersionJson {
        version: report.version,
        semantic_search: report.semantic.into(),
        ocr: report.ocr.map(OcrJson::from),
    })
}

impl From<SemanticHealth> for SemanticSearchJson {
    fn from(s: SemanticHealth) -> Self {
        Self {
            enabled: s.enabled,
            model: s.model,
            engine: s.engine,
            dimensions: s.dimensions,
            embedded_chunks: s.embedded_chunks,
            reembedding: s.reembedding,
            reason: s.reason,
            preparing: s.preparing,
        }
    }
}

impl From<OcrHealth> for OcrJson {
    fn from(o: OcrHealth) -> Self {
        Self {
            enabled: o.enabled,
            languages: o.languages,
            max_pages: o.max_pages,
            dpi: o.dpi,
            note: o.note,
            reason: o.reason,
        }
    }
}
