//! The local embedder: a model directory loaded once, texts embedded on the CPU.

use std::path::{Path, PathBuf};

use crate::ModelError;
use crate::bert::{Bert, BertConfig};
use crate::tokenizer::WordPiece;

/// sentence-transformers' window for all-MiniLM-L6-v2 (`sentence_bert_config.json`): longer
/// inputs are cut, not split.
const DEFAULT_MAX_TOKENS: usize = 256;

/// A sentence embedder loaded from a model directory.
#[derive(Debug)]
pub struct LocalEmbedder {
    tokenizer: WordPiece,
    bert: Bert,
    max_tokens: usize,
    dimensions: usize,
    name: String,
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
        Ok(Self {
            tokenizer,
            bert,
            max_tokens,
            dimensions: config.hidden_size,
            name,
            config,
        })
    }

    /// Length of the vectors.
    pub fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// The model's configuration.
    pub fn config(&self) -> &BertConfig {
        &self.config
    }

    /// The model directory's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Token ids of `text` as the model sees them (cut to the window).
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, self.max_tokens)
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
            for (&i, vector) in group.iter().zip(self.bert.embed_batch(&batch)?) {
                out[i] = vector;
            }
        }
        Ok(out)
    }
}

/// Sequences per forward pass: large enough that the projections are big products, small
/// enough that one batch's activations stay in a few MiB.
const BATCH_SIZE: usize = 4;

fn read(path: &PathBuf) -> Result<String, ModelError> {
    std::fs::read_to_string(path).map_err(|source| ModelError::File {
        path: path.clone(),
        source,
    })
}
