//! The dashboard: what the service holds and what went wrong lately.

use axum::extract::State;
use axum::response::Html;
use maud::html;
use quire_app::health::{self, Overview};
use quire_core::DocumentStatus;

use crate::html::{page, table, time};
use crate::session::Signed;
use crate::{AdminError, AdminState};

/// How many failed documents the dashboard lists.
const RECENT_FAILURES: u32 = 10;

const STATUSES: [(DocumentStatus, &str); 5] = [
    (DocumentStatus::Ready, "Ready"),
    (DocumentStatus::Queued, "Queued"),
    (DocumentStatus::Processing, "Processing"),
    (DocumentStatus::PendingReview, "Pending review"),
    (DocumentStatus::Failed, "Failed"),
];

/// GET /admin.
pub(crate) async fn show(
    State(state): State<AdminState>,
    signed: Signed,
) -> Result<Html<String>, AdminError> {
    let Overview {
        sources,
        pending_jobs: jobs,
        documents: counts,
        recent_failures: failures,
    } = health::overview(&state.app, RECENT_FAILURES).await?;

    let count = |status: DocumentStatus| {
        counts
            .iter()
            .find(|(s, _)| *s == status)
            .map_or(0, |(_, n)| *n)
    };
    let caption = format!("The {RECENT_FAILURES} most recent");
    let rows = html! {
        @for doc in &failures {
            tr {
                td { (doc.name) }
                td { code { (doc.source_id) } }
                td { (doc.error.as_deref().unwrap_or("")) }
                td { (time(doc.updated_at)) }
            }
        }
    };
    let body = html! {
        h1 { "Dashboard" }
        ul class="stats" aria-label="Counts" {
            li { span class="n" { (sources) } "Sources" }
            li { span class="n" { (jobs) } "Pending jobs" }
            @for (status, label) in STATUSES {
                li { span class="n" { (count(status)) } "Documents " (label.to_lowercase()) }
            }
        }
        h2 { "Recent failures" }
        @if failures.is_empty() {
            p class="muted" { "No document has failed." }
        } @else {
            (table(None, Some(&caption), &["Document", "Source", "Error", "Failed at"], rows))
        }
    };
    Ok(page("/admin", "Dashboard", &signed.csrf, body))
}
