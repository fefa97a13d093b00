//! `[search]`: how keyword and vector rankings are combined.

use anyhow::bail;
use quire_core::Secret;
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
    /// `[search.rerank]`: a reranking server that orders the first results.
    pub rerank: RerankConfig,
}

/// `[search.rerank]`: a server speaking the `/rerank` shape of Cohere, Jina,
/// text-embeddings-inference, vLLM, Infinity and llama.cpp's server. Unset `base_url`: no
/// reranking. See `docs/retrieval.md`, "Reranking".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RerankConfig {
    /// Requests go to `{base_url}/rerank`, exactly as given (`…/v1` where the server wants it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The reranking model's name, sent as `model` (unset: not sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Bearer token for the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret<String>>,
    /// Results of the fused order handed to the reranker (at least the request's `limit`).
    pub candidates: usize,
    /// Longest wait for the reranker, in milliseconds; past it the fused order stands.
    pub timeout_ms: u64,
}

impl Default for RerankConfig {
    fn default() -> Self {
        Self {
            base_url: None,
            model: None,
            api_key: None,
            candidates: 50,
            timeout_ms: 5_000,
        }
    }
}

impl RerankConfig {
    /// The client settings, when a server is configured.
    pub fn settings(&self) -> Option<quire_models::RerankSettings> {
        Some(quire_models::RerankSettings {
            base_url: self.base_url.clone()?,
            model: self.model.clone(),
            api_key: self.api_key.as_ref().map(|k| k.expose().clone()),
            timeout: std::time::Duration::from_millis(self.timeout_ms),
        })
    }

    fn validate(&self) -> anyhow::Result<()> {
        if !(1..=1_000).contains(&self.candidates) {
            bail!("search.rerank.candidates must be between 1 and 1000");
        }
        if self.timeout_ms == 0 {
            bail!("search.rerank.timeout_ms must be at least 1");
        }
        if self.base_url.is_none() && (self.model.is_some() || self.api_key.is_some()) {
            bail!("search.rerank.model and search.rerank.api_key need search.rerank.base_url");
        }
        Ok(())
    }
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
            rerank: RerankConfig::default(),
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
        self.rerank.validate()
    }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::load;

    #[test]
    fn the_reranker_is_configured_from_the_environment() {
        let off = load(&[]).unwrap();
        assert_eq!(off.search.rerank.base_url, None);
        assert!(off.search.rerank.settings().is_none());
        assert_eq!(off.search.rerank.candidates, 50);
        assert_eq!(off.search.rerank.timeout_ms, 5_000);

        let on = load(&[
            ("QUIRE_SEARCH_RERANK_BASE_URL", "http://localhost:8080/v1"),
            ("QUIRE_SEARCH_RERANK_MODEL", "bge-reranker-v2-m3"),
            ("QUIRE_SEARCH_RERANK_API_KEY", "rr-hunter2"),
            ("QUIRE_SEARCH_RERANK_CANDIDATES", "20"),
            ("QUIRE_SEARCH_RERANK_TIMEOUT_MS", "750"),
        ])
        .unwrap();
        let settings = on.search.rerank.settings().unwrap();
        assert_eq!(settings.base_url, "http://localhost:8080/v1");
        assert_eq!(settings.model.as_deref(), Some("bge-reranker-v2-m3"));
        assert_eq!(settings.api_key.as_deref(), Some("rr-hunter2"));
        assert_eq!(settings.timeout, std::time::Duration::from_millis(750));
        assert_eq!(on.search.rerank.candidates, 20);
        let shown = toml::to_string(&on.redacted()).unwrap();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("[search.rerank]"), "{shown}");

        for (name, value, needle) in [
            (
                "QUIRE_SEARCH_RERANK_CANDIDATES",
                "0",
                "search.rerank.candidates",
            ),
            (
                "QUIRE_SEARCH_RERANK_TIMEOUT_MS",
                "0",
                "search.rerank.timeout_ms",
            ),
            ("QUIRE_SEARCH_RERANK_MODEL", "m", "search.rerank.base_url"),
        ] {
            let err = load(&[(name, value)]).unwrap_err();
            assert!(format!("{err:#}").contains(needle), "{name}: {err:#}");
        }
    }

    #[test]
    fn the_printed_defaults_show_the_rerank_settings_unset() {
        let text = crate::config::Config::default_toml();
        assert!(
            text.contains("[search.rerank]\ncandidates = 50\ntimeout_ms = 5000\n# base_url = "),
            "{text}"
        );
    }
}
