//! The int8 graph against the fp32 one on a small, randomly initialised BERT, and the
//! experiment behind refusing bf16. Both run ONNX Runtime: `QUIRE_TEST_ONNXRUNTIME`, else
//! where the product looks (`ORT_DYLIB_PATH`, then the cache `scripts/fetch-onnxruntime`
//! fills).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};

use super::graph::{
    BFLOAT16, Dim, FLOAT, Graph, Linear, bert_model, int, quantise_columns, value_info,
};
use super::runtime::{OnnxEncoder, UNFUSED, builder, environment, session};
use crate::bert::BertConfig;

pub(crate) fn library() -> PathBuf {
    let library = std::env::var_os("QUIRE_TEST_ONNXRUNTIME")
        .map(PathBuf::from)
        .or_else(super::default_library)
        .expect(
            "no ONNX Runtime library: run scripts/fetch-onnxruntime (scripts/test does) or set \
             QUIRE_TEST_ONNXRUNTIME",
        );
    assert!(library.is_file(), "{} is not a file", library.display());
    library
}

/// A deterministic stream of uniform numbers in [-1, 1) (a 64-bit LCG's high bits), so the
/// test model is the same at every run.
struct Uniform(u64);

impl Uniform {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn tensor(&mut self, dims: &[usize], amplitude: f32) -> Tensor {
        let values: Vec<f32> = (0..dims.iter().product::<usize>())
            .map(|_| self.next() * amplitude)
            .collect();
        Tensor::from_vec(values, dims, &Device::Cpu).unwrap()
    }
}

pub(crate) const VOCAB: usize = 120;
pub(crate) const HIDDEN: usize = 64;
const INTERMEDIATE: usize = 256;
const LAYERS: usize = 2;

/// Writes a two-layer BERT with random weights to `dir/model.safetensors` and returns its
/// configuration. Linear weights have a standard deviation of 1/√fan-in, as a trained
/// model's roughly do, so the layers matter next to the residual path and an error in the
/// quantised products shows in the output.
pub(crate) fn tiny_bert(dir: &Path) -> BertConfig {
    let mut random = Uniform(0x5eed);
    let mut tensors = HashMap::new();
    let mut put = |name: String, tensor: Tensor| {
        tensors.insert(name, tensor);
    };
    // Uniform on [-a, a] has standard deviation a/√3.
    let linear = |fan_in: usize| (3.0 / fan_in as f32).sqrt();
    put(
        "embeddings.word_embeddings.weight".into(),
        random.tensor(&[VOCAB, HIDDEN], 1.7),
    );
    put(
        "embeddings.position_embeddings.weight".into(),
        random.tensor(&[32, HIDDEN], 0.5),
    );
    put(
        "embeddings.token_type_embeddings.weight".into(),
        random.tensor(&[2, HIDDEN], 0.1),
    );
    let mut norm = |prefix: String, random: &mut Uniform| {
        let scale = (random.tensor(&[HIDDEN], 0.2) + 1.0).unwrap();
        put(format!("{prefix}.weight"), scale);
        put(format!("{prefix}.bias"), random.tensor(&[HIDDEN], 0.1));
    };
    norm("embeddings.LayerNorm".into(), &mut random);
    let mut dense = Vec::new();
    for i in 0..LAYERS {
        let p = format!("encoder.layer.{i}");
        for n in ["query", "key", "value"] {
            dense.push((format!("{p}.attention.self.{n}"), HIDDEN, HIDDEN));
        }
        dense.push((format!("{p}.attention.output.dense"), HIDDEN, HIDDEN));
        dense.push((format!("{p}.intermediate.dense"), INTERMEDIATE, HIDDEN));
        dense.push((format!("{p}.output.dense"), HIDDEN, INTERMEDIATE));
        norm(format!("{p}.attention.output.LayerNorm"), &mut random);
        norm(format!("{p}.output.LayerNorm"), &mut random);
    }
    for (prefix, out, input) in dense {
        // Output units of very different sizes (a factor 8 between the smallest and the
        // largest), as in a trained model: a column quantised with another column's scale
        // is then visibly wrong.
        let sizes: Vec<f32> = (0..out)
            .map(|j| 0.25 + 1.75 * ((j * 7) % out) as f32 / out as f32)
            .collect();
        let sizes = Tensor::from_vec(sizes, (out, 1), &Device::Cpu).unwrap();
        let weight = random.tensor(&[out, input], linear(input));
        put(
            format!("{prefix}.weight"),
            weight.broadcast_mul(&sizes).unwrap(),
        );
        put(format!("{prefix}.bias"), random.tensor(&[out], 0.1));
    }
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors")).unwrap();
    serde_json::from_value(serde_json::json!({
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": 4,
        "intermediate_size": INTERMEDIATE,
        "max_position_embeddings": 32,
        "layer_norm_eps": 1e-12,
        "hidden_act": "gelu",
    }))
    .unwrap()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

#[test]
fn int8_sentence_embeddings_stay_close_to_fp32() {
    let dir = tempfile::tempdir().unwrap();
    let config = tiny_bert(dir.path());
    let weights = dir.path().join("model.safetensors");
    let library = library();
    let fp32 = OnnxEncoder::load(&library, &weights, &config, Linear::Fp32, 1).unwrap();
    let int8 = OnnxEncoder::load(&library, &weights, &config, Linear::Int8, 1).unwrap();
    let mut random = Uniform(7);
    // Sentences of 3 to 30 tokens, batched with padding as the embedder batches them.
    let sequences: Vec<Vec<u32>> = (0..12)
        .map(|i| {
            (0..3 + i * 27 / 11)
                .map(|_| ((random.next() + 1.0) / 2.0 * (VOCAB - 1) as f32) as u32)
                .collect()
        })
        .collect();
    let mut worst = 1f32;
    let mut largest_difference = 0f32;
    for batch in sequences.chunks(4) {
        let pooled = |states: Vec<Vec<f32>>| -> Vec<Vec<f32>> {
            let mean = crate::sentence::SentenceSettings::default();
            states
                .iter()
                .map(|rows| mean.pool(rows, config.hidden_size, 0))
                .collect()
        };
        let exact = pooled(fp32.token_states(batch).unwrap());
        let quantised = pooled(int8.token_states(batch).unwrap());
        for (a, b) in exact.iter().zip(&quantised) {
            worst = worst.min(cosine(a, b));
            for (x, y) in a.iter().zip(b) {
                largest_difference = largest_difference.max((x - y).abs());
            }
        }
    }
    eprintln!("tiny BERT, int8 against fp32: lowest cosine {worst:.5}");
    assert!(worst >= 0.99, "lowest cosine {worst}");
    // The int8 graph really is another computation, not the fp32 one under another name.
    assert!(largest_difference > 1e-5, "{largest_difference}");
}

#[test]
fn quantised_columns_have_their_own_scale() {
    // Two input rows, three output columns of very different magnitudes, one all zero.
    let weight = [0.25, -0.002, 0.0, -1.0, 0.0005, 0.0];
    let (q, scales) = quantise_columns(&weight, 2, 3, 127.0);
    assert_eq!(q, [32, -127, 0, -127, 32, 0]);
    assert_eq!(scales, [1.0 / 127.0, 0.002 / 127.0, 1.0]);
    for (w, (q, s)) in weight.iter().zip(q.iter().zip(scales.iter().cycle())) {
        assert!(
            (f32::from(*q) * s - w).abs() <= s / 2.0 + 1e-9,
            "{w} {q} {s}"
        );
    }
    // Seven bits, for CPUs that add pairs of products in 16 bits.
    let (q, scales) = quantise_columns(&weight, 2, 3, 63.0);
    assert_eq!(q, [16, -63, 0, -63, 16, 0]);
    assert_eq!(scales, [1.0 / 63.0, 0.002 / 63.0, 1.0]);
}

/// Seven-bit weights exactly where ONNX Runtime's kernel adds pairs of u8×s8 products in a
/// saturating 16-bit sum: x86 without VNNI.
#[test]
fn weights_have_seven_bits_only_where_the_kernel_sums_pairs_in_16_bits() {
    let vnni = !cfg!(target_arch = "x86_64") || super::graph::cpu_has_vnni();
    assert_eq!(
        super::graph::weight_levels(),
        if vnni { 127.0 } else { 63.0 }
    );
}

/// The experiment behind refusing `precision = "bf16"`: the linear layer of the encoder
/// (`Cast` to bfloat16, `MatMul` with bfloat16 weights, `Cast` back) is not something ONNX
/// Runtime's CPU provider can run. Should a later library run it, this test fails and the
/// refusal ([`crate::BF16_REFUSAL`]) is to be revisited.
#[test]
fn onnx_runtime_cannot_run_a_bfloat16_linear_layer_on_the_cpu() {
    let mut g = Graph::default();
    let weights: Vec<u8> = (0..8 * 4)
        .flat_map(|i| {
            let w = (i as f32 - 16.0) / 16.0;
            // bfloat16 is the upper half of an f32.
            let bits = (w.to_bits() >> 16) as u16;
            bits.to_le_bytes()
        })
        .collect();
    let w = g.tensor("weight", &[8, 4], BFLOAT16, &weights);
    let x = g.node("Cast", &["x"], vec![int("to", BFLOAT16)]);
    let product = g.node("MatMul", &[&x, &w], vec![]);
    let product = g.node("Cast", &[&product], vec![int("to", FLOAT)]);
    let model = g.finish(
        "bf16_linear",
        vec![value_info("x", FLOAT, &[Dim::Fixed(2), Dim::Fixed(8)])],
        vec![value_info(&product, FLOAT, &[Dim::Fixed(2), Dim::Fixed(4)])],
    );
    let error = match session(&library(), &model, 1) {
        Err(error) => error.to_string(),
        Ok(mut session) => {
            let x = ort::value::Tensor::from_array(([2i64, 8], vec![0.5f32; 16])).unwrap();
            match session.run(ort::inputs!["x" => x]) {
                Err(error) => error.to_string(),
                Ok(_) => panic!(
                    "this ONNX Runtime runs a bfloat16 MatMul on the CPU: precision = \"bf16\" \
                     could be offered instead of refused"
                ),
            }
        }
    };
    eprintln!("bfloat16 linear layer: {error}");
    assert!(error.contains("MatMul"), "{error}");
}

/// The sessions keep each residual `Add` and the `LayerNormalization` after it apart
/// ([`UNFUSED`]), where ONNX Runtime's default optimisations would fuse them into the slower
/// `SkipLayerNormalization`. Read from the graph each session optimises to. Should a later
/// library stop fusing them by default, the first assertion fails and [`UNFUSED`] is to be
/// revisited.
#[test]
fn sessions_leave_the_skip_layer_normalization_unfused() {
    let dir = tempfile::tempdir().unwrap();
    let config = tiny_bert(dir.path());
    let model = bert_model(&dir.path().join("model.safetensors"), &config, Linear::Int8).unwrap();
    let library = library();
    let optimised = |builder: ort::session::builder::SessionBuilder, name: &str| -> String {
        let path = dir.path().join(name);
        builder
            .with_optimized_model_path(&path)
            .unwrap()
            .commit_from_memory(&model)
            .unwrap();
        String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned()
    };
    let fused = optimised(
        ort::session::Session::builder(environment(&library).unwrap()).unwrap(),
        "default.onnx",
    );
    assert!(
        fused.contains("SkipLayerNormalization"),
        "ONNX Runtime no longer fuses it"
    );
    let ours = optimised(builder(&library, 1).unwrap(), "ours.onnx");
    assert!(
        !ours.contains("SkipLayerNormalization"),
        "{UNFUSED} was fused"
    );
    assert!(ours.contains("LayerNormalization"));
}
