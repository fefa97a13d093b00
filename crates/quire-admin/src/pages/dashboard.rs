//! The dashboard: what the service holds and what went wrong lately.

use std::fmt::Write as _;

use axum::extract::State;
use axum::response::Html;
use quire_core::{DocumentStatus, SourceScope};

use crate::html::{esc, page, time};
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
    let store = &state.app.store;
    let sources = store.list_sources(&SourceScope::All).await?.len();
    let counts = store.document_status_counts().await?;
    let jobs = store.pending_job_count().await?;
    let failures = store.recent_failures(RECENT_FAILURES).await?;

    let mut stats = format!(
        r#"<li><span class="n">{sources}</span>Sources</li><li><span class="n">{jobs}</span>Pending jobs</li>"#
    );
    for (status, label) in STATUSES {
        let n = counts
            .iter()
            .find(|(s, _)| *s == status)
            .map_or(0, |(_, n)| *n);
        let _ = write!(
            stats,
            r#"<li><span class="n">{n}</span>Documents {}</li>"#,
            label.to_lowercase()
        );
    }
    let failures_html = if failures.is_empty() {
        r#"<p class="muted">No document has failed.</p>"#.to_owned()
    } else {
        let mut rows = String::new();
        for doc in &failures {
            let _ = write!(
                rows,
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                esc(&doc.name),
                doc.source_id,
                esc(doc.error.as_deref().unwrap_or("")),
                time(doc.updated_at)
            );
        }
        format!(
            r#"<div class="table"><table><caption class="muted">The {RECENT_FAILURES} most recent</caption>
<thead><tr><th scope="col">Document</th><th scope="col">Source</th><th scope="col">Error</th><th scope="col">Failed at</th></tr></thead>
<tbody>{rows}</tbody></table></div>"#
        )
    };
    let body = format!(
        r#"<h1>Dashboard</h1>
<ul class="stats" aria-label="Counts">{stats}</ul>
<h2>Recent failures</h2>
{failures_html}"#
    );
    Ok(page("/admin", "Dashboard", &signed.csrf, &body))
}
