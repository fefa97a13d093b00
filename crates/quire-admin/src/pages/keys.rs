//! API keys: the list, the create form (the secret shown once) and revocation with a
//! confirmation step.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::{Markup, html};
use quire_app::keys::{self, KeySpec};
use quire_app::{Actor, AppError, sources};
use quire_core::{ApiKeyRecord, KeyId, Permission, SourceId, SourceRecord, SourceScope};

use crate::html::{alert, back, csrf_field, opt_time, page, table, time};
use crate::session::{Form, Signed, csrf_refused};
use crate::{AdminError, AdminState};

/// Longest key name accepted, in characters.
const MAX_NAME_CHARS: usize = 200;

fn scope_text(scope: &SourceScope, names: &HashMap<SourceId, &str>) -> String {
    match scope.source_ids() {
        None => "All sources".into(),
        Some(ids) if ids.is_empty() => "No source".into(),
        Some(ids) => ids
            .iter()
            .map(|id| names.get(id).copied().unwrap_or("(deleted source)"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn key_rows(keys: &[ApiKeyRecord], names: &HashMap<SourceId, &str>) -> Markup {
    html! {
        @for key in keys {
            tr {
                td { (key.name) }
                td { (key.permission) }
                td { (scope_text(&key.scope, names)) }
                td {
                    @match key.rate_limit {
                        Some(n) => { (n) "/min" },
                        None => "default",
                    }
                }
                td { (time(key.created_at)) }
                td { (opt_time(key.last_used_at)) }
                td {
                    @match key.revoked_at {
                        Some(at) => { "Revoked " (time(at)) },
                        None => {
                            a href={ "/admin/keys/" (key.id) "/revoke" } {
                                "Revoke" span class="visually-hidden" { " " (key.name) }
                            }
                        },
                    }
                }
            }
        }
    }
}

/// What the create form was filled with (to show it again after an error).
#[derive(Debug, Default)]
struct Draft {
    name: String,
    permission: Option<Permission>,
    chosen: Option<Vec<SourceId>>,
    rate_limit: String,
}

fn create_form(csrf: &str, sources: &[SourceRecord], draft: &Draft) -> Markup {
    let chosen = |source: &SourceRecord| {
        draft
            .chosen
            .as_ref()
            .is_some_and(|c| c.contains(&source.id))
    };
    html! {
        form method="post" action="/admin/keys" class="card" {
            (csrf_field(csrf))
            label for="name" { "Name" }
            input type="text" id="name" name="name" maxlength=(MAX_NAME_CHARS) required value=(draft.name);
            label for="permission" { "Permission" }
            select id="permission" name="permission" {
                @for permission in [Permission::Read, Permission::ReadWrite, Permission::Admin] {
                    option value=(permission.as_str()) selected[draft.permission == Some(permission)] {
                        (permission.as_str())
                    }
                }
            }
            fieldset {
                legend { "Sources" }
                div {
                    input type="radio" id="scope-all" name="scope" value="all" checked[draft.chosen.is_none()];
                    " "
                    label for="scope-all" { "All sources, including future ones" }
                }
                div {
                    input type="radio" id="scope-chosen" name="scope" value="chosen" checked[draft.chosen.is_some()];
                    " "
                    label for="scope-chosen" { "Only the sources chosen below" }
                }
                @for (i, source) in sources.iter().enumerate() {
                    div {
                        input type="checkbox" id={ "source-" (i) } name="source" value=(source.id) checked[chosen(source)];
                        " "
                        label for={ "source-" (i) } { (source.name) }
                    }
                }
                @if sources.is_empty() {
                    p class="muted" { "No source exists yet." }
                }
            }
            label for="rate_limit" {
                "Rate limit (requests per minute for search and for generate; empty for the default)"
            }
            input type="number" id="rate_limit" name="rate_limit" min="1" value=(draft.rate_limit);
            // The field and the button are inline: a space keeps them apart.
            " "
            button type="submit" { "Create key" }
        }
    }
}

/// The keys, the create form and what was wrong with the form, if anything.
fn list_body(
    keys: &[ApiKeyRecord],
    sources: &[SourceRecord],
    csrf: &str,
    error: Option<&str>,
    draft: &Draft,
) -> Markup {
    let names: HashMap<SourceId, &str> = sources.iter().map(|s| (s.id, s.name.as_str())).collect();
    let headings = [
        "Name",
        "Permission",
        "Sources",
        "Rate limit",
        "Created",
        "Last used",
        "Status",
    ];
    html! {
        h1 { "API keys" }
        @if keys.is_empty() {
            p class="muted" { "No key exists yet." }
        } @else {
            (table(None, None, &headings, key_rows(keys, &names)))
        }
        h2 id="create" { "Create a key" }
        @if let Some(error) = error {
            (alert(error))
        }
        (create_form(csrf, sources, draft))
    }
}

async fn list_page(
    state: &AdminState,
    signed: &Signed,
    error: Option<&str>,
    draft: &Draft,
) -> Result<Html<String>, AdminError> {
    let keys = keys::list(&state.app).await?;
    let sources = sources::list(&state.app, &SourceScope::All).await?;
    let body = list_body(&keys, &sources, &signed.csrf, error, draft);
    Ok(page("/admin/keys", "API keys", &signed.csrf, body))
}

/// GET /admin/keys.
pub(crate) async fn list(
    State(state): State<AdminState>,
    signed: Signed,
) -> Result<Html<String>, AdminError> {
    list_page(&state, &signed, None, &Draft::default()).await
}

/// Reads the create form; the error message is shown above the form.
fn parse_spec(form: &Form, draft: &mut Draft) -> Result<KeySpec, String> {
    draft.name = form.get("name").unwrap_or_default().trim().to_owned();
    draft.rate_limit = form.get("rate_limit").unwrap_or_default().trim().to_owned();
    draft.permission = form.get("permission").and_then(|p| p.parse().ok());
    let chosen = form
        .all("source")
        .map(|s| s.parse::<SourceId>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| "A chosen source is not a source id.".to_owned())?;
    if form.get("scope") == Some("chosen") {
        draft.chosen = Some(chosen.clone());
    }
    if draft.name.is_empty() {
        return Err("Give the key a name.".into());
    }
    if draft.name.chars().count() > MAX_NAME_CHARS {
        return Err(format!(
            "The name is longer than {MAX_NAME_CHARS} characters."
        ));
    }
    let permission = draft
        .permission
        .ok_or("Choose read, read-write or admin as the permission.")?;
    let scope = match form.get("scope") {
        Some("all") | None => SourceScope::All,
        Some("chosen") if chosen.is_empty() => {
            return Err("Choose at least one source, or all sources.".into());
        }
        Some("chosen") => SourceScope::only(chosen),
        Some(_) => return Err("Choose all sources or the chosen sources.".into()),
    };
    let rate_limit = match draft.rate_limit.as_str() {
        "" => None,
        raw => match raw.parse::<u32>() {
            Ok(n) if n >= 1 => Some(n),
            _ => return Err("The rate limit must be a whole number of at least 1.".into()),
        },
    };
    Ok(KeySpec {
        name: draft.name.clone(),
        permission,
        scope,
        rate_limit,
    })
}

/// The list page with the form filled in again and what was wrong with it.
async fn invalid(
    state: &AdminState,
    signed: &Signed,
    message: &str,
    draft: &Draft,
) -> Result<Response, AdminError> {
    let page = list_page(state, signed, Some(message), draft).await?;
    Ok((StatusCode::BAD_REQUEST, page).into_response())
}

/// POST /admin/keys: creates a key and shows its secret once.
pub(crate) async fn create(
    State(state): State<AdminState>,
    signed: Signed,
    body: Bytes,
) -> Result<Response, AdminError> {
    let form = Form::parse(&body);
    if !signed.csrf_ok(&form) {
        return Ok(csrf_refused());
    }
    let mut draft = Draft::default();
    let spec = match parse_spec(&form, &mut draft) {
        Ok(spec) => spec,
        Err(message) => return invalid(&state, &signed, &message, &draft).await,
    };
    let (key, secret) = match keys::create(&state.app, &Actor::Admin, spec).await {
        Ok(issued) => issued,
        // A chosen source was deleted meanwhile.
        Err(AppError::Invalid(message)) => {
            return invalid(&state, &signed, &message, &draft).await;
        }
        Err(e) => return Err(e.into()),
    };
    let body = html! {
        h1 { "Key created" }
        p class="ok" role="status" {
            "The key " strong { (key.name) } " (" (key.permission) ") was created. Copy its secret \
             now: it is shown only this once."
        }
        div class="card" {
            label for="secret" { "Secret" }
            input type="text" id="secret" class="secret" readonly value=(secret.expose());
            button type="button" id="copy" hidden { "Copy to clipboard" }
            p id="copied" class="muted" role="status" aria-live="polite" {}
        }
        (back("/admin/keys", "Back to the keys"))
    };
    Ok((
        StatusCode::CREATED,
        page("/admin/keys", "Key created", &signed.csrf, body),
    )
        .into_response())
}

fn not_found(signed: &Signed) -> Response {
    (
        StatusCode::NOT_FOUND,
        page(
            "/admin/keys",
            "No such key",
            &signed.csrf,
            html! {
                h1 { "No such key" }
                (back("/admin/keys", "Back to the keys"))
            },
        ),
    )
        .into_response()
}

/// GET /admin/keys/{id}/revoke: the confirmation step.
pub(crate) async fn confirm_revoke(
    State(state): State<AdminState>,
    signed: Signed,
    Path(id): Path<String>,
) -> Result<Response, AdminError> {
    let Ok(id) = id.parse::<KeyId>() else {
        return Ok(not_found(&signed));
    };
    let keys = keys::list(&state.app).await?;
    let Some(key) = keys.iter().find(|k| k.id == id) else {
        return Ok(not_found(&signed));
    };
    if key.revoked_at.is_some() {
        return Ok(Redirect::to("/admin/keys").into_response());
    }
    let body = html! {
        h1 { "Revoke a key" }
        div class="card" {
            p {
                "Revoke " strong { (key.name) } " (" (key.permission) ", created "
                (time(key.created_at)) ")? Every request with it is refused from then on; this \
                 cannot be undone."
            }
            form method="post" action={ "/admin/keys/" (key.id) "/revoke" } {
                (csrf_field(&signed.csrf))
                button type="submit" class="danger" { "Revoke the key" }
                // Keeps the inline button and link apart (they have no side margins).
                " "
                a class="button" href="/admin/keys" { "Cancel" }
            }
        }
    };
    Ok(page("/admin/keys", "Revoke a key", &signed.csrf, body).into_response())
}

/// POST /admin/keys/{id}/revoke.
pub(crate) async fn revoke(
    State(state): State<AdminState>,
    signed: Signed,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, AdminError> {
    if !signed.csrf_ok(&Form::parse(&body)) {
        return Ok(csrf_refused());
    }
    let Ok(id) = id.parse::<KeyId>() else {
        return Ok(not_found(&signed));
    };
    match keys::revoke(&state.app, &Actor::Admin, id).await {
        Ok(_) => Ok(Redirect::to("/admin/keys").into_response()),
        Err(AppError::NotFound(_)) => Ok(not_found(&signed)),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    /// A key name with quotes and markup stays text in the table, in the revoke link's hidden
    /// label and in the refilled form's attribute.
    #[test]
    fn a_hostile_key_name_is_escaped_in_the_rendered_page() {
        let name = r#"agent" autofocus onfocus="alert(1)" <b>bold</b>"#;
        let escaped = "agent&quot; autofocus onfocus=&quot;alert(1)&quot; &lt;b&gt;bold&lt;/b&gt;";
        let key = ApiKeyRecord {
            id: KeyId::new(),
            name: name.into(),
            permission: Permission::Read,
            scope: SourceScope::All,
            rate_limit: None,
            created_at: Utc::now(),
            last_used_at: None,
            revoked_at: None,
        };
        let draft = Draft {
            name: name.into(),
            ..Draft::default()
        };
        let body = list_body(&[key], &[], "token", Some(name), &draft);
        let Html(html) = page("/admin/keys", "API keys", "token", body);
        assert!(!html.contains("<b>bold"), "{html}");
        assert!(!html.contains(r#"onfocus="alert"#), "{html}");
        assert!(html.contains(&format!("<td>{escaped}</td>")), "{html}");
        assert!(
            html.contains(&format!(
                r#"<span class="visually-hidden"> {escaped}</span>"#
            )),
            "{html}"
        );
        assert!(
            html.contains(&format!(r#"<p class="error" role="alert">{escaped}</p>"#)),
            "{html}"
        );
        assert!(html.contains(&format!(r#"value="{escaped}""#)), "{html}");
    }
}
