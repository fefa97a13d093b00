//! Configuration, in layers: compiled-in defaults < `--config FILE` (TOML) < `QUIRE_…`
//! environment variables < command-line flags.
//!
//! Every setting has an environment variable named after its path: `QUIRE_` followed by the
//! table and key in upper case, joined by `_` (`limits.max_upload_bytes` is
//! `QUIRE_LIMITS_MAX_UPLOAD_BYTES`, `data_dir` is `QUIRE_DATA_DIR`).
//!
//! Each `[section]` is a module of its own: its settings, their defaults and its checks. This
//! module holds the whole ([`Config`]) and the layering.

mod connectors;
mod embedding;
mod files;
mod limits;
mod llm;
mod log;
mod metrics;
mod ocr;
mod parsing;
mod pii;
mod search;
mod store;
mod webhooks;
mod workers;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use quire_ingest::ChunkingParams;
use serde::{Deserialize, Serialize};
use toml::{Table, Value};

pub use self::connectors::ConnectorsConfig;
pub use self::embedding::EmbeddingConfig;
pub use self::files::{FilesConfig, FilesLocation};
pub use self::limits::LimitsConfig;
pub use self::llm::LlmConfig;
pub use self::log::LogConfig;
pub use self::metrics::MetricsConfig;
pub use self::ocr::{OcrConfig, OcrMode};
pub use self::parsing::ParsingConfig;
pub use self::pii::PiiConfig;
pub use self::search::{RerankConfig, SearchConfig};
pub use self::store::StoreConfig;
pub use self::webhooks::WebhooksConfig;
pub use self::workers::WorkersConfig;

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
    /// Reading scanned pages and images (Tesseract).
    pub ocr: OcrConfig,
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
    /// Sources that sync: the folders they may read, the key that seals their credentials.
    pub connectors: ConnectorsConfig,
    /// Personal data: which documents wait for an administrator's review.
    pub pii: PiiConfig,
    /// Where metadata, jobs, keys and the outbox live.
    pub store: StoreConfig,
    /// Where original files live.
    pub files: FilesConfig,
    /// The Prometheus endpoint.
    pub metrics: MetricsConfig,
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
            ocr: OcrConfig::default(),
            workers: WorkersConfig::default(),
            embedding: EmbeddingConfig::default(),
            search: SearchConfig::default(),
            llm: LlmConfig::default(),
            webhooks: WebhooksConfig::default(),
            connectors: ConnectorsConfig::default(),
            pii: PiiConfig::default(),
            store: StoreConfig::default(),
            files: FilesConfig::default(),
            metrics: MetricsConfig::default(),
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

    /// Where originals are kept: `files.url`, else `files/` in the data directory.
    pub fn files_location(&self) -> anyhow::Result<FilesLocation> {
        self.files.location(&self.data_dir)
    }

    /// A copy fit to print: every secret (API keys, the S3 secret, the database URL's
    /// password) replaced by `***`, so `quire config show` never puts one on a screen or in a log.
    pub fn redacted(&self) -> Self {
        let hide = |secret: &Option<quire_core::Secret<String>>| {
            secret
                .as_ref()
                .map(|_| quire_core::Secret::new("***".to_owned()))
        };
        let mut shown = self.clone();
        shown.llm.api_key = hide(&self.llm.api_key);
        shown.embedding.api_key = hide(&self.embedding.api_key);
        shown.search.rerank.api_key = hide(&self.search.rerank.api_key);
        shown.files.secret_access_key = hide(&self.files.secret_access_key);
        shown.store.url = self.store.url.as_ref().map(|url| {
            quire_core::Secret::new(
                quire_store::StoreLocation::parse(url.expose())
                    .map_or_else(|_| "***".to_owned(), |location| location.to_string()),
            )
        });
        shown
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
        self.files.validate(&self.data_dir)?;
        self.limits.validate()?;
        if self.parsing.max_text_mb == 0 || self.parsing.max_chunks == 0 {
            bail!("parsing.max_text_mb and parsing.max_chunks must be at least 1");
        }
        if self.chunking.target_tokens < 16 {
            bail!("chunking.target_tokens must be at least 16");
        }
        if self.chunking.overlap_tokens >= self.chunking.target_tokens {
            bail!("chunking.overlap_tokens must be smaller than chunking.target_tokens");
        }
        self.log.validate()?;
        self.ocr.validate()?;
        self.embedding.validate()?;
        self.search.validate()?;
        self.llm.validate()?;
        self.pii.policy()?;
        self.webhooks.validate()?;
        self.metrics.validate()?;
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

/// Settings that are unset (`None`) by default, as (table, key, example value); a nested
/// table is named by its dotted path (`search.rerank`). They are missing from the table of
/// defaults, where [`apply_env`] looks, so they are handled apart.
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
        "ocr",
        "program",
        "\"/usr/bin/tesseract\"  # unset: tesseract on the PATH",
    ),
    (
        "ocr",
        "tessdata_dir",
        "\"/usr/share/tesseract-ocr/5/tessdata\"  # unset: the program's own",
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
        "connectors",
        "secret_key",
        "\"<32 random bytes, base64>\"  # unset: generated into data_dir/connectors.key",
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
    (
        "files",
        "url",
        "\"s3://quire-originals/prefix\"  # or file:///path; unset: data_dir/files",
    ),
    (
        "files",
        "endpoint",
        "\"https://minio.example:9000\"  # S3-compatible services; unset: AWS",
    ),
    ("files", "region", "\"eu-central-1\""),
    (
        "files",
        "access_key_id",
        "\"AKIA…\"  # unset: the usual AWS sources (environment, profile, role)",
    ),
    ("files", "secret_access_key", "\"…\"  # with access_key_id"),
    (
        "search.rerank",
        "base_url",
        "\"http://localhost:8080/v1\"  # a /rerank server, posted at {base_url}/rerank; unset: no reranking",
    ),
    (
        "search.rerank",
        "model",
        "\"bge-reranker-v2-m3\"  # sent as `model`; unset: not sent",
    ),
    (
        "search.rerank",
        "api_key",
        "\"…\"  # with base_url, if the server wants one",
    ),
    (
        "metrics",
        "bind",
        "\"127.0.0.1:9464\"  # Prometheus scrapes /metrics here; unset: no metrics endpoint",
    ),
];

/// Sets each optional setting whose environment variable is set; an empty value unsets it.
fn apply_optional_env(table: &mut Table, env: &[(String, String)]) {
    for (path, key, _) in OPTIONAL_SETTINGS {
        let name = format!("QUIRE_{}_{key}", path.replace('.', "_")).to_uppercase();
        let Some((_, raw)) = env.iter().find(|(k, _)| *k == name) else {
            continue;
        };
        let mut section = Some(&mut *table);
        for part in path.split('.') {
            section = match section.and_then(|t| t.get_mut(part)) {
                Some(Value::Table(inner)) => Some(inner),
                _ => None,
            };
        }
        let Some(section) = section else {
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
pub(crate) mod tests {
    use super::*;

    /// An environment of these variables only.
    pub(crate) fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The configuration these environment variables make, with no file and no flags.
    pub(crate) fn load(pairs: &[(&str, &str)]) -> anyhow::Result<Config> {
        Config::load(None, env(pairs), &Overrides::default())
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
    fn chunk_sizes_are_estimated_unless_the_models_tokens_are_asked_for() {
        use quire_ingest::TokenCounting;
        assert_eq!(load(&[]).unwrap().chunking.count, TokenCounting::Estimate);
        let model = load(&[("QUIRE_CHUNKING_COUNT", "model")]).unwrap();
        assert_eq!(model.chunking.count, TokenCounting::Model);
        assert!(load(&[("QUIRE_CHUNKING_COUNT", "words")]).is_err());
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
            text.contains("documents_per_worker = 100\n# worker_program = "),
            "unset keys are shown commented out in their table:\n{text}"
        );
        assert!(
            text.contains("[files]\nallow_http = false\n# url = \"s3://"),
            "the files section and its unset keys are shown:\n{text}"
        );
        assert!(text.contains("# secret_access_key = "), "{text}");
    }
}
