//! The playground: a search, or a question answered with citations, run with the scope of one
//! active key, so the administrator sees exactly what that key's callers would get.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use maud::{Markup, html};
use quire_core::{ApiKeyRecord, Filter, KeyId, SearchLimit, SearchQuery};

use crate::html::{alert, csrf_field, page, table};
use crate::session::{Form, Signed, csrf_refused};
use crate::{AdminError, AdminState};

const NAV: &str = "/admin/playground";

fn form(
    csrf: &str,
    keys: &[ApiKeyRecord],
    chosen: Option<KeyId>,
    query: &str,
    filter: &str,
) -> Markup {
    if keys.is_empty() {
        return html! {
            p class="muted" {
                "No active key exists. " a href="/admin/keys" { "Create one" }
                " to try searches with its scope."
            }
        };
    }
    html! {
        form method="post" action="/admin/playground" id="playground" class="card" {
            (csrf_field(csrf))
            label for="key" { "Search as the key" }
            select id="key" name="key" {
                @for key in keys {
                    option value=(key.id) selected[Some(key.id) == chosen] {
                        (key.name) " (" (key.permission) ")"
                    }
                }
            }
            label for="query" { "Query or question" }
            input type="text" id="query" name="query" required value=(query);
            label for="filter" {
                "Filter (optional; a JSON object such as "
                code { r#"{"department": "legal", "year": {"$gte": 2024}}"# }
                ", see docs/api.md)"
            }
            input type="text" id="filter" name="filter" value=(filter);
            // The field and the buttons are inline: spaces keep them apart.
            " "
            button type="submit" id="search-button" name="action" value="search" { "Search" }
            " "
            button type="submit" id="ask-button" name="action" value="ask" {
                "Ask (answer with citations)"
            }
        }
    }
}

async fn active_keys(state: &AdminState) -> Result<Vec<ApiKeyRecord>, AdminError> {
    let mut keys = quire_app::keys::list(&state.app).await?;
    keys.retain(|k| k.revoked_at.is_none());
    Ok(keys)
}

fn render(signed: &Signed, form: &Markup, results: Markup) -> Html<String> {
    let body = html! {
        h1 { "Search playground" }
        p {
            "Run a search, or ask a question, with the sources one key may see, without using the \
             key itself (its last use and rate limit do not change; answers are not stored in a \
             conversation)."
        }
        (form)
        (results)
    };
    page(NAV, "Search playground", &signed.csrf, body)
}

/// GET /admin/playground.
pub(crate) async fn show(
    State(state): State<AdminState>,
    signed: Signed,
) -> Result<Html<String>, AdminError> {
    let keys = active_keys(&state).await?;
    Ok(render(
        &signed,
        &form(&signed.csrf, &keys, None, "", ""),
        html! {},
    ))
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
    let raw_filter = fields.get("filter").unwrap_or_default().trim().to_owned();
    let form_html = form(&signed.csrf, &keys, chosen, &raw_query, &raw_filter);
    let refuse = |message: &str| {
        (
            StatusCode::BAD_REQUEST,
            render(&signed, &form_html, alert(message)),
        )
            .into_response()
    };
    let Some(key) = keys.iter().find(|k| Some(k.id) == chosen) else {
        return Ok(refuse("Choose an active key."));
    };
    let query = match SearchQuery::parse(&raw_query) {
        Ok(query) => query,
        Err(e) => return Ok(refuse(&e.0)),
    };
    let filter = if raw_filter.is_empty() {
        None
    } else {
        let parsed = serde_json::from_str(&raw_filter)
            .map_err(|e| format!("the filter is not JSON: {e}"))
            .and_then(|value| Filter::parse(&value).map_err(|e| format!("filter: {}", e.0)));
        match parsed {
            Ok(filter) => Some(filter),
            Err(message) => return Ok(refuse(&message)),
        }
    };
    if fields.get("action") == Some("ask") {
        let answered = match quire_app::answers::answer_collected(
            &state.app,
            key.id,
            &key.scope,
            query.as_str(),
            filter.as_ref(),
        )
        .await
        {
            Ok(answered) => answered,
            Err(message) => return Ok(refuse(&message)),
        };
        return Ok(render(&signed, &form_html, answer_html(&answered, &key.name)).into_response());
    }
    let outcome = match quire_app::search::find(
        &state.app,
        &key.scope,
        &query,
        SearchLimit::default(),
        filter.as_ref(),
    )
    .await
    {
        Ok(outcome) => outcome,
        Err(e) => return Ok(refuse(&e.to_string())),
    };
    let caption = format!(
        "{} result(s) for the key {}",
        outcome.results.len(),
        key.name
    );
    let rows = html! {
        @for result in &outcome.results {
            tr class="result" {
                td class="page-text" { (result.content) }
                td {
                    a href={ "/admin/documents/" (result.document.id) } { (result.document.name) }
                    br;
                    span class="muted" { (result.data_source.name) }
                }
                td { (result.metadata.page) }
                td { (format!("{:.3}", result.score)) }
            }
        }
    };
    let headings = ["Content", "Document", "Page", "Score"];
    let results = html! {
        h2 { "Results" }
        @if outcome.results.is_empty() {
            p class="muted" id="no-results" { "Nothing found with this key's sources." }
        } @else {
            (table(Some("results"), Some(&caption), &headings, rows))
        }
    };
    Ok(render(&signed, &form_html, results).into_response())
}

/// The answer and its citations.
fn answer_html(answered: &quire_app::answers::CollectedAnswer, key: &str) -> Markup {
    html! {
        h2 { "Answer" }
        p class="muted" { "As the key " (key) " would get it, from " (answered.generator) "." }
        div class="card" id="answer" { (answered.text) }
        h3 { "Citations" }
        @if answered.citations.is_empty() {
            p class="muted" { "No citations." }
        } @else {
            ol id="citations" {
                @for c in &answered.citations {
                    li class="citation" {
                        strong { "[" (c.index) "]" }
                        " "
                        a href={ "/admin/documents/" (c.document_id) } { (c.document_name) }
                        ", page " (c.page)
                        @if !c.section.is_empty() {
                            ", " (c.section)
                        }
                        " "
                        span class="muted" {
                            "(" (c.data_source_name) ", score " (format!("{:.3}", c.score)) ")"
                        }
                        blockquote { (c.content) }
                    }
                }
            }
        }
    }
}
