//! API keys: the list, the create form (the secret shown once) and revocation with a
//! confirmation step.

use std::collections::HashMap;
use std::fmt::Write as _;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use quire_app::AppError;
use quire_app::keys::{KeySpec, issue_key};
use quire_core::{ApiKeyRecord, KeyId, Permission, SourceId, SourceRecord, SourceScope};

use super::audit;
use crate::html::legacy::{csrf_field, esc, page};
use crate::html::{opt_time, time};
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
            .map(|id| esc(names.get(id).copied().unwrap_or("(deleted source)")))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn key_rows(keys: &[ApiKeyRecord], names: &HashMap<SourceId, &str>) -> String {
    let mut rows = String::new();
    for key in keys {
        let action = match key.revoked_at {
            Some(at) => format!("Revoked {}", time(at)),
            None => format!(
                r#"<a href="/admin/keys/{}/revoke">Revoke<span class="visually-hidden"> {}</span></a>"#,
                key.id,
                esc(&key.name)
            ),
        };
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&key.name),
            key.permission,
            scope_text(&key.scope, names),
            key.rate_limit
                .map_or_else(|| "default".to_owned(), |n| format!("{n}/min")),
            time(key.created_at),
            opt_time(key.last_used_at),
            action
        );
    }
    rows
}

/// What the create form was filled with (to show it again after an error).
#[derive(Debug, Default)]
struct Draft {
    name: String,
    permission: Option<Permission>,
    chosen: Option<Vec<SourceId>>,
    rate_limit: String,
}

fn create_form(csrf: &str, sources: &[SourceRecord], draft: &Draft) -> String {
    let mut options = String::new();
    for permission in [Permission::Read, Permission::ReadWrite, Permission::Admin] {
        let selected = if draft.permission == Some(permission) {
            " selected"
        } else {
            ""
        };
        let _ = write!(
            options,
            r#"<option value="{p}"{selected}>{p}</option>"#,
            p = permission.as_str()
        );
    }
    let mut boxes = String::new();
    for (i, source) in sources.iter().enumerate() {
        let checked = if draft
            .chosen
            .as_ref()
            .is_some_and(|c| c.contains(&source.id))
        {
            " checked"
        } else {
            ""
        };
        let _ = write!(
            boxes,
            r#"<div><input type="checkbox" id="source-{i}" name="source" value="{id}"{checked}> <label for="source-{i}">{name}</label></div>"#,
            id = source.id,
            name = esc(&source.name)
        );
    }
    if sources.is_empty() {
        boxes.push_str(r#"<p class="muted">No source exists yet.</p>"#);
    }
    let (all_checked, chosen_checked) = if draft.chosen.is_some() {
        ("", " checked")
    } else {
        (" checked", "")
    };
    format!(
        r#"<form method="post" action="/admin/keys" class="card">
{csrf}
<label for="name">Name</label>
<input type="text" id="name" name="name" maxlength="{MAX_NAME_CHARS}" required value="{name}">
<label for="permission">Permission</label>
<select id="permission" name="permission">{options}</select>
<fieldset><legend>Sources</legend>
<div><input type="radio" id="scope-all" name="scope" value="all"{all_checked}> <label for="scope-all">All sources, including future ones</label></div>
<div><input type="radio" id="scope-chosen" name="scope" value="chosen"{chosen_checked}> <label for="scope-chosen">Only the sources chosen below</label></div>
{boxes}
</fieldset>
<label for="rate_limit">Rate limit (requests per minute for search and for generate; empty for the default)</label>
<input type="number" id="rate_limit" name="rate_limit" min="1" value="{rate}">
<button type="submit">Create key</button>
</form>"#,
        csrf = csrf_field(csrf),
        name = esc(&draft.name),
        rate = esc(&draft.rate_limit),
    )
}

async fn list_page(
    state: &AdminState,
    signed: &Signed,
    error: Option<&str>,
    draft: &Draft,
) -> Result<Html<String>, AdminError> {
    let keys = state.app.store.list_keys().await?;
    let sources = state.app.store.list_sources(&SourceScope::All).await?;
    let names: HashMap<SourceId, &str> = sources.iter().map(|s| (s.id, s.name.as_str())).collect();
    let table = if keys.is_empty() {
        r#"<p class="muted">No key exists yet.</p>"#.to_owned()
    } else {
        format!(
            r#"<div class="table"><table>
<thead><tr><th scope="col">Name</th><th scope="col">Permission</th><th scope="col">Sources</th><th scope="col">Rate limit</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Status</th></tr></thead>
<tbody>{}</tbody></table></div>"#,
            key_rows(&keys, &names)
        )
    };
    let error = error
        .map(|e| format!(r#"<p class="error" role="alert">{}</p>"#, esc(e)))
        .unwrap_or_default();
    let body = format!(
        r#"<h1>API keys</h1>
{table}
<h2 id="create">Create a key</h2>
{error}
{form}"#,
        form = create_form(&signed.csrf, &sources, draft)
    );
    Ok(page("/admin/keys", "API keys", &signed.csrf, &body))
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
    let scope = match spec.scope.source_ids() {
        None => "all sources".to_owned(),
        Some(ids) => format!("{} source(s)", ids.len()),
    };
    let (key, secret) =
        match issue_key(state.app.store.as_ref(), state.app.clock.as_ref(), spec).await {
            Ok(issued) => issued,
            // A chosen source was deleted meanwhile.
            Err(AppError::Invalid(message)) => {
                return invalid(&state, &signed, &message, &draft).await;
            }
            Err(e) => return Err(e.into()),
        };
    audit(
        &state,
        "key.created",
        format!("{} ({}), {}, {scope}", key.name, key.id, key.permission),
    )
    .await?;
    let body = format!(
        r#"<h1>Key created</h1>
<p class="ok" role="status">The key <strong>{name}</strong> ({permission}) was created. Copy its secret now: it is shown only this once.</p>
<div class="card">
<label for="secret">Secret</label>
<input type="text" id="secret" class="secret" readonly value="{secret}">
<button type="button" id="copy" hidden>Copy to clipboard</button>
<p id="copied" class="muted" role="status" aria-live="polite"></p>
</div>
<p><a href="/admin/keys">Back to the keys</a></p>"#,
        name = esc(&key.name),
        permission = key.permission,
        secret = esc(secret.expose()),
    );
    Ok((
        StatusCode::CREATED,
        page("/admin/keys", "Key created", &signed.csrf, &body),
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
            r#"<h1>No such key</h1><p><a href="/admin/keys">Back to the keys</a></p>"#,
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
    let keys = state.app.store.list_keys().await?;
    let Some(key) = keys.iter().find(|k| k.id == id) else {
        return Ok(not_found(&signed));
    };
    if key.revoked_at.is_some() {
        return Ok(Redirect::to("/admin/keys").into_response());
    }
    let body = format!(
        r#"<h1>Revoke a key</h1>
<div class="card">
<p>Revoke <strong>{name}</strong> ({permission}, created {created})? Every request with it is refused from then on; this cannot be undone.</p>
<form method="post" action="/admin/keys/{id}/revoke">
{csrf}
<button type="submit" class="danger">Revoke the key</button>
<a class="button" href="/admin/keys">Cancel</a>
</form>
</div>"#,
        name = esc(&key.name),
        permission = key.permission,
        created = time(key.created_at),
        id = key.id,
        csrf = csrf_field(&signed.csrf),
    );
    Ok(page("/admin/keys", "Revoke a key", &signed.csrf, &body).into_response())
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
    let Some(key) = state
        .app
        .store
        .revoke_key(id, state.app.clock.now())
        .await?
    else {
        return Ok(not_found(&signed));
    };
    audit(&state, "key.revoked", format!("{} ({})", key.name, key.id)).await?;
    Ok(Redirect::to("/admin/keys").into_response())
}
