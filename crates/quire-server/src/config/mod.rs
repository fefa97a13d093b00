//! Configuration, in layers: compiled-in defaults < `--config FILE` (TOML) < `QUIRE_…`
//! environment variables < command-line flags.
//!
//! Every setting has an environment variable named after its path: `QUIRE_` followed by the
//! table and key in upper case, joined by `_` (`limits.max_upload_bytes` is
//! `QUIRE_LIMITS_MAX_UPLOAD_BYTES`, `data_dir` is `QUIRE_DATA_DIR`).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use quire_core::Secret;
use quire_ingest::{ChunkingParams, Isolation, ParseLimits, WorkerCommand};
use serde::{Deserialize, Serialize};
use toml::{Table, Value};

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Where the database, indexes and original files live.
    pub data_dir: PathBuf,
    /// Address the HTTP server listens on.
    pub bind: String,
    /// Logging.
    pub log: LogConfig,
    /// Request and upload limits.
    pub limits: LimitsConfig,
    /// How documents are cut into chunks.
    pub chunking: ChunkingParams,
    /// Bounds on parsing one document.
    pub parsing: ParsingConfig,
    /// Background processing.
    pub workers: WorkersConfig,
    /// The embedding model for semantic search.
    pub embedding: EmbeddingConfig,
    /// How keyword and vector rankings are combined.
    pub search: SearchConfig,
    /// The language model that writes answers, and the queue in front of it.
    pub llm: LlmConfig,
    /// Outgoing webhooks.
    pub webhooks: WebhooksConfig,
    /// Personal data: which documents wait for an administrator's review.
    pub pii: PiiConfig,
    /// Where metadata, jobs, keys and the outbox live.
    pub store: StoreConfig,
}

/// `[store]`: the database behind the service, chosen at run time.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `sqlite:///path/to/quire.db` or `postgres://user:password@host/db`; unset: SQLite in
    /// the data directory (`<data_dir>/quire.db`), the embedded default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<Secret<String>>,
}

/// `[pii]`: documents are screened for personal data after parsing; those this policy holds
/// wait in `pending_review` (not searchable) for an administrator. The defaults were chosen on
/// measurements (`quire eval pii`, `docs/pii.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PiiConfig {
    /// Screen documents at all.
    pub enabled: bool,
    /// Types that count (`person_name`, `email`, `phone`, `credit_card`, `iban`, `us_ssn`,
    /// `ip_address`); findings of other types are ignored.
    pub types: Vec<String>,
    /// Findings less certain than this (0–1) are ignored.
    pub min_confidence: f32,
    /// Types of which one finding holds a document.
    pub strong: Vec<String>,
    /// Distinct e-mail addresses, phone numbers and IP addresses that hold a document (a
    /// customer list).
    pub min_findings: usize,
    /// Hold when a name appears with both an e-mail address and a phone number (a CV).
    pub name_with_contact: bool,
    /// Distinct names that hold a document by themselves; 0: names alone never do.
    pub min_names: usize,
}

impl Default for PiiConfig {
    fn default() -> Self {
        let p = quire_ingest::pii::Policy::default();
        Self {
            enabled: true,
            types: p.types.iter().map(|t| t.as_str().to_owned()).collect(),
            min_confidence: p.min_confidence,
            strong: p.strong.iter().map(|t| t.as_str().to_owned()).collect(),
            min_findings: p.min_findings,
            name_with_contact: p.name_with_contact,
            min_names: p.min_names.unwrap_or(0),
        }
    }
}

impl PiiConfig {
    /// The policy these settings describe.
    pub fn policy(&self) -> anyhow::Result<quire_ingest::pii::Policy> {
        let parse =
            |names: &[String], key: &str| -> anyhow::Result<Vec<quire_ingest::pii::PiiType>> {
                names
                    .iter()
                    .map(|n| {
                        n.parse().map_err(|_| {
                            anyhow::anyhow!(
                                "pii.{key}: unknown type {n:?} (person_name, email, phone, \
                             credit_card, iban, us_ssn, ip_address)"
                            )
                        })
                    })
                    .collect()
            };
        if !(0.0..=1.0).contains(&self.min_confidence) {
            bail!("pii.min_confidence must be between 0 and 1");
        }
        Ok(quire_ingest::pii::Policy {
            types: parse(&self.types, "types")?,
            min_confidence: self.min_confidence,
            strong: parse(&self.strong, "strong")?,
            min_findings: self.min_findings,
            name_with_contact: self.name_with_contact,
            min_names: (self.min_names > 0).then_some(self.min_names),
        })
    }
}

/// `[webhooks]`: how events are delivered to registered webhooks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhooksConfig {
    /// Allow targets on loopback, private, link-local and other internal addresses (refused
    /// by default, at registration and again at each delivery).
    pub allow_private_targets: bool,
    /// Longest wait for a receiver's answer, in seconds (the spec's 10).
    pub timeout_seconds: u64,
    /// Deliveries in flight at once.
    pub concurrency: usize,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        Self {
            allow_private_targets: false,
            timeout_seconds: 10,
            concurrency: 64,
        }
    }
}

/// `[llm]`: the chat model for `POST /api/v1/generate`. Without `base_url` answers come from
/// the built-in extractive answerer, which quotes the most relevant sentences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// An OpenAI-compatible server's base URL (`…/v1`: Ollama, llama.cpp server, vLLM,
    /// LM Studio, OpenAI).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The served model's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Bearer token for the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret<String>>,
    /// Longest wait for the server's first answer, and between two pieces of a stream, in
    /// seconds.
    pub timeout_seconds: u64,
    /// Sampling temperature.
    pub temperature: f32,
    /// Most tokens in one answer.
    pub max_tokens: u32,
    /// Answers generated at the same time; others wait in line. One suits a single local
    /// model; a hosted API takes more.
    pub max_concurrent: usize,
    /// Questions that may wait in line; beyond it generate answers 429 `queue_full`.
    pub max_queue: usize,
    /// Passages retrieved and numbered for each answer.
    pub passages: usize,
    /// Earlier exchanges of a conversation read back.
    pub history_turns: u32,
    /// Budget for those exchanges in the prompt, in estimated tokens (oldest left out first).
    pub history_tokens: usize,
    /// Seconds between SSE keep-alive comments while a stream has nothing else to send.
    pub keep_alive_seconds: u64,
}

impl Default for LlmConfig {
    fn default() -> Self {
        let g = quire_http::generate::GenerationSettings::default();
        Self {
            base_url: None,
            model: None,
            api_key: None,
            timeout_seconds: 60,
            temperature: 0.1,
            max_tokens: 1024,
            max_concurrent: 1,
            max_queue: 100,
            passages: g.passages,
            history_turns: g.history_turns,
            history_tokens: g.history_tokens,
            keep_alive_seconds: g.keep_alive.as_secs(),
        }
    }
}

impl LlmConfig {
    /// The grounding and streaming settings handed to the HTTP layer.
    pub fn generation_settings(&self) -> quire_http::generate::GenerationSettings {
        quire_http::generate::GenerationSettings {
            passages: self.passages,
            history_turns: self.history_turns,
            history_tokens: self.history_tokens,
            keep_alive: std::time::Duration::from_secs(self.keep_alive_seconds),
        }
    }
}

/// `[embedding]`: where chunk and query vectors come from. With neither `model_dir` nor
/// `base_url` set, the model `quire model fetch` put in the cache is used when it is there
/// (`use_cached_model`); otherwise semantic search is off and search is keyword only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbeddingConfig {
    /// A local sentence-transformers model directory (`config.json`, `vocab.txt`,
    /// `model.safetensors`), such as all-MiniLM-L6-v2 from `quire model fetch`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_dir: Option<PathBuf>,
    /// An OpenAI-compatible server's base URL (`…/v1`) to use instead of a local model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The served model's name (with `base_url`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Bearer token for the server (with `base_url`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret<String>>,
    /// Texts per request to the server.
    pub batch_size: usize,
    /// Longest wait for one request to the server, in seconds.
    pub timeout_seconds: u64,
    /// With neither `model_dir` nor `base_url`: use all-MiniLM-L6-v2 from the model cache
    /// (`~/.cache/quire-models`, or `QUIRE_MODEL_CACHE`) if `quire model fetch` or
    /// `scripts/fetch-model` put it there.
    pub use_cached_model: bool,
    /// The inference engine of a local model: `auto` (ONNX Runtime when its library is found,
    /// else candle), `onnxruntime` (an error without it) or `candle`.
    pub engine: String,
    /// The ONNX Runtime shared library (`libonnxruntime.so`); unset: `ORT_DYLIB_PATH`, then
    /// `onnxruntime/` in the model cache, where `scripts/fetch-onnxruntime` puts it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub onnxruntime_library: Option<PathBuf>,
    /// Put before every query sent to the server (models such as E5 want `query: `).
    pub query_prefix: String,
    /// Put before every chunk sent to the server (E5: `passage: `).
    pub document_prefix: String,
}

impl Default for EmbeddingConfig {
    fn default() -> Self {
        Self {
            model_dir: None,
            base_url: None,
            model: None,
            api_key: None,
            batch_size: 64,
            timeout_seconds: 30,
            use_cached_model: true,
            engine: "auto".into(),
            onnxruntime_library: None,
            query_prefix: String::new(),
            document_prefix: String::new(),
        }
    }
}

impl EmbeddingConfig {
    /// How the local model is to be run.
    pub fn engine_options(&self) -> anyhow::Result<quire_models::EngineOptions> {
        let engine = match self.engine.as_str() {
            "auto" => quire_models::Engine::Auto,
            "candle" => quire_models::Engine::Candle,
            "onnxruntime" => quire_models::Engine::OnnxRuntime,
            other => bail!(
                "embedding.engine must be \"auto\", \"onnxruntime\" or \"candle\", not {other:?}"
            ),
        };
        Ok(quire_models::EngineOptions {
            engine,
            onnxruntime_library: self.onnxruntime_library.clone(),
        })
    }
}

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
}

impl Default for SearchConfig {
    fn default() -> Self {
        let d = quire_http::search::SearchSettings::default();
        Self {
            fusion: match d.method {
                quire_http::search::FusionMethod::ReciprocalRank => "rrf".into(),
                quire_http::search::FusionMethod::Convex => "convex".into(),
            },
            rrf_k: d.fusion.k,
            keyword_weight: d.fusion.keyword_weight,
            vector_weight: d.fusion.vector_weight,
            candidates: d.candidates,
        }
    }
}

impl SearchConfig {
    /// The settings handed to the search code.
    pub fn settings(&self) -> quire_http::search::SearchSettings {
        quire_http::search::SearchSettings {
            method: if self.fusion == "convex" {
                quire_http::search::FusionMethod::Convex
            } else {
                quire_http::search::FusionMethod::ReciprocalRank
            },
            fusion: quire_search::FusionParams {
                k: self.rrf_k,
                keyword_weight: self.keyword_weight,
                vector_weight: self.vector_weight,
            },
            candidates: self.candidates,
        }
    }
}

/// `[log]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A tracing filter such as `info` or `quire=debug,info` (overridden by `RUST_LOG`).
    pub level: String,
    /// `text` or `json`.
    pub format: String,
}

/// `[limits]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest uploaded file, in bytes.
    pub max_upload_bytes: u64,
    /// Largest JSON request body, in bytes.
    pub max_json_bytes: usize,
    /// Most files in one bulk upload.
    pub max_bulk_files: usize,
    /// Default search requests per minute per key.
    pub search_per_minute: u32,
    /// Default generate requests per minute per key.
    pub generate_per_minute: u32,
}

/// `[parsing]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ParsingConfig {
    /// Most pages (slides, sheets) in one document.
    pub max_pages: u32,
    /// Most bytes unpacked from a container (DOCX, XLSX, …) or decoded from attachments.
    pub max_unpacked_bytes: u64,
    /// Most entries in a container.
    pub max_archive_entries: usize,
    /// How deep attachments inside attachments are followed (e-mail).
    pub max_attachment_depth: u32,
    /// Parse each document in a child process, killed at the time budget and held to
    /// `memory_limit_mb`; `false` parses on the server's own threads (no memory limit, and a
    /// hang keeps its thread until the server stops).
    pub isolate: bool,
    /// Memory one document's parsing may use, in MiB, on top of the worker's own size at start
    /// (0: no limit). Only with `isolate`.
    pub memory_limit_mb: u64,
    /// Program run as the parse worker (`PROGRAM parse-worker`); unset, the running `quire`
    /// binary. For packaging and tests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_program: Option<PathBuf>,
}

impl Default for ParsingConfig {
    fn default() -> Self {
        let limits = ParseLimits::default();
        Self {
            max_pages: limits.max_pages,
            max_unpacked_bytes: limits.max_unpacked_bytes,
            max_archive_entries: limits.max_archive_entries,
            max_attachment_depth: limits.max_attachment_depth,
            isolate: true,
            memory_limit_mb: 1024,
            worker_program: None,
        }
    }
}

impl ParsingConfig {
    /// The limits handed to the parsers.
    pub fn limits(&self) -> ParseLimits {
        ParseLimits {
            max_pages: self.max_pages,
            max_unpacked_bytes: self.max_unpacked_bytes,
            max_archive_entries: self.max_archive_entries,
            max_attachment_depth: self.max_attachment_depth,
        }
    }

    /// Where documents are parsed: `quire parse-worker` child processes unless `isolate` is off.
    pub fn isolation(&self) -> anyhow::Result<Isolation> {
        if !self.isolate {
            return Ok(Isolation::InProcess);
        }
        let program = match &self.worker_program {
            Some(program) => program.clone(),
            None => std::env::current_exe()
                .context("could not find the running program to start parse workers")?,
        };
        Ok(Isolation::ChildProcess(WorkerCommand {
            program,
            args: vec!["parse-worker".into()],
            memory_limit_bytes: self.memory_limit_mb.saturating_mul(1024 * 1024),
        }))
    }
}

/// `[workers]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkersConfig {
    /// Documents processed at the same time (0 disables processing in this process).
    pub count: usize,
    /// How often idle workers look for jobs, in milliseconds.
    pub poll_interval_ms: u64,
    /// How long a job stays leased to its worker, in seconds; a job whose lease runs out is
    /// taken up again.
    pub lease_seconds: u64,
    /// Claims of one document (crashes included) before it is failed.
    pub max_attempts: u32,
    /// Longest time spent processing one document, in seconds.
    pub time_budget_seconds: u64,
    /// How long shutdown waits for running jobs, in seconds.
    pub shutdown_grace_seconds: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("./quire-data"),
            bind: "127.0.0.1:8080".into(),
            log: LogConfig::default(),
            limits: LimitsConfig::default(),
            chunking: ChunkingParams::default(),
            parsing: ParsingConfig::default(),
            workers: WorkersConfig::default(),
            embedding: EmbeddingConfig::default(),
            search: SearchConfig::default(),
            llm: LlmConfig::default(),
            webhooks: WebhooksConfig::default(),
            pii: PiiConfig::default(),
            store: StoreConfig::default(),
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            level: "info,tantivy=warn".into(),
            format: "text".into(),
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_upload_bytes: 100 * 1024 * 1024,
            max_json_bytes: 1024 * 1024,
            max_bulk_files: 100,
            search_per_minute: 100,
            generate_per_minute: 100,
        }
    }
}

impl Default for WorkersConfig {
    fn default() -> Self {
        Self {
            count: 2,
            poll_interval_ms: 1000,
            lease_seconds: 600,
            max_attempts: 3,
            time_budget_seconds: 300,
            shutdown_grace_seconds: 10,
        }
    }
}

/// Flags that override everything else.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--data-dir`.
    pub data_dir: Option<PathBuf>,
    /// `--bind`.
    pub bind: Option<String>,
}

impl Config {
    /// Where the store is: `store.url`, else `quire.db` in the data directory.
    pub fn store_location(&self) -> anyhow::Result<quire_store::StoreLocation> {
        match &self.store.url {
            Some(url) => Ok(quire_store::StoreLocation::parse(url.expose())?),
            None => Ok(quire_store::StoreLocation::Sqlite(
                self.data_dir.join("quire.db"),
            )),
        }
    }

    /// Loads the layers: defaults, then `file`, then the environment `env`, then `flags`.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        flags: &Overrides,
    ) -> anyhow::Result<Self> {
        let mut layered = to_table(&Config::default())?;
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("could not read config file {}", path.display()))?;
            let from_file: Table = toml::from_str(&text)
                .with_context(|| format!("invalid TOML in {}", path.display()))?;
            merge(&mut layered, from_file);
        }
        let env: Vec<(String, String)> = env
            .into_iter()
            .filter(|(k, _)| k.starts_with("QUIRE_"))
            .collect();
        apply_optional_env(&mut layered, &env);
        apply_env(&mut layered, &mut Vec::new(), &env)?;
        let mut config: Config = Value::Table(layered)
            .try_into()
            .context("invalid configuration")?;
        if let Some(dir) = &flags.data_dir {
            config.data_dir = dir.clone();
        }
        if let Some(bind) = &flags.bind {
            config.bind = bind.clone();
        }
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> anyhow::Result<()> {
        self.store_location()?;
        if self.limits.max_upload_bytes == 0 {
            bail!("limits.max_upload_bytes must be at least 1");
        }
        if self.limits.search_per_minute == 0 || self.limits.generate_per_minute == 0 {
            bail!("rate limits must be at least 1 request per minute");
        }
        if self.limits.max_bulk_files == 0 {
            bail!("limits.max_bulk_files must be at least 1");
        }
        if self.chunking.target_tokens < 16 {
            bail!("chunking.target_tokens must be at least 16");
        }
        if self.chunking.overlap_tokens >= self.chunking.target_tokens {
            bail!("chunking.overlap_tokens must be smaller than chunking.target_tokens");
        }
        if !matches!(self.log.format.as_str(), "text" | "json") {
            bail!("log.format must be \"text\" or \"json\"");
        }
        let e = &self.embedding;
        if e.model_dir.is_some() && e.base_url.is_some() {
            bail!(
                "set either embedding.model_dir (a local model) or embedding.base_url (an \
                 OpenAI-compatible server), not both"
            );
        }
        if e.base_url.is_some() && e.model.is_none() {
            bail!("embedding.base_url needs embedding.model (the served model's name)");
        }
        e.engine_options()?;
        if e.batch_size == 0 || e.timeout_seconds == 0 {
            bail!("embedding.batch_size and embedding.timeout_seconds must be at least 1");
        }
        let s = &self.search;
        if !(s.rrf_k >= 0.0 && s.keyword_weight >= 0.0 && s.vector_weight >= 0.0)
            || s.keyword_weight + s.vector_weight <= 0.0
        {
            bail!("search.rrf_k and the weights must be non-negative, and a weight positive");
        }
        if !matches!(s.fusion.as_str(), "rrf" | "convex") {
            bail!("search.fusion must be \"rrf\" or \"convex\"");
        }
        if s.candidates == 0 {
            bail!("search.candidates must be at least 1");
        }
        let l = &self.llm;
        if l.base_url.is_some() != l.model.is_some() {
            bail!("llm.base_url and llm.model go together (the server and the model it serves)");
        }
        if l.max_concurrent == 0 {
            bail!("llm.max_concurrent must be at least 1");
        }
        if l.passages == 0 || l.passages > 50 {
            bail!("llm.passages must be between 1 and 50");
        }
        self.pii.policy()?;
        if self.webhooks.timeout_seconds == 0 || self.webhooks.concurrency == 0 {
            bail!("webhooks.timeout_seconds and webhooks.concurrency must be at least 1");
        }
        if l.timeout_seconds == 0 || l.keep_alive_seconds == 0 || l.max_tokens == 0 {
            bail!(
                "llm.timeout_seconds, llm.keep_alive_seconds and llm.max_tokens must be at least 1"
            );
        }
        Ok(())
    }

    /// The defaults as a commented TOML file (`quire config print-default`).
    pub fn default_toml() -> String {
        let mut body = toml::to_string_pretty(&Config::default()).unwrap_or_default();
        for (table, key, example) in OPTIONAL_SETTINGS {
            // TOML has no "unset": show the key commented out at the end of its table.
            let Some(start) = body.find(&format!("[{table}]\n")) else {
                continue;
            };
            let end = body[start..]
                .find("\n\n")
                .map_or(body.len(), |n| start + n + 1);
            body.insert_str(end, &format!("# {key} = {example}\n"));
        }
        format!(
            "# Quire configuration: the compiled-in defaults.\n\
             # Every key can also be set with an environment variable: QUIRE_ + the table and key\n\
             # in upper case joined by '_' (limits.max_upload_bytes -> QUIRE_LIMITS_MAX_UPLOAD_BYTES).\n\
             # Keys shown commented out are unset by default; an empty variable unsets them.\n\
             # Precedence: defaults < this file (--config) < environment < command-line flags.\n\n{body}"
        )
    }
}

fn to_table(config: &Config) -> anyhow::Result<Table> {
    match Value::try_from(config)? {
        Value::Table(t) => Ok(t),
        _ => bail!("configuration did not serialise to a table"),
    }
}

fn merge(base: &mut Table, over: Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(Value::Table(b)), Value::Table(o)) => merge(b, o),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Settings that are unset (`None`) by default, as (table, key, example value). They are
/// missing from the table of defaults, where [`apply_env`] looks, so they are handled apart.
const OPTIONAL_SETTINGS: &[(&str, &str, &str)] = &[
    (
        "store",
        "url",
        "\"postgres://quire:password@db.example/quire\"  # unset: sqlite in data_dir",
    ),
    (
        "parsing",
        "worker_program",
        "\"/usr/lib/quire/quire\"  # unset: the running quire binary",
    ),
    (
        "embedding",
        "model_dir",
        "\"~/.cache/quire-models/all-MiniLM-L6-v2\"  # unset (and no base_url): keyword search only",
    ),
    (
        "embedding",
        "onnxruntime_library",
        "\"~/.cache/quire-models/onnxruntime/libonnxruntime.so\"  # unset: ORT_DYLIB_PATH, then that cache path",
    ),
    (
        "llm",
        "base_url",
        "\"http://localhost:11434/v1\"  # an OpenAI-compatible chat server; unset: extractive answers",
    ),
    ("llm", "model", "\"llama3.1:8b\"  # with base_url"),
    (
        "llm",
        "api_key",
        "\"sk-…\"  # with base_url, if the server wants one",
    ),
    (
        "embedding",
        "base_url",
        "\"http://localhost:11434/v1\"  # an OpenAI-compatible /v1/embeddings server",
    ),
    (
        "embedding",
        "model",
        "\"nomic-embed-text\"  # with base_url",
    ),
    (
        "embedding",
        "api_key",
        "\"sk-…\"  # with base_url, if the server wants one",
    ),
];

/// Sets each optional setting whose environment variable is set; an empty value unsets it.
fn apply_optional_env(table: &mut Table, env: &[(String, String)]) {
    for (section, key, _) in OPTIONAL_SETTINGS {
        let name = format!("QUIRE_{section}_{key}").to_uppercase();
        let Some((_, raw)) = env.iter().find(|(k, _)| *k == name) else {
            continue;
        };
        let Some(Value::Table(section)) = table.get_mut(*section) else {
            continue;
        };
        if raw.trim().is_empty() {
            section.remove(*key);
        } else {
            section.insert((*key).to_owned(), Value::String(raw.trim().to_owned()));
        }
    }
}

/// Replaces each leaf of `table` whose environment variable is set, parsed as the leaf's type.
fn apply_env(
    table: &mut Table,
    path: &mut Vec<String>,
    env: &[(String, String)],
) -> anyhow::Result<()> {
    for (key, value) in table.iter_mut() {
        path.push(key.clone());
        if let Value::Table(inner) = value {
            apply_env(inner, path, env)?;
        } else {
            let name = format!("QUIRE_{}", path.join("_").to_uppercase());
            if let Some((_, raw)) = env.iter().find(|(k, _)| *k == name) {
                *value =
                    parse_like(value, raw).with_context(|| format!("invalid value in {name}"))?;
            }
        }
        path.pop();
    }
    Ok(())
}

fn parse_like(current: &Value, raw: &str) -> anyhow::Result<Value> {
    let raw = raw.trim();
    Ok(match current {
        Value::Integer(_) => Value::Integer(raw.parse().context("expected an integer")?),
        Value::Float(_) => Value::Float(raw.parse().context("expected a number")?),
        Value::Boolean(_) => Value::Boolean(match raw.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => true,
            "false" | "0" | "no" | "off" => false,
            _ => bail!("expected true or false"),
        }),
        _ => Value::String(raw.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_match_the_documented_ones() {
        let c = Config::load(None, env(&[]), &Overrides::default()).unwrap();
        assert_eq!(c.data_dir, PathBuf::from("./quire-data"));
        assert_eq!(c.bind, "127.0.0.1:8080");
        assert_eq!(c.limits.max_upload_bytes, 100 * 1024 * 1024);
        assert_eq!(c.limits.search_per_minute, 100);
    }

    #[test]
    fn the_llm_is_configured_from_the_environment() {
        let c = Config::load(
            None,
            env(&[
                ("QUIRE_LLM_BASE_URL", "http://localhost:11434/v1"),
                ("QUIRE_LLM_MODEL", "llama3.1:8b"),
                ("QUIRE_LLM_API_KEY", "sk-test"),
                ("QUIRE_LLM_MAX_CONCURRENT", "3"),
            ]),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.llm.base_url.as_deref(), Some("http://localhost:11434/v1"));
        assert_eq!(c.llm.model.as_deref(), Some("llama3.1:8b"));
        assert_eq!(c.llm.api_key.as_ref().unwrap().expose(), "sk-test");
        assert_eq!(c.llm.max_concurrent, 3);
        let err = Config::load(
            None,
            env(&[("QUIRE_LLM_BASE_URL", "http://localhost:11434/v1")]),
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("llm.model"), "{err:#}");
        let err = Config::load(
            None,
            env(&[("QUIRE_LLM_MAX_CONCURRENT", "0")]),
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("llm.max_concurrent"), "{err:#}");
    }

    #[test]
    fn an_unknown_embedding_engine_is_refused() {
        let err = Config::load(
            None,
            env(&[("QUIRE_EMBEDDING_ENGINE", "gpu")]),
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("embedding.engine"), "{err:#}");
        let c = Config::load(
            None,
            env(&[("QUIRE_EMBEDDING_ENGINE", "candle")]),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(
            c.embedding.engine_options().unwrap().engine,
            quire_models::Engine::Candle
        );
    }

    #[test]
    fn layers_apply_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("quire.toml");
        std::fs::write(
            &file,
            "bind = \"0.0.0.0:9000\"\ndata_dir = \"/from/file\"\n[limits]\nsearch_per_minute = 7\nmax_bulk_files = 3\n",
        )
        .unwrap();
        let c = Config::load(
            Some(&file),
            env(&[
                ("QUIRE_DATA_DIR", "/from/env"),
                ("QUIRE_LIMITS_SEARCH_PER_MINUTE", "9"),
                ("OTHER", "x"),
            ]),
            &Overrides {
                data_dir: Some("/from/flag".into()),
                bind: None,
            },
        )
        .unwrap();
        assert_eq!(c.bind, "0.0.0.0:9000");
        assert_eq!(c.data_dir, PathBuf::from("/from/flag"));
        assert_eq!(c.limits.search_per_minute, 9);
        assert_eq!(c.limits.max_bulk_files, 3);
    }

    #[test]
    fn bad_values_are_reported_with_their_source() {
        let err = Config::load(
            None,
            env(&[("QUIRE_WORKERS_COUNT", "many")]),
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("QUIRE_WORKERS_COUNT"),
            "{err:#}"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("q.toml");
        std::fs::write(&file, "[limits]\nmax_upload_byte = 1\n").unwrap();
        let err = Config::load(Some(&file), env(&[]), &Overrides::default()).unwrap_err();
        assert!(format!("{err:#}").contains("max_upload_byte"), "{err:#}");
    }

    #[test]
    fn printed_defaults_parse_back_to_the_defaults() {
        let text = Config::default_toml();
        let parsed: Config = toml::from_str(&text).unwrap();
        assert_eq!(parsed, Config::default());
        assert!(
            text.contains("memory_limit_mb = 1024\n# worker_program = "),
            "unset keys are shown commented out in their table:\n{text}"
        );
    }

    #[test]
    fn parsing_isolation_follows_the_settings() {
        let c = Config::load(None, env(&[]), &Overrides::default()).unwrap();
        let Isolation::ChildProcess(worker) = c.parsing.isolation().unwrap() else {
            panic!("parsing is isolated by default");
        };
        assert_eq!(worker.program, std::env::current_exe().unwrap());
        assert_eq!(worker.args, ["parse-worker"]);
        assert_eq!(worker.memory_limit_bytes, 1024 * 1024 * 1024);

        let c = Config::load(
            None,
            env(&[
                ("QUIRE_PARSING_WORKER_PROGRAM", "/opt/quire/bin/quire"),
                ("QUIRE_PARSING_MEMORY_LIMIT_MB", "16"),
            ]),
            &Overrides::default(),
        )
        .unwrap();
        let Isolation::ChildProcess(worker) = c.parsing.isolation().unwrap() else {
            panic!("parsing is isolated by default");
        };
        assert_eq!(worker.program, PathBuf::from("/opt/quire/bin/quire"));
        assert_eq!(worker.memory_limit_bytes, 16 * 1024 * 1024);

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("q.toml");
        std::fs::write(&file, "[parsing]\nworker_program = \"/from/file\"\n").unwrap();
        let c = Config::load(
            Some(&file),
            env(&[("QUIRE_PARSING_WORKER_PROGRAM", "")]),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(
            c.parsing.worker_program, None,
            "an empty variable unsets it"
        );

        let c = Config::load(
            None,
            env(&[("QUIRE_PARSING_ISOLATE", "false")]),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.parsing.isolation().unwrap(), Isolation::InProcess);
    }
}
