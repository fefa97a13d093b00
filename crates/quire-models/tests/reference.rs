//! The local embedder against sentence-transformers: the same token ids and, for every
//! sentence, a vector with cosine ≥ 0.999 to the reference (`tests/data/minilm-reference.json`,
//! written by `scripts/dev/reference-embeddings.py`). The model directory comes from
//! `QUIRE_TEST_MODEL_DIR`, else the cache that `scripts/fetch-model` fills.

use std::path::PathBuf;

use quire_models::{Engine, EngineOptions, LocalEmbedder};
use serde_json::Value;

fn model_dir() -> PathBuf {
    let dir = std::env::var_os("QUIRE_TEST_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
            home.join(".cache/quire-models/all-MiniLM-L6-v2")
        });
    assert!(
        dir.join("model.safetensors").is_file(),
        "no model in {}: run scripts/fetch-model (scripts/test does) or set QUIRE_TEST_MODEL_DIR",
        dir.display()
    );
    dir
}

/// The ONNX Runtime library: `QUIRE_TEST_ONNXRUNTIME`, else where the product looks
/// (`ORT_DYLIB_PATH`, then the cache that `scripts/fetch-onnxruntime` fills).
fn onnxruntime_library() -> PathBuf {
    let library = std::env::var_os("QUIRE_TEST_ONNXRUNTIME")
        .map(PathBuf::from)
        .or_else(quire_models::onnx::default_library);
    let library = library.expect(
        "no ONNX Runtime library: run scripts/fetch-onnxruntime (scripts/test does) or set \
         QUIRE_TEST_ONNXRUNTIME",
    );
    assert!(library.is_file(), "{} is not a file", library.display());
    library
}

fn load(engine: Engine) -> LocalEmbedder {
    let options = EngineOptions {
        engine,
        onnxruntime_library: (engine == Engine::OnnxRuntime).then(onnxruntime_library),
    };
    let embedder = LocalEmbedder::load_with(&model_dir(), &options).unwrap();
    let expected = match engine {
        Engine::OnnxRuntime => "onnxruntime",
        _ => "candle",
    };
    assert!(
        embedder.engine().starts_with(expected),
        "{}",
        embedder.engine()
    );
    embedder
}

fn reference() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/minilm-reference.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn cosine(a: &[f32], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * y).sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
fn candle_matches_sentence_transformers() {
    matches_sentence_transformers(&load(Engine::Candle));
}

#[test]
fn onnxruntime_matches_sentence_transformers() {
    matches_sentence_transformers(&load(Engine::OnnxRuntime));
}

/// Both engines produce the same vectors, so switching engines never needs re-embedding.
#[test]
fn the_engines_agree_and_share_a_model_id() {
    let (candle, onnx) = (load(Engine::Candle), load(Engine::OnnxRuntime));
    assert_eq!(candle.model_id(), onnx.model_id());
    let texts = ["pumps and valves", "Die Pumpe muss vorher gefüllt werden."];
    for (a, b) in candle
        .embed(&texts)
        .unwrap()
        .iter()
        .zip(onnx.embed(&texts).unwrap())
    {
        let b: Vec<f64> = b.iter().map(|x| f64::from(*x)).collect();
        assert!(cosine(a, &b) > 0.99999, "cosine {}", cosine(a, &b));
    }
}

fn matches_sentence_transformers(embedder: &LocalEmbedder) {
    assert_eq!(embedder.dimensions(), 384);
    let reference = reference();
    let cases = reference["cases"].as_array().unwrap();
    let texts: Vec<&str> = cases.iter().map(|c| c["text"].as_str().unwrap()).collect();
    let vectors = embedder.embed(&texts).unwrap();
    let mut worst = f64::MAX;
    for (case, vector) in cases.iter().zip(&vectors) {
        let text = case["text"].as_str().unwrap();
        let expected_ids: Vec<u32> = case["token_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(embedder.token_ids(text), expected_ids, "tokens of {text:?}");
        let expected: Vec<f64> = case["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let similarity = cosine(vector, &expected);
        assert!(similarity >= 0.999, "{text:?}: cosine {similarity}");
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{text:?}: norm {norm}");
        worst = worst.min(similarity);
    }
    eprintln!(
        "{}: lowest cosine to the reference: {worst:.6}",
        embedder.engine()
    );
}

#[test]
fn a_directory_without_a_model_is_a_clear_error() {
    let dir = tempfile_dir();
    let err = LocalEmbedder::load(&dir).unwrap_err().to_string();
    assert!(err.contains("config.json"), "{err}");
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("quire-no-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn padding_in_a_batch_does_not_change_a_vector() {
    for engine in [Engine::Candle, Engine::OnnxRuntime] {
        padding_does_not_change_a_vector(&load(engine));
    }
}

fn padding_does_not_change_a_vector(embedder: &LocalEmbedder) {
    let texts = [
        "short",
        "a somewhat longer sentence about pumps, valves and seals",
        "mid length text here",
        "x",
        "The pump must be primed before it is started, every single time, without exception.",
    ];
    let together = embedder.embed(&texts).unwrap();
    for (text, batched) in texts.iter().zip(&together) {
        let alone = embedder.embed(&[text]).unwrap().remove(0);
        let alone: Vec<f64> = alone.iter().map(|x| f64::from(*x)).collect();
        let similarity = cosine(batched, &alone);
        assert!(similarity > 0.99999, "{text:?}: {similarity}");
    }
}
