//! Search: keyword hits (Tantivy BM25) and vector hits (the query's embedding against the
//! chunk vectors) fused by reciprocal rank, then turned into results with document and source
//! names from the store. The store is asked again with the caller's scope, which also drops
//! hits of documents deleted (or no longer ready) since they were indexed.
//!
//! Without an embedding model, or before any chunk has a vector, search is keyword only. When
//! the model fails on a query (a remote embedder that is down), the search still answers from
//! the keyword index and the failure is logged.
//!
//! With a reranker configured (`[search.rerank]`), the first results of that order are handed
//! to it and shown in its order, with its scores ([`Rerank`]); when it fails they keep the
//! fused order.

mod rerank;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use quire_core::{DocumentId, Filter, FilterTarget, SearchLimit, SearchQuery, SourceScope};
use quire_ingest::Semantic;
use quire_search::{
    FusionParams, KeywordHit, VectorHit, convex_combination, reciprocal_rank_fusion,
};

use serde::Serialize;

use quire_store::DocumentHit;

use crate::{AppError, Services};

pub use self::rerank::{RERANK_REQUESTS, RERANK_SECONDS, Rerank};

/// Extra hits fetched beyond `limit`, to make up for stale ones dropped after the store check.
const STALE_MARGIN: usize = 8;

/// The deepest a ranking is read when stale index entries keep a search short of its limit.
const MAX_CANDIDATES: usize = 4_096;

/// How the keyword and vector rankings are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FusionMethod {
    /// Reciprocal rank fusion: `weight / (k + rank)` from each ranking.
    ReciprocalRank,
    /// A weighted sum of the rankings' scores, each normalised to [0, 1].
    Convex,
}

/// How searches are run (`[search]` in the config file).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchSettings {
    /// Which fusion.
    pub method: FusionMethod,
    /// Its parameters (`k` for rank fusion only).
    pub fusion: FusionParams,
    /// Chunks taken from each ranking before fusion (at least the request's `limit`).
    pub candidates: usize,
    /// Show the best chunk of each page before a second chunk of a page already shown.
    pub spread_pages: bool,
    /// How much a chunk's rank gains from its document's best chunk (relative to the best
    /// candidate), as a share of the best candidate's score; 0 ranks chunks on their own.
    pub document_weight: f32,
}

impl Default for SearchSettings {
    fn default() -> Self {
        // Chosen on SciFact's train queries (docs/retrieval.md): the convex combination beat
        // every reciprocal-rank setting tried, and equal weights sit on its flat optimum.
        Self {
            method: FusionMethod::Convex,
            fusion: FusionParams {
                k: 60.0,
                keyword_weight: 0.5,
                vector_weight: 0.5,
            },
            candidates: 100,
            spread_pages: true,
            // Chosen on FinanceBench (docs/retrieval.md).
            document_weight: 0.5,
        }
    }
}

/// Which rankings a search uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retrieval {
    /// BM25 only.
    Keyword,
    /// Embeddings only (needs a model).
    Vector,
    /// Both, fused by reciprocal rank.
    Hybrid,
}

/// What a search found: results best first, and the rankings that made them.
#[derive(Debug)]
pub struct SearchOutcome {
    /// Results, best first, at most the limit asked for.
    pub results: Vec<SearchResult>,
    /// The rankings actually used (keyword only when no model is available).
    pub retrieval: Retrieval,
}

/// `{id, name}` of a document or source in a search result.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct NamedRef {
    /// Identifier.
    pub id: String,
    /// Name.
    pub name: String,
}

/// The document a search result comes from.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = ResultDocument)]
pub struct DocumentRef {
    /// Identifier.
    pub id: String,
    /// Name.
    pub name: String,
    /// The document's metadata (`{}` when it has none).
    #[schema(value_type = Object)]
    pub metadata: quire_core::Metadata,
}

/// Where in its document a passage is.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PassageLocation {
    /// Heading path (empty when the document has no headings there).
    pub section: String,
    /// Page number, from 1.
    pub page: u32,
}

/// One search result, in the shape the API returns it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchResult {
    /// The passage.
    pub content: String,
    /// Relevance score (higher is better).
    pub score: f32,
    /// The document.
    pub document: DocumentRef,
    /// The document's source.
    pub data_source: NamedRef,
    /// Section and page.
    pub metadata: PassageLocation,
}

/// Page, section path and text of chunks, by document and ordinal: from the keyword hits,
/// completed from the store for the chunks only the vector ranking found.
type Passages = HashMap<(DocumentId, u32), (u32, String, String)>;

/// The chunks of `ranked` whose passage `passages` does not hold yet.
fn missing_passages(ranked: &[Ranked], passages: &Passages) -> Vec<(DocumentId, u32)> {
    ranked
        .iter()
        .map(|r| (r.document_id, r.ordinal))
        .filter(|key| !passages.contains_key(key))
        .collect()
}

/// Adds chunks read from the store to `passages`.
fn remember(passages: &mut Passages, stored: Vec<quire_store::StoredChunk>) {
    for stored in stored {
        let c = stored.chunk;
        passages.insert(
            (stored.document_id, c.ordinal),
            (c.page, c.section, c.content),
        );
    }
}

/// A ranked chunk before it is resolved against the store.
#[derive(Debug)]
struct Ranked {
    document_id: DocumentId,
    ordinal: u32,
    score: f32,
}

/// Searches `scope` with the rankings of `retrieval`, or with the best available when it is
/// `None`: hybrid when an embedding model is loaded and has vectors, keyword otherwise.
///
/// Scores: keyword-only results carry BM25 scores; hybrid results carry the fused score
/// divided by the best possible one, so 1.0 means best in both rankings; vector-only results
/// carry the cosine similarity. Reranked results carry the reranker's relevance score.
pub async fn search(
    services: &Services,
    scope: &SourceScope,
    query: &str,
    limit: usize,
    retrieval: Option<Retrieval>,
) -> Result<SearchOutcome, AppError> {
    search_filtered(services, scope, query, limit, retrieval, None).await
}

/// The search an adapter runs for a caller: the validated query and limit, and the caller's
/// filter, in `scope` (already the caller's scope narrowed to the sources it named); hybrid
/// when an embedding model is loaded. [`search`] is for the answers and the measurements,
/// which choose their own depth.
pub async fn find(
    services: &Services,
    scope: &SourceScope,
    query: &SearchQuery,
    limit: SearchLimit,
    filter: Option<&Filter>,
) -> Result<SearchOutcome, AppError> {
    search_filtered(services, scope, query.as_str(), limit.get(), None, filter).await
}

/// [`search`] among the documents `filter` matches: the matching documents are found first,
/// and both rankings are restricted to them before `limit` is cut (never filtered after the
/// top-k), so a narrow filter still returns `limit` results when it matches that many chunks.
pub async fn search_filtered(
    services: &Services,
    scope: &SourceScope,
    query: &str,
    limit: usize,
    retrieval: Option<Retrieval>,
    filter: Option<&Filter>,
) -> Result<SearchOutcome, AppError> {
    let allowed = match filter.filter(|f| !f.is_all()) {
        Some(filter) => Some(Arc::new(matching_documents(services, scope, filter).await?)),
        None => None,
    };
    let semantic = services
        .ingest
        .semantic()
        .filter(|s| !s.vectors().is_empty());
    let retrieval = match (retrieval, semantic) {
        (Some(Retrieval::Keyword), _) | (None, None) => Retrieval::Keyword,
        (Some(asked), Some(_)) => asked,
        (None, Some(_)) => Retrieval::Hybrid,
        (Some(_), None) => {
            return Err(AppError::Invalid(
                "semantic search is off: no embedding model is configured or nothing is embedded yet"
                    .into(),
            ));
        }
    };
    let mut retrieval = retrieval;
    // With a reranker, its candidates are resolved, and the cut to `limit` follows its order.
    let depth = services.rerank.as_ref().map_or(limit, |r| r.depth(limit));
    let mut candidates = services.search.candidates.max(depth + STALE_MARGIN);
    // The query is embedded once (beside the first keyword search), however deep the rankings
    // are read.
    let mut embedding: Option<Vec<f32>> = None;
    loop {
        let (keyword, vector) = tokio::join!(
            async {
                if retrieval != Retrieval::Vector {
                    keyword_hits(services, scope, query, candidates, allowed.clone()).await
                } else {
                    Ok(Vec::new())
                }
            },
            async {
                match semantic {
                    Some(semantic) if retrieval != Retrieval::Keyword => vector_hits(
                        semantic,
                        scope,
                        query,
                        embedding.as_deref(),
                        candidates,
                        allowed.clone(),
                    )
                    .await
                    .map(Some),
                    _ => Ok(None),
                }
            }
        );
        let keyword = keyword?;
        let vector = match vector {
            Ok(Some((embedded, hits))) => {
                embedding = Some(embedded);
                hits
            }
            Ok(None) => Vec::new(),
            Err(e) if retrieval == Retrieval::Hybrid => {
                tracing::warn!(error = %e, "query embedding failed; answering from keywords only");
                retrieval = Retrieval::Keyword;
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        // Every ranking returned fewer than it was asked for: there is nothing deeper to read.
        let exhausted = keyword.len() < candidates && vector.len() < candidates;
        let ranked = rank(retrieval, &keyword, &vector, &services.search);
        let results = resolve(services, scope, ranked, keyword, depth).await?;
        // `resolve` drops index entries of deleted or no longer ready documents; when they
        // crowd out the limit, the rankings are read deeper rather than the answer cut short.
        if results.len() >= limit || exhausted || candidates >= MAX_CANDIDATES {
            let results = match &services.rerank {
                Some(rerank) => rerank.reorder(query, results, limit).await,
                None => results,
            };
            return Ok(SearchOutcome { results, retrieval });
        }
        candidates = (candidates * 4).min(MAX_CANDIDATES);
    }
}

async fn keyword_hits(
    services: &Services,
    scope: &SourceScope,
    query: &str,
    candidates: usize,
    allowed: Option<Arc<HashSet<DocumentId>>>,
) -> Result<Vec<KeywordHit>, AppError> {
    let index = Arc::clone(&services.index);
    let (text, scope) = (query.to_owned(), scope.clone());
    Ok(tokio::task::spawn_blocking(move || {
        index.search_within(&text, &scope, allowed.as_deref(), candidates)
    })
    .await
    .map_err(|e| AppError::internal(&e))??)
}

/// The ready documents in `scope` that `filter` matches.
async fn matching_documents(
    services: &Services,
    scope: &SourceScope,
    filter: &Filter,
) -> Result<HashSet<DocumentId>, AppError> {
    let ready = crate::documents::ready_documents(services, scope).await?;
    // The index ids a matching document's entries may be under: its live version's, and the
    // one before it (still indexed where the switch has not been applied yet).
    Ok(ready
        .iter()
        .filter(|d| {
            filter.matches(&FilterTarget {
                metadata: &d.metadata,
                external_id: d.external_id.as_ref().map(|e| e.as_str()),
                document_id: d.id,
                created_at: d.created_at,
            })
        })
        .flat_map(|d| std::iter::once(d.index_id).chain(d.previous_index_id))
        .collect())
}

/// The `candidates` nearest chunks to `query` in `scope`, with the query's embedding (computed
/// here unless `embedded` already holds it).
async fn vector_hits(
    semantic: &Semantic,
    scope: &SourceScope,
    query: &str,
    embedded: Option<&[f32]>,
    candidates: usize,
    allowed: Option<Arc<HashSet<DocumentId>>>,
) -> Result<(Vec<f32>, Vec<VectorHit>), AppError> {
    let embedding = match embedded {
        Some(embedding) => embedding.to_vec(),
        None => semantic
            .embed_query(query)
            .await
            .map_err(|e| AppError::internal(&e))?,
    };
    let vectors = Arc::clone(semantic.vectors());
    let (query_vector, scope) = (embedding.clone(), scope.clone());
    let hits = tokio::task::spawn_blocking(move || {
        vectors.search_within(&query_vector, &scope, allowed.as_deref(), candidates)
    })
    .await
    .map_err(|e| AppError::internal(&e))?
    .map_err(|e| AppError::internal(&e))?;
    Ok((embedding, hits))
}

fn rank(
    retrieval: Retrieval,
    keyword: &[KeywordHit],
    vector: &[VectorHit],
    settings: &SearchSettings,
) -> Vec<Ranked> {
    let fusion = settings.fusion;
    match retrieval {
        Retrieval::Keyword => keyword
            .iter()
            .map(|h| Ranked {
                document_id: h.document_id,
                ordinal: h.ordinal,
                score: h.score,
            })
            .collect(),
        Retrieval::Vector => vector
            .iter()
            .map(|h| Ranked {
                document_id: h.document_id,
                ordinal: h.ordinal,
                score: h.score,
            })
            .collect(),
        Retrieval::Hybrid => {
            let weights = fusion.keyword_weight + fusion.vector_weight;
            let (fused, best) = match settings.method {
                FusionMethod::ReciprocalRank => (
                    reciprocal_rank_fusion(keyword, vector, fusion),
                    weights / (fusion.k + 1.0),
                ),
                FusionMethod::Convex => (convex_combination(keyword, vector, fusion), weights),
            };
            fused
                .into_iter()
                .map(|h| Ranked {
                    document_id: h.document_id,
                    ordinal: h.ordinal,
                    score: if best > 0.0 { h.score / best } else { 0.0 },
                })
                .collect()
        }
    }
}

/// Turns ranked chunks into results, best first, until `limit` are found or the ranking ends:
/// text from the keyword hits where they have it, from the store otherwise; names from the
/// store, asked with the caller's scope. Chunks of documents that are gone or not ready are
/// skipped, and the next ranked ones are read in their place.
async fn resolve(
    services: &Services,
    scope: &SourceScope,
    ranked: Vec<Ranked>,
    keyword: Vec<KeywordHit>,
    limit: usize,
) -> Result<Vec<SearchResult>, AppError> {
    let mut passages: Passages = keyword
        .into_iter()
        .map(|h| ((h.document_id, h.ordinal), (h.page, h.section, h.content)))
        .collect();
    let ranked = if services.search.document_weight > 0.0 {
        with_document_standing(ranked, services.search.document_weight)
    } else {
        ranked
    };
    let ranked = if services.search.spread_pages {
        spread_pages(services, ranked, &mut passages, limit + STALE_MARGIN).await?
    } else {
        ranked
    };
    // Index ids among the candidates: a document whose live version is among them is never
    // also shown from the version before it (still indexed on a node that has not applied the
    // switch, or for the moment after it here).
    let candidates: HashSet<DocumentId> = ranked.iter().map(|r| r.document_id).collect();
    let mut ranked = ranked.into_iter();
    let mut results = Vec::with_capacity(limit);
    while results.len() < limit {
        let window: Vec<Ranked> = ranked
            .by_ref()
            .take(limit - results.len() + STALE_MARGIN)
            .collect();
        if window.is_empty() {
            break;
        }
        results.extend(resolve_window(services, scope, window, &mut passages, &candidates).await?);
    }
    results.truncate(limit);
    Ok(results)
}

/// `ranked` (best first) ordered again by document: each chunk ranks by its score plus
/// `weight` × its document's best score among the candidates. A question about one filing
/// matches that filing's pages, and this lets the filing's further chunks outrank a stray
/// chunk of another filing that matches one phrase well. Every document's best chunk gains in
/// the same proportion, so documents keep their order (ranked by their best chunk, as
/// SciFact's evaluation ranks them, nothing changes); only a document's further chunks move.
/// Counting more than the best chunk (a sum of the best ten, or three) found more evidence
/// pages on FinanceBench but favoured documents cut into more chunks, and cost SciFact up to
/// 0.08 nDCG@10 (docs/retrieval.md). Each chunk keeps its own score: the answer's `score`
/// stays what `docs/api.md` says it is.
fn with_document_standing(ranked: Vec<Ranked>, weight: f32) -> Vec<Ranked> {
    let mut best: HashMap<DocumentId, f32> = HashMap::new();
    for r in &ranked {
        best.entry(r.document_id).or_insert(r.score);
    }
    let mut keyed: Vec<(f32, Ranked)> = ranked
        .into_iter()
        .map(|r| (r.score + weight * best[&r.document_id], r))
        .collect();
    // Stable: chunks of equal key keep their order.
    keyed.sort_by(|(a, _), (b, _)| b.total_cmp(a));
    keyed.into_iter().map(|(_, r)| r).collect()
}

/// `ranked` with the best chunk of each page first, in rank order, and every further chunk of
/// a page after them, in rank order too: the first results cover as many pages as they can.
/// Measured on FinanceBench (docs/retrieval.md), this finds the evidence page more often than
/// ranking chunks alone, where a page split into several matching chunks fills several of
/// the first places; adding a page's other chunks to its score did worse than either.
///
/// Only the head of the ranking matters: pages (from the keyword passages, else from the
/// store) are looked up a window at a time until `wanted` distinct pages are found.
async fn spread_pages(
    services: &Services,
    ranked: Vec<Ranked>,
    passages: &mut Passages,
    wanted: usize,
) -> Result<Vec<Ranked>, AppError> {
    let mut seen = HashSet::new();
    let (mut first, mut again) = (Vec::new(), Vec::new());
    let mut ranked = ranked.into_iter().peekable();
    while seen.len() < wanted && ranked.peek().is_some() {
        let window: Vec<Ranked> = ranked.by_ref().take(2 * wanted).collect();
        let missing = missing_passages(&window, passages);
        if !missing.is_empty() {
            remember(passages, services.store.chunks(&missing).await?);
        }
        for r in window {
            match passages.get(&(r.document_id, r.ordinal)) {
                Some((page, ..)) if !seen.insert((r.document_id, *page)) => again.push(r),
                // A chunk the store no longer has keeps its place; the window check drops it.
                _ => first.push(r),
            }
        }
    }
    first.extend(again);
    first.extend(ranked);
    Ok(first)
}

/// The results among `ranked` (in order) whose documents are ready in `scope`, taking their
/// text from `passages` or the store.
async fn resolve_window(
    services: &Services,
    scope: &SourceScope,
    ranked: Vec<Ranked>,
    passages: &mut Passages,
    candidates: &HashSet<DocumentId>,
) -> Result<Vec<SearchResult>, AppError> {
    let missing = missing_passages(&ranked, passages);
    let mut ids = Vec::new();
    let mut seen = HashSet::new();
    for r in &ranked {
        if seen.insert(r.document_id) {
            ids.push(r.document_id);
        }
    }
    // Two independent reads: run them at once.
    let (stored, documents_read) = tokio::join!(
        async {
            if missing.is_empty() {
                Ok(Vec::new())
            } else {
                services.store.chunks(&missing).await
            }
        },
        services.store.ready_documents(scope, &ids)
    );
    remember(passages, stored?);
    // Hits carry the index id of a document's live version, or of the version before it:
    // that one is shown only where the switch has not reached this node's index yet (the
    // live version neither among the candidates nor in the index), so a document is never
    // missing and never found twice.
    let mut documents: HashMap<DocumentId, Arc<DocumentHit>> = HashMap::new();
    for hit in documents_read? {
        let hit = Arc::new(hit);
        if let Some(previous) = hit.previous_index_id
            && !candidates.contains(&hit.index_id)
            && ranked.iter().any(|r| r.document_id == previous)
            && !services
                .index
                .contains_document(hit.index_id)
                .map_err(|e| AppError::internal(&e))?
        {
            documents.insert(previous, Arc::clone(&hit));
        }
        documents.insert(hit.index_id, hit);
    }
    Ok(ranked
        .into_iter()
        .filter_map(|r| {
            let doc = documents.get(&r.document_id)?;
            let (page, section, content) = passages.remove(&(r.document_id, r.ordinal))?;
            Some(SearchResult {
                content,
                score: r.score,
                document: DocumentRef {
                    id: doc.id.to_string(),
                    name: doc.name.clone(),
                    metadata: doc.metadata.clone(),
                },
                data_source: NamedRef {
                    id: doc.source_id.to_string(),
                    name: doc.source_name.clone(),
                },
                metadata: PassageLocation { section, page },
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(document_id: DocumentId, ordinal: u32, score: f32) -> Ranked {
        Ranked {
            document_id,
            ordinal,
            score,
        }
    }

    #[test]
    fn a_documents_further_chunks_rise_with_its_best_one() {
        let (filing, stray) = (DocumentId::new(), DocumentId::new());
        let before = vec![
            ranked(filing, 0, 0.9),
            ranked(stray, 0, 0.72),
            ranked(filing, 1, 0.6),
            ranked(filing, 2, 0.3),
        ];
        let after = with_document_standing(before, 0.5);
        // Keys: the filing's 1.35, 1.05 and 0.75; the stray's 1.08.
        let order: Vec<(DocumentId, u32, f32)> = after
            .iter()
            .map(|r| (r.document_id, r.ordinal, r.score))
            .collect();
        assert_eq!(
            order,
            [
                (filing, 0, 0.9),
                (stray, 0, 0.72),
                (filing, 1, 0.6),
                (filing, 2, 0.3)
            ],
        );
        let after = with_document_standing(after, 1.0);
        let order: Vec<(DocumentId, u32)> =
            after.iter().map(|r| (r.document_id, r.ordinal)).collect();
        // Keys: 1.8, 1.44 (stray), 1.5, 1.2: the filing's second chunk passes the stray one.
        assert_eq!(order, [(filing, 0), (filing, 1), (stray, 0), (filing, 2)]);
        assert_eq!(after[1].score, 0.6, "the shown score stays the chunk's own");
    }

    #[test]
    fn documents_keep_the_order_of_their_best_chunks() {
        let docs: Vec<DocumentId> = (0..5).map(|_| DocumentId::new()).collect();
        let mut before = Vec::new();
        for (i, doc) in docs.iter().enumerate() {
            before.push(ranked(*doc, 0, 1.0 - 0.1 * i as f32));
        }
        for (i, doc) in docs.iter().enumerate() {
            before.push(ranked(*doc, 1, 0.5 - 0.05 * i as f32));
        }
        let after = with_document_standing(before, 0.5);
        let mut first_seen = Vec::new();
        for r in &after {
            if !first_seen.contains(&r.document_id) {
                first_seen.push(r.document_id);
            }
        }
        assert_eq!(first_seen, docs);
    }

    #[test]
    fn an_empty_ranking_stays_empty() {
        assert!(with_document_standing(Vec::new(), 0.5).is_empty());
    }
}
