//! The local embedder against sentence-transformers: the same token ids and, for every
//! sentence, a vector with cosine ≥ 0.999 to the reference (`tests/data/minilm-reference.json`,
//! written by `scripts/dev/reference-embeddings.py`). The model directory comes from
//! `QUIRE_TEST_MODEL_DIR`, else the cache that `scripts/fetch-model` fills.

use std::path::PathBuf;

use quire_models::LocalEmbedder;
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
fn embeddings_match_sentence_transformers() {
    let embedder = LocalEmbedder::load(&model_dir()).unwrap();
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
    eprintln!("lowest cosine to the reference: {worst:.6}");
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
    let embedder = LocalEmbedder::load(&model_dir()).unwrap();
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
