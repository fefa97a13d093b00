//! The playground: a search, or a question answered with citations, run with the scope of one
//! active key, so the administrator sees exactly what that key's callers would get.

use std::fmt::Write as _;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use quire_core::{ApiKeyRecord, KeyId, SearchLimit, SearchQuery};

use crate::html::legacy::{csrf_field, esc, page};
use crate::session::{Form, Signed, csrf_refused};
use crate::{AdminError, AdminState};

const NAV: &str = "/admin/playground";

fn form(csrf: &str, keys: &[ApiKeyRecord], chosen: Option<KeyId>, query: &str) -> String {
    if keys.is_empty() {
        return r#"<p class="muted">No active key exists. <a href="/admin/keys">Create one</a> to try searches with its scope.</p>"#.to_owned();
    }
    let mut options = String::new();
    for key in keys {
        let selected = if Some(key.id) == chosen {
            " selected"
        } else {
            ""
        };
        let _ = write!(
            options,
            r#"<option value="{id}"{selected}>{name} ({permission})</option>"#,
            id = key.id,
            name = esc(&key.name),
            permission = key.permission,
        );
    }
    format!(
        r#"<form method="post" action="/admin/playground" id="playground" class="card">
{csrf}
<label for="key">Search as the key</label>
<select id="key" name="key">{options}</select>
<label for="query">Query or question</label>
<input type="text" id="query" name="query" required value="{query}">
<button type="submit" id="search-button" name="action" value="search">Search</button>
<button type="submit" id="ask-button" name="action" value="ask">Ask (answer with citations)</button>
</form>"#,
        csrf = csrf_field(csrf),
        query = esc(query),
    )
}

async fn active_keys(state: &AdminState) -> Result<Vec<ApiKeyRecord>, AdminError> {
    let mut keys = state.app.store.list_keys().await?;
    keys.retain(|k| k.revoked_at.is_none());
    Ok(keys)
}

fn render(signed: &Signed, form: &str, results: &str) -> Html<String> {
    let body = format!(
        r#"<h1>Search playground</h1>
<p>Run a search, or ask a question, with the sources one key may see, without using the key itself (its last use and rate limit do not change; answers are not stored in a conversation).</p>
{form}
{results}"#
    );
    page(NAV, "Search playground", &signed.csrf, &body)
}

/// GET /admin/playground.
pub(crate) async fn show(
    State(state): State<AdminState>,
    signed: Signed,
) -> Result<Html<String>, AdminError> {
    let keys = active_keys(&state).await?;
    Ok(render(&signed, &form(&signed.csrf, &keys, None, ""), ""))
}

/// POST /admin/playground: runs the search in the chosen key's scope.
pub(crate) async fn search(
    State(state): State<AdminState>,
    signed: Signed,
    body: Bytes,
) -> Result<Response, AdminError> {
    let fields = Form::parse(&body);
    if !signed.csrf_ok(&fields) {
        return Ok(csrf_refused());
    }
    let keys = active_keys(&state).await?;
    let raw_query = fields.get("query").unwrap_or_default().to_owned();
    let chosen = fields.get("key").and_then(|k| k.parse::<KeyId>().ok());
    let form_html = form(&signed.csrf, &keys, chosen, &raw_query);
    let refuse = |message: &str| {
        let error = format!(r#"<p class="error" role="alert">{}</p>"#, esc(message));
        (StatusCode::BAD_REQUEST, render(&signed, &form_html, &error)).into_response()
    };
    let Some(key) = keys.iter().find(|k| Some(k.id) == chosen) else {
        return Ok(refuse("Choose an active key."));
    };
    let query = match SearchQuery::parse(&raw_query) {
        Ok(query) => query,
        Err(e) => return Ok(refuse(&e.0)),
    };
    if fields.get("action") == Some("ask") {
        let answered = match quire_app::answers::answer_collected(
            &state.app,
            key.id,
            &key.scope,
            query.as_str(),
        )
        .await
        {
            Ok(answered) => answered,
            Err(message) => return Ok(refuse(&message)),
        };
        return Ok(render(&signed, &form_html, &answer_html(&answered, &key.name)).into_response());
    }
    let limit = SearchLimit::default().get();
    let outcome = match quire_app::search::search(
        &state.app,
        &key.scope,
        query.as_str(),
        limit,
        None,
    )
    .await
    {
        Ok(outcome) => outcome,
        Err(e) => return Ok(refuse(&e.to_string())),
    };
    let results = if outcome.results.is_empty() {
        r#"<p class="muted" id="no-results">Nothing found with this key's sources.</p>"#.to_owned()
    } else {
        let mut rows = String::new();
        for result in &outcome.results {
            let _ = write!(
                rows,
                r#"<tr class="result"><td class="page-text">{content}</td><td><a href="/admin/documents/{doc}">{name}</a><br><span class="muted">{source}</span></td><td>{page}</td><td>{score:.3}</td></tr>"#,
                content = esc(&result.content),
                doc = esc(&result.document.id),
                name = esc(&result.document.name),
                source = esc(&result.data_source.name),
                page = result.metadata.page,
                score = result.score,
            );
        }
        format!(
            r#"<div class="table"><table id="results"><caption class="muted">{count} result(s) for the key {key}</caption>
<thead><tr><th scope="col">Content</th><th scope="col">Document</th><th scope="col">Page</th><th scope="col">Score</th></tr></thead>
<tbody>{rows}</tbody></table></div>"#,
            count = outcome.results.len(),
            key = esc(&key.name),
        )
    };
    let results = format!("<h2>Results</h2>\n{results}");
    Ok(render(&signed, &form_html, &results).into_response())
}

/// The answer and its citations.
fn answer_html(answered: &quire_app::answers::CollectedAnswer, key: &str) -> String {
    let mut citations = String::new();
    for c in &answered.citations {
        let section = if c.section.is_empty() {
            String::new()
        } else {
            format!(", {}", esc(&c.section))
        };
        let _ = write!(
            citations,
            r#"<li class="citation"><strong>[{index}]</strong> <a href="/admin/documents/{doc}">{name}</a>, page {page}{section} <span class="muted">({source}, score {score:.3})</span><blockquote>{content}</blockquote></li>"#,
            index = c.index,
            doc = esc(&c.document_id),
            name = esc(&c.document_name),
            page = c.page,
            source = esc(&c.data_source_name),
            score = c.score,
            content = esc(&c.content),
        );
    }
    let citations = if citations.is_empty() {
        r#"<p class="muted">No citations.</p>"#.to_owned()
    } else {
        format!(r#"<ol id="citations">{citations}</ol>"#)
    };
    format!(
        r#"<h2>Answer</h2>
<p class="muted">As the key {key} would get it, from {generator}.</p>
<div class="card" id="answer">{text}</div>
<h3>Citations</h3>
{citations}"#,
        key = esc(key),
        generator = esc(&answered.generator),
        text = esc(&answered.text),
    )
}
