//! The admin area's 404.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

use crate::html::page;
use crate::session::Signed;

/// Any other path under /admin (signed in).
pub(crate) async fn not_found(signed: Signed) -> Response {
    let body = html! {
        h1 { "Not found" }
        p { "There is no such page. " a href="/admin" { "Back to the dashboard" } }
    };
    (
        StatusCode::NOT_FOUND,
        page("", "Not found", &signed.csrf, body),
    )
        .into_response()
}
