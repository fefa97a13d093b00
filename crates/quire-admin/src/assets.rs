//! The admin interface's stylesheet and script, served as files of their own so the
//! Content-Security-Policy can forbid inline style and script (`'self'` only): markup that got
//! past escaping cannot run, and cannot restyle the page to mislead the administrator.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The stylesheet every page links.
const STYLESHEET: &str = include_str!("../assets/admin.css");
/// The one script every page loads (deferred): copy buttons and status polling.
const SCRIPT: &str = include_str!("../assets/admin.js");

/// GET /admin/assets/{name}: the stylesheet or the script, to anyone (they hold no data); any
/// other name is 404.
pub(crate) async fn serve(Path(name): Path<String>) -> Response {
    let (content_type, body) = match name.as_str() {
        "admin.css" => ("text/css; charset=utf-8", STYLESHEET),
        "admin.js" => ("text/javascript; charset=utf-8", SCRIPT),
        _ => return (StatusCode::NOT_FOUND, "no such file").into_response(),
    };
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}
