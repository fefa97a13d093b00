//! `GET /api/health/version`: unauthenticated, for monitoring.

use axum::Json;
use serde_json::{Value, json};

pub(super) async fn version() -> Json<Value> {
    Json(json!({ "version": env!("CARGO_PKG_VERSION") }))
}
