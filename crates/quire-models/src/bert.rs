//! A BERT encoder forward pass on `candle-core` tensors, for sentence embedding: embeddings,
//! `n` transformer layers (self-attention, then a GELU feed-forward, each with a residual and
//! LayerNorm), mean pooling over the tokens and L2 normalisation, exactly as
//! sentence-transformers computes all-MiniLM-L6-v2. Small enough to own, which spares the
//! workspace `candle-transformers` (most of candle's build time).

use std::path::Path;

use candle_core::{D, DType, Device, Tensor};
use serde::Deserialize;

use crate::ModelError;

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
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.matmul(&self.weight_t)?.broadcast_add(&self.bias)
    }
}

struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f64,
}

impl LayerNorm {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let mean = x.mean_keepdim(D::Minus1)?;
        let centered = x.broadcast_sub(&mean)?;
        let variance = centered.sqr()?.mean_keepdim(D::Minus1)?;
        let normed = centered.broadcast_div(&(variance + self.eps)?.sqrt()?)?;
        normed
            .broadcast_mul(&self.weight)?
            .broadcast_add(&self.bias)
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
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
    max_positions: usize,
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
        if config.hidden_act != "gelu" {
            return Err(ModelError::Unsupported(format!(
                "activation {:?} (only gelu)",
                config.hidden_act
            )));
        }
        if config.num_attention_heads == 0
            || !config
                .hidden_size
                .is_multiple_of(config.num_attention_heads)
        {
            return Err(ModelError::Unsupported(
                "hidden size not divisible by the number of heads".into(),
            ));
        }
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
            layers.push(Layer {
                query: linear(&mut take, &format!("{p}.attention.self.query"))?,
                key: linear(&mut take, &format!("{p}.attention.self.key"))?,
                value: linear(&mut take, &format!("{p}.attention.self.value"))?,
                attention_out: linear(&mut take, &format!("{p}.attention.output.dense"))?,
                attention_norm: norm(&mut take, &format!("{p}.attention.output.LayerNorm"), eps)?,
                intermediate: linear(&mut take, &format!("{p}.intermediate.dense"))?,
                output: linear(&mut take, &format!("{p}.output.dense"))?,
                output_norm: norm(&mut take, &format!("{p}.output.LayerNorm"), eps)?,
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
            max_positions: config.max_position_embeddings,
            device,
        })
    }

    /// The longest input the position embeddings allow.
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// The mean-pooled, L2-normalised embedding of one token sequence (no padding, so every
    /// token counts in the mean).
    pub fn embed(&self, ids: &[u32]) -> Result<Vec<f32>, ModelError> {
        self.forward(ids)
            .map_err(|e| ModelError::Inference(e.to_string()))
    }

    fn forward(&self, ids: &[u32]) -> candle_core::Result<Vec<f32>> {
        let len = ids.len();
        let ids = Tensor::new(ids, &self.device)?;
        let positions = Tensor::arange(0u32, len as u32, &self.device)?;
        let token_types = Tensor::zeros(len, DType::U32, &self.device)?;
        let x = self
            .word_embeddings
            .embedding(&ids)?
            .add(&self.position_embeddings.embedding(&positions)?)?
            .add(&self.token_type_embeddings.embedding(&token_types)?)?;
        let mut x = self.embeddings_norm.forward(&x)?;
        for layer in &self.layers {
            x = self.layer(layer, &x)?;
        }
        let pooled = x.mean(0)?;
        let norm = pooled.sqr()?.sum_all()?.sqrt()?.to_scalar::<f32>()?;
        let pooled = (pooled / f64::from(norm.max(1e-12)))?;
        pooled.to_vec1()
    }

    fn layer(&self, layer: &Layer, x: &Tensor) -> candle_core::Result<Tensor> {
        let len = x.dim(0)?;
        // [len, hidden] -> [heads, len, head_dim]
        let split = |t: Tensor| -> candle_core::Result<Tensor> {
            t.reshape((len, self.heads, self.head_dim))?
                .transpose(0, 1)?
                .contiguous()
        };
        let q = split(layer.query.forward(x)?)?;
        let k = split(layer.key.forward(x)?)?;
        let v = split(layer.value.forward(x)?)?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let scores = (q.matmul(&k.transpose(1, 2)?.contiguous()?)? * scale)?;
        let weights = softmax_last(&scores)?;
        let context = weights
            .matmul(&v)?
            .transpose(0, 1)?
            .contiguous()?
            .reshape((len, self.heads * self.head_dim))?;
        let attended = layer
            .attention_norm
            .forward(&(layer.attention_out.forward(&context)? + x)?)?;
        let hidden = layer.intermediate.forward(&attended)?.gelu_erf()?;
        layer
            .output_norm
            .forward(&(layer.output.forward(&hidden)? + attended)?)
    }
}

fn softmax_last(x: &Tensor) -> candle_core::Result<Tensor> {
    let max = x.max_keepdim(D::Minus1)?;
    let exp = x.broadcast_sub(&max)?.exp()?;
    let sum = exp.sum_keepdim(D::Minus1)?;
    exp.broadcast_div(&sum)
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
    Ok(LayerNorm {
        weight: take(&format!("{prefix}.weight"))?,
        bias: take(&format!("{prefix}.bias"))?,
        eps,
    })
}
