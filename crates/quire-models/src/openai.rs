//! An [`Embedder`] backed by a server speaking OpenAI's `POST /v1/embeddings`: OpenAI itself,
//! Ollama, Hugging Face text-embeddings-inference, vLLM and the like. The servers differ in
//! small ways (some return vectors out of order, some do not normalise, each words its errors
//! differently), so every answer is checked and normalised here rather than trusted.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::http::{build, client_builder, excerpt, explanation, transport_error};
use crate::{Embedder, ModelError, Purpose, normalize};

/// Embedded once by [`OpenAiEmbedder::connect`] to learn the width and prove the settings work.
const PROBE_TEXT: &str = "Quire checks that the embedding server answers.";

/// Longest wait a server's `Retry-After` may impose on one retry: beyond this an operator is
/// better served by an error than by a stalled ingestion.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

/// How to reach an OpenAI-compatible embedding server. Build it with
/// [`OpenAiSettings::new`] and change the public fields as needed.
#[derive(Clone)]
pub struct OpenAiSettings {
    /// The API root, without `/embeddings`: `https://api.openai.com/v1`,
    /// `http://localhost:11434/v1` (Ollama), `http://localhost:8080/v1`
    /// (text-embeddings-inference), `http://localhost:8000/v1` (vLLM). A trailing `/` is fine.
    pub base_url: String,
    /// The model name the server knows (`text-embedding-3-small`, `nomic-embed-text`, …).
    pub model: String,
    /// Sent as `Authorization: Bearer …` when set. Never printed: `Debug` shows it redacted.
    pub api_key: Option<String>,
    /// When set, sent as the request's `dimensions` (models that can shorten their vectors,
    /// such as OpenAI's `text-embedding-3-*`) and required of every answer. When unset, the
    /// width is learned from the server at [`OpenAiEmbedder::connect`].
    pub dimensions: Option<usize>,
    /// Texts per request. Servers cap it (OpenAI at 2,048 inputs, text-embeddings-inference at
    /// 32 by default), so lower it when a server answers 413 or complains about the batch.
    pub batch_size: usize,
    /// Longest wait for one request, from sending to the last byte of the answer.
    pub timeout: Duration,
    /// Extra attempts after HTTP 429 or a 5xx answer (not after a timeout, which would multiply
    /// the wait).
    pub max_retries: u32,
    /// Wait before the first retry, doubled for each further one; a `Retry-After` header of
    /// up to 10 s takes precedence.
    pub retry_backoff: Duration,
    /// Put before every search query: instruction-tuned models want one (e5: `"query: "`,
    /// nomic-embed-text: `"search_query: "`). Empty for symmetric models.
    pub query_prefix: String,
    /// Put before every document chunk (e5: `"passage: "`, nomic-embed-text:
    /// `"search_document: "`). Empty for symmetric models.
    pub document_prefix: String,
}

impl OpenAiSettings {
    /// Settings for `model` at `base_url` with the defaults: no key, the server's own width,
    /// 64 texts per request, 30 s per request, 2 retries from 0.5 s, no prefixes.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            dimensions: None,
            batch_size: 64,
            timeout: Duration::from_secs(30),
            max_retries: 2,
            retry_backoff: Duration::from_millis(500),
            query_prefix: String::new(),
            document_prefix: String::new(),
        }
    }
}

/// Written by hand so the API key can never reach a log.
impl fmt::Debug for OpenAiSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("dimensions", &self.dimensions)
            .field("batch_size", &self.batch_size)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_backoff", &self.retry_backoff)
            .field("query_prefix", &self.query_prefix)
            .field("document_prefix", &self.document_prefix)
            .finish()
    }
}

/// Embeds through an OpenAI-compatible server. Cheap to clone: clones share the connection
/// pool.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedder {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    settings: OpenAiSettings,
    client: reqwest::Client,
    /// `{base_url}/embeddings`.
    endpoint: String,
    dimensions: usize,
    model_id: String,
}

impl OpenAiEmbedder {
    /// Checks the settings and embeds one probe text, so a wrong URL, key or model name fails
    /// here, at start-up, instead of at the first document. The probe also tells the width when
    /// [`OpenAiSettings::dimensions`] is unset, and must agree with it when set.
    pub async fn connect(settings: OpenAiSettings) -> Result<Self, ModelError> {
        let base = reqwest::Url::parse(settings.base_url.trim_end_matches('/')).map_err(|e| {
            ModelError::Settings(format!(
                "base_url {:?} is not a URL ({e}); expected e.g. http://localhost:11434/v1",
                settings.base_url
            ))
        })?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(ModelError::Settings(format!(
                "base_url {:?} must start with http:// or https://",
                settings.base_url
            )));
        }
        if settings.model.trim().is_empty() {
            return Err(ModelError::Settings("the model name is empty".to_owned()));
        }
        if settings.batch_size == 0 {
            return Err(ModelError::Settings(
                "batch_size must be at least 1".to_owned(),
            ));
        }
        if settings.dimensions == Some(0) {
            return Err(ModelError::Settings(
                "dimensions must be at least 1".to_owned(),
            ));
        }
        let authority = match (base.host_str(), base.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => {
                return Err(ModelError::Settings(format!(
                    "base_url {:?} names no host",
                    settings.base_url
                )));
            }
        };
        let endpoint = format!("{}/embeddings", base.as_str().trim_end_matches('/'));
        let client = build(client_builder(settings.timeout))?;
        let mut embedder = Inner {
            client,
            endpoint,
            dimensions: settings.dimensions.unwrap_or(0),
            model_id: String::new(),
            settings,
        };
        let probe = embedder
            .request(&[PROBE_TEXT.to_owned()], embedder.settings.dimensions)
            .await?;
        embedder.dimensions = probe[0].len();
        embedder.model_id = model_id(&embedder.settings, &authority, embedder.dimensions);
        Ok(Self {
            inner: Arc::new(embedder),
        })
    }

    /// The settings it was connected with.
    pub fn settings(&self) -> &OpenAiSettings {
        &self.inner.settings
    }
}

/// `openai:{model}@{host[:port]}/{width}d`, plus a hash of the prefixes when there are any:
/// each of these changes the vectors, so each must start a new index.
fn model_id(settings: &OpenAiSettings, authority: &str, dimensions: usize) -> String {
    let mut id = format!("openai:{}@{authority}/{dimensions}d", settings.model);
    if !settings.query_prefix.is_empty() || !settings.document_prefix.is_empty() {
        let mut hasher = Sha256::new();
        hasher.update(settings.query_prefix.as_bytes());
        hasher.update([0]);
        hasher.update(settings.document_prefix.as_bytes());
        id.push_str(&format!("+p{}", hex::encode(&hasher.finalize()[..4])));
    }
    id
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.inner.model_id
    }

    fn dimensions(&self) -> usize {
        self.inner.dimensions
    }

    fn engine(&self) -> String {
        format!("server at {}", self.inner.endpoint)
    }

    /// One request per [`OpenAiSettings::batch_size`] texts, in order; a failed batch fails
    /// the call (the caller's job retries the whole document).
    async fn embed(&self, texts: &[String], purpose: Purpose) -> Result<Vec<Vec<f32>>, ModelError> {
        let inner = &self.inner;
        let prefix = match purpose {
            Purpose::Query => &inner.settings.query_prefix,
            Purpose::Document => &inner.settings.document_prefix,
        };
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(inner.settings.batch_size) {
            let inputs: Cow<'_, [String]> = if prefix.is_empty() {
                Cow::Borrowed(batch)
            } else {
                Cow::Owned(batch.iter().map(|t| format!("{prefix}{t}")).collect())
            };
            vectors.extend(inner.request(&inputs, Some(inner.dimensions)).await?);
        }
        Ok(vectors)
    }
}

/// The request body. `encoding_format` is explicit because some servers default to base64.
#[derive(Serialize)]
struct EmbeddingsRequest<'a> {
    model: &'a str,
    input: &'a [String],
    encoding_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<usize>,
}

/// The part of the answer that matters; `object`, `model` and `usage` are ignored.
#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    /// Position in the request; missing from a few servers, which then answer in order.
    index: Option<usize>,
    embedding: Vec<f32>,
}

impl Inner {
    /// Embeds `inputs` in one request (retried on 429 and 5xx), returning unit vectors in the
    /// order of `inputs`, each `width` wide when `width` is given.
    async fn request(
        &self,
        inputs: &[String],
        width: Option<usize>,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let body = EmbeddingsRequest {
            model: &self.settings.model,
            input: inputs,
            encoding_format: "float",
            dimensions: self.settings.dimensions,
        };
        let mut attempt = 0;
        let answer = loop {
            let mut request = self
                .client
                .post(&self.endpoint)
                .timeout(self.settings.timeout)
                .json(&body);
            if let Some(key) = &self.settings.api_key {
                request = request.bearer_auth(key);
            }
            let response = request.send().await.map_err(|e| self.transport(&e))?;
            let status = response.status();
            let retry_after = retry_after(&response);
            let bytes = response.bytes().await.map_err(|e| self.transport(&e))?;
            if status.is_success() {
                break bytes;
            }
            let retryable = status.as_u16() == 429 || status.is_server_error();
            if !retryable || attempt >= self.settings.max_retries {
                return Err(ModelError::Remote {
                    url: self.endpoint.clone(),
                    status: status.as_u16(),
                    message: remote_message(status.as_u16(), &bytes),
                });
            }
            let backoff = self.settings.retry_backoff * 2u32.saturating_pow(attempt);
            tokio::time::sleep(retry_after.unwrap_or(backoff)).await;
            attempt += 1;
        };
        self.vectors(&answer, inputs.len(), width)
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

    /// Parses and checks a successful answer: one finite, non-empty vector per input, each
    /// index once, all of one width; then puts them in input order and normalises them.
    fn vectors(
        &self,
        answer: &[u8],
        expected: usize,
        width: Option<usize>,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let parsed: EmbeddingsResponse = serde_json::from_slice(answer).map_err(|e| {
            self.protocol(format!(
                "the answer is not an embeddings list ({e}): {}",
                excerpt(answer)
            ))
        })?;
        if parsed.data.len() != expected {
            return Err(self.protocol(format!(
                "asked for {expected} embeddings, got {}",
                parsed.data.len()
            )));
        }
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
        for (position, item) in parsed.data.into_iter().enumerate() {
            let index = item.index.unwrap_or(position);
            let slot = slots.get_mut(index).ok_or_else(|| {
                self.protocol(format!(
                    "embedding index {index} is out of range for {expected} inputs"
                ))
            })?;
            if slot.is_some() {
                return Err(self.protocol(format!("embedding index {index} appears twice")));
            }
            *slot = Some(item.embedding);
        }
        let width = width.unwrap_or_else(|| slots[0].as_ref().map_or(0, Vec::len));
        let mut vectors = Vec::with_capacity(expected);
        for (index, slot) in slots.into_iter().enumerate() {
            let mut vector =
                slot.ok_or_else(|| self.protocol(format!("embedding index {index} is missing")))?;
            if vector.is_empty() || vector.len() != width {
                return Err(self.protocol(format!(
                    "embedding {index} has {} values, expected {width} (did the model behind \
                     the server change, or does it ignore `dimensions`?)",
                    vector.len()
                )));
            }
            if vector.iter().any(|x| !x.is_finite()) {
                return Err(self.protocol(format!(
                    "embedding {index} contains a value that is not a finite number"
                )));
            }
            // OpenAI's vectors are unit length, Ollama's and vLLM's not always: the index
            // compares by dot product, so every vector is made unit length here.
            normalize(&mut vector);
            vectors.push(vector);
        }
        Ok(vectors)
    }
}

/// `Retry-After` in seconds (the form rate limiters use), capped at [`MAX_RETRY_AFTER`].
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let seconds: f64 = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (seconds.is_finite() && seconds >= 0.0)
        .then(|| Duration::from_secs_f64(seconds).min(MAX_RETRY_AFTER))
}

/// The server's own explanation of an error status, wherever this server family puts it
/// (OpenAI, Ollama and vLLM: `error.message`; text-embeddings-inference: `error`; FastAPI
/// servers: `detail`), with a hint for the statuses that usually mean a setting is wrong.
fn remote_message(status: u16, body: &[u8]) -> String {
    let text = explanation(body);
    let hint = match status {
        401 | 403 => " (check the API key)",
        404 => " (check that base_url is the API root, such as …/v1, and the model name)",
        413 => " (lower batch_size)",
        _ => "",
    };
    format!("{text}{hint}")
}
