//! The audit log page.

use std::fmt::Write as _;

use axum::extract::State;
use axum::response::Html;

use crate::html::{esc, page, time};
use crate::session::Signed;
use crate::{AdminError, AdminState};

/// How many entries the page shows.
const SHOWN: u32 = 200;

/// GET /admin/audit.
pub(crate) async fn show(
    State(state): State<AdminState>,
    signed: Signed,
) -> Result<Html<String>, AdminError> {
    let entries = state.app.store.audit_log(SHOWN).await?;
    let body = if entries.is_empty() {
        r#"<h1>Audit log</h1><p class="muted">Nothing recorded yet.</p>"#.to_owned()
    } else {
        let mut rows = String::new();
        for entry in &entries {
            let _ = write!(
                rows,
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                time(entry.at),
                esc(&entry.action),
                esc(&entry.detail)
            );
        }
        format!(
            r#"<h1>Audit log</h1>
<div class="table"><table><caption class="muted">The {SHOWN} most recent entries, newest first</caption>
<thead><tr><th scope="col">When</th><th scope="col">Action</th><th scope="col">Details</th></tr></thead>
<tbody>{rows}</tbody></table></div>"#
        )
    };
    Ok(page("/admin/audit", "Audit log", &signed.csrf, &body))
}
