//! The admin area's 404.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::html::page;
use crate::session::Signed;

/// Any other path under /admin (signed in).
pub(crate) async fn not_found(signed: Signed) -> Response {
    (
        StatusCode::NOT_FOUND,
        page(
            "",
            "Not found",
            &signed.csrf,
            r#"<h1>Not found</h1><p>There is no such page. <a href="/admin">Back to the dashboard</a></p>"#,
        ),
    )
        .into_response()
}
