//! `[search]`: how keyword and vector rankings are combined.

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// `[search]`: reciprocal rank fusion of the keyword and vector rankings (see
/// `docs/retrieval.md` for how the defaults were chosen).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchConfig {
    /// `rrf` (reciprocal rank fusion) or `convex` (weighted sum of normalised scores).
    pub fusion: String,
    /// RRF's `k`: larger values flatten the difference between top and lower ranks.
    pub rrf_k: f32,
    /// Weight of the keyword ranking.
    pub keyword_weight: f32,
    /// Weight of the vector ranking.
    pub vector_weight: f32,
    /// Chunks taken from each ranking before fusion.
    pub candidates: usize,
    /// Show the best chunk of each page before a second chunk of a page already shown.
    pub spread_pages: bool,
    /// How much a chunk's rank gains from its document's best chunk (0: none).
    pub document_weight: f32,
}

impl Default for SearchConfig {
    fn default() -> Self {
        let d = quire_app::search::SearchSettings::default();
        Self {
            fusion: match d.method {
                quire_app::search::FusionMethod::ReciprocalRank => "rrf".into(),
                quire_app::search::FusionMethod::Convex => "convex".into(),
            },
            rrf_k: d.fusion.k,
            keyword_weight: d.fusion.keyword_weight,
            vector_weight: d.fusion.vector_weight,
            candidates: d.candidates,
            spread_pages: d.spread_pages,
            document_weight: d.document_weight,
        }
    }
}

impl SearchConfig {
    /// The settings handed to the search code.
    pub fn settings(&self) -> quire_app::search::SearchSettings {
        quire_app::search::SearchSettings {
            method: if self.fusion == "convex" {
                quire_app::search::FusionMethod::Convex
            } else {
                quire_app::search::FusionMethod::ReciprocalRank
            },
            fusion: quire_search::FusionParams {
                k: self.rrf_k,
                keyword_weight: self.keyword_weight,
                vector_weight: self.vector_weight,
            },
            candidates: self.candidates,
            spread_pages: self.spread_pages,
            document_weight: self.document_weight,
        }
    }

    /// Refuses settings the service cannot work with.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if !(self.rrf_k >= 0.0 && self.keyword_weight >= 0.0 && self.vector_weight >= 0.0)
            || self.keyword_weight + self.vector_weight <= 0.0
        {
            bail!("search.rrf_k and the weights must be non-negative, and a weight positive");
        }
        if !matches!(self.fusion.as_str(), "rrf" | "convex") {
            bail!("search.fusion must be \"rrf\" or \"convex\"");
        }
        if !(0.0..=10.0).contains(&self.document_weight) {
            bail!("search.document_weight must be between 0 and 10");
        }
        if self.candidates == 0 {
            bail!("search.candidates must be at least 1");
        }
        Ok(())
    }
}
