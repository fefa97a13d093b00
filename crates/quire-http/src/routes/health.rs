//! `GET /api/health/version`: unauthenticated, for monitoring. Besides the spec's `version` it
//! says whether semantic search is on. The details (model, engine, chunk counts, why semantic
//! search is off: text that can name internal hosts and paths) are for admin keys only, and
//! so is whether OCR is on (with the Tesseract version, or why it is off).

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use quire_core::Permission;
use serde_json::{Value, json};

use crate::AppState;
use crate::auth::find_key;

pub(super) async fn version(State(state): State<AppState>, headers: HeaderMap) -> Json<Value> {
    let admin = headers.contains_key(axum::http::header::AUTHORIZATION)
        && find_key(&state, &headers)
            .await
            .is_ok_and(|key| key.permission == Permission::Admin);
    let semantic = match (state.ingest.semantic(), admin) {
        (Some(_), false) => json!({ "enabled": true }),
        (None, false) => json!({ "enabled": false }),
        (Some(semantic), true) => json!({
            "enabled": true,
            "model": semantic.embedder().model_id(),
            "engine": semantic.embedder().engine(),
            "dimensions": semantic.embedder().dimensions(),
            "embeddedChunks": semantic.vectors().len(),
            "reembedding": semantic.backfill_running(),
        }),
        (None, true) => json!({
            "enabled": false,
            "reason": &*state.semantic_note,
        }),
    };
    let mut body = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "semanticSearch": semantic,
    });
    if admin {
        body["ocr"] = match state.ingest.ocr() {
            Some(ocr) => json!({
                "enabled": true,
                "languages": ocr.languages,
                "maxPages": ocr.max_pages,
                "dpi": ocr.dpi,
                "note": state.ingest.ocr_note(),
            }),
            None => json!({ "enabled": false, "reason": state.ingest.ocr_note() }),
        };
    }
    Json(body)
}
