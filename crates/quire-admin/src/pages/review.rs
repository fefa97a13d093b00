//! The personal-data review queue: held documents, their findings with the found text marked,
//! and the decision (approve, redact, or reject with a confirmation box).

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::{Markup, html};
use quire_app::records::{ReviewDecision, ReviewRecord};
use quire_app::{Actor, AppError, reviews};
use quire_core::{DocumentId, SourceScope};
use serde_json::Value;

use crate::html::{alert, back, csrf_field, page, table, time};
use crate::session::{Form, Signed, csrf_refused};
use crate::{AdminError, AdminState};

const NAV: &str = "/admin/review";

/// The flash message after a decision, chosen by a fixed code (never text from the URL).
fn flash(done: Option<&str>) -> &'static str {
    match done {
        Some("approved") => "The document was approved and goes back to processing.",
        Some("redacted") => "The document will be processed again with the personal data redacted.",
        Some("rejected") => "The document was rejected and deleted.",
        Some("gone") => "That document is no longer waiting for review.",
        _ => "",
    }
}

/// `?done=` after a decision.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct Done {
    done: Option<String>,
}

/// GET /admin/review.
pub(crate) async fn list(
    State(state): State<AdminState>,
    signed: Signed,
    Query(query): Query<Done>,
) -> Result<Html<String>, AdminError> {
    let waiting = reviews::pending(&state.app, &SourceScope::All).await?;
    let rows = html! {
        @for review in &waiting {
            tr {
                td {
                    a class="review-link" href={ "/admin/review/" (review.document.id) } { (review.document.name) }
                }
                td { (review.pii_types.join(", ")) }
                td { (time(review.held_at)) }
            }
        }
    };
    let message = flash(query.done.as_deref());
    let body = html! {
        h1 { "Review" }
        @if !message.is_empty() {
            p class="ok" role="status" id="flash" { (message) }
        }
        p {
            "Documents held because personal data was found in them. Open one to approve it as it \
             is, redact the personal data, or reject (delete) it."
        }
        @if waiting.is_empty() {
            p class="muted" { "No document is waiting for review." }
        } @else {
            (table(None, None, &["Document", "Personal data found", "Held at"], rows))
        }
    };
    Ok(page(NAV, "Review", &signed.csrf, body))
}

/// `context` with every occurrence of `found` wrapped in `<mark>`, all of it escaped.
fn marked(context: &str, found: &str) -> Markup {
    html! {
        @if found.is_empty() {
            (context)
        } @else {
            @for (i, part) in context.split(found).enumerate() {
                @if i > 0 {
                    mark { (found) }
                }
                (part)
            }
        }
    }
}

fn findings_table(review: &ReviewRecord) -> Markup {
    let findings: Value = serde_json::from_str(&review.findings).unwrap_or(Value::Null);
    let Some(findings) = findings.as_array().filter(|f| !f.is_empty()) else {
        return html! { p class="muted" { "No finding was recorded." } };
    };
    let rows = html! {
        @for finding in findings {
            @let text = finding["text"].as_str().unwrap_or("");
            tr class="finding" {
                td { (finding["type"].as_str().unwrap_or("")) }
                td { (finding_page(finding)) }
                td { (marked(finding["context"].as_str().unwrap_or(text), text)) }
            }
        }
    };
    table(Some("findings"), None, &["Type", "Page", "Context"], rows)
}

/// Where a finding is: findings in the document's name have no page; those in a section path
/// say so.
fn finding_page(finding: &Value) -> String {
    match (finding["in"].as_str(), finding["page"].as_u64()) {
        (Some("name"), _) => "name".to_owned(),
        (Some("section"), Some(p)) => format!("{p} (heading)"),
        (_, Some(p)) => p.to_string(),
        (_, None) => "—".to_owned(),
    }
}

async fn waiting(state: &AdminState, id: &str) -> Result<Option<ReviewRecord>, AdminError> {
    let Ok(id) = id.parse::<DocumentId>() else {
        return Ok(None);
    };
    match reviews::get(&state.app, &SourceScope::All, id).await {
        Ok(review) => Ok(Some(review).filter(|r| r.decision.is_none())),
        Err(AppError::NotFound(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// GET /admin/review/{docId}: the findings and the decision form.
pub(crate) async fn show(
    State(state): State<AdminState>,
    signed: Signed,
    Path(id): Path<String>,
) -> Result<Response, AdminError> {
    let Some(review) = waiting(&state, &id).await? else {
        return Ok(Redirect::to("/admin/review?done=gone").into_response());
    };
    let body = html! {
        h1 { "Review: " (review.document.name) }
        p { "Held " (time(review.held_at)) " because of: " (review.pii_types.join(", ")) "." }
        h2 { "Findings" }
        (findings_table(&review))
        h2 { "Decision" }
        form method="post" action={ "/admin/review/" (review.document.id) } id="decide" class="card" {
            (csrf_field(&signed.csrf))
            p {
                "Approve keeps the text as it is; redact replaces the personal data before the \
                 document becomes searchable; reject deletes the document and its file."
            }
            div {
                input type="checkbox" id="confirm-reject" name="confirm_reject" value="yes";
                " "
                label for="confirm-reject" {
                    "I want to reject and delete this document (needed for Reject)"
                }
            }
            // The spaces keep the buttons apart: they are inline and have no side margins.
            button type="submit" name="decision" value="approve" { "Approve" }
            " "
            button type="submit" name="decision" value="redact" { "Redact" }
            " "
            button type="submit" name="decision" value="reject" class="danger" { "Reject" }
        }
        (back("/admin/review", "Back to the review queue"))
    };
    Ok(page(NAV, "Review", &signed.csrf, body).into_response())
}

/// POST /admin/review/{docId}: applies the decision.
pub(crate) async fn decide(
    State(state): State<AdminState>,
    signed: Signed,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, AdminError> {
    let form = Form::parse(&body);
    if !signed.csrf_ok(&form) {
        return Ok(csrf_refused());
    }
    let Some(review) = waiting(&state, &id).await? else {
        return Ok(Redirect::to("/admin/review?done=gone").into_response());
    };
    let doc = &review.document;
    let decision = match form.get("decision") {
        Some("approve") => ReviewDecision::Approve,
        Some("redact") => ReviewDecision::Redact,
        Some("reject") if form.get("confirm_reject") == Some("yes") => {
            match reviews::reject(&state.app, &Actor::Admin, doc.id).await {
                Ok(_) => {}
                // Decided or deleted by someone else meanwhile.
                Err(AppError::NotFound(_)) => {
                    return Ok(Redirect::to("/admin/review?done=gone").into_response());
                }
                Err(e) => return Err(e.into()),
            }
            return Ok(Redirect::to("/admin/review?done=rejected").into_response());
        }
        _ => {
            let message = if form.get("decision") == Some("reject") {
                "Tick the confirmation box to reject the document."
            } else {
                "Choose approve, redact or reject."
            };
            return Ok((
                StatusCode::BAD_REQUEST,
                page(
                    NAV,
                    "Not decided",
                    &signed.csrf,
                    html! {
                        h1 { "Not decided" }
                        (alert(message))
                        p { a href={ "/admin/review/" (doc.id) } { "Back to the document" } }
                    },
                ),
            )
                .into_response());
        }
    };
    match reviews::decide(&state.app, &Actor::Admin, doc.id, decision).await {
        Ok(_) => {}
        Err(AppError::NotFound(_) | AppError::Conflict(_)) => {
            return Ok(Redirect::to("/admin/review?done=gone").into_response());
        }
        Err(e) => return Err(e.into()),
    }
    let done = match decision {
        ReviewDecision::Approve => "approved",
        ReviewDecision::Redact => "redacted",
    };
    Ok(Redirect::to(&format!("/admin/review?done={done}")).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_every_occurrence_and_escapes_the_rest() {
        assert_eq!(
            marked("<b>a@x.org</b> or a@x.org", "a@x.org").into_string(),
            "&lt;b&gt;<mark>a@x.org</mark>&lt;/b&gt; or <mark>a@x.org</mark>"
        );
        assert_eq!(marked("plain", "").into_string(), "plain");
    }
}
