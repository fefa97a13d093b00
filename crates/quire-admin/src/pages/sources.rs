//! Sources and their documents: the list and create form, a source's documents with a
//! multi-file upload form and live statuses, a document's extracted text, and deletion.

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::{Markup, html};
use quire_app::records::{DocumentProgress, ProcessingStage};
use quire_app::sources::SourceSpec;
use quire_app::uploads::{self, PartError, clean_file_name};
use quire_app::{Actor, AppError, documents, sources, syncs};
use quire_core::{
    DocumentId, DocumentRecord, DocumentStatus, SourceDescription, SourceId, SourceName,
    SourceRecord, SourceScope, SourceType,
};
use serde_json::{Value, json};

use crate::error::status_of;
use crate::html::{alert, back, bare_page, csrf_field, headings_row, page, table, time};
use crate::session::{Form, Signed, csrf_refused};
use crate::{AdminError, AdminState};

const NAV: &str = "/admin/sources";
fn not_found(signed: &Signed, what: &str) -> Response {
    let body = html! {
        h1 { "No such " (what) }
        (back("/admin/sources", "Back to the sources"))
    };
    (
        StatusCode::NOT_FOUND,
        page(NAV, "Not found", &signed.csrf, body),
    )
        .into_response()
}

/// What the create form holds, to fill it in again when something was wrong.
#[derive(Debug, Default)]
struct SourceFields<'a> {
    name: &'a str,
    description: &'a str,
    /// `network`, `folder`, `s3` or `web`.
    source_type: &'a str,
    /// The `sync` object as typed (JSON).
    sync: &'a str,
}

/// The create form, filled in again with what was wrong when `error` is given.
fn source_form(csrf: &str, error: Option<&str>, fields: &SourceFields<'_>) -> Markup {
    let kinds = [
        ("network", "network: filled by uploads"),
        ("folder", "folder: a directory on the server"),
        ("s3", "s3: a bucket prefix"),
        ("web", "web: a site or sitemap"),
    ];
    html! {
        h2 id="create" { "Create a source" }
        @if let Some(error) = error {
            (alert(error))
        }
        form method="post" action="/admin/sources" id="new-source" class="card" {
            (csrf_field(csrf))
            label for="source-name" { "Name" }
            input type="text" id="source-name" name="name" required value=(fields.name);
            label for="source-description" { "Description (optional)" }
            input type="text" id="source-description" name="description" value=(fields.description);
            label for="source-type" { "Type" }
            select id="source-type" name="type" {
                @for (value, label) in kinds {
                    option value=(value) selected[fields.source_type == value] { (label) }
                }
            }
            label for="source-sync" {
                "Sync settings, for a folder, s3 or web source (JSON, as the API's "
                code { "sync" } " object; see docs/connectors.md)"
            }
            textarea id="source-sync" name="sync" rows="3"
                placeholder=r#"{"path": "/srv/handbook", "intervalSeconds": 3600}"# { (fields.sync) }
            // The field and the button are inline: a space keeps them apart.
            " "
            button type="submit" id="create-source" { "Create source" }
        }
    }
}

/// The `sync` object typed into a form: JSON, an object.
fn sync_json(raw: &str) -> Result<Value, String> {
    serde_json::from_str::<Value>(raw)
        .map_err(|e| format!("the sync settings are not valid JSON: {e}"))
}

/// The sources and the create form.
fn list_body(sources: &[SourceRecord], form: Markup) -> Markup {
    let rows = html! {
        @for source in sources {
            tr {
                td {
                    a class="source-link" href={ "/admin/sources/" (source.id) } { (source.name) }
                }
                td { (source.description) }
                td { (source.document_count) }
                td { (time(source.created_at)) }
            }
        }
    };
    html! {
        h1 { "Sources" }
        @if sources.is_empty() {
            p class="muted" { "No source exists yet." }
        } @else {
            (table(None, None, &["Name", "Description", "Documents", "Created"], rows))
        }
        (form)
    }
}

async fn list_page(
    state: &AdminState,
    signed: &Signed,
    form: Markup,
) -> Result<Html<String>, AdminError> {
    let sources = sources::list(&state.app, &SourceScope::All).await?;
    Ok(page(
        NAV,
        "Sources",
        &signed.csrf,
        list_body(&sources, form),
    ))
}

/// GET /admin/sources.
pub(crate) async fn list(
    State(state): State<AdminState>,
    signed: Signed,
) -> Result<Html<String>, AdminError> {
    let form = source_form(&signed.csrf, None, &SourceFields::default());
    list_page(&state, &signed, form).await
}

/// POST /admin/sources: creates a source and shows it.
pub(crate) async fn create(
    State(state): State<AdminState>,
    signed: Signed,
    body: Bytes,
) -> Result<Response, AdminError> {
    let form = Form::parse(&body);
    if !signed.csrf_ok(&form) {
        return Ok(csrf_refused());
    }
    let fields = SourceFields {
        name: form.get("name").unwrap_or_default().trim(),
        description: form.get("description").unwrap_or_default().trim(),
        source_type: form.get("type").unwrap_or("network"),
        sync: form.get("sync").unwrap_or_default().trim(),
    };
    let outcome = create_from(&state, &fields).await?;
    match outcome {
        Ok(source) => Ok(Redirect::to(&format!("/admin/sources/{}", source.id)).into_response()),
        Err(message) => {
            let form = source_form(&signed.csrf, Some(&message), &fields);
            let page = list_page(&state, &signed, form).await?;
            Ok((StatusCode::BAD_REQUEST, page).into_response())
        }
    }
}

/// Creates the source the form describes: the source, or what was wrong with the form.
async fn create_from(
    state: &AdminState,
    fields: &SourceFields<'_>,
) -> Result<Result<SourceRecord, String>, AdminError> {
    let parsed = SourceName::parse(fields.name).and_then(|name| {
        SourceDescription::parse(fields.description).and_then(|description| {
            SourceType::parse(fields.source_type).map(|kind| (name, description, kind))
        })
    });
    let (name, description, source_type) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => return Ok(Err(e.0)),
    };
    let spec = SourceSpec {
        name,
        description,
        source_type,
    };
    // An empty box is no `sync` object at all: a network source's.
    let sync = match fields.sync {
        "" => None,
        typed => match sync_json(typed) {
            Ok(sync) => Some(sync),
            Err(message) => return Ok(Err(message)),
        },
    };
    match syncs::create_source(&state.app, &Actor::Admin, spec, sync.as_ref()).await {
        Ok((source, _)) => Ok(Ok(source)),
        Err(AppError::Invalid(message)) => Ok(Err(message)),
        Err(e) => Err(e.into()),
    }
}

fn status_cell(doc: &DocumentRecord, progress: Option<&DocumentProgress>) -> Markup {
    html! {
        @match (&doc.status, &doc.error, progress) {
            (DocumentStatus::Failed, Some(error), _) => {
                td class="status status-failed" { (doc.status.as_str()) ": " (error) }
            },
            (_, _, Some(progress)) => {
                td class="status" { (doc.status.as_str()) " (" (progress_text(progress)) ")" }
            },
            _ => { td class="status" { (doc.status.as_str()) } },
        }
    }
}

/// A document's progress in words: `parsing 12/600 pages`, `embedding 120/400 chunks`, or
/// the stage alone.
fn progress_text(progress: &DocumentProgress) -> String {
    let unit = match progress.stage {
        ProcessingStage::Parsing => "pages",
        _ => "chunks",
    };
    match (progress.done, progress.total) {
        (Some(done), Some(total)) => format!("{} {done}/{total} {unit}", progress.stage),
        _ => progress.stage.as_str().to_owned(),
    }
}

/// The progress of each document among `docs` that is being processed (a query per such
/// document: a source has few of them at any moment).
async fn progress_of(
    state: &AdminState,
    docs: &[DocumentRecord],
) -> Result<BTreeMap<DocumentId, DocumentProgress>, AdminError> {
    let mut found = BTreeMap::new();
    for doc in docs
        .iter()
        .filter(|d| d.status == DocumentStatus::Processing)
    {
        match documents::get(&state.app, &SourceScope::All, doc.source_id, doc.id).await {
            Ok((_, Some(progress))) => {
                found.insert(doc.id, progress);
            }
            // Done meanwhile, or deleted.
            Ok((_, None)) | Err(AppError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(found)
}

fn is_pending(status: DocumentStatus) -> bool {
    matches!(status, DocumentStatus::Queued | DocumentStatus::Processing)
}

async fn source_of(state: &AdminState, id: &str) -> Result<Option<SourceRecord>, AdminError> {
    let Ok(id) = id.parse::<SourceId>() else {
        return Ok(None);
    };
    match sources::get(&state.app, &SourceScope::All, id).await {
        Ok(source) => Ok(Some(source)),
        Err(AppError::NotFound(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The source `id` with its documents, newest first; `None` when there is no such source.
async fn source_with_documents(
    state: &AdminState,
    id: &str,
) -> Result<Option<(SourceRecord, Vec<DocumentRecord>)>, AdminError> {
    let Ok(id) = id.parse::<SourceId>() else {
        return Ok(None);
    };
    match sources::get_with_documents(&state.app, &SourceScope::All, id).await {
        Ok(found) => Ok(Some(found)),
        Err(AppError::NotFound(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A source's documents, marked for admin.js to poll their statuses while any is pending.
fn documents_table(
    source: &SourceRecord,
    docs: &[DocumentRecord],
    progress: &BTreeMap<DocumentId, DocumentProgress>,
) -> Markup {
    html! {
        div class="table" {
            // admin.js polls the statuses of a table (or a document) marked `data-poll`.
            table id="documents" data-statuses={ "/admin/sources/" (source.id) "/statuses" } data-poll[docs.iter().any(|d| is_pending(d.status))] {
                (headings_row(&["Document", "Status", "Chunks", "Bytes", "Uploaded"]))
                tbody {
                    @for doc in docs {
                        tr data-document-id=(doc.id) {
                            td {
                                a class="document-link" href={ "/admin/documents/" (doc.id) } { (doc.name) }
                            }
                            (status_cell(doc, progress.get(&doc.id)))
                            td class="chunks" { (doc.chunk_count) }
                            td { (doc.size) }
                            td { (time(doc.created_at)) }
                        }
                    }
                }
            }
        }
        @if docs.is_empty() {
            p class="muted" { "No document yet." }
        }
    }
}

/// GET /admin/sources/{id}: the documents and the upload form.
pub(crate) async fn show(
    State(state): State<AdminState>,
    signed: Signed,
    Path(id): Path<String>,
) -> Result<Response, AdminError> {
    let Some((source, docs)) = source_with_documents(&state, &id).await? else {
        return Ok(not_found(&signed, "source"));
    };
    let progress = progress_of(&state, &docs).await?;
    let max = human_size(state.app.max_upload_bytes());
    let sync = syncs::view(&state.app, &SourceScope::All, source.id).await?;
    let body = html! {
        h1 { (source.name) }
        p class="muted" { (source.description) }
        @if let Some(sync) = &sync {
            (sync_section(&source, sync, &signed.csrf))
        }
        h2 { "Documents" }
        (documents_table(&source, &docs, &progress))
        h2 { "Upload" }
        form method="post" action={ "/admin/sources/" (source.id) "/upload" } id="upload" enctype="multipart/form-data" class="card" {
            (csrf_field(&signed.csrf))
            label for="files" { "Files (up to " (max) " each)" }
            input type="file" id="files" name="files" multiple required;
            // The field and the button are inline: a space keeps them apart.
            " "
            button type="submit" id="upload-button" { "Upload" }
        }
        (back("/admin/sources", "Back to the sources"))
    };
    Ok(page(NAV, &source.name, &signed.csrf, body).into_response())
}

/// A syncing source's settings (never its credential), last run and next run, and the form
/// that starts a run now.
fn sync_section(source: &SourceRecord, sync: &syncs::SyncView, csrf: &str) -> Markup {
    html! {
        h2 { "Sync" }
        div class="table" {
            table id="sync" {
                tbody {
                    tr { th scope="row" { "Type" } td { (source.source_type) } }
                    tr {
                        th scope="row" { "Settings" }
                        td { code { (serde_json::Value::Object(sync.settings.clone())) } }
                    }
                    tr {
                        th scope="row" { "Credentials" }
                        td { @if sync.has_secret { "stored (never shown)" } @else { "none" } }
                    }
                    tr {
                        th scope="row" { "Last run" }
                        td id="last-run" {
                            @match &sync.last_run {
                                Some(run) => {
                                    (run.status) ", " (time(run.started_at)) ": "
                                    (run.counts.added) " added, " (run.counts.updated) " updated, "
                                    (run.counts.deleted) " deleted, " (run.counts.unchanged)
                                    " unchanged, " (run.counts.failed) " failed"
                                    @if let Some(error) = &run.error { " (" (error) ")" }
                                },
                                None => { "none yet" },
                            }
                        }
                    }
                    tr {
                        th scope="row" { "Next run" }
                        td {
                            @match sync.next_run_at {
                                Some(at) => { (time(at)) },
                                None => { "on demand" },
                            }
                        }
                    }
                }
            }
        }
        form method="post" action={ "/admin/sources/" (source.id) "/sync" } id="sync-now" class="card" {
            (csrf_field(csrf))
            button type="submit" id="sync-button" { "Sync now" }
        }
        form method="post" action={ "/admin/sources/" (source.id) "/sync-settings" } id="sync-settings" class="card" {
            (csrf_field(csrf))
            label for="sync-settings-json" {
                "Settings (JSON; a stored credential is kept unless a new "
                code { "secretAccessKey" } " is given)"
            }
            textarea id="sync-settings-json" name="sync" rows="3" {
                (Value::Object(sync.settings.clone()))
            }
            " "
            button type="submit" id="sync-settings-button" { "Save settings" }
        }
    }
}

/// POST /admin/sources/{id}/sync-settings: replaces how a syncing source syncs; the next run
/// comes at once.
pub(crate) async fn change_sync(
    State(state): State<AdminState>,
    signed: Signed,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, AdminError> {
    let form = Form::parse(&body);
    if !signed.csrf_ok(&form) {
        return Ok(csrf_refused());
    }
    let Some(source) = source_of(&state, &id).await? else {
        return Ok(not_found(&signed, "source"));
    };
    let changed = match sync_json(form.get("sync").unwrap_or_default()) {
        Ok(sync) => syncs::update(
            &state.app,
            &Actor::Admin,
            &SourceScope::All,
            source.id,
            &sync,
        )
        .await
        .map(|_| ()),
        Err(message) => Err(AppError::Invalid(message)),
    };
    let back = format!("/admin/sources/{}", source.id);
    match changed {
        Ok(()) => Ok(Redirect::to(&back).into_response()),
        Err(AppError::Invalid(message)) => Ok(refusal(
            &signed,
            "Sync settings refused",
            &message,
            (&back, "Back to the source"),
        )),
        Err(e) => Err(e.into()),
    }
}

/// POST /admin/sources/{id}/sync: starts a run of a syncing source now (a run already under
/// way is left to finish).
pub(crate) async fn sync_now(
    State(state): State<AdminState>,
    signed: Signed,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, AdminError> {
    let form = Form::parse(&body);
    if !signed.csrf_ok(&form) {
        return Ok(csrf_refused());
    }
    let Some(source) = source_of(&state, &id).await? else {
        return Ok(not_found(&signed, "source"));
    };
    match syncs::start(&state.app, &Actor::Admin, source.id).await {
        Ok(_) | Err(AppError::Conflict(_)) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Redirect::to(&format!("/admin/sources/{}", source.id)).into_response())
}

/// GET /admin/sources/{id}/statuses: `{documentId: {status, error, chunkCount, progress}}`
/// (`progress` in words, for documents being processed).
pub(crate) async fn statuses(
    State(state): State<AdminState>,
    signed: Signed,
    Path(id): Path<String>,
) -> Result<Response, AdminError> {
    let Some((_, docs)) = source_with_documents(&state, &id).await? else {
        return Ok(not_found(&signed, "source"));
    };
    let progress = progress_of(&state, &docs).await?;
    let all: serde_json::Map<String, Value> = docs
        .iter()
        .map(|d| {
            (
                d.id.to_string(),
                json!({
                    "status": d.status.as_str(),
                    "error": d.error,
                    "chunkCount": d.chunk_count,
                    "progress": progress.get(&d.id).map(progress_text),
                }),
            )
        })
        .collect();
    Ok(Json(Value::Object(all)).into_response())
}

fn bad_upload(signed: &Signed, source: SourceId, message: &str) -> Response {
    upload_failed(StatusCode::BAD_REQUEST, signed, source, message)
}

fn upload_failed(status: StatusCode, signed: &Signed, source: SourceId, message: &str) -> Response {
    let body = html! {
        h1 { "Upload failed" }
        (alert(message))
        p { a href={ "/admin/sources/" (source) } { "Back to the source" } }
    };
    (status, page(NAV, "Upload failed", &signed.csrf, body)).into_response()
}

/// POST /admin/sources/{id}/upload: several files in the `files` part; the CSRF field must
/// come before them.
pub(crate) async fn upload(
    State(state): State<AdminState>,
    signed: Signed,
    Path(id): Path<String>,
    headers: HeaderMap,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<Response, AdminError> {
    let Ok(mut multipart) = multipart else {
        return Ok(csrf_refused());
    };
    let max_files = state.app.upload_settings().max_bulk_files;
    if declared_length(&headers)
        .is_some_and(|n| n > uploads::max_request_bytes(&state.app, max_files))
    {
        return Ok(too_large_request());
    }
    let mut csrf_seen = false;
    let mut received = Vec::new();
    let mut problems = Vec::new();
    let source = source_of(&state, &id).await?;
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(e) => {
                if !csrf_seen {
                    return Ok(csrf_refused());
                }
                let source = source.map_or_else(SourceId::new, |s| s.id);
                return Ok(bad_upload(&signed, source, &e.body_text()));
            }
        };
        match field.name() {
            Some("csrf") => {
                let value = field.text().await.unwrap_or_default();
                let form = Form::parse(format!("csrf={}", encode(&value)).as_bytes());
                if !signed.csrf_ok(&form) {
                    return Ok(csrf_refused());
                }
                csrf_seen = true;
            }
            Some("files") if csrf_seen => {
                let Some(source) = &source else {
                    return Ok(not_found(&signed, "source"));
                };
                let name = clean_file_name(field.file_name().unwrap_or(""));
                if received.len() + problems.len() == max_files {
                    return Ok(bad_upload(
                        &signed,
                        source.id,
                        &format!("Upload at most {max_files} files at once."),
                    ));
                }
                let file_name = field.file_name().map(str::to_owned);
                let content_type = field.content_type().map(str::to_owned);
                match uploads::receive_part(&state.app, file_name.as_deref(), content_type, field)
                    .await
                {
                    Ok(upload) => received.push(upload),
                    // A file input left empty still sends one empty part.
                    Err(PartError::Empty) => {}
                    Err(PartError::TooLarge { limit }) => {
                        problems.push(format!("{name} is larger than {limit} bytes"));
                    }
                    Err(PartError::Request(e)) => {
                        return Ok(bad_upload(&signed, source.id, &e.body_text()));
                    }
                    Err(PartError::Failed(e)) => return Err(e.into()),
                }
            }
            _ if !csrf_seen => return Ok(csrf_refused()),
            _ => {}
        }
    }
    if !csrf_seen {
        return Ok(csrf_refused());
    }
    let Some(source) = source else {
        return Ok(not_found(&signed, "source"));
    };
    if received.is_empty() && problems.is_empty() {
        return Ok(bad_upload(&signed, source.id, "Choose at least one file."));
    }
    // Every received file in one transaction; a file whose original could not be kept fails
    // alone and is reported with the others' problems.
    let names: Vec<String> = received.iter().map(|u| clean_file_name(&u.name)).collect();
    let outcomes = if received.is_empty() {
        Vec::new()
    } else {
        uploads::accept_all(&state.app, &Actor::Admin, source.id, received).await?
    };
    let mut status = StatusCode::BAD_REQUEST;
    for (name, outcome) in names.iter().zip(outcomes) {
        if let Err(e) = outcome {
            // A fault of the service (5xx) outweighs the refusals of files.
            status = status.max(status_of(&e));
            problems.push(format!("{name} could not be stored: {e}"));
        }
    }
    if !problems.is_empty() {
        return Ok(upload_failed(
            status,
            &signed,
            source.id,
            &problems.join("; "),
        ));
    }
    Ok(Redirect::to(&format!("/admin/sources/{}", source.id)).into_response())
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

fn too_large_request() -> Response {
    bare_page(
        StatusCode::PAYLOAD_TOO_LARGE,
        "Upload too large",
        html! {
            p { "The upload is larger than the server accepts. Send fewer or smaller files." }
            (back("/admin/sources", "Back to the sources"))
        },
    )
}

/// Percent-encodes every byte but letters and digits (to reuse [`Form`]'s CSRF check).
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Finds a document by id alone (the admin sees every source).
async fn document_of(
    state: &AdminState,
    id: &str,
) -> Result<Option<(DocumentRecord, Option<DocumentProgress>)>, AdminError> {
    let Ok(id) = id.parse::<DocumentId>() else {
        return Ok(None);
    };
    match documents::find(&state.app, id).await {
        Ok(found) => Ok(Some(found)),
        Err(AppError::NotFound(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// GET /admin/documents/{id}: the document, its text by page and the delete form.
pub(crate) async fn document(
    State(state): State<AdminState>,
    signed: Signed,
    Path(id): Path<String>,
) -> Result<Response, AdminError> {
    let Some((doc, progress)) = document_of(&state, &id).await? else {
        return Ok(not_found(&signed, "document"));
    };
    let chunks = documents::passages(&state.app, &doc).await?;
    let versions =
        documents::versions(&state.app, &SourceScope::All, doc.source_id, doc.id).await?;
    let status = match &progress {
        Some(progress) => format!("{} ({})", doc.status, progress_text(progress)),
        None => doc.status.as_str().to_owned(),
    };
    let mut pages: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for chunk in &chunks {
        pages.entry(chunk.page).or_default().push(&chunk.content);
    }
    let body = html! {
        h1 { (doc.name) }
        div class="table" {
            table {
                tbody {
                    tr {
                        th scope="row" { "Status" }
                        td class="status" id="document-status" data-statuses={ "/admin/sources/" (doc.source_id) "/statuses" } data-document-id=(doc.id) data-poll[is_pending(doc.status)] { (status) }
                    }
                    tr { th scope="row" { "Chunks" } td { (doc.chunk_count) } }
                    tr { th scope="row" { "Pages" } td { (doc.page_count) } }
                    tr { th scope="row" { "Error" } td { (doc.error.as_deref().unwrap_or("—")) } }
                    tr { th scope="row" { "Uploaded" } td { (time(doc.created_at)) } }
                    tr {
                        th scope="row" { "External id" }
                        td { (doc.external_id.as_ref().map_or("—", |e| e.as_str())) }
                    }
                    tr {
                        th scope="row" { "Live version" }
                        td id="live-version" {
                            (doc.version)
                            @if let Some(next) = &doc.next_version {
                                " (version " (next.version) " is " (next.status.as_str())
                                @if let Some(error) = &next.error { ": " (error) }
                                ")"
                            }
                        }
                    }
                    tr {
                        th scope="row" { "Metadata" }
                        td {
                            @if doc.metadata.is_empty() {
                                "—"
                            } @else {
                                code { (doc.metadata.to_json()) }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Versions" }
        div class="table" {
            table id="versions" {
                thead { tr { th { "Version" } th { "File" } th { "Size" } th { "SHA-256" } th { "Status" } th { "Uploaded" } } }
                tbody {
                    @for v in &versions {
                        tr {
                            td { (v.version) }
                            td { (v.name) }
                            td { (v.size) }
                            td { code { (v.sha256.get(..12).unwrap_or(&v.sha256)) } }
                            td {
                                (v.status.as_str())
                                @if let Some(error) = &v.error { ": " (error) }
                            }
                            td { (time(v.created_at)) }
                        }
                    }
                }
            }
        }
        h2 { "Extracted text" }
        @for (number, parts) in &pages {
            section class="page card" data-page=(number) aria-labelledby={ "page-" (number) } {
                h3 id={ "page-" (number) } { "Page " (number) }
                div class="page-text" { (parts.join("\n\n")) }
            }
        }
        @if pages.is_empty() {
            p class="muted" { "No text has been extracted." }
        }
        h2 { "Metadata" }
        form method="post" action={ "/admin/documents/" (doc.id) "/metadata" } id="edit-metadata" class="card" {
            (csrf_field(&signed.csrf))
            label for="metadata" { "Metadata (a JSON object; the document is not processed again)" }
            textarea id="metadata" name="metadata" rows="4" { (doc.metadata.to_json()) }
            button type="submit" { "Save metadata" }
        }
        h2 { "Delete" }
        form method="post" action={ "/admin/documents/" (doc.id) "/delete" } id="delete-document" class="card" {
            (csrf_field(&signed.csrf))
            div {
                input type="checkbox" id="confirm-delete" name="confirm" value="yes" required;
                " "
                label for="confirm-delete" {
                    "Delete this document, its text and its original file; this cannot be undone"
                }
            }
            button type="submit" class="danger" id="delete-button" { "Delete document" }
        }
        p { a href={ "/admin/sources/" (doc.source_id) } { "Back to the source" } }
    };
    Ok(page(NAV, &doc.name, &signed.csrf, body).into_response())
}

/// POST /admin/documents/{id}/delete (the confirmation box must be ticked).
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
    let Some((doc, _)) = document_of(&state, &id).await? else {
        return Ok(not_found(&signed, "document"));
    };
    if form.get("confirm") != Some("yes") {
        return Ok(refusal(
            &signed,
            "Not deleted",
            "Tick the confirmation box to delete the document.",
            (&document_href(&doc), "Back to the document"),
        ));
    }
    match documents::delete(&state.app, &Actor::Admin, doc.source_id, doc.id).await {
        // Not found: deleted by someone else meanwhile; it is gone either way.
        Ok(_) | Err(AppError::NotFound(_)) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Redirect::to(&format!("/admin/sources/{}", doc.source_id)).into_response())
}

/// POST /admin/documents/{id}/metadata: replaces the document's metadata by the form's JSON
/// object, without processing the document again.
pub(crate) async fn edit_metadata(
    State(state): State<AdminState>,
    signed: Signed,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, AdminError> {
    let form = Form::parse(&body);
    if !signed.csrf_ok(&form) {
        return Ok(csrf_refused());
    }
    let Some((doc, _)) = document_of(&state, &id).await? else {
        return Ok(not_found(&signed, "document"));
    };
    let back = document_href(&doc);
    let refused = |message: &str| {
        refusal(
            &signed,
            "Metadata not saved",
            message,
            (&back, "Back to the document"),
        )
    };
    let text = form.get("metadata").unwrap_or("").trim();
    let text = if text.is_empty() { "{}" } else { text };
    let wanted = match quire_core::Metadata::parse(text) {
        Ok(metadata) => metadata,
        Err(e) => return Ok(refused(&e.0)),
    };
    match documents::replace_metadata(&state.app, &Actor::Admin, doc.source_id, doc.id, &wanted)
        .await
    {
        Ok(_) => Ok(Redirect::to(&format!("/admin/documents/{}", doc.id)).into_response()),
        Err(AppError::Invalid(message)) => Ok(refused(&message)),
        Err(AppError::NotFound(_)) => Ok(not_found(&signed, "document")),
        Err(e) => Err(e.into()),
    }
}

/// Where a document's admin page is.
fn document_href(doc: &DocumentRecord) -> String {
    format!("/admin/documents/{}", doc.id)
}

/// The 400 page of a refused change, titled `title`, saying why, with a link (`href`, text)
/// back to what was to change.
fn refusal(signed: &Signed, title: &str, message: &str, (href, text): (&str, &str)) -> Response {
    (
        StatusCode::BAD_REQUEST,
        page(
            NAV,
            title,
            &signed.csrf,
            html! {
                h1 { (title) }
                (alert(message))
                p { a href=(href) { (text) } }
            },
        ),
    )
        .into_response()
}

/// A byte count as people read it: 100 MiB, 512 KiB, 900 bytes.
fn human_size(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= MIB {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    } else if bytes >= 1024 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    /// A name, a description and a form value that would run script or break out of an
    /// attribute if they reached the page unescaped.
    #[test]
    fn hostile_values_are_escaped_in_the_rendered_page() {
        let script = "<script>alert(1)</script>";
        let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
        let source = SourceRecord {
            id: SourceId::new(),
            name: script.into(),
            description: r#"" onmouseover="alert(2)"#.into(),
            source_type: "network".into(),
            document_count: 0,
            created_at: Utc::now(),
        };
        let form = source_form(
            "token",
            Some(script),
            &SourceFields {
                name: r#""><script>alert(3)</script>"#,
                sync: "</textarea><script>alert(4)</script>",
                ..SourceFields::default()
            },
        );
        let Html(html) = page(
            NAV,
            &source.name,
            "token",
            list_body(std::slice::from_ref(&source), form),
        );
        // Only the admin's own script file is loaded; no value became an element.
        assert_eq!(html.matches("<script").count(), 1, "{html}");
        assert!(!html.contains("<script>alert"), "{html}");
        // The title, the source's link and the form's error message.
        assert_eq!(html.matches(escaped).count(), 3, "{html}");
        assert!(
            html.contains("<td>&quot; onmouseover=&quot;alert(2)</td>"),
            "{html}"
        );
        assert!(
            html.contains(r#"value="&quot;&gt;&lt;script&gt;alert(3)&lt;/script&gt;""#),
            "{html}"
        );
    }

    #[test]
    fn sizes_read_naturally() {
        assert_eq!(human_size(104_857_600), "100 MiB");
        assert_eq!(human_size(1_572_864), "1.5 MiB");
        assert_eq!(human_size(2048), "2 KiB");
        assert_eq!(human_size(900), "900 bytes");
    }
}
