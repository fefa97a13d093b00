//! Search: keyword hits from the index, turned into results with document and source names
//! from the store. The store is asked again with the caller's scope, which also drops hits of
//! documents deleted (or no longer ready) since they were indexed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use quire_core::{SearchLimit, SearchQuery, SourceScope};

use crate::wire::{MetadataJson, RefJson, SearchResultJson};
use crate::{ApiError, AppState};

/// Extra hits fetched beyond `limit`, to make up for stale ones dropped after the store check.
const STALE_MARGIN: usize = 8;

/// Runs a keyword search within `scope`.
pub async fn keyword_search(
    state: &AppState,
    scope: &SourceScope,
    query: &SearchQuery,
    limit: SearchLimit,
) -> Result<Vec<SearchResultJson>, ApiError> {
    let index = Arc::clone(&state.index);
    let (text, task_scope) = (query.as_str().to_owned(), scope.clone());
    let hits = tokio::task::spawn_blocking(move || {
        index.search(&text, &task_scope, limit.get() + STALE_MARGIN)
    })
    .await
    .map_err(|e| ApiError::internal(&e))??;
    let mut ids = Vec::new();
    let mut seen = HashSet::new();
    for hit in &hits {
        if seen.insert(hit.document_id) {
            ids.push(hit.document_id);
        }
    }
    let documents: HashMap<_, _> = state
        .store
        .ready_documents(scope, &ids)
        .await?
        .into_iter()
        .map(|d| (d.id, d))
        .collect();
    Ok(hits
        .into_iter()
        .filter_map(|hit| {
            let doc = documents.get(&hit.document_id)?;
            Some(SearchResultJson {
                content: hit.content,
                score: hit.score,
                document: RefJson {
                    id: doc.id.to_string(),
                    name: doc.name.clone(),
                },
                data_source: RefJson {
                    id: doc.source_id.to_string(),
                    name: doc.source_name.clone(),
                },
                metadata: MetadataJson {
                    section: hit.section,
                    page: hit.page,
                },
            })
        })
        .take(limit.get())
        .collect())
}
