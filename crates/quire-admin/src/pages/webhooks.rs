//! Webhooks: the list and create form (the signing secret shown once), a webhook's delivery
//! log, and deletion with a confirmation step.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::{Markup, html};
use quire_app::records::WebhookRecord;
use quire_app::{Actor, AppError, webhooks};
use quire_core::{SourceScope, WebhookEvent, WebhookId};

use crate::AdminState;
use crate::error::AdminError;
use crate::html::{alert, back, csrf_field, page, table, time};
use crate::session::{Form, Signed, csrf_refused};

const NAV: &str = "/admin/webhooks";
/// How many delivery attempts a webhook's page shows.
const DELIVERIES_SHOWN: u32 = 100;

fn events_text(hook: &WebhookRecord) -> String {
    let events: Vec<&str> = hook.events.iter().map(|e| e.as_str()).collect();
    events.join(", ")
}

/// The register form, filled in again with what was wrong when `error` is given.
fn create_form(csrf: &str, error: Option<&str>, url: &str, chosen: &[WebhookEvent]) -> Markup {
    html! {
        h2 id="create" { "Register a webhook" }
        @if let Some(error) = error {
            (alert(error))
        }
        form method="post" action="/admin/webhooks" id="new-webhook" class="card" {
            (csrf_field(csrf))
            label for="webhook-url" { "URL" }
            input type="text" id="webhook-url" name="url" required inputmode="url" value=(url);
            fieldset {
                legend { "Events" }
                @for (i, event) in WebhookEvent::ALL.iter().enumerate() {
                    div {
                        input type="checkbox" id={ "event-" (i) } name="events" value=(event.as_str()) checked[chosen.contains(event)];
                        " "
                        label for={ "event-" (i) } { (event.as_str()) }
                    }
                }
            }
            button type="submit" id="create-webhook" { "Register webhook" }
        }
    }
}

async fn list_page(
    state: &AdminState,
    signed: &Signed,
    form: Markup,
) -> Result<Html<String>, AdminError> {
    let hooks = webhooks::list(&state.app, &SourceScope::All).await?;
    let rows = html! {
        @for hook in &hooks {
            tr data-webhook-id=(hook.id) {
                td { a class="webhook-link" href={ "/admin/webhooks/" (hook.id) } { (hook.url) } }
                td { (events_text(hook)) }
                td { (time(hook.created_at)) }
            }
        }
    };
    let body = html! {
        h1 { "Webhooks" }
        @if hooks.is_empty() {
            p class="muted" { "No webhook is registered." }
        } @else {
            (table(Some("webhooks"), None, &["URL", "Events", "Registered"], rows))
        }
        (form)
    };
    Ok(page(NAV, "Webhooks", &signed.csrf, body))
}

/// GET /admin/webhooks.
pub(crate) async fn list(
    State(state): State<AdminState>,
    signed: Signed,
) -> Result<Html<String>, AdminError> {
    let form = create_form(&signed.csrf, None, "", &[]);
    list_page(&state, &signed, form).await
}

/// The list page with the form filled in again and what was wrong.
async fn invalid(
    state: &AdminState,
    signed: &Signed,
    message: &str,
    url: &str,
    chosen: &[WebhookEvent],
) -> Result<Response, AdminError> {
    let form = create_form(&signed.csrf, Some(message), url, chosen);
    let page = list_page(state, signed, form).await?;
    Ok((StatusCode::BAD_REQUEST, page).into_response())
}

/// POST /admin/webhooks: registers a webhook and shows its secret once.
pub(crate) async fn create(
    State(state): State<AdminState>,
    signed: Signed,
    body: Bytes,
) -> Result<Response, AdminError> {
    let form = Form::parse(&body);
    if !signed.csrf_ok(&form) {
        return Ok(csrf_refused());
    }
    let raw_url = form.get("url").unwrap_or_default().trim().to_owned();
    let names: Vec<&str> = form.all("events").collect();
    let registered = match webhooks::parse_events(&names) {
        // The administrator signs in for the whole instance: every source.
        Ok(events) => {
            webhooks::register(
                &state.app,
                &Actor::Admin,
                SourceScope::All,
                &raw_url,
                events,
            )
            .await
        }
        Err(e) => Err(e),
    };
    let (hook, secret) = match registered {
        Ok(r) => (r.webhook, r.secret),
        Err(AppError::Invalid(message)) => {
            let chosen: Vec<WebhookEvent> = names.iter().filter_map(|n| n.parse().ok()).collect();
            return invalid(&state, &signed, &message, &raw_url, &chosen).await;
        }
        Err(e) => return Err(e.into()),
    };
    let body = html! {
        h1 { "Webhook registered" }
        p class="ok" role="status" {
            "The webhook for " strong { (hook.url) } " (" (events_text(&hook)) ") was registered. \
             Copy its signing secret now: it is shown only this once."
        }
        div class="card" {
            label for="secret" { "Signing secret" }
            input type="text" id="secret" class="secret" readonly value=(secret);
            button type="button" id="copy" hidden { "Copy to clipboard" }
            p id="copied" class="muted" role="status" aria-live="polite" {}
        }
        (back("/admin/webhooks", "Back to the webhooks"))
    };
    Ok((
        StatusCode::CREATED,
        page(NAV, "Webhook registered", &signed.csrf, body),
    )
        .into_response())
}

fn not_found(signed: &Signed) -> Response {
    (
        StatusCode::NOT_FOUND,
        page(
            NAV,
            "No such webhook",
            &signed.csrf,
            html! {
                h1 { "No such webhook" }
                (back("/admin/webhooks", "Back to the webhooks"))
            },
        ),
    )
        .into_response()
}

async fn webhook_of(state: &AdminState, id: &str) -> Result<Option<WebhookRecord>, AdminError> {
    let Ok(id) = id.parse::<WebhookId>() else {
        return Ok(None);
    };
    match webhooks::get(&state.app, &SourceScope::All, id).await {
        Ok(hook) => Ok(Some(hook)),
        Err(AppError::NotFound(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// GET /admin/webhooks/{id}: the delivery log and the delete form.
pub(crate) async fn show(
    State(state): State<AdminState>,
    signed: Signed,
    Path(id): Path<String>,
) -> Result<Response, AdminError> {
    let Some(hook) = webhook_of(&state, &id).await? else {
        return Ok(not_found(&signed));
    };
    let attempts = match webhooks::deliveries(
        &state.app,
        &SourceScope::All,
        hook.id,
        DELIVERIES_SHOWN,
    )
    .await
    {
        Ok(attempts) => attempts,
        // Deleted meanwhile.
        Err(AppError::NotFound(_)) => return Ok(not_found(&signed)),
        Err(e) => return Err(e.into()),
    };
    let caption = format!("The {DELIVERIES_SHOWN} most recent attempts");
    let rows = html! {
        @for attempt in &attempts {
            tr {
                td { (time(attempt.attempted_at)) }
                td { (attempt.event.as_str()) }
                td {
                    @match (attempt.status_code, &attempt.error) {
                        (_, Some(error)) => { (error) },
                        (Some(code), None) => { (code) },
                        (None, None) => "—",
                    }
                }
                td { (attempt.latency_ms) " ms" }
            }
        }
    };
    let headings = ["Time", "Event", "Status or error", "Latency"];
    let body = html! {
        h1 { "Webhook" }
        p {
            strong { (hook.url) } " · " (events_text(&hook)) " · registered " (time(hook.created_at))
        }
        h2 { "Deliveries" }
        @if attempts.is_empty() {
            p class="muted" { "Nothing has been delivered yet." }
        } @else {
            (table(Some("deliveries"), Some(&caption), &headings, rows))
        }
        h2 { "Delete" }
        form method="post" action={ "/admin/webhooks/" (hook.id) "/delete" } id="delete-webhook" class="card" {
            (csrf_field(&signed.csrf))
            div {
                input type="checkbox" id="confirm-delete" name="confirm" value="yes" required;
                " "
                label for="confirm-delete" { "Delete this webhook; nothing more is sent to it" }
            }
            button type="submit" class="danger" id="delete-button" { "Delete webhook" }
        }
        (back("/admin/webhooks", "Back to the webhooks"))
    };
    Ok(page(NAV, "Webhook", &signed.csrf, body).into_response())
}

/// POST /admin/webhooks/{id}/delete (the confirmation box must be ticked).
pub(crate) async fn delete(
    State(state): State<AdminState>,
    signed: Signed,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, AdminError> {
    let form = Form::parse(&body);
    if !signed.csrf_ok(&form) {
        return Ok(csrf_refused());
    }
    let Some(hook) = webhook_of(&state, &id).await? else {
        return Ok(not_found(&signed));
    };
    if form.get("confirm") != Some("yes") {
        return Ok(Redirect::to(&format!("/admin/webhooks/{}", hook.id)).into_response());
    }
    match webhooks::delete(&state.app, &Actor::Admin, hook.id).await {
        // Not found: deleted by someone else meanwhile; it is gone either way.
        Ok(()) | Err(AppError::NotFound(_)) => Ok(Redirect::to("/admin/webhooks").into_response()),
        Err(e) => Err(e.into()),
    }
}
