//! The local embedder: a model directory loaded once, texts embedded on the CPU.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use crate::bert::{Bert, BertConfig};
use crate::onnx::{Linear, OnnxEncoder, cpu_has_vnni};
use crate::sentence::SentenceSettings;
use crate::token_count::ModelTokens;
use crate::tokenizer::WordPiece;
use crate::{Embedder, ModelError, Purpose};
use quire_core::embed::TokenCount;
use tokenizers::{Tokenizer, TruncationParams};

/// Which inference engine runs the local model. Both compute the same vectors (each matches
/// sentence-transformers to a cosine of 1.000000), so the choice never changes the model id
/// and never causes re-embedding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Engine {
    /// ONNX Runtime when its library is configured or found, else candle.
    #[default]
    Auto,
    /// The forward pass in this crate on candle tensors: always available.
    Candle,
    /// ONNX Runtime, loaded from a shared library; an error when it cannot be loaded.
    OnnxRuntime,
}

/// The arithmetic of the model's linear layers (where nearly all of its time goes). Unlike
/// the engine, the choice changes the vectors a little: int8 vectors have a cosine of 0.98
/// to 0.995 to the fp32 ones (see `docs/retrieval.md`). It does not change the model id, so
/// switching does not re-embed what is indexed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Precision {
    /// int8 on ONNX Runtime when the CPU has VNNI (its int8 dot-product instructions), where
    /// it was measured 2.2 times faster for at most 0.005 nDCG@10 on SciFact; fp32 otherwise.
    #[default]
    Auto,
    /// Single precision everywhere.
    Fp32,
    /// Dynamic quantisation on ONNX Runtime: int8 weights per output column, activations
    /// quantised at run time. Refused on candle.
    Int8,
    /// bfloat16 linear layers: refused, because neither engine has bfloat16 matrix products
    /// on the CPU ([`BF16_REFUSAL`]).
    Bf16,
}

impl Precision {
    /// The setting's value: `auto`, `fp32`, `int8` or `bf16`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Fp32 => "fp32",
            Self::Int8 => "int8",
            Self::Bf16 => "bf16",
        }
    }
}

/// Why [`Precision::Bf16`] is refused, and what to use instead.
pub const BF16_REFUSAL: &str = "embedding.precision = \"bf16\" is not available: ONNX \
    Runtime's CPU provider has no bfloat16 MatMul kernel (a graph that runs the linear layers \
    in bfloat16 is rejected when the session is built), and candle runs the model in fp32 \
    only; use \"int8\" (fastest on CPUs with VNNI or AVX2), \"fp32\" or \"auto\"";

/// Whether `auto` runs the linear layers in int8 on this CPU, detected at run time: where
/// `quire bench embed` and `quire eval retrieval` found int8 faster than fp32 and within
/// 0.005 nDCG@10 of it on SciFact (`docs/retrieval.md`, "Reduced precision"), that is with
/// VNNI (AVX512-VNNI or AVX-VNNI) or AVX2. Without VNNI the weights have seven bits, so ONNX
/// Runtime's 16-bit pair sums cannot saturate (`onnx/graph.rs`, `weight_levels`). Older CPUs
/// were not measured and stay fp32.
fn int8_pays() -> bool {
    #[cfg(target_arch = "x86_64")]
    let avx2 = std::arch::is_x86_feature_detected!("avx2");
    #[cfg(not(target_arch = "x86_64"))]
    let avx2 = false;
    cpu_has_vnni() || avx2
}

/// How to run the local model.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// The engine.
    pub engine: Engine,
    /// The ONNX Runtime library; when unset, [`crate::onnx::default_library`].
    pub onnxruntime_library: Option<PathBuf>,
    /// The arithmetic of the linear layers.
    pub precision: Precision,
    /// How many calls ONNX Runtime runs side by side, each on its own session with its share
    /// of the cores: the number of ingest workers, so that each embeds its document at once.
    /// 0 and 1 both mean one session with every core; there is never more than one per core.
    pub sessions: usize,
}

impl EngineOptions {
    /// Refuses a precision no engine can give: bf16 always, int8 on candle. Checked before
    /// anything is loaded, so a bad setting fails at start with the reason.
    pub fn check(&self) -> Result<(), ModelError> {
        match (self.precision, self.engine) {
            (Precision::Bf16, _) => Err(ModelError::Unsupported(BF16_REFUSAL.into())),
            (Precision::Int8, Engine::Candle) => Err(ModelError::Unsupported(
                "embedding.precision = \"int8\" needs the ONNX Runtime engine; candle runs \
                 the model in fp32 only (use embedding.engine = \"onnxruntime\" or \"auto\", \
                 or precision = \"fp32\")"
                    .into(),
            )),
            _ => Ok(()),
        }
    }

    /// The linear layers ONNX Runtime is to run. `Auto` picks int8 only where it was
    /// measured to pay ([`int8_pays`]).
    fn onnx_linear(&self) -> Linear {
        match self.precision {
            Precision::Int8 => Linear::Int8,
            Precision::Auto if int8_pays() => Linear::Int8,
            Precision::Auto | Precision::Fp32 | Precision::Bf16 => Linear::Fp32,
        }
    }
}

/// Text to the model's token ids (`[CLS] … [SEP]`, cut to the window).
#[derive(Debug)]
enum TextTokenizer {
    /// The model's own `tokenizer.json`, read with the `tokenizers` crate: whatever
    /// normaliser and vocabulary the model ships (cased or not) is honoured.
    File(Box<Tokenizer>),
    /// Our WordPiece over `vocab.txt`, for a directory without `tokenizer.json` (uncased
    /// BERT vocabularies only).
    WordPiece(WordPiece),
}

impl TextTokenizer {
    /// The model's `tokenizer.json` when it has one, cut at `window` tokens (its own
    /// truncation and padding are replaced: MiniLM's file cuts at 128 where
    /// sentence-transformers reads 256); else `vocab.txt`.
    fn load(dir: &Path, window: usize) -> Result<Self, ModelError> {
        let path = dir.join("tokenizer.json");
        if !path.exists() {
            return WordPiece::from_vocab(&read(&dir.join("vocab.txt"))?)
                .map(Self::WordPiece)
                .map_err(|e| ModelError::Config(e.to_string()));
        }
        let invalid = |e: tokenizers::Error| ModelError::Config(format!("{}: {e}", path.display()));
        let mut tokenizer = Tokenizer::from_file(&path).map_err(invalid)?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: window,
                ..TruncationParams::default()
            }))
            .map_err(invalid)?;
        tokenizer.with_padding(None);
        Ok(Self::File(Box::new(tokenizer)))
    }

    /// The ids of `text` cut at `window` tokens, lower-cased first where the model's
    /// `do_lower_case` says so (as sentence-transformers does before tokenizing).
    fn encode(&self, text: &str, window: usize, lower_case: bool) -> Result<Vec<u32>, ModelError> {
        if lower_case {
            return self.encode(&text.to_lowercase(), window, false);
        }
        match self {
            Self::WordPiece(wordpiece) => Ok(wordpiece.encode(text, window)),
            Self::File(tokenizer) => tokenizer
                .encode(text, true)
                .map(|encoding| encoding.get_ids().to_vec())
                .map_err(|e| ModelError::Inference(format!("the model's tokenizer: {e}"))),
        }
    }
}

#[derive(Debug)]
enum Encoder {
    Candle(Bert),
    OnnxRuntime(OnnxEncoder),
}

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
    tokenizer: TextTokenizer,
    encoder: Encoder,
    /// Why `Auto` fell back to candle, for the log.
    fallback: Option<String>,
    max_tokens: usize,
    /// The model's token counts from its `tokenizer.json`, when it ships one.
    tokens: Option<Arc<ModelTokens>>,
    dimensions: usize,
    name: String,
    model_id: String,
    config: BertConfig,
    /// Pooling, normalisation, prompts and casing from the sentence-transformers files.
    sentence: SentenceSettings,
    /// `[CLS]` plus the prompt's tokens, for documents and for queries (0 without a prompt).
    prompt_tokens: [usize; 2],
}

impl LocalEmbedder {
    /// Loads `config.json`, `vocab.txt` and `model.safetensors` from `dir` with the default
    /// engine choice ([`Engine::Auto`]); the window comes from `sentence_bert_config.json`
    /// when present.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        Self::load_with(dir, &EngineOptions::default())
    }

    /// Loads the model directory `dir` onto the engine `options` choose.
    pub fn load_with(dir: &Path, options: &EngineOptions) -> Result<Self, ModelError> {
        options.check()?;
        let config: BertConfig = serde_json::from_str(&read(&dir.join("config.json"))?)
            .map_err(|e| ModelError::Config(e.to_string()))?;
        config.check()?;
        let weights = dir.join("model.safetensors");
        let library = options
            .onnxruntime_library
            .clone()
            .or_else(crate::onnx::default_library);
        let linear = options.onnx_linear();
        let (encoder, fallback) = match (options.engine, library) {
            (Engine::Auto, None) if options.precision == Precision::Int8 => {
                return Err(ModelError::Unsupported(format!(
                    "embedding.precision = \"int8\" runs on ONNX Runtime, and no library was \
                     found: set embedding.onnxruntime_library or {}, or run \
                     scripts/fetch-onnxruntime",
                    crate::onnx::LIBRARY_ENV
                )));
            }
            (Engine::Candle, _) | (Engine::Auto, None) => {
                (Encoder::Candle(Bert::load(&weights, &config)?), None)
            }
            (Engine::OnnxRuntime, None) => {
                return Err(ModelError::Unsupported(format!(
                    "the ONNX Runtime engine needs its library: set embedding.onnxruntime_library \
                     or {}, or run scripts/fetch-onnxruntime",
                    crate::onnx::LIBRARY_ENV
                )));
            }
            (Engine::OnnxRuntime, Some(library)) => (
                Encoder::OnnxRuntime(OnnxEncoder::load(
                    &library,
                    &weights,
                    &config,
                    linear,
                    options.sessions,
                )?),
                None,
            ),
            (Engine::Auto, Some(library)) => {
                match OnnxEncoder::load(&library, &weights, &config, linear, options.sessions) {
                    Ok(encoder) => (Encoder::OnnxRuntime(encoder), None),
                    // Asked for explicitly, int8 must not turn into candle's fp32 quietly.
                    Err(e) if options.precision == Precision::Int8 => return Err(e),
                    Err(e) => (
                        Encoder::Candle(Bert::load(&weights, &config)?),
                        Some(e.to_string()),
                    ),
                }
            }
        };
        let sentence = SentenceSettings::load(dir)?;
        let max_tokens = sentence
            .max_seq_length
            .unwrap_or(DEFAULT_MAX_TOKENS)
            .min(config.max_position_embeddings);
        let tokenizer = TextTokenizer::load(dir, max_tokens)?;
        // `[CLS]` and the prompt's own tokens, per purpose: the prompt takes part of the
        // window, and is left out of the pooling where the model says so.
        // As sentence-transformers counts them: the prompt tokenized alone, its `[SEP]` not
        // counted; none without a prompt.
        let prompt_tokens = |prompt: &str| -> Result<usize, ModelError> {
            Ok(match prompt {
                "" => 0,
                _ => {
                    tokenizer
                        .encode(prompt, max_tokens, sentence.lower_case)?
                        .len()
                        - 1
                }
            })
        };
        let prompt_tokens = [
            prompt_tokens(sentence.prompt(Purpose::Document))?,
            prompt_tokens(sentence.prompt(Purpose::Query))?,
        ];
        // Chunks are cut to what is left of the window after the document prompt.
        let chunk_window = max_tokens
            .saturating_sub(prompt_tokens[0].saturating_sub(1))
            .max(1);
        // The same `tokenizer.json`, read once, counts chunk tokens for ingestion.
        let tokens = match &tokenizer {
            TextTokenizer::File(file) => Some(Arc::new(
                ModelTokens::from_tokenizer((**file).clone(), chunk_window)
                    .map_err(|e| ModelError::Config(format!("tokenizer.json: {e}")))?,
            )),
            TextTokenizer::WordPiece(_) => None,
        };
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut model_id = format!("local:{name}@{}", fingerprint(dir)?);
        if !sentence.is_default() {
            // Same weights read another way are another model: their vectors must not mix.
            let digest = Sha256::digest(sentence.describe().as_bytes());
            model_id.push_str(&format!("+{}", hex::encode(&digest[..4])));
        }
        Ok(Self {
            inner: Arc::new(Inner {
                tokenizer,
                encoder,
                fallback,
                max_tokens,
                tokens,
                dimensions: sentence.dimensions(config.hidden_size),
                name,
                model_id,
                config,
                sentence,
                prompt_tokens,
            }),
        })
    }

    /// Length of the vectors.
    pub fn dimensions(&self) -> usize {
        self.inner.dimensions
    }

    /// The engine running the model: `candle`, or `onnxruntime`, the precision of its linear
    /// layers, the library's path and its sessions (`onnxruntime int8
    /// (/…/libonnxruntime.so), 2 sessions of 1 thread`; `3 sessions of 2 or 3 threads` where the
    /// cores do not divide evenly).
    pub fn engine(&self) -> String {
        match &self.inner.encoder {
            Encoder::Candle(_) => "candle".into(),
            Encoder::OnnxRuntime(e) => {
                let sessions = e.sessions();
                let threads = match e.threads() {
                    (1, 1) => "1 thread".to_owned(),
                    (fewest, most) if fewest == most => format!("{most} threads"),
                    (fewest, most) => format!("{fewest} or {most} threads"),
                };
                format!(
                    "onnxruntime {} ({}), {sessions} session{} of {threads}",
                    self.precision().as_str(),
                    e.library().display(),
                    if sessions == 1 { "" } else { "s" },
                )
            }
        }
    }

    /// The precision the model runs in, resolved: [`Precision::Fp32`] or
    /// [`Precision::Int8`], never `Auto`.
    pub fn precision(&self) -> Precision {
        match &self.inner.encoder {
            Encoder::OnnxRuntime(e) if e.linear() == Linear::Int8 => Precision::Int8,
            _ => Precision::Fp32,
        }
    }

    /// Why ONNX Runtime was found but could not be used, when [`Engine::Auto`] fell back to
    /// candle.
    pub fn engine_fallback(&self) -> Option<&str> {
        self.inner.fallback.as_deref()
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

    /// Token ids of `text` as the model sees them (cut to the window), without a prompt.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        let inner = &self.inner;
        inner
            .tokenizer
            .encode(text, inner.max_tokens, inner.sentence.lower_case)
    }

    /// How the model directory's sentence-transformers files say texts become vectors.
    pub fn sentence_settings(&self) -> &SentenceSettings {
        &self.inner.sentence
    }

    /// The unit-length embedding of each document text, in order (with the model's document
    /// prompt, if it has one).
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.embed_for(texts, Purpose::Document)
    }

    /// The unit-length embedding of each text, in order, for `purpose` (whose prompt the
    /// model's configuration puts before it). Short texts of similar length share a forward
    /// pass and long ones run alone ([`passes`]), so little work goes into padding.
    pub fn embed_for(&self, texts: &[&str], purpose: Purpose) -> Result<Vec<Vec<f32>>, ModelError> {
        let prompt = self.inner.sentence.prompt(purpose);
        let prompt_tokens = self.inner.prompt_tokens[usize::from(purpose == Purpose::Query)];
        let sequences: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| match prompt {
                "" => self.token_ids(t),
                _ => self.token_ids(&format!("{prompt}{t}")),
            })
            .collect::<Result<_, _>>()?;
        let mut order: Vec<usize> = (0..sequences.len()).collect();
        order.sort_by_key(|&i| sequences[i].len());
        let groups = passes(&order, |i| sequences[i].len());
        let embed_group = |group: &[usize]| -> Result<Vec<(usize, Vec<f32>)>, ModelError> {
            let batch: Vec<Vec<u32>> = group.iter().map(|&i| sequences[i].clone()).collect();
            let states = match &self.inner.encoder {
                Encoder::Candle(bert) => bert.token_states(&batch)?,
                Encoder::OnnxRuntime(encoder) => encoder.token_states(&batch)?,
            };
            let width = self.inner.config.hidden_size;
            Ok(group
                .iter()
                .zip(states)
                .map(|(&i, rows)| (i, self.inner.sentence.pool(&rows, width, prompt_tokens)))
                .collect())
        };
        let side_by_side = match &self.inner.encoder {
            Encoder::OnnxRuntime(encoder) => encoder.sessions().min(groups.len()),
            Encoder::Candle(_) => 1,
        };
        let mut out = vec![Vec::new(); sequences.len()];
        for (i, vector) in in_parallel(&groups, side_by_side, embed_group)? {
            out[i] = vector;
        }
        Ok(out)
    }
}

/// Runs `embed_group` over `groups` on `threads` threads (this one among them; none is started
/// for one), each taking the next group; the groups are the same however many threads share
/// them, so the vectors are too. One long document thus uses every session while the other
/// workers are idle, and shares them when they are not (a call waits for a busy session).
fn in_parallel<F>(
    groups: &[&[usize]],
    threads: usize,
    embed_group: F,
) -> Result<Vec<(usize, Vec<f32>)>, ModelError>
where
    F: Fn(&[usize]) -> Result<Vec<(usize, Vec<f32>)>, ModelError> + Sync,
{
    let next = std::sync::atomic::AtomicUsize::new(0);
    let take = || -> Result<Vec<(usize, Vec<f32>)>, ModelError> {
        let mut out = Vec::new();
        loop {
            let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(group) = groups.get(at) else {
                return Ok(out);
            };
            out.extend(embed_group(group)?);
        }
    };
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads.max(1)).map(|_| scope.spawn(take)).collect();
        let mut out = take()?;
        for helper in helpers {
            let part = helper
                .join()
                .map_err(|_| ModelError::Inference("an embedding thread panicked".into()))??;
            out.extend(part);
        }
        Ok(out)
    })
}

/// The most tokens, padding included, one forward pass holds. The projections of a single
/// sequence of this length are already products large enough for the CPU's kernels, so long
/// sequences run alone, unpadded, and only short ones share a pass. Against four sequences to
/// every pass, `quire bench ingest` (hybrid SciFact, where a call is one document's one or two
/// chunks) took 9 % less time and 40 % less peak memory. The batch sizes per length behind the
/// budget are in docs/performance.md, "The encoder's operators and sequences per pass".
const PASS_TOKENS: usize = 256;

/// `order` (indexes sorted by ascending `length`) cut into forward passes: each takes the next
/// sequences while their count times the longest of them stays within [`PASS_TOKENS`]; a
/// longer sequence gets a pass of its own. Only the lengths decide, so a call's passes, and
/// with them its vectors, are the same however many sessions run them.
fn passes(order: &[usize], length: impl Fn(usize) -> usize) -> Vec<&[usize]> {
    let mut out = Vec::new();
    let mut start = 0;
    for (at, &i) in order.iter().enumerate() {
        if at > start && (at - start + 1) * length(i) > PASS_TOKENS {
            out.push(&order[start..at]);
            start = at;
        }
    }
    if start < order.len() {
        out.push(&order[start..]);
    }
    out
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn model_id(&self) -> &str {
        LocalEmbedder::model_id(self)
    }

    fn dimensions(&self) -> usize {
        LocalEmbedder::dimensions(self)
    }

    fn engine(&self) -> String {
        LocalEmbedder::engine(self)
    }

    fn tokens(&self) -> Option<Arc<dyn TokenCount>> {
        self.inner
            .tokens
            .clone()
            .map(|tokens| tokens as Arc<dyn TokenCount>)
    }

    /// int8 activations are quantised with one scale for the whole call.
    fn batch_invariant(&self) -> bool {
        self.precision() != Precision::Int8
    }

    /// Runs on the blocking pool: a forward pass is milliseconds of CPU that must not stall
    /// the async workers.
    async fn embed(&self, texts: &[String], purpose: Purpose) -> Result<Vec<Vec<f32>>, ModelError> {
        let (model, texts) = (self.clone(), texts.to_vec());
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            model.embed_for(&refs, purpose)
        })
        .await
        .map_err(|e| ModelError::Inference(e.to_string()))?
    }
}

/// Hash of the configuration, the vocabulary (`tokenizer.json` where there is no
/// `vocab.txt`), and the weights' size and first MiB: tells two models apart without reading
/// 90 MB at every start.
fn fingerprint(dir: &Path) -> Result<String, ModelError> {
    let mut hasher = Sha256::new();
    hasher.update(read(&dir.join("config.json"))?.as_bytes());
    let vocabulary = match dir.join("vocab.txt") {
        vocab if vocab.exists() => vocab,
        _ => dir.join("tokenizer.json"),
    };
    hasher.update(read(&vocabulary)?.as_bytes());
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// Short sequences share a pass up to the token budget; long ones run alone; every
    /// sequence is in exactly one pass, in the order given.
    #[test]
    fn passes_fill_up_to_the_token_budget() {
        let lengths = [8, 8, 8, 30, 60, 64, 100, 128, 128, 200, 256, 300];
        let order: Vec<usize> = (0..lengths.len()).collect();
        let passes = passes(&order, |i| lengths[i]);
        let sizes: Vec<Vec<usize>> = passes
            .iter()
            .map(|pass| pass.iter().map(|&i| lengths[i]).collect())
            .collect();
        assert_eq!(
            sizes,
            vec![
                vec![8, 8, 8, 30],
                vec![60, 64],
                vec![100, 128],
                vec![128],
                vec![200],
                vec![256],
                vec![300],
            ]
        );
        assert!(
            passes.iter().all(
                |pass| pass.len() * lengths[pass[pass.len() - 1]] <= PASS_TOKENS || pass.len() == 1
            )
        );
        assert!(super::passes(&[], |_| 1).is_empty());
    }

    /// Groups run side by side on the threads asked for, each once, and every result comes
    /// back; a failing group fails the call.
    #[test]
    fn groups_run_side_by_side_once_each() {
        let order: Vec<usize> = (0..16).collect();
        let groups: Vec<&[usize]> = order.chunks(4).collect();
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let embed_group = |group: &[usize]| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(30));
            running.fetch_sub(1, Ordering::SeqCst);
            Ok(group.iter().map(|&i| (i, vec![i as f32])).collect())
        };
        let mut out = in_parallel(&groups, 2, embed_group).unwrap();
        out.sort_by_key(|(i, _)| *i);
        assert_eq!(out.len(), 16);
        assert!(
            out.iter()
                .enumerate()
                .all(|(n, (i, v))| n == *i && v[0] == n as f32)
        );
        assert_eq!(most.load(Ordering::SeqCst), 2, "two groups at once");

        most.store(0, Ordering::SeqCst);
        in_parallel(&groups, 1, embed_group).unwrap();
        assert_eq!(most.load(Ordering::SeqCst), 1);

        let failing = |group: &[usize]| {
            if group.contains(&9) {
                Err(ModelError::Inference("boom".into()))
            } else {
                Ok(Vec::new())
            }
        };
        assert!(in_parallel(&groups, 2, failing).is_err());
    }
}
