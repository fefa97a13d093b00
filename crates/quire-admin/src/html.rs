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

const STYLE: &str = r#"
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1a1a1a;background:#f6f7f9}
header{background:#1f2937;color:#fff}
header .bar{max-width:72rem;margin:0 auto;padding:.5rem 1rem;display:flex;flex-wrap:wrap;align-items:center;gap:.25rem 1rem}
header .brand{font-weight:700;margin-right:1rem}
nav ul{list-style:none;margin:0;padding:0;display:flex;flex-wrap:wrap;gap:.25rem}
nav a,nav button{display:inline-block;color:#fff;text-decoration:none;padding:.4rem .6rem;border-radius:.3rem;background:none;border:0;font:inherit;cursor:pointer}
nav a[aria-current=page]{background:#374151;text-decoration:underline}
nav a:hover,nav button:hover{background:#4b5563}
main{max-width:72rem;margin:0 auto;padding:1rem}
h1{font-size:1.6rem;margin:.5rem 0 1rem}
h2{font-size:1.2rem;margin:1.5rem 0 .5rem}
a{color:#1d4ed8}
:focus-visible{outline:3px solid #f59e0b;outline-offset:2px}
.card{background:#fff;border:1px solid #d1d5db;border-radius:.5rem;padding:1rem;margin-bottom:1rem}
.stats{display:grid;grid-template-columns:repeat(auto-fit,minmax(10rem,1fr));gap:1rem;margin:0;padding:0;list-style:none}
.stats li{background:#fff;border:1px solid #d1d5db;border-radius:.5rem;padding:.75rem}
.stats .n{display:block;font-size:1.8rem;font-weight:700}
.table{overflow-x:auto}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{text-align:left;padding:.45rem .6rem;border-bottom:1px solid #e5e7eb;vertical-align:top}
th{background:#f3f4f6}
label{display:block;font-weight:600;margin:.75rem 0 .25rem}
fieldset{border:1px solid #d1d5db;border-radius:.4rem;margin:.75rem 0;padding:.5rem .75rem}
fieldset label{display:inline;font-weight:400;margin:0}
legend{font-weight:600}
input[type=text],input[type=password],input[type=number],select{width:100%;max-width:28rem;padding:.45rem;border:1px solid #6b7280;border-radius:.3rem;font:inherit}
button,.button{display:inline-block;margin-top:1rem;padding:.5rem 1rem;border:0;border-radius:.3rem;background:#1d4ed8;color:#fff;font:inherit;cursor:pointer;text-decoration:none}
button.danger{background:#b91c1c}
.small button{margin-top:0;padding:.25rem .6rem}
nav button{margin-top:0}
#secret{max-width:none;font-family:ui-monospace,SFMono-Regular,Menlo,monospace}
input[type=checkbox]+label,label:has(+input[type=checkbox]){display:inline;margin-left:.4rem}
.error{background:#fef2f2;border:1px solid #b91c1c;color:#7f1d1d;padding:.6rem .8rem;border-radius:.3rem}
.ok{background:#f0fdf4;border:1px solid #15803d;color:#14532d;padding:.6rem .8rem;border-radius:.3rem}
.secret{font-family:ui-monospace,monospace;width:100%;max-width:40rem;padding:.5rem;border:1px solid #6b7280;border-radius:.3rem}
.muted{color:#4b5563}
code{font-family:ui-monospace,monospace}
.login{max-width:24rem;margin:4rem auto}
mark{background:#fde68a;color:#1a1a1a}
.page-text{white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:.9rem}
.status-failed{color:#991b1b}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
"#;

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
<style>{STYLE}</style>
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
