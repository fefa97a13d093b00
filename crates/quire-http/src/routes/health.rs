//! `GET /api/health/version`: unauthenticated, for monitoring. Besides the spec's `version`
//! it says whether semantic search is on, so an operator sees at a glance that a model is
//! missing or still embedding old documents.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::AppState;

pub(super) async fn version(State(state): State<AppState>) -> Json<Value> {
    let semantic = match state.ingest.semantic() {
        Some(semantic) => json!({
            "enabled": true,
            "model": semantic.embedder().model_id(),
            "engine": semantic.embedder().engine(),
            "dimensions": semantic.embedder().dimensions(),
            "embeddedChunks": semantic.vectors().len(),
            "reembedding": semantic.backfill_running(),
        }),
        None => json!({
            "enabled": false,
            "reason": &*state.semantic_note,
        }),
    };
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "semanticSearch": semantic,
    }))
}
