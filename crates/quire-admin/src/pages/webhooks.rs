//! Webhooks: the list and create form (the signing secret shown once), a webhook's delivery
//! log, and deletion with a confirmation step.

use std::fmt::Write as _;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use quire_app::AppError;
use quire_core::{SourceScope, WebhookEvent, WebhookId};
use quire_store::WebhookRecord;

use super::audit;
use crate::AdminState;
use crate::error::AdminError;
use crate::html::legacy::{csrf_field, esc, page};
use crate::html::time;
use crate::session::{Form, Signed, csrf_refused};

const NAV: &str = "/admin/webhooks";
/// How many delivery attempts a webhook's page shows.
const DELIVERIES_SHOWN: u32 = 100;

fn events_text(hook: &WebhookRecord) -> String {
    let events: Vec<&str> = hook.events.iter().map(|e| e.as_str()).collect();
    esc(&events.join(", "))
}

fn create_form(csrf: &str, error: Option<&str>, url: &str, chosen: &[WebhookEvent]) -> String {
    let error = error
        .map(|e| format!(r#"<p class="error" role="alert">{}</p>"#, esc(e)))
        .unwrap_or_default();
    let mut boxes = String::new();
    for (i, event) in WebhookEvent::ALL.iter().enumerate() {
        let checked = if chosen.contains(event) {
            " checked"
        } else {
            ""
        };
        let _ = write!(
            boxes,
            r#"<div><input type="checkbox" id="event-{i}" name="events" value="{e}"{checked}> <label for="event-{i}">{e}</label></div>"#,
            e = event.as_str()
        );
    }
    format!(
        r#"<h2 id="create">Register a webhook</h2>
{error}
<form method="post" action="/admin/webhooks" id="new-webhook" class="card">
{csrf}
<label for="webhook-url">URL</label>
<input type="text" id="webhook-url" name="url" required inputmode="url" value="{url}">
<fieldset><legend>Events</legend>{boxes}</fieldset>
<button type="submit" id="create-webhook">Register webhook</button>
</form>"#,
        csrf = csrf_field(csrf),
        url = esc(url),
    )
}

async fn list_page(
    state: &AdminState,
    signed: &Signed,
    form: String,
) -> Result<Html<String>, AdminError> {
    let hooks = state.app.store.list_webhooks().await?;
    let list = if hooks.is_empty() {
        r#"<p class="muted">No webhook is registered.</p>"#.to_owned()
    } else {
        let mut rows = String::new();
        for hook in &hooks {
            let _ = write!(
                rows,
                r#"<tr data-webhook-id="{id}"><td><a class="webhook-link" href="/admin/webhooks/{id}">{url}</a></td><td>{events}</td><td>{created}</td></tr>"#,
                id = hook.id,
                url = esc(&hook.url),
                events = events_text(hook),
                created = time(hook.created_at)
            );
        }
        format!(
            r#"<div class="table"><table id="webhooks">
<thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">Registered</th></tr></thead>
<tbody>{rows}</tbody></table></div>"#
        )
    };
    let body = format!("<h1>Webhooks</h1>\n{list}\n{form}");
    Ok(page(NAV, "Webhooks", &signed.csrf, &body))
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
    let registered = match quire_app::webhooks::parse_events(&names) {
        // The administrator signs in for the whole instance: every source.
        Ok(events) => {
            quire_app::webhooks::register(&state.app, SourceScope::All, &raw_url, events).await
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
    audit(
        &state,
        "webhook.created",
        format!("{} ({})", hook.url, hook.id),
    )
    .await?;
    let body = format!(
        r#"<h1>Webhook registered</h1>
<p class="ok" role="status">The webhook for <strong>{url}</strong> ({events}) was registered. Copy its signing secret now: it is shown only this once.</p>
<div class="card">
<label for="secret">Signing secret</label>
<input type="text" id="secret" class="secret" readonly value="{secret}">
<button type="button" id="copy" hidden>Copy to clipboard</button>
<p id="copied" class="muted" role="status" aria-live="polite"></p>
</div>
<p><a href="/admin/webhooks">Back to the webhooks</a></p>"#,
        url = esc(&hook.url),
        events = events_text(&hook),
        secret = esc(&secret),
    );
    Ok((
        StatusCode::CREATED,
        page(NAV, "Webhook registered", &signed.csrf, &body),
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
            r#"<h1>No such webhook</h1><p><a href="/admin/webhooks">Back to the webhooks</a></p>"#,
        ),
    )
        .into_response()
}

async fn webhook_of(state: &AdminState, id: &str) -> Result<Option<WebhookRecord>, AdminError> {
    let Ok(id) = id.parse::<WebhookId>() else {
        return Ok(None);
    };
    Ok(state.app.store.get_webhook(id).await?)
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
    let attempts = state
        .app
        .store
        .deliveries(hook.id, DELIVERIES_SHOWN)
        .await?;
    let log = if attempts.is_empty() {
        r#"<p class="muted">Nothing has been delivered yet.</p>"#.to_owned()
    } else {
        let mut rows = String::new();
        for attempt in &attempts {
            let outcome = match (attempt.status_code, &attempt.error) {
                (_, Some(error)) => esc(error),
                (Some(code), None) => code.to_string(),
                (None, None) => "—".to_owned(),
            };
            let _ = write!(
                rows,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} ms</td></tr>",
                time(attempt.attempted_at),
                attempt.event.as_str(),
                outcome,
                attempt.latency_ms
            );
        }
        format!(
            r#"<div class="table"><table id="deliveries"><caption class="muted">The {DELIVERIES_SHOWN} most recent attempts</caption>
<thead><tr><th scope="col">Time</th><th scope="col">Event</th><th scope="col">Status or error</th><th scope="col">Latency</th></tr></thead>
<tbody>{rows}</tbody></table></div>"#
        )
    };
    let body = format!(
        r#"<h1>Webhook</h1>
<p><strong>{url}</strong> · {events} · registered {created}</p>
<h2>Deliveries</h2>
{log}
<h2>Delete</h2>
<form method="post" action="/admin/webhooks/{id}/delete" id="delete-webhook" class="card">
{csrf}
<div><input type="checkbox" id="confirm-delete" name="confirm" value="yes" required> <label for="confirm-delete">Delete this webhook; nothing more is sent to it</label></div>
<button type="submit" class="danger" id="delete-button">Delete webhook</button>
</form>
<p><a href="/admin/webhooks">Back to the webhooks</a></p>"#,
        url = esc(&hook.url),
        events = events_text(&hook),
        created = time(hook.created_at),
        id = hook.id,
        csrf = csrf_field(&signed.csrf),
    );
    Ok(page(NAV, "Webhook", &signed.csrf, &body).into_response())
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
    if state.app.store.delete_webhook(hook.id).await? {
        audit(
            &state,
            "webhook.deleted",
            format!("{} ({})", hook.url, hook.id),
        )
        .await?;
    }
    Ok(Redirect::to("/admin/webhooks").into_response())
}
