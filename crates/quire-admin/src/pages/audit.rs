//! The audit log page.

use axum::extract::State;
use axum::response::Html;
use maud::html;
use quire_app::audit;

use crate::html::{page, table, time};
use crate::session::Signed;
use crate::{AdminError, AdminState};

/// How many entries the page shows.
const SHOWN: u32 = 200;

/// GET /admin/audit.
pub(crate) async fn show(
    State(state): State<AdminState>,
    signed: Signed,
) -> Result<Html<String>, AdminError> {
    let entries = audit::recent(&state.app, SHOWN).await?;
    let caption = format!("The {SHOWN} most recent entries, newest first");
    let rows = html! {
        @for entry in &entries {
            tr {
                td { (time(entry.at)) }
                td { (entry.actor) }
                td { code { (entry.action) } }
                td { (entry.detail) }
            }
        }
    };
    let body = html! {
        h1 { "Audit log" }
        @if entries.is_empty() {
            p class="muted" { "Nothing recorded yet." }
        } @else {
            (table(None, Some(&caption), &["When", "Who", "Action", "Details"], rows))
        }
    };
    Ok(page("/admin/audit", "Audit log", &signed.csrf, body))
}
