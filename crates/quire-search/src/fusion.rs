//! Reciprocal rank fusion of keyword and vector results: each list gives a chunk
//! `weight / (k + rank)` (rank from 1), and chunks are ordered by the sum. Ranks, not raw
//! scores, so BM25's unbounded scores and cosine similarities need no calibration.

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

/// Fuses two ranked lists; ties keep the keyword list's order, then the vector list's.
pub fn reciprocal_rank_fusion(
    keyword: &[KeywordHit],
    vector: &[VectorHit],
    params: FusionParams,
) -> Vec<FusedHit> {
    let mut fused: Vec<FusedHit> = Vec::with_capacity(keyword.len() + vector.len());
    let mut position: HashMap<(DocumentId, u32), usize> = HashMap::new();
    let mut add = |document_id, source_id, ordinal, rank: usize, weight: f32, is_keyword| {
        let contribution = weight / (params.k + rank as f32);
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
        add(
            hit.document_id,
            hit.source_id,
            hit.ordinal,
            i + 1,
            params.keyword_weight,
            true,
        );
    }
    for (i, hit) in vector.iter().enumerate() {
        add(
            hit.document_id,
            hit.source_id,
            hit.ordinal,
            i + 1,
            params.vector_weight,
            false,
        );
    }
    // A stable sort keeps first-seen order among equal scores.
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
}
