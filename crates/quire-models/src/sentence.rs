//! What a sentence-transformers model directory says beyond the BERT weights: how the token
//! states become one sentence vector (`modules.json`, the pooling module's `config.json`, a
//! `Normalize` module), which prompts go before queries and documents
//! (`config_sentence_transformers.json`), and how the input is cut and cased
//! (`sentence_bert_config.json`). Read once at load, so a model such as BGE (CLS pooling, a
//! query instruction) or E5 (mean pooling, `query: ` and `passage: ` prompts) is embedded the
//! way sentence-transformers embeds it instead of always mean-pooled without prompts.
//!
//! A directory without `modules.json` is taken as all-MiniLM-L6-v2 is: mean pooling, then
//! normalised. Modules the engines cannot run (a `Dense` projection, for example) are refused
//! with an error naming them, never skipped.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::{ModelError, Purpose};

/// One way of pooling token states, in the order sentence-transformers concatenates them when
/// a model asks for several.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolingMode {
    /// The first token's state (`[CLS]`).
    Cls,
    /// The largest value of each dimension over the tokens.
    Max,
    /// The mean over the tokens.
    Mean,
    /// The sum over the tokens divided by the square root of their number.
    MeanSqrtLen,
    /// The mean weighted by position (the first token 1, the second 2, …).
    WeightedMean,
    /// The last token's state.
    LastToken,
}

impl PoolingMode {
    fn name(self) -> &'static str {
        match self {
            Self::Cls => "cls",
            Self::Max => "max",
            Self::Mean => "mean",
            Self::MeanSqrtLen => "mean_sqrt_len",
            Self::WeightedMean => "weightedmean",
            Self::LastToken => "lasttoken",
        }
    }
}

/// How a model directory turns text into a sentence vector, as sentence-transformers would.
#[derive(Debug, Clone, PartialEq)]
pub struct SentenceSettings {
    /// Pooling modes, concatenated in this order (usually one).
    pub pooling: Vec<PoolingMode>,
    /// Whether the prompt's tokens take part in the pooling (sentence-transformers'
    /// `include_prompt`; `[CLS]` counts as part of the prompt when they do not).
    pub include_prompt: bool,
    /// Whether a `Normalize` module follows the pooling.
    pub normalize: bool,
    /// Put before a search query.
    pub query_prompt: String,
    /// Put before a document's chunk.
    pub document_prompt: String,
    /// Lower-case the text before tokenizing (`do_lower_case`).
    pub lower_case: bool,
    /// The window in tokens (`max_seq_length`), when the directory sets one.
    pub max_seq_length: Option<usize>,
}

impl Default for SentenceSettings {
    /// all-MiniLM-L6-v2's: mean pooling, normalised, no prompts.
    fn default() -> Self {
        Self {
            pooling: vec![PoolingMode::Mean],
            include_prompt: true,
            normalize: true,
            query_prompt: String::new(),
            document_prompt: String::new(),
            lower_case: false,
            max_seq_length: None,
        }
    }
}

#[derive(Deserialize)]
struct Module {
    #[serde(default)]
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

/// `1_Pooling/config.json`, the fields that choose the modes: `pooling_mode` (a name or a
/// list, sentence-transformers 5 and later) or the older `pooling_mode_*` flags.
#[derive(Deserialize, Default)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode: Option<serde_json::Value>,
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
    #[serde(default = "yes")]
    include_prompt: bool,
}

fn yes() -> bool {
    true
}

const TRANSFORMER: &str = "sentence_transformers.models.Transformer";
const POOLING: &str = "sentence_transformers.models.Pooling";
const NORMALIZE: &str = "sentence_transformers.models.Normalize";

impl SentenceSettings {
    /// Reads the settings of the model directory `dir`; the defaults where it has no
    /// sentence-transformers files.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let mut settings = Self::default();
        if let Some(modules) = json_file::<Vec<Module>>(&dir.join("modules.json"))? {
            settings.read_modules(dir, &modules)?;
        }
        if let Some(config) = json_file::<Value>(&dir.join("sentence_bert_config.json"))? {
            settings.max_seq_length = config["max_seq_length"].as_u64().map(|n| n as usize);
            settings.lower_case = config["do_lower_case"].as_bool().unwrap_or(false);
        }
        if let Some(config) = json_file::<Value>(&dir.join("config_sentence_transformers.json"))? {
            settings.read_prompts(&config)?;
        }
        Ok(settings)
    }

    fn read_modules(&mut self, dir: &Path, modules: &[Module]) -> Result<(), ModelError> {
        let unsupported: Vec<&str> = modules
            .iter()
            .map(|m| m.kind.as_str())
            .filter(|kind| ![TRANSFORMER, POOLING, NORMALIZE].contains(kind))
            .collect();
        if !unsupported.is_empty() {
            return Err(ModelError::Unsupported(format!(
                "modules.json asks for {}, which Quire cannot run: a local model may have a \
                 Transformer (BERT), a Pooling and a Normalize module",
                unsupported.join(", ")
            )));
        }
        let Some(pooling) = modules.iter().find(|m| m.kind == POOLING) else {
            return Err(ModelError::Unsupported(
                "modules.json has no Pooling module: Quire needs one to make a sentence vector"
                    .into(),
            ));
        };
        let config: PoolingConfig =
            json_file(&dir.join(&pooling.path).join("config.json"))?.unwrap_or_default();
        self.pooling = match &config.pooling_mode {
            Some(named) => named_modes(named, &pooling.path)?,
            None => flagged_modes(&config),
        };
        // As sentence-transformers: a configuration that names no mode means the mean.
        if self.pooling.is_empty() {
            self.pooling = vec![PoolingMode::Mean];
        }
        self.include_prompt = config.include_prompt;
        self.normalize = modules.iter().any(|m| m.kind == NORMALIZE);
        Ok(())
    }

    /// Prompts by name, as `encode(prompt_name=…)` takes them: `query` for queries; for
    /// documents `document`, else `passage`, else `corpus`; the `default_prompt_name` where a
    /// purpose has none of its own.
    fn read_prompts(&mut self, config: &Value) -> Result<(), ModelError> {
        let prompts = &config["prompts"];
        let prompt = |name: &str| prompts[name].as_str().map(str::to_owned);
        let default = config["default_prompt_name"].as_str().map(|name| {
            prompt(name).ok_or_else(|| {
                ModelError::Config(format!(
                    "config_sentence_transformers.json names the default prompt {name:?}, \
                     which is not among its prompts"
                ))
            })
        });
        let default = default.transpose()?;
        self.query_prompt = prompt("query")
            .or_else(|| default.clone())
            .unwrap_or_default();
        self.document_prompt = ["document", "passage", "corpus"]
            .into_iter()
            .find_map(prompt)
            .or(default)
            .unwrap_or_default();
        // Similarities other than cosine rank by length too; Quire's vectors are unit length.
        let similarity = config["similarity_fn_name"].as_str().unwrap_or("cosine");
        if similarity != "cosine" && !self.normalize {
            return Err(ModelError::Unsupported(format!(
                "the model compares vectors by {similarity} without normalising them; Quire \
                 searches by cosine similarity, which would rank differently"
            )));
        }
        Ok(())
    }

    /// The prompt to put before a text embedded for `purpose`.
    pub fn prompt(&self, purpose: Purpose) -> &str {
        match purpose {
            Purpose::Query => &self.query_prompt,
            Purpose::Document => &self.document_prompt,
        }
    }

    /// Width of the sentence vector for token states of `hidden` values.
    pub fn dimensions(&self, hidden: usize) -> usize {
        hidden * self.pooling.len()
    }

    /// Whether these are the defaults (mean, normalised, no prompts, no lower-casing), which
    /// earlier versions always assumed: the model id stays what it was for such models.
    pub fn is_default(&self) -> bool {
        Self {
            max_seq_length: self.max_seq_length,
            ..Self::default()
        } == *self
    }

    /// A short description for the model id, so models differing only in these settings
    /// never share vectors.
    pub fn describe(&self) -> String {
        let modes: Vec<&str> = self.pooling.iter().map(|m| m.name()).collect();
        format!(
            "{}{}{}{}|q={:?}|d={:?}",
            modes.join("+"),
            if self.normalize { ",norm" } else { "" },
            if self.include_prompt {
                ""
            } else {
                ",no-prompt-pool"
            },
            if self.lower_case { ",lower" } else { "" },
            self.query_prompt,
            self.document_prompt
        )
    }

    /// The sentence vector from one sequence's token states: `rows` holds `width` values per
    /// token, the sequence's real tokens only (no padding); the first `prompt_tokens` of
    /// them (`[CLS]` and the prompt's) are left out of the pooling unless `include_prompt`.
    /// Always returned at unit length (Quire searches by cosine; see [`Self::normalize`]).
    pub fn pool(&self, rows: &[f32], width: usize, prompt_tokens: usize) -> Vec<f32> {
        let tokens = rows.len() / width.max(1);
        let row = |t: usize| &rows[t * width..(t + 1) * width];
        // sentence-transformers masks the prompt out of the pooling; CLS then reads the first
        // token left (the text's first), last token the last.
        let first = if self.include_prompt {
            0
        } else {
            prompt_tokens.min(tokens)
        };
        let pooled_rows = first..tokens;
        let count = pooled_rows.len();
        let mut out = Vec::with_capacity(self.dimensions(width));
        for mode in &self.pooling {
            match mode {
                PoolingMode::Cls => out.extend_from_slice(row(first.min(tokens.saturating_sub(1)))),
                PoolingMode::LastToken => out.extend_from_slice(row(tokens.saturating_sub(1))),
                PoolingMode::Max if count == 0 => out.extend(std::iter::repeat_n(0.0, width)),
                PoolingMode::Max => out.extend((0..width).map(|d| {
                    pooled_rows
                        .clone()
                        .map(|t| row(t)[d])
                        .fold(f32::NEG_INFINITY, f32::max)
                })),
                PoolingMode::Mean | PoolingMode::MeanSqrtLen | PoolingMode::WeightedMean => {
                    let weight = |t: usize| match mode {
                        // Positions count from 1 over the whole sequence, prompt included.
                        PoolingMode::WeightedMean => (t + 1) as f32,
                        _ => 1.0,
                    };
                    let total: f32 = pooled_rows.clone().map(weight).sum();
                    let divisor = match mode {
                        PoolingMode::MeanSqrtLen => total.sqrt(),
                        _ => total,
                    }
                    // sentence-transformers clamps the mask's sum at 1e-9.
                    .max(1e-9);
                    out.extend((0..width).map(|d| {
                        pooled_rows
                            .clone()
                            .map(|t| row(t)[d] * weight(t))
                            .sum::<f32>()
                            / divisor
                    }));
                }
            }
        }
        let norm = out.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        out.iter_mut().for_each(|x| *x /= norm);
        out
    }
}

/// Modes named by `pooling_mode`, in its order.
fn named_modes(named: &Value, folder: &str) -> Result<Vec<PoolingMode>, ModelError> {
    let names: Vec<&str> = match named {
        Value::String(name) => vec![name.as_str()],
        Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    names
        .into_iter()
        .map(|name| match name {
            "cls" => Ok(PoolingMode::Cls),
            "max" => Ok(PoolingMode::Max),
            "mean" => Ok(PoolingMode::Mean),
            "mean_sqrt_len_tokens" => Ok(PoolingMode::MeanSqrtLen),
            "weightedmean" => Ok(PoolingMode::WeightedMean),
            "lasttoken" => Ok(PoolingMode::LastToken),
            other => Err(ModelError::Unsupported(format!(
                "{folder}/config.json asks for the pooling mode {other:?}, which Quire does not \
                 know (cls, max, mean, mean_sqrt_len_tokens, weightedmean, lasttoken)"
            ))),
        })
        .collect()
}

/// Modes turned on by the older `pooling_mode_*` flags, in sentence-transformers' order.
fn flagged_modes(config: &PoolingConfig) -> Vec<PoolingMode> {
    [
        (config.pooling_mode_cls_token, PoolingMode::Cls),
        (config.pooling_mode_max_tokens, PoolingMode::Max),
        (config.pooling_mode_mean_tokens, PoolingMode::Mean),
        (
            config.pooling_mode_mean_sqrt_len_tokens,
            PoolingMode::MeanSqrtLen,
        ),
        (
            config.pooling_mode_weightedmean_tokens,
            PoolingMode::WeightedMean,
        ),
        (config.pooling_mode_lasttoken, PoolingMode::LastToken),
    ]
    .into_iter()
    .filter_map(|(on, mode)| on.then_some(mode))
    .collect()
}

/// The JSON in `path`, `None` when there is no such file.
fn json_file<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, ModelError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ModelError::File {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ModelError::Config(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests;
