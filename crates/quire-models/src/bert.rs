//! A BERT encoder forward pass on `candle-core` tensors, for sentence embedding: embeddings,
//! `n` transformer layers (self-attention, then a GELU feed-forward, each with a residual and
//! LayerNorm), mean pooling over the tokens and L2 normalisation, exactly as
//! sentence-transformers computes all-MiniLM-L6-v2. Small enough to own, which spares the
//! workspace `candle-transformers` (most of candle's build time).

use std::path::Path;

use candle_core::{D, DType, Device, Tensor};
use serde::Deserialize;

use crate::ModelError;
use crate::fused::{BiasGeluOp, BiasResidualNormOp, LayerNormOp, MaskedSoftmaxOp, values};

/// The parts of `config.json` the forward pass needs.
#[derive(Debug, Clone, Deserialize)]
pub struct BertConfig {
    /// Width of the hidden states (384 for MiniLM-L6).
    pub hidden_size: usize,
    /// Transformer layers.
    pub num_hidden_layers: usize,
    /// Attention heads per layer.
    pub num_attention_heads: usize,
    /// Width of the feed-forward block (4 × hidden when absent).
    #[serde(default)]
    pub intermediate_size: Option<usize>,
    /// Longest input the position embeddings cover.
    pub max_position_embeddings: usize,
    /// LayerNorm epsilon.
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    /// The activation of the feed-forward block; only `gelu` (the exact, erf-based one) is
    /// implemented.
    #[serde(default = "default_activation")]
    pub hidden_act: String,
    /// The architecture (`bert` for every model this engine runs; absent in old files).
    #[serde(default)]
    pub model_type: Option<String>,
    /// How positions are encoded; only `absolute` (BERT's learned position embeddings).
    #[serde(default)]
    pub position_embedding_type: Option<String>,
}

impl BertConfig {
    /// Refuses what this implementation does not compute: another activation than the
    /// exact GELU, or a width the heads do not divide.
    pub fn check(&self) -> Result<(), ModelError> {
        // Others (MPNet, XLM-RoBERTa, NomicBERT, …) differ in positions, attention or
        // tokenizer: computed as BERT they would give wrong vectors without an error.
        if let Some(kind) = self.model_type.as_deref().filter(|kind| *kind != "bert") {
            return Err(ModelError::Unsupported(format!(
                "model_type {kind:?}: the local engines run BERT models only (MiniLM, BGE, E5, \
                 GTE, Arctic-embed and others of the BERT kind)"
            )));
        }
        if let Some(positions) = self
            .position_embedding_type
            .as_deref()
            .filter(|p| *p != "absolute")
        {
            return Err(ModelError::Unsupported(format!(
                "position_embedding_type {positions:?} (only absolute)"
            )));
        }
        if self.hidden_act != "gelu" {
            return Err(ModelError::Unsupported(format!(
                "activation {:?} (only gelu)",
                self.hidden_act
            )));
        }
        if self.num_attention_heads == 0
            || !self.hidden_size.is_multiple_of(self.num_attention_heads)
        {
            return Err(ModelError::Unsupported(
                "hidden size not divisible by the number of heads".into(),
            ));
        }
        Ok(())
    }
}

fn default_eps() -> f64 {
    1e-12
}

fn default_activation() -> String {
    "gelu".into()
}

struct Linear {
    /// `[out, in]`, transposed once at load so the forward pass multiplies row-major.
    weight_t: Tensor,
    bias: Tensor,
}

impl Linear {
    /// `[.., in]` to `[.., out]`: the leading dimensions are flattened into one product.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        self.product(x)?.broadcast_add(&self.bias)
    }

    /// The product with the weights alone, for a fused kernel that adds the bias itself.
    fn product(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let (rows, width) = (x.elem_count() / x.dim(D::Minus1)?, x.dim(D::Minus1)?);
        let mut shape = x.dims().to_vec();
        let out = self.weight_t.dim(1)?;
        *shape.last_mut().expect("at least one dimension") = out;
        x.reshape((rows, width))?
            .matmul(&self.weight_t)?
            .reshape(shape)
    }

    fn bias_values(&self) -> Result<Vec<f32>, ModelError> {
        values(&self.bias).map_err(|e| ModelError::Weights(e.to_string()))
    }
}

/// A projection followed by its bias, the residual and LayerNorm, the last three in one
/// kernel.
struct ProjectAndNormalise {
    projection: Linear,
    norm: BiasResidualNormOp,
}

impl ProjectAndNormalise {
    fn new(projection: Linear, norm: LayerNorm) -> Result<Self, ModelError> {
        let LayerNormOp { weight, shift, eps } = norm.0;
        let bias = projection.bias_values()?;
        Ok(Self {
            projection,
            norm: BiasResidualNormOp {
                bias,
                weight,
                shift,
                eps,
            },
        })
    }

    fn forward(&self, x: &Tensor, residual: &Tensor) -> candle_core::Result<Tensor> {
        self.projection
            .product(x)?
            .apply_op2_no_bwd(&residual.contiguous()?, &self.norm)
    }
}

/// The feed-forward block's widening projection, with its bias and GELU in one kernel.
struct Intermediate {
    projection: Linear,
    activation: BiasGeluOp,
}

impl Intermediate {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        self.projection
            .product(x)?
            .apply_op1_no_bwd(&self.activation)
    }
}

struct LayerNorm(LayerNormOp);

impl LayerNorm {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.contiguous()?.apply_op1_no_bwd(&self.0)
    }
}

struct Layer {
    /// Query, key and value projections side by side (`[hidden, 3 × hidden]`): one product
    /// instead of three.
    query_key_value: Linear,
    attention_out: ProjectAndNormalise,
    intermediate: Intermediate,
    output: ProjectAndNormalise,
}

/// Loaded weights of a BERT encoder.
pub struct Bert {
    word_embeddings: Tensor,
    position_embeddings: Tensor,
    token_type_embeddings: Tensor,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_dim: usize,
    device: Device,
}

impl std::fmt::Debug for Bert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bert")
            .field("layers", &self.layers.len())
            .field("heads", &self.heads)
            .field("head_dim", &self.head_dim)
            .finish_non_exhaustive()
    }
}

impl Bert {
    /// Loads `model.safetensors` with the shapes `config` describes.
    pub fn load(weights: &Path, config: &BertConfig) -> Result<Self, ModelError> {
        config.check()?;
        let device = Device::Cpu;
        let mut tensors = candle_core::safetensors::load(weights, &device)
            .map_err(|e| ModelError::Weights(e.to_string()))?;
        let mut take = |name: &str| -> Result<Tensor, ModelError> {
            let tensor = tensors
                .remove(name)
                .ok_or_else(|| ModelError::Weights(format!("{name} is missing")))?;
            tensor
                .to_dtype(DType::F32)
                .map_err(|e| ModelError::Weights(e.to_string()))
        };
        let eps = config.layer_norm_eps;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            let projections = ["query", "key", "value"]
                .map(|name| linear(&mut take, &format!("{p}.attention.self.{name}")));
            let [query, key, value] = projections;
            let intermediate = linear(&mut take, &format!("{p}.intermediate.dense"))?;
            layers.push(Layer {
                query_key_value: side_by_side(&[query?, key?, value?])?,
                attention_out: ProjectAndNormalise::new(
                    linear(&mut take, &format!("{p}.attention.output.dense"))?,
                    norm(&mut take, &format!("{p}.attention.output.LayerNorm"), eps)?,
                )?,
                intermediate: Intermediate {
                    activation: BiasGeluOp {
                        bias: intermediate.bias_values()?,
                    },
                    projection: intermediate,
                },
                output: ProjectAndNormalise::new(
                    linear(&mut take, &format!("{p}.output.dense"))?,
                    norm(&mut take, &format!("{p}.output.LayerNorm"), eps)?,
                )?,
            });
        }
        Ok(Self {
            word_embeddings: take("embeddings.word_embeddings.weight")?,
            position_embeddings: take("embeddings.position_embeddings.weight")?,
            token_type_embeddings: take("embeddings.token_type_embeddings.weight")?,
            embeddings_norm: norm(&mut take, "embeddings.LayerNorm", eps)?,
            layers,
            heads: config.num_attention_heads,
            head_dim: config.hidden_size / config.num_attention_heads,
            device,
        })
    }

    /// The last layer's token states of each sequence (its real tokens' rows, `hidden_size`
    /// values each, padding left out), run as one batch: shorter sequences are padded and
    /// padding is masked out of attention, so each result equals the sequence's states on
    /// its own. Pooling is [`crate::sentence::SentenceSettings::pool`]'s.
    pub fn token_states(&self, sequences: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        if sequences.is_empty() {
            return Ok(Vec::new());
        }
        self.forward(sequences)
            .map_err(|e| ModelError::Inference(e.to_string()))
    }

    fn forward(&self, sequences: &[Vec<u32>]) -> candle_core::Result<Vec<Vec<f32>>> {
        let batch = sequences.len();
        let len = sequences.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let mut ids = Vec::with_capacity(batch * len);
        let mut mask = Vec::with_capacity(batch * len);
        for sequence in sequences {
            ids.extend_from_slice(sequence);
            ids.extend(std::iter::repeat_n(0, len - sequence.len()));
            mask.extend(std::iter::repeat_n(1f32, sequence.len()));
            mask.extend(std::iter::repeat_n(0f32, len - sequence.len()));
        }
        let ids = Tensor::from_vec(ids, (batch, len), &self.device)?;
        let mask = Tensor::from_vec(mask, (batch, len), &self.device)?;
        // Added to the attention scores: 0 for real tokens, a large negative for padding, so
        // padding gets exactly zero weight after the softmax.
        let attention_bias: Vec<f32> = values(&mask)?
            .into_iter()
            .map(|m| (m - 1.0) * 1e9)
            .collect();

        let positions = Tensor::arange(0u32, len as u32, &self.device)?;
        let token_types = Tensor::zeros((batch, len), DType::U32, &self.device)?;
        let x = self
            .word_embeddings
            .embedding(&ids.flatten_all()?)?
            .reshape((batch, len, ()))?
            .broadcast_add(&self.position_embeddings.embedding(&positions)?)?
            .add(
                &self
                    .token_type_embeddings
                    .embedding(&token_types.flatten_all()?)?
                    .reshape((batch, len, ()))?,
            )?;
        let mut x = self.embeddings_norm.forward(&x)?;
        for layer in &self.layers {
            x = self.layer(layer, &x, &attention_bias)?;
        }
        let states = x.to_vec3::<f32>()?;
        Ok(states
            .into_iter()
            .zip(sequences)
            .map(|(rows, sequence)| rows.into_iter().take(sequence.len()).flatten().collect())
            .collect())
    }

    fn layer(&self, layer: &Layer, x: &Tensor, bias: &[f32]) -> candle_core::Result<Tensor> {
        let (batch, len, hidden) = x.dims3()?;
        // [batch, len, 3 × hidden] -> 3 × [batch, heads, len, head_dim]
        let qkv = layer
            .query_key_value
            .forward(x)?
            .reshape((batch, len, 3, self.heads, self.head_dim))?
            .permute((2, 0, 3, 1, 4))?
            .contiguous()?;
        let (q, k, v) = (qkv.get(0)?, qkv.get(1)?, qkv.get(2)?);
        let scores = q.matmul(&k.transpose(2, 3)?.contiguous()?)?;
        let weights = scores.apply_op1_no_bwd(&MaskedSoftmaxOp {
            scale: 1.0 / (self.head_dim as f32).sqrt(),
            mask: bias.to_vec(),
            keys: len,
            rows_per_sequence: self.heads * len,
        })?;
        let context = weights
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((batch, len, hidden))?;
        let attended = layer.attention_out.forward(&context, x)?;
        let hidden = layer.intermediate.forward(&attended)?;
        layer.output.forward(&hidden, &attended)
    }
}

/// Linear layers of the same input side by side: their outputs concatenated.
fn side_by_side(parts: &[Linear]) -> Result<Linear, ModelError> {
    let weights: Vec<&Tensor> = parts.iter().map(|l| &l.weight_t).collect();
    let biases: Vec<&Tensor> = parts.iter().map(|l| &l.bias).collect();
    let weird = |e: candle_core::Error| ModelError::Weights(e.to_string());
    Ok(Linear {
        weight_t: Tensor::cat(&weights, 1).map_err(weird)?,
        bias: Tensor::cat(&biases, 0).map_err(weird)?,
    })
}

fn linear(
    take: &mut impl FnMut(&str) -> Result<Tensor, ModelError>,
    prefix: &str,
) -> Result<Linear, ModelError> {
    let weight = take(&format!("{prefix}.weight"))?;
    let weight_t = weight
        .t()
        .and_then(|t| t.contiguous())
        .map_err(|e| ModelError::Weights(e.to_string()))?;
    Ok(Linear {
        weight_t,
        bias: take(&format!("{prefix}.bias"))?,
    })
}

fn norm(
    take: &mut impl FnMut(&str) -> Result<Tensor, ModelError>,
    prefix: &str,
    eps: f64,
) -> Result<LayerNorm, ModelError> {
    let mut weights = |name: &str| -> Result<Vec<f32>, ModelError> {
        values(&take(&format!("{prefix}.{name}"))?).map_err(|e| ModelError::Weights(e.to_string()))
    };
    Ok(LayerNorm(LayerNormOp {
        weight: weights("weight")?,
        shift: weights("bias")?,
        eps: eps as f32,
    }))
}
