//! Fusion of keyword and vector results. Reciprocal rank fusion: each list gives a chunk
//! `weight / (k + rank)` (rank from 1), and chunks are ordered by the sum; ranks, not raw
//! scores, so BM25's unbounded scores and cosine similarities need no calibration. Convex
//! combination: each list's scores normalised to [0, 1] and summed with weights.

use std::collections::HashMap;

use quire_core::{DocumentId, SourceId};

use crate::{KeywordHit, VectorHit};

/// Fusion settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FusionParams {
    /// RRF's `k`: larger values flatten the difference between top and lower ranks.
    pub k: f32,
    /// Weight of the keyword list.
    pub keyword_weight: f32,
    /// Weight of the vector list.
    pub vector_weight: f32,
}

impl Default for FusionParams {
    fn default() -> Self {
        Self {
            k: 60.0,
            keyword_weight: 1.0,
            vector_weight: 1.0,
        }
    }
}

/// A chunk after fusion, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct FusedHit {
    /// The chunk's document.
    pub document_id: DocumentId,
    /// The document's source.
    pub source_id: SourceId,
    /// The chunk's position in the document.
    pub ordinal: u32,
    /// The fused score (sum of the lists' reciprocal-rank contributions).
    pub score: f32,
    /// Rank in the keyword list (from 1), if the chunk was in it.
    pub keyword_rank: Option<usize>,
    /// Rank in the vector list (from 1), if the chunk was in it.
    pub vector_rank: Option<usize>,
}

/// Fuses two ranked lists by reciprocal rank; ties keep the keyword list's order, then the
/// vector list's.
pub fn reciprocal_rank_fusion(
    keyword: &[KeywordHit],
    vector: &[VectorHit],
    params: FusionParams,
) -> Vec<FusedHit> {
    fuse(
        keyword,
        vector,
        |rank, _| params.keyword_weight / (params.k + rank as f32),
        |rank, _| params.vector_weight / (params.k + rank as f32),
    )
}

/// Fuses two ranked lists by a weighted sum of normalised scores (a convex combination when
/// the weights add up to 1): BM25 divided by the list's best score, cosine similarity scaled
/// from the list's worst (0) to its best (1); a chunk missing from a list gets 0 from it.
/// `k` is not used. Unlike rank fusion it keeps how far apart the scores are, so a clear
/// keyword match is not levelled with a weak one.
pub fn convex_combination(
    keyword: &[KeywordHit],
    vector: &[VectorHit],
    params: FusionParams,
) -> Vec<FusedHit> {
    let best_keyword = keyword.iter().map(|h| h.score).fold(0.0, f32::max);
    let (worst_vector, best_vector) = vector
        .iter()
        .map(|h| h.score)
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), s| {
            (lo.min(s), hi.max(s))
        });
    let spread = best_vector - worst_vector;
    fuse(
        keyword,
        vector,
        |_, score| {
            if best_keyword > 0.0 {
                params.keyword_weight * score / best_keyword
            } else {
                0.0
            }
        },
        |_, score| {
            if spread > 0.0 {
                params.vector_weight * (score - worst_vector) / spread
            } else {
                params.vector_weight
            }
        },
    )
}

/// Adds up each chunk's contributions (a function of its rank from 1 and its score in each
/// list) and sorts by the sum; a stable sort keeps first-seen order among equal sums.
fn fuse(
    keyword: &[KeywordHit],
    vector: &[VectorHit],
    keyword_contribution: impl Fn(usize, f32) -> f32,
    vector_contribution: impl Fn(usize, f32) -> f32,
) -> Vec<FusedHit> {
    let mut fused: Vec<FusedHit> = Vec::with_capacity(keyword.len() + vector.len());
    let mut position: HashMap<(DocumentId, u32), usize> = HashMap::new();
    let mut add = |document_id, source_id, ordinal, rank: usize, contribution: f32, is_keyword| {
        let at = *position.entry((document_id, ordinal)).or_insert_with(|| {
            fused.push(FusedHit {
                document_id,
                source_id,
                ordinal,
                score: 0.0,
                keyword_rank: None,
                vector_rank: None,
            });
            fused.len() - 1
        });
        let hit = &mut fused[at];
        hit.score += contribution;
        if is_keyword {
            hit.keyword_rank = Some(rank);
        } else {
            hit.vector_rank = Some(rank);
        }
    };
    for (i, hit) in keyword.iter().enumerate() {
        let contribution = keyword_contribution(i + 1, hit.score);
        add(
            hit.document_id,
            hit.source_id,
            hit.ordinal,
            i + 1,
            contribution,
            true,
        );
    }
    for (i, hit) in vector.iter().enumerate() {
        let contribution = vector_contribution(i + 1, hit.score);
        add(
            hit.document_id,
            hit.source_id,
            hit.ordinal,
            i + 1,
            contribution,
            false,
        );
    }
    fused.sort_by(|a, b| b.score.total_cmp(&a.score));
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyword(document: DocumentId, source: SourceId, ordinal: u32) -> KeywordHit {
        KeywordHit {
            document_id: document,
            source_id: source,
            ordinal,
            page: 1,
            section: String::new(),
            content: String::new(),
            score: 10.0,
        }
    }

    fn vector(document: DocumentId, source: SourceId, ordinal: u32) -> VectorHit {
        VectorHit {
            document_id: document,
            source_id: source,
            ordinal,
            score: 0.5,
        }
    }

    #[test]
    fn chunks_in_both_lists_rise_and_scores_are_rank_sums() {
        let s = SourceId::new();
        let (a, b, c) = (DocumentId::new(), DocumentId::new(), DocumentId::new());
        let fused = reciprocal_rank_fusion(
            &[keyword(a, s, 0), keyword(b, s, 0)],
            &[vector(c, s, 0), vector(b, s, 0)],
            FusionParams::default(),
        );
        let order: Vec<DocumentId> = fused.iter().map(|h| h.document_id).collect();
        assert_eq!(order, vec![b, a, c]);
        assert!((fused[0].score - (1.0 / 62.0 + 1.0 / 62.0)).abs() < 1e-7);
        assert_eq!(
            (fused[0].keyword_rank, fused[0].vector_rank),
            (Some(2), Some(2))
        );
        assert_eq!(
            (fused[2].keyword_rank, fused[2].vector_rank),
            (None, Some(1))
        );
    }

    #[test]
    fn weights_and_chunk_identity() {
        let s = SourceId::new();
        let d = DocumentId::new();
        // Two chunks of one document are two results.
        let fused = reciprocal_rank_fusion(
            &[keyword(d, s, 0)],
            &[vector(d, s, 1)],
            FusionParams {
                vector_weight: 2.0,
                ..FusionParams::default()
            },
        );
        assert_eq!(fused.len(), 2);
        assert_eq!(fused[0].ordinal, 1);
        assert!((fused[0].score - 2.0 / 61.0).abs() < 1e-7);
        assert!(reciprocal_rank_fusion(&[], &[], FusionParams::default()).is_empty());
    }

    #[test]
    fn convex_combination_keeps_score_distances() {
        let s = SourceId::new();
        let (a, b, c) = (DocumentId::new(), DocumentId::new(), DocumentId::new());
        let kw = |d, score| KeywordHit {
            score,
            ..keyword(d, s, 0)
        };
        let vec = |d, score| VectorHit {
            score,
            ..vector(d, s, 0)
        };
        let params = FusionParams {
            k: 0.0,
            keyword_weight: 0.5,
            vector_weight: 0.5,
        };
        // a: a strong keyword match only; b: weak keyword, best vector; c: worst vector only.
        let fused = convex_combination(
            &[kw(a, 20.0), kw(b, 2.0)],
            &[vec(b, 0.8), vec(c, 0.4)],
            params,
        );
        let order: Vec<DocumentId> = fused.iter().map(|h| h.document_id).collect();
        assert_eq!(order, vec![b, a, c]);
        assert!((fused[0].score - (0.5 * 0.1 + 0.5)).abs() < 1e-6);
        assert!((fused[1].score - 0.5).abs() < 1e-6);
        assert_eq!(fused[2].score, 0.0);
        assert!(convex_combination(&[], &[], params).is_empty());
    }
}
