//! Server-rendered HTML with maud: the shared layout, navigation, CSRF field, tables and time
//! format. maud escapes every value spliced into text or an attribute, so no page escapes by
//! hand and none can forget to; markup that is not escaped would have to be wrapped in
//! `PreEscaped`, which the pages never use.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};

/// A time as the pages show it.
pub(crate) fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// An optional time, or a dash.
pub(crate) fn opt_time(t: Option<DateTime<Utc>>) -> String {
    t.map(time).unwrap_or_else(|| "—".into())
}

/// The hidden field every form of a session carries (and the sign-in form its double-submit
/// token).
pub(crate) fn csrf_field(csrf: &str) -> Markup {
    html! { input type="hidden" name="csrf" value=(csrf); }
}

/// What was wrong with a form, announced to screen readers.
pub(crate) fn alert(message: &str) -> Markup {
    html! { p class="error" role="alert" { (message) } }
}

/// A link back to a list, alone in its paragraph.
pub(crate) fn back(href: &str, text: &str) -> Markup {
    html! { p { a href=(href) { (text) } } }
}

/// A data table that scrolls on its own on narrow screens: column headings, then `rows`
/// (`<tr>` elements), with an `id` for tests and scripts and a caption when given.
pub(crate) fn table(
    id: Option<&str>,
    caption: Option<&str>,
    headings: &[&str],
    rows: Markup,
) -> Markup {
    html! {
        div class="table" {
            table id=[id] {
                @if let Some(caption) = caption {
                    caption class="muted" { (caption) }
                }
                (headings_row(headings))
                tbody { (rows) }
            }
        }
    }
}

/// The `<thead>` of a table with these column headings.
pub(crate) fn headings_row(headings: &[&str]) -> Markup {
    html! {
        thead { tr { @for heading in headings { th scope="col" { (heading) } } } }
    }
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

/// The whole document around `header` and `body`. Style and script come from the admin's own
/// files only: the Content-Security-Policy allows nothing inline.
fn document(title: &str, header: Markup, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Quire admin" }
                link rel="stylesheet" href="/admin/assets/admin.css";
                script src="/admin/assets/admin.js" defer {}
            }
            body {
                (header)
                main id="main" { (body) }
            }
        }
    }
    .into_string()
}

/// A page of a signed-in session: the navigation (with `current` marked), a sign-out form and
/// `body`.
pub(crate) fn page(current: &str, title: &str, csrf: &str, body: Markup) -> Html<String> {
    let header = html! {
        header {
            div class="bar" {
                span class="brand" { "Quire admin" }
                nav aria-label="Main" {
                    ul {
                        @for (path, label) in NAV {
                            li { a href=(path) aria-current=[(*path == current).then_some("page")] { (label) } }
                        }
                        li {
                            form method="post" action="/admin/logout" {
                                (csrf_field(csrf))
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                }
            }
        }
    };
    Html(document(title, header, body))
}

/// A page without navigation (sign-in, errors before a session exists) with its status.
pub(crate) fn bare_page(status: StatusCode, title: &str, body: Markup) -> Response {
    let header = html! {
        header { div class="bar" { span class="brand" { "Quire admin" } } }
    };
    let body = html! {
        div class="login card" {
            h1 { (title) }
            (body)
        }
    };
    (status, Html(document(title, header, body))).into_response()
}
