//! A [`Reranker`] backed by a server speaking the rerank shape Cohere, Jina, vLLM, Infinity
//! and llama.cpp's server share: `POST {base_url}/rerank` with
//! `{"model", "query", "documents": [..], "top_n"}`, answered by
//! `{"results": [{"index", "relevance_score"}, ..]}`. Hugging Face text-embeddings-inference
//! answers a bare `[{"index", "score"}, ..]` and wants the passages as `texts`: both are
//! understood (see [`HttpReranker`]). Every answer is checked, never trusted: one finite score
//! for each passage sent, or an error.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::ModelError;
use crate::http::{build, client_builder, excerpt, explanation, transport_error};
use quire_core::rerank::Reranker;

/// How to reach a reranking server.
#[derive(Clone)]
pub struct RerankSettings {
    /// Requests go to `{base_url}/rerank`, exactly (a trailing `/` is dropped, nothing is
    /// added): `https://api.cohere.com/v2`, `https://api.jina.ai/v1`, `http://localhost:8000/v1`
    /// (vLLM; its root works too), `http://localhost:8080` (text-embeddings-inference, whose
    /// `/rerank` sits at the root), `http://localhost:7997` (Infinity),
    /// `http://localhost:8080/v1` (llama.cpp's server; its root works too).
    pub base_url: String,
    /// Sent as `model` when set (Cohere and Jina need it; servers of one model ignore it).
    pub model: Option<String>,
    /// Sent as `Authorization: Bearer …` when set. Never printed: `Debug` shows it redacted.
    pub api_key: Option<String>,
    /// Longest wait for one request, from sending to the last byte of the answer.
    pub timeout: Duration,
}

/// Written by hand so the API key can never reach a log.
impl fmt::Debug for RerankSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RerankSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Reranks through a server (see the module's documentation for the shapes it speaks). Sends
/// the passages as `documents`; a server that answers HTTP 422 naming `texts`
/// (text-embeddings-inference) is asked again with `texts`, and from then on always so.
#[derive(Debug)]
pub struct HttpReranker {
    settings: RerankSettings,
    client: reqwest::Client,
    /// `{base_url}/rerank`.
    endpoint: String,
    /// The server wants the passages as `texts`, not `documents`.
    wants_texts: AtomicBool,
}

impl HttpReranker {
    /// A client for `settings`; checks the URL, does not contact the server (a server that is
    /// down costs each search its fallback, not the service its start).
    pub fn new(settings: RerankSettings) -> Result<Self, ModelError> {
        let trimmed = settings.base_url.trim_end_matches('/');
        let base = reqwest::Url::parse(trimmed).map_err(|e| {
            ModelError::Settings(format!(
                "rerank base_url {:?} is not a URL ({e}); expected e.g. http://localhost:8080/v1",
                settings.base_url
            ))
        })?;
        if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
            return Err(ModelError::Settings(format!(
                "rerank base_url {:?} must be an http:// or https:// URL with a host",
                settings.base_url
            )));
        }
        if settings
            .model
            .as_deref()
            .is_some_and(|m| m.trim().is_empty())
        {
            return Err(ModelError::Settings(
                "the rerank model name is empty".to_owned(),
            ));
        }
        if settings.timeout.is_zero() {
            return Err(ModelError::Settings(
                "the rerank timeout must be positive".to_owned(),
            ));
        }
        let endpoint = format!("{trimmed}/rerank");
        let client = build(client_builder(settings.timeout))?;
        Ok(Self {
            settings,
            client,
            endpoint,
            wants_texts: AtomicBool::new(false),
        })
    }

    /// Where requests go: `{base_url}/rerank`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// One request, answered by the body of a success.
    async fn request(
        &self,
        query: &str,
        documents: &[String],
        as_texts: bool,
    ) -> Result<Vec<u8>, Refusal> {
        let body = RerankRequest {
            model: self.settings.model.as_deref(),
            query,
            documents: (!as_texts).then_some(documents),
            texts: as_texts.then_some(documents),
            top_n: documents.len(),
        };
        let mut request = self
            .client
            .post(&self.endpoint)
            .timeout(self.settings.timeout)
            .json(&body);
        if let Some(key) = &self.settings.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Refusal::Failed(self.transport(&e)))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| Refusal::Failed(self.transport(&e)))?;
        if status.is_success() {
            return Ok(bytes.to_vec());
        }
        if status.as_u16() == 422 && !as_texts && String::from_utf8_lossy(&bytes).contains("texts")
        {
            return Err(Refusal::WantsTexts);
        }
        Err(Refusal::Failed(ModelError::Remote {
            url: self.endpoint.clone(),
            status: status.as_u16(),
            message: remote_message(status.as_u16(), &bytes),
        }))
    }

    fn transport(&self, error: &reqwest::Error) -> ModelError {
        transport_error(&self.endpoint, error, self.settings.timeout)
    }

    fn protocol(&self, message: String) -> ModelError {
        ModelError::Protocol {
            url: self.endpoint.clone(),
            message,
        }
    }

    /// Parses and checks a successful answer: each index in range and once, each score
    /// finite, every document scored.
    fn scores(&self, answer: &[u8], expected: usize) -> Result<Vec<f32>, ModelError> {
        let parsed: RerankResponse = serde_json::from_slice(answer).map_err(|e| {
            self.protocol(format!(
                "the answer is not a rerank result list ({e}): {}",
                excerpt(answer)
            ))
        })?;
        let items = match parsed {
            RerankResponse::Results { results } => results,
            RerankResponse::Bare(items) => items,
        };
        let mut scores: Vec<Option<f32>> = vec![None; expected];
        for item in items {
            let slot = scores.get_mut(item.index).ok_or_else(|| {
                self.protocol(format!(
                    "result index {} is out of range for {expected} documents",
                    item.index
                ))
            })?;
            if slot.is_some() {
                return Err(self.protocol(format!("result index {} appears twice", item.index)));
            }
            if !item.score.is_finite() {
                return Err(self.protocol(format!(
                    "the score of document {} is not a finite number",
                    item.index
                )));
            }
            *slot = Some(item.score);
        }
        scores
            .into_iter()
            .enumerate()
            .map(|(index, score)| {
                score.ok_or_else(|| {
                    self.protocol(format!(
                        "document {index} has no score (asked for {expected} with top_n)"
                    ))
                })
            })
            .collect()
    }
}

#[async_trait]
impl Reranker for HttpReranker {
    fn name(&self) -> String {
        match &self.settings.model {
            Some(model) => format!("{model} at {}", self.endpoint),
            None => format!("server at {}", self.endpoint),
        }
    }

    async fn rerank(&self, query: &str, documents: &[String]) -> Result<Vec<f32>, ModelError> {
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        let as_texts = self.wants_texts.load(Ordering::Relaxed);
        let answer = match self.request(query, documents, as_texts).await {
            Ok(answer) => answer,
            Err(Refusal::Failed(error)) => return Err(error),
            Err(Refusal::WantsTexts) => {
                let answer = self
                    .request(query, documents, true)
                    .await
                    .map_err(Refusal::into_error)?;
                self.wants_texts.store(true, Ordering::Relaxed);
                answer
            }
        };
        self.scores(&answer, documents.len())
    }
}

/// Why a request brought no answer.
enum Refusal {
    /// HTTP 422 naming `texts`: the server wants the passages under that name.
    WantsTexts,
    /// Anything else.
    Failed(ModelError),
}

impl Refusal {
    fn into_error(self) -> ModelError {
        match self {
            // Only asked for with `documents`, so never the answer to a `texts` request.
            Self::WantsTexts => ModelError::Inference("the rerank server refused `texts`".into()),
            Self::Failed(error) => error,
        }
    }
}

/// The request body: `documents` for most servers, `texts` for text-embeddings-inference.
#[derive(Serialize)]
struct RerankRequest<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    query: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    documents: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    texts: Option<&'a [String]>,
    top_n: usize,
}

/// `{"results": [...]}` (Cohere, Jina, vLLM, Infinity, llama.cpp) or a bare list
/// (text-embeddings-inference); `document`, `usage` and the like are ignored.
#[derive(Deserialize)]
#[serde(untagged)]
enum RerankResponse {
    Results { results: Vec<RerankItem> },
    Bare(Vec<RerankItem>),
}

#[derive(Deserialize)]
struct RerankItem {
    index: usize,
    #[serde(alias = "relevance_score")]
    score: f32,
}

/// The server's own explanation of an error status (`error.message`, `error`, `message` or
/// `detail`), else the start of its body.
fn remote_message(status: u16, body: &[u8]) -> String {
    let text = explanation(body);
    let hint = match status {
        401 | 403 => " (check search.rerank.api_key)",
        404 => " (check search.rerank.base_url: requests go to {base_url}/rerank)",
        _ => "",
    };
    format!("{text}{hint}")
}
