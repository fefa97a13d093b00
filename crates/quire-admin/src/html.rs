//! Server-rendered HTML with maud: the shared layout, navigation, CSRF field, tables and time
//! format. maud escapes every value spliced into text or an attribute, so no page escapes by
//! hand and none can forget to; markup that is not escaped would have to be wrapped in
//! `PreEscaped`, which no code of the admin does (a test reads the sources to keep it so).

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
        // maud's own constant: the one piece of markup it does not escape, and a fixed one.
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every `.rs` file under `dir`, with its text.
    fn sources(dir: &Path, found: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                found.push((path.display().to_string(), text));
            }
        }
    }

    /// maud's escaping can be bypassed only by wrapping markup in its unescaped type; no code of
    /// the admin does (comments may name it). A page that truly needs constant markup must say
    /// why here.
    #[test]
    fn no_code_bypasses_escaping() {
        let unescaped = ["Pre", "Escaped"].concat();
        let mut found = Vec::new();
        sources(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut found,
        );
        assert!(found.len() > 10, "the sources were not found");
        for (path, text) in &found {
            for line in text.lines() {
                let code = line.trim_start();
                assert!(
                    code.starts_with("//") || !code.contains(&unescaped),
                    "{path}: {line}"
                );
            }
        }
    }
}
