//! Server-rendered HTML: one escaping helper, the shared layout and its embedded stylesheet.
//! Every value that comes from data goes through [`esc`]; the rest is literal markup.

use std::fmt::Write as _;

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, Utc};

/// Escapes text for use in element content and in double-quoted attribute values.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A time as the pages show it.
pub(crate) fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// An optional time, or a dash.
pub(crate) fn opt_time(t: Option<DateTime<Utc>>) -> String {
    t.map(time).unwrap_or_else(|| "—".into())
}

/// The hidden field every form of a session carries.
pub(crate) fn csrf_field(csrf: &str) -> String {
    format!(r#"<input type="hidden" name="csrf" value="{}">"#, esc(csrf))
}

/// The navigation entries: (path, label).
const NAV: &[(&str, &str)] = &[
    ("/admin", "Dashboard"),
    ("/admin/sources", "Sources"),
    ("/admin/keys", "API keys"),
    ("/admin/review", "Review"),
    ("/admin/webhooks", "Webhooks"),
    ("/admin/playground", "Playground"),
    ("/admin/audit", "Audit log"),
];

fn document(title: &str, header: &str, body: &str) -> String {
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · Quire admin</title>
<link rel="stylesheet" href="/admin/assets/admin.css">
<script src="/admin/assets/admin.js" defer></script>
</head>
<body>
{header}
<main id="main">
{body}
</main>
</body>
</html>
"#,
        title = esc(title),
    )
}

/// A page of a signed-in session: the navigation (with `current` marked), a sign-out form and
/// `body` (already HTML).
pub(crate) fn page(current: &str, title: &str, csrf: &str, body: &str) -> Html<String> {
    let mut nav = String::new();
    for (path, label) in NAV {
        let aria = if *path == current {
            r#" aria-current="page""#
        } else {
            ""
        };
        let _ = write!(nav, r#"<li><a href="{path}"{aria}>{label}</a></li>"#);
    }
    let header = format!(
        r#"<header><div class="bar"><span class="brand">Quire admin</span>
<nav aria-label="Main"><ul>{nav}<li><form method="post" action="/admin/logout">{csrf}<button type="submit">Sign out</button></form></li></ul></nav>
</div></header>"#,
        csrf = csrf_field(csrf),
    );
    Html(document(title, &header, body))
}

/// A page without navigation (sign-in, errors before a session exists) with its status.
pub(crate) fn bare_page(status: StatusCode, title: &str, body: &str) -> Response {
    let header =
        r#"<header><div class="bar"><span class="brand">Quire admin</span></div></header>"#;
    let body = format!(
        r#"<div class="login card"><h1>{}</h1>{body}</div>"#,
        esc(title)
    );
    (status, Html(document(title, header, &body))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(esc("plain"), "plain");
    }
}
