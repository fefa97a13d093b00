//! Writes the BERT encoder of a model directory as an ONNX model, in memory, from its
//! safetensors weights: the same computation as [`crate::bert`], expressed in standard ONNX
//! operators (opset 17) so ONNX Runtime can run it. No export step and no second copy of the
//! model on disk: the model directory stays what sentence-transformers ships.
//!
//! Every linear layer (the fused query-key-value projection, the attention output, the
//! intermediate and the output layer) runs in fp32 or, with [`Linear::Int8`], as dynamic
//! quantisation built from the same weights: int8 weights per output column, activations
//! quantised at run time (see [`int8_linear`]). Embeddings, LayerNorm, softmax and the attention
//! score products stay fp32 either way.
//!
//! Inputs: `input_ids` (int64 `[batch, sequence]`), `position_ids` (int64 `[sequence]`) and
//! `attention_bias` (float `[batch, 1, 1, sequence]`: 0 for tokens, a large negative number
//! for padding). Output: `last_hidden_state` (float `[batch, sequence, hidden]`); pooling is
//! left to the caller, as for the candle encoder.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};

use super::proto::Message;
use crate::ModelError;
use crate::bert::BertConfig;

/// ONNX `TensorProto.DataType` codes.
pub(super) const FLOAT: i64 = 1;
const INT8: i64 = 3;
const INT64: i64 = 7;
/// `bfloat16`, which the graph never uses: the code is here for the test that shows ONNX
/// Runtime's CPU provider cannot run a linear layer in it.
#[cfg(test)]
pub(super) const BFLOAT16: i64 = 16;

/// The operator set the graph is written against; 17 brings `LayerNormalization`, and ONNX
/// Runtime 1.13 and later run it.
const OPSET: i64 = 17;
/// The IR version that goes with opset 17.
const IR_VERSION: i64 = 8;

/// How the graph computes its linear layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Linear {
    /// `MatMul` and `Add` in fp32.
    Fp32,
    /// Dynamic quantisation: int8 weights (symmetric, per output column), uint8 activations
    /// quantised per call, which ONNX Runtime fuses into its own int8 kernels.
    Int8,
}

/// The encoder of `weights` as a serialized ONNX `ModelProto`, its linear layers computed as
/// `linear` says.
pub(crate) fn bert_model(
    weights: &Path,
    config: &BertConfig,
    linear: Linear,
) -> Result<Vec<u8>, ModelError> {
    let mut weights = Weights::load(weights)?;
    let hidden = config.hidden_size;
    let heads = config.num_attention_heads;
    let head_dim = hidden / heads;
    let eps = config.layer_norm_eps as f32;
    let mut g = Graph::default();

    // Embeddings. Token types are always 0 for a sentence embedder, so that row is folded into
    // the position table once here instead of being gathered and added at every call.
    let (word_dims, word) = weights.take("embeddings.word_embeddings.weight")?;
    let (position_dims, mut positions) = weights.take("embeddings.position_embeddings.weight")?;
    let (_, token_types) = weights.take("embeddings.token_type_embeddings.weight")?;
    for row in positions.chunks_exact_mut(hidden) {
        for (p, t) in row.iter_mut().zip(&token_types[..hidden]) {
            *p += t;
        }
    }
    let word = g.float_tensor("word_embeddings", &word_dims, &word);
    let positions = g.float_tensor("position_embeddings", &position_dims, &positions);
    let words = g.node("Gather", &[&word, "input_ids"], vec![]);
    let places = g.node("Gather", &[&positions, "position_ids"], vec![]);
    let summed = g.node("Add", &[&words, &places], vec![]);
    let mut x = layer_norm(&mut g, &mut weights, "embeddings.LayerNorm", &summed, eps)?;

    let qkv_shape = g.int64_tensor("qkv_shape", &[5], &[0, 0, 3, heads as i64, head_dim as i64]);
    let context_shape = g.int64_tensor("context_shape", &[3], &[0, 0, hidden as i64]);
    let scale = g.float_tensor("attention_scale", &[], &[1.0 / (head_dim as f32).sqrt()]);
    let part: Vec<String> = (0..3)
        .map(|i| g.int64_tensor(&format!("part_{i}"), &[], &[i]))
        .collect();
    let (half, one, root_two) = (
        g.float_tensor("half", &[], &[0.5]),
        g.float_tensor("one", &[], &[1.0]),
        g.float_tensor("root_two", &[], &[std::f32::consts::SQRT_2]),
    );

    for i in 0..config.num_hidden_layers {
        let p = format!("encoder.layer.{i}");
        // Query, key and value as one product, split by a reshape to [batch, sequence, 3,
        // heads, head_dim] and a transpose to [3, batch, heads, sequence, head_dim].
        let (w, b) = side_by_side(
            &mut weights,
            &["query", "key", "value"].map(|n| format!("{p}.attention.self.{n}")),
        )?;
        let qkv = project(
            &mut g,
            &format!("{p}.qkv"),
            &x,
            Projection {
                weight: &w,
                bias: &b,
                input: hidden,
                output: 3 * hidden,
            },
            linear,
        );
        let qkv = g.node("Reshape", &[&qkv, &qkv_shape], vec![]);
        let qkv = g.node("Transpose", &[&qkv], vec![ints("perm", &[2, 0, 3, 1, 4])]);
        let [q, k, v] = [0, 1, 2].map(|j| g.node("Gather", &[&qkv, &part[j]], vec![]));
        let k = g.node("Transpose", &[&k], vec![ints("perm", &[0, 1, 3, 2])]);
        let scores = g.node("MatMul", &[&q, &k], vec![]);
        let scores = g.node("Mul", &[&scores, &scale], vec![]);
        let scores = g.node("Add", &[&scores, "attention_bias"], vec![]);
        let weights_ = g.node("Softmax", &[&scores], vec![int("axis", -1)]);
        let context = g.node("MatMul", &[&weights_, &v], vec![]);
        let context = g.node("Transpose", &[&context], vec![ints("perm", &[0, 2, 1, 3])]);
        let context = g.node("Reshape", &[&context, &context_shape], vec![]);
        let attended = dense(
            &mut g,
            &mut weights,
            &format!("{p}.attention.output.dense"),
            &context,
            linear,
        )?;
        let attended = g.node("Add", &[&attended, &x], vec![]);
        let attended = layer_norm(
            &mut g,
            &mut weights,
            &format!("{p}.attention.output.LayerNorm"),
            &attended,
            eps,
        )?;
        // Exact GELU: x * 0.5 * (1 + erf(x / sqrt 2)).
        let wide = dense(
            &mut g,
            &mut weights,
            &format!("{p}.intermediate.dense"),
            &attended,
            linear,
        )?;
        let erf = g.node("Div", &[&wide, &root_two], vec![]);
        let erf = g.node("Erf", &[&erf], vec![]);
        let erf = g.node("Add", &[&erf, &one], vec![]);
        let gelu = g.node("Mul", &[&wide, &erf], vec![]);
        let gelu = g.node("Mul", &[&gelu, &half], vec![]);
        let out = dense(
            &mut g,
            &mut weights,
            &format!("{p}.output.dense"),
            &gelu,
            linear,
        )?;
        let out = g.node("Add", &[&out, &attended], vec![]);
        x = layer_norm(
            &mut g,
            &mut weights,
            &format!("{p}.output.LayerNorm"),
            &out,
            eps,
        )?;
    }
    Ok(g.into_model(&x, hidden))
}

/// `x W + b` for the linear layer `prefix` of the safetensors file.
fn dense(
    g: &mut Graph,
    weights: &mut Weights,
    prefix: &str,
    x: &str,
    linear: Linear,
) -> Result<String, ModelError> {
    let (dims, w) = weights.take(&format!("{prefix}.weight"))?;
    let (_, b) = weights.take(&format!("{prefix}.bias"))?;
    let (out, input) = two_dims(prefix, &dims)?;
    let weight = transpose(&w, out, input);
    let projection = Projection {
        weight: &weight,
        bias: &b,
        input,
        output: out,
    };
    Ok(project(g, prefix, x, projection, linear))
}

/// The weights of a linear layer: `[input, output]` row-major, and the bias.
struct Projection<'a> {
    weight: &'a [f32],
    bias: &'a [f32],
    input: usize,
    output: usize,
}

/// `x W + b` as `linear` computes it; returns the output's name.
fn project(g: &mut Graph, name: &str, x: &str, p: Projection<'_>, linear: Linear) -> String {
    let b = g.float_tensor(&format!("{name}.bias"), &[p.output], p.bias);
    match linear {
        Linear::Fp32 => {
            let w = g.float_tensor(&format!("{name}.weight"), &[p.input, p.output], p.weight);
            let product = g.node("MatMul", &[x, &w], vec![]);
            g.node("Add", &[&product, &b], vec![])
        }
        Linear::Int8 => int8_linear(g, name, x, &p, &b),
    }
}

/// `x W + b` with int8 weights and activations quantised at run time, in the pattern ONNX
/// Runtime's `MatMulIntegerToFloat` and `DynamicQuantizeMatMul` fusions recognise (the one
/// its own `quantize_dynamic` writes): `DynamicQuantizeLinear(x)` → `MatMulInteger(xq, Wq,
/// x_zero)` → `Cast` to float → `Mul` by `x_scale × w_scale` (a `Mul` of its own, as the
/// fusion looks for) → `Add` the bias. Fused, the product runs on ONNX Runtime's u8×s8 kernels
/// (VNNI where the CPU has it); unfused, the same nodes compute the same numbers, slower.
fn int8_linear(g: &mut Graph, name: &str, x: &str, p: &Projection<'_>, bias: &str) -> String {
    let (quantised, scales) = quantise_columns(p.weight, p.input, p.output, weight_levels());
    let w = g.int8_tensor(
        &format!("{name}.weight_int8"),
        &[p.input, p.output],
        &quantised,
    );
    let w_scale = g.float_tensor(&format!("{name}.weight_scale"), &[p.output], &scales);
    let [xq, x_scale, x_zero] = g.nodes_out("DynamicQuantizeLinear", &[x], vec![]);
    let product = g.node("MatMulInteger", &[&xq, &w, &x_zero], vec![]);
    let product = g.node("Cast", &[&product], vec![int("to", FLOAT)]);
    let scale = g.node("Mul", &[&x_scale, &w_scale], vec![]);
    let product = g.node("Mul", &[&product, &scale], vec![]);
    g.node("Add", &[&product, bias], vec![])
}

/// The largest magnitude of a quantised weight on this CPU.
///
/// On x86 CPUs without VNNI, ONNX Runtime's u8×s8 kernel multiplies with `vpmaddubsw`, which
/// adds each pair of products in a saturating 16-bit sum. 255 × 127 × 2 is beyond 32,767, so
/// large activations against large weights were clipped: on a tiny random BERT, the lowest
/// cosine of int8 to fp32 vectors fell from at least 0.99 on a VNNI CPU to 0.88 on an AVX2 one
/// (`onnx::tests`). Weights of at most 63 keep every pair sum in range (255 × 63 × 2 = 32,130);
/// this is the "reduced range" ONNX Runtime's own quantiser offers for such CPUs. With VNNI
/// (`vpdpbusd`) products are summed in 32 bits, so the full range is kept. What the seventh bit
/// costs on a real model is measured in `docs/retrieval.md`, "Reduced precision".
pub(super) fn weight_levels() -> f32 {
    // Only x86 without VNNI sums pairs in 16 bits (ARM's dot products sum in 32).
    if cfg!(target_arch = "x86_64") && !cpu_has_vnni() {
        63.0
    } else {
        127.0
    }
}

/// Whether this CPU has the VNNI int8 dot-product instructions (AVX512-VNNI or AVX-VNNI),
/// detected at run time.
pub(crate) fn cpu_has_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512vnni")
            || std::arch::is_x86_feature_detected!("avxvnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `[input, output]` weights as int8 and one scale per output column: symmetric (zero maps to
/// zero, so no weight zero point), `scale = max |w| / levels`, so weights span `-levels..=levels`
/// (see [`weight_levels`]). A column's own scale keeps a column of small weights from being
/// rounded away by another column's large ones.
pub(super) fn quantise_columns(
    weight: &[f32],
    input: usize,
    output: usize,
    levels: f32,
) -> (Vec<i8>, Vec<f32>) {
    let mut scales = vec![0f32; output];
    for row in weight.chunks_exact(output).take(input) {
        for (s, w) in scales.iter_mut().zip(row) {
            *s = s.max(w.abs());
        }
    }
    for s in &mut scales {
        // An all-zero column quantises to zeros under any scale; 1 avoids dividing by zero.
        *s = if *s > 0.0 { *s / levels } else { 1.0 };
    }
    let quantised = weight
        .chunks_exact(output)
        .flat_map(|row| {
            row.iter()
                .zip(&scales)
                .map(|(w, s)| (w / s).round().clamp(-levels, levels) as i8)
        })
        .collect();
    (quantised, scales)
}

/// Linear layers of the same input side by side: `[in, Σ out]` weights and the biases
/// concatenated.
fn side_by_side(
    weights: &mut Weights,
    prefixes: &[String],
) -> Result<(Vec<f32>, Vec<f32>), ModelError> {
    let mut parts = Vec::new();
    let mut bias = Vec::new();
    for prefix in prefixes {
        let (dims, w) = weights.take(&format!("{prefix}.weight"))?;
        let (out, input) = two_dims(prefix, &dims)?;
        parts.push((transpose(&w, out, input), out, input));
        bias.extend(weights.take(&format!("{prefix}.bias"))?.1);
    }
    let total: usize = parts.iter().map(|(_, out, _)| out).sum();
    let input = parts.first().map_or(0, |(_, _, input)| *input);
    let mut joined = Vec::with_capacity(input * total);
    for row in 0..input {
        for (w, out, _) in &parts {
            joined.extend_from_slice(&w[row * out..(row + 1) * out]);
        }
    }
    Ok((joined, bias))
}

fn layer_norm(
    g: &mut Graph,
    weights: &mut Weights,
    prefix: &str,
    x: &str,
    eps: f32,
) -> Result<String, ModelError> {
    let (dims, scale) = weights.take(&format!("{prefix}.weight"))?;
    let (_, shift) = weights.take(&format!("{prefix}.bias"))?;
    let scale = g.float_tensor(&format!("{prefix}.weight"), &dims, &scale);
    let shift = g.float_tensor(&format!("{prefix}.bias"), &dims, &shift);
    Ok(g.node(
        "LayerNormalization",
        &[x, &scale, &shift],
        vec![int("axis", -1), float("epsilon", eps)],
    ))
}

/// `[rows, columns]` row-major to `[columns, rows]`.
fn transpose(values: &[f32], rows: usize, columns: usize) -> Vec<f32> {
    let mut out = vec![0f32; values.len()];
    for r in 0..rows {
        for c in 0..columns {
            out[c * rows + r] = values[r * columns + c];
        }
    }
    out
}

fn two_dims(name: &str, dims: &[usize]) -> Result<(usize, usize), ModelError> {
    match dims {
        [a, b] => Ok((*a, *b)),
        _ => Err(ModelError::Weights(format!(
            "{name}.weight has shape {dims:?}, expected two dimensions"
        ))),
    }
}

/// The safetensors file's tensors as f32, taken by name.
struct Weights(HashMap<String, Tensor>);

impl Weights {
    fn load(path: &Path) -> Result<Self, ModelError> {
        candle_core::safetensors::load(path, &Device::Cpu)
            .map(Self)
            .map_err(|e| ModelError::Weights(e.to_string()))
    }

    fn take(&mut self, name: &str) -> Result<(Vec<usize>, Vec<f32>), ModelError> {
        let tensor = self
            .0
            .remove(name)
            .ok_or_else(|| ModelError::Weights(format!("{name} is missing")))?;
        let dims = tensor.dims().to_vec();
        let values = tensor
            .to_dtype(DType::F32)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| ModelError::Weights(e.to_string()))?;
        Ok((dims, values))
    }
}

/// The nodes and constants of a graph being written.
#[derive(Default)]
pub(super) struct Graph {
    nodes: Vec<Message>,
    initializers: Vec<Message>,
    outputs: usize,
}

impl Graph {
    /// Adds a node with one output and returns the output's name.
    pub(super) fn node(&mut self, op: &str, inputs: &[&str], attributes: Vec<Message>) -> String {
        let [output] = self.nodes_out(op, inputs, attributes);
        output
    }

    /// Adds a node with `N` outputs and returns their names.
    fn nodes_out<const N: usize>(
        &mut self,
        op: &str,
        inputs: &[&str],
        attributes: Vec<Message>,
    ) -> [String; N] {
        self.outputs += 1;
        let name = format!("{}_{}", op.to_lowercase(), self.outputs);
        let outputs: [String; N] = std::array::from_fn(|i| match i {
            0 => name.clone(),
            _ => format!("{name}_{i}"),
        });
        // NodeProto: input 1, output 2, name 3, op_type 4, attribute 5.
        let mut node = Message::new();
        for input in inputs {
            node = node.string(1, input);
        }
        for output in &outputs {
            node = node.string(2, output);
        }
        node = node.string(3, &name).string(4, op);
        for attribute in attributes {
            node = node.message(5, attribute);
        }
        self.nodes.push(node);
        outputs
    }

    fn int8_tensor(&mut self, name: &str, dims: &[usize], values: &[i8]) -> String {
        let raw: Vec<u8> = values.iter().map(|v| v.to_le_bytes()[0]).collect();
        self.tensor(name, dims, INT8, &raw)
    }

    pub(super) fn float_tensor(&mut self, name: &str, dims: &[usize], values: &[f32]) -> String {
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensor(name, dims, FLOAT, &raw)
    }

    fn int64_tensor(&mut self, name: &str, dims: &[usize], values: &[i64]) -> String {
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensor(name, dims, INT64, &raw)
    }

    /// TensorProto: dims 1, data_type 2, name 8, raw_data 9 (little-endian).
    pub(super) fn tensor(
        &mut self,
        name: &str,
        dims: &[usize],
        data_type: i64,
        raw: &[u8],
    ) -> String {
        let mut tensor = Message::new();
        for &d in dims {
            tensor = tensor.int(1, d as i64);
        }
        self.initializers
            .push(tensor.int(2, data_type).string(8, name).bytes(9, raw));
        name.to_owned()
    }

    /// ModelProto around GraphProto (node 1, name 2, initializer 5, input 11, output 12).
    fn into_model(mut self, output: &str, hidden: usize) -> Vec<u8> {
        // An Identity gives the graph's output a stable name.
        self.nodes.push(
            Message::new()
                .string(1, output)
                .string(2, "last_hidden_state")
                .string(3, "output")
                .string(4, "Identity"),
        );
        let batch = Dim::Named("batch");
        let sequence = Dim::Named("sequence");
        let inputs = vec![
            value_info("input_ids", INT64, &[batch, sequence]),
            value_info("position_ids", INT64, &[sequence]),
            value_info(
                "attention_bias",
                FLOAT,
                &[batch, Dim::Fixed(1), Dim::Fixed(1), sequence],
            ),
        ];
        let outputs = vec![value_info(
            "last_hidden_state",
            FLOAT,
            &[batch, sequence, Dim::Fixed(hidden)],
        )];
        self.finish("bert_encoder", inputs, outputs)
    }

    /// The model of these nodes and initializers, with the graph inputs and outputs given as
    /// `ValueInfoProto`s ([`value_info`]).
    pub(super) fn finish(self, name: &str, inputs: Vec<Message>, outputs: Vec<Message>) -> Vec<u8> {
        let mut graph = Message::new();
        for node in self.nodes {
            graph = graph.message(1, node);
        }
        graph = graph.string(2, name);
        for initializer in self.initializers {
            graph = graph.message(5, initializer);
        }
        for input in inputs {
            graph = graph.message(11, input);
        }
        for output in outputs {
            graph = graph.message(12, output);
        }
        let graph_bytes = graph.into_bytes();
        // ModelProto: ir_version 1, producer_name 2, graph 7, opset_import 8
        // (OperatorSetIdProto: domain 1, version 2).
        Message::new()
            .int(1, IR_VERSION)
            .string(2, "quire")
            .bytes(7, &graph_bytes)
            .message(8, Message::new().string(1, "").int(2, OPSET))
            .into_bytes()
    }
}

/// A dimension of a graph input or output.
#[derive(Clone, Copy)]
pub(super) enum Dim {
    Fixed(usize),
    Named(&'static str),
}

/// ValueInfoProto (name 1, type 2) of a tensor: TypeProto.tensor_type 1 → elem_type 1,
/// shape 2 → dim 1 → dim_value 1 or dim_param 2.
pub(super) fn value_info(name: &str, elem_type: i64, dims: &[Dim]) -> Message {
    let mut shape = Message::new();
    for dim in dims {
        let dim = match dim {
            Dim::Fixed(n) => Message::new().int(1, *n as i64),
            Dim::Named(n) => Message::new().string(2, n),
        };
        shape = shape.message(1, dim);
    }
    let tensor = Message::new().int(1, elem_type).message(2, shape);
    Message::new()
        .string(1, name)
        .message(2, Message::new().message(1, tensor))
}

/// AttributeProto: name 1, f 2, i 3, ints 8, type 20 (FLOAT 1, INT 2, INTS 7).
pub(super) fn int(name: &str, value: i64) -> Message {
    Message::new().string(1, name).int(3, value).int(20, 2)
}

fn float(name: &str, value: f32) -> Message {
    Message::new().string(1, name).float(2, value).int(20, 1)
}

fn ints(name: &str, values: &[i64]) -> Message {
    let mut attribute = Message::new().string(1, name);
    for &v in values {
        attribute = attribute.int(8, v);
    }
    attribute.int(20, 7)
}
