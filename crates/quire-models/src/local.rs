//! The local embedder: a model directory loaded once, texts embedded on the CPU.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use crate::bert::{Bert, BertConfig};
use crate::tokenizer::WordPiece;
use crate::{Embedder, ModelError, Purpose};

/// sentence-transformers' window for all-MiniLM-L6-v2 (`sentence_bert_config.json`): longer
/// inputs are cut, not split.
const DEFAULT_MAX_TOKENS: usize = 256;

/// A sentence embedder loaded from a model directory. Cheap to clone: clones share the
/// weights.
#[derive(Debug, Clone)]
pub struct LocalEmbedder {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    tokenizer: WordPiece,
    bert: Bert,
    max_tokens: usize,
    dimensions: usize,
    name: String,
    model_id: String,
    config: BertConfig,
}

impl LocalEmbedder {
    /// Loads `config.json`, `vocab.txt` and `model.safetensors` from `dir`; the window comes
    /// from `sentence_bert_config.json` when present.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let config: BertConfig = serde_json::from_str(&read(&dir.join("config.json"))?)
            .map_err(|e| ModelError::Config(e.to_string()))?;
        let tokenizer = WordPiece::from_vocab(&read(&dir.join("vocab.txt"))?)
            .map_err(|e| ModelError::Config(e.to_string()))?;
        let bert = Bert::load(&dir.join("model.safetensors"), &config)?;
        let max_tokens = std::fs::read_to_string(dir.join("sentence_bert_config.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|v| v["max_seq_length"].as_u64())
            .map_or(DEFAULT_MAX_TOKENS, |n| n as usize)
            .min(bert.max_positions());
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let model_id = format!("local:{name}@{}", fingerprint(dir)?);
        Ok(Self {
            inner: Arc::new(Inner {
                tokenizer,
                bert,
                max_tokens,
                dimensions: config.hidden_size,
                name,
                model_id,
                config,
            }),
        })
    }

    /// Length of the vectors.
    pub fn dimensions(&self) -> usize {
        self.inner.dimensions
    }

    /// The model's configuration.
    pub fn config(&self) -> &BertConfig {
        &self.inner.config
    }

    /// The model directory's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// `local:` + the directory's name + a fingerprint of its files, so replacing the weights
    /// under the same name still counts as a new model.
    pub fn model_id(&self) -> &str {
        &self.inner.model_id
    }

    /// Token ids of `text` as the model sees them (cut to the window).
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        self.inner.tokenizer.encode(text, self.inner.max_tokens)
    }

    /// The unit-length embedding of each text, in order. Texts are embedded in batches of
    /// similar length, so little work goes into padding.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let sequences: Vec<Vec<u32>> = texts.iter().map(|t| self.token_ids(t)).collect();
        let mut order: Vec<usize> = (0..sequences.len()).collect();
        order.sort_by_key(|&i| sequences[i].len());
        let mut out = vec![Vec::new(); sequences.len()];
        for group in order.chunks(BATCH_SIZE) {
            let batch: Vec<Vec<u32>> = group.iter().map(|&i| sequences[i].clone()).collect();
            for (&i, vector) in group.iter().zip(self.inner.bert.embed_batch(&batch)?) {
                out[i] = vector;
            }
        }
        Ok(out)
    }
}

/// Sequences per forward pass: large enough that the projections are big products, small
/// enough that one batch's activations stay in a few MiB.
const BATCH_SIZE: usize = 4;

#[async_trait]
impl Embedder for LocalEmbedder {
    fn model_id(&self) -> &str {
        LocalEmbedder::model_id(self)
    }

    fn dimensions(&self) -> usize {
        LocalEmbedder::dimensions(self)
    }

    /// Runs on the blocking pool: a forward pass is milliseconds of CPU that must not stall
    /// the async workers.
    async fn embed(&self, texts: &[String], _: Purpose) -> Result<Vec<Vec<f32>>, ModelError> {
        let (model, texts) = (self.clone(), texts.to_vec());
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            LocalEmbedder::embed(&model, &refs)
        })
        .await
        .map_err(|e| ModelError::Inference(e.to_string()))?
    }
}

/// Hash of the configuration, the vocabulary, and the weights' size and first MiB: tells two
/// models apart without reading 90 MB at every start.
fn fingerprint(dir: &Path) -> Result<String, ModelError> {
    let mut hasher = Sha256::new();
    for name in ["config.json", "vocab.txt"] {
        hasher.update(read(&dir.join(name))?.as_bytes());
    }
    let weights = dir.join("model.safetensors");
    let io = |source| ModelError::File {
        path: weights.clone(),
        source,
    };
    let file = std::fs::File::open(&weights).map_err(io)?;
    hasher.update(file.metadata().map_err(io)?.len().to_le_bytes());
    let mut head = Vec::with_capacity(1 << 20);
    file.take(1 << 20).read_to_end(&mut head).map_err(io)?;
    hasher.update(&head);
    Ok(hex::encode(&hasher.finalize()[..6]))
}

fn read(path: &PathBuf) -> Result<String, ModelError> {
    std::fs::read_to_string(path).map_err(|source| ModelError::File {
        path: path.clone(),
        source,
    })
}
