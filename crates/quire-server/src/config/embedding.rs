//! `[embedding]`: the model behind semantic search.

use std::path::PathBuf;

use anyhow::bail;
use quire_core::Secret;
use serde::{Deserialize, Serialize};

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
    /// With `use_cached_model` and no model in the cache: fetch it (and the ONNX Runtime
    /// library) at start, in the background, verified against pinned SHA-256 sums, and turn
    /// semantic search on once it is there. `false` for air-gapped installs: the log then names
    /// the command that brings the files.
    pub fetch_model: bool,
    /// The inference engine of a local model: `auto` (ONNX Runtime when its library is found,
    /// else candle), `onnxruntime` (an error without it) or `candle`.
    pub engine: String,
    /// The ONNX Runtime shared library (`libonnxruntime.so`); unset: `ORT_DYLIB_PATH`, then
    /// `onnxruntime/` in the model cache, where `scripts/fetch-onnxruntime` puts it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub onnxruntime_library: Option<PathBuf>,
    /// The arithmetic of a local model's linear layers: `auto` (int8 on ONNX Runtime when the
    /// CPU has VNNI, else fp32), `fp32`, or `int8` (ONNX Runtime only). `bf16` is refused:
    /// no engine has bfloat16 products on the CPU. Changing it does not re-embed.
    pub precision: String,
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
            fetch_model: true,
            engine: "auto".into(),
            onnxruntime_library: None,
            precision: "auto".into(),
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
        let precision = match self.precision.as_str() {
            "auto" => quire_models::Precision::Auto,
            "fp32" => quire_models::Precision::Fp32,
            "int8" => quire_models::Precision::Int8,
            "bf16" => quire_models::Precision::Bf16,
            other => {
                bail!("embedding.precision must be \"auto\", \"fp32\" or \"int8\", not {other:?}")
            }
        };
        let options = quire_models::EngineOptions {
            engine,
            onnxruntime_library: self.onnxruntime_library.clone(),
            precision,
            // One caller at a time unless the server says how many workers embed at once.
            sessions: 1,
        };
        // Refused here, at start, rather than when the model is first loaded.
        options.check()?;
        Ok(options)
    }

    /// Refuses settings the service cannot work with.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.model_dir.is_some() && self.base_url.is_some() {
            bail!(
                "set either embedding.model_dir (a local model) or embedding.base_url (an \
                 OpenAI-compatible server), not both"
            );
        }
        if self.base_url.is_some() && self.model.is_none() {
            bail!("embedding.base_url needs embedding.model (the served model's name)");
        }
        self.engine_options()?;
        if self.batch_size == 0 || self.timeout_seconds == 0 {
            bail!("embedding.batch_size and embedding.timeout_seconds must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::env;
    use crate::config::{Config, Overrides};

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
    fn precision_is_auto_unless_set() {
        let c = Config::load(None, env(&[]), &Overrides::default()).unwrap();
        assert_eq!(c.embedding.precision, "auto");
        assert_eq!(
            c.embedding.engine_options().unwrap().precision,
            quire_models::Precision::Auto
        );
        let c = Config::load(
            None,
            env(&[("QUIRE_EMBEDDING_PRECISION", "int8")]),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(
            c.embedding.engine_options().unwrap().precision,
            quire_models::Precision::Int8
        );
    }

    #[test]
    fn an_unknown_precision_is_refused() {
        let err = Config::load(
            None,
            env(&[("QUIRE_EMBEDDING_PRECISION", "fp16")]),
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("embedding.precision"),
            "{err:#}"
        );
    }

    #[test]
    fn int8_on_candle_is_refused_at_start() {
        let err = Config::load(
            None,
            env(&[
                ("QUIRE_EMBEDDING_ENGINE", "candle"),
                ("QUIRE_EMBEDDING_PRECISION", "int8"),
            ]),
            &Overrides::default(),
        )
        .unwrap_err();
        let err = format!("{err:#}");
        assert!(err.contains("int8") && err.contains("candle"), "{err}");
        // candle with `auto` is fine: it means fp32 there.
        Config::load(
            None,
            env(&[("QUIRE_EMBEDDING_ENGINE", "candle")]),
            &Overrides::default(),
        )
        .unwrap();
    }

    #[test]
    fn bf16_is_refused_with_the_reason() {
        for engine in ["auto", "onnxruntime", "candle"] {
            let err = Config::load(
                None,
                env(&[
                    ("QUIRE_EMBEDDING_ENGINE", engine),
                    ("QUIRE_EMBEDDING_PRECISION", "bf16"),
                ]),
                &Overrides::default(),
            )
            .unwrap_err();
            let err = format!("{err:#}");
            assert!(
                err.contains("bfloat16 MatMul") && err.contains("\"int8\""),
                "{engine}: {err}"
            );
        }
    }
}
