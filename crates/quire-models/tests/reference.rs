//! The local embedder against sentence-transformers: the same token ids and, for every
//! sentence, a vector with cosine ≥ 0.999 to the reference (`tests/data/minilm-reference.json`,
//! written by `scripts/dev/reference-embeddings.py`). The model directory comes from
//! `QUIRE_TEST_MODEL_DIR`, else the cache that `scripts/fetch-model` fills.

use std::path::PathBuf;

use quire_models::{Engine, EngineOptions, LocalEmbedder, Precision};
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
    load_in(engine, Precision::Fp32)
}

fn load_in(engine: Engine, precision: Precision) -> LocalEmbedder {
    let options = EngineOptions {
        engine,
        onnxruntime_library: (engine == Engine::OnnxRuntime).then(onnxruntime_library),
        precision,
        sessions: 1,
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
    assert_same_vectors(&candle.embed(&texts).unwrap(), &onnx.embed(&texts).unwrap());
}

/// Each vector of `a` points where the one of `b` at its place does (cosine above 0.99999).
fn assert_same_vectors(a: &[Vec<f32>], b: &[Vec<f32>]) {
    assert_eq!(a.len(), b.len());
    for (a, b) in a.iter().zip(b) {
        let b: Vec<f64> = b.iter().map(|x| f64::from(*x)).collect();
        assert!(cosine(a, &b) > 0.99999, "cosine {}", cosine(a, &b));
    }
}

/// A session per worker: callers on several threads embed side by side, each call on a free
/// session, a long call spreads its batches over the sessions, and all get the vectors one
/// session gives.
#[test]
fn sessions_side_by_side_give_the_vectors_of_one() {
    let options = EngineOptions {
        engine: Engine::OnnxRuntime,
        onnxruntime_library: Some(onnxruntime_library()),
        precision: Precision::Fp32,
        sessions: 2,
    };
    let pair = LocalEmbedder::load_with(&model_dir(), &options).unwrap();
    // At most one session per core.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let sessions = if cores >= 2 {
        ", 2 sessions of "
    } else {
        ", 1 session of "
    };
    assert!(pair.engine().contains(sessions), "{}", pair.engine());
    let one = load(Engine::OnnxRuntime);
    assert!(one.engine().contains(", 1 session of "), "{}", one.engine());
    let texts = ["pumps and valves", "Die Pumpe muss vorher gefüllt werden."];
    let expected = one.embed(&texts).unwrap();
    // One call of many texts runs its batches on both sessions and gets the same vectors.
    let many: Vec<String> = (0..21)
        .map(|n| format!("pump number {n} needs {} litres of oil", n * 7))
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert_same_vectors(&pair.embed(&many).unwrap(), &one.embed(&many).unwrap());
    std::thread::scope(|scope| {
        let callers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    (0..5)
                        .map(|_| pair.embed(&texts).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for caller in callers {
            for vectors in caller.join().unwrap() {
                assert_same_vectors(&vectors, &expected);
            }
        }
    });
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
        assert_eq!(
            embedder.token_ids(text).unwrap(),
            expected_ids,
            "tokens of {text:?}"
        );
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

/// In int8 the activations' scale is taken per call, over the whole padded batch, so a
/// text's vector depends on the texts it is embedded with (ingestion embeds chunks four at a
/// time, a search its query alone): a short text batched with longer ones, whose larger
/// activations set a coarser scale, moves most (measured 0.972 for "x"; zeroing the padding
/// before quantising gained only 0.003). The SciFact figures in docs/retrieval.md include
/// this effect; the bound here keeps it from growing unnoticed.
#[test]
fn an_int8_vector_depends_a_little_on_its_batch() {
    let embedder = load_in(Engine::OnnxRuntime, Precision::Int8);
    let worst = lowest_cosine_batched_against_alone(&embedder);
    eprintln!("int8, batched against alone: lowest cosine {worst:.6}");
    assert!(worst > 0.96, "{worst}");
}

fn padding_does_not_change_a_vector(embedder: &LocalEmbedder) {
    let worst = lowest_cosine_batched_against_alone(embedder);
    assert!(worst > 0.99999, "{}: {worst}", embedder.engine());
}

fn lowest_cosine_batched_against_alone(embedder: &LocalEmbedder) -> f64 {
    let texts = [
        "short",
        "a somewhat longer sentence about pumps, valves and seals",
        "mid length text here",
        "x",
        "The pump must be primed before it is started, every single time, without exception.",
    ];
    let together = embedder.embed(&texts).unwrap();
    let mut worst = f64::MAX;
    for (text, batched) in texts.iter().zip(&together) {
        let alone = embedder.embed(&[text]).unwrap().remove(0);
        let alone: Vec<f64> = alone.iter().map(|x| f64::from(*x)).collect();
        worst = worst.min(cosine(batched, &alone));
    }
    worst
}

/// int8 vectors are close to the fp32 ones and put the same passage first for each query, so
/// `precision` can change without re-embedding (the model id stays; see docs/retrieval.md).
#[test]
fn int8_stays_close_to_fp32_and_ranks_the_same() {
    let fp32 = load_in(Engine::OnnxRuntime, Precision::Fp32);
    let int8 = load_in(Engine::OnnxRuntime, Precision::Int8);
    assert_eq!(int8.precision(), Precision::Int8);
    assert_eq!(fp32.precision(), Precision::Fp32);
    assert!(
        int8.engine().starts_with("onnxruntime int8"),
        "{}",
        int8.engine()
    );
    assert_eq!(fp32.model_id(), int8.model_id());
    // An int8 vector depends on its batch, so search queries are not batched with it.
    assert!(!quire_core::embed::Embedder::batch_invariant(&int8));
    assert!(quire_core::embed::Embedder::batch_invariant(&fp32));
    let passages = [
        "The centrifugal pump must be primed before it is started, or the seal runs dry.",
        "Bearings are greased every three months and their temperature logged each shift.",
        "Invoices are due thirty days after the date of delivery.",
        "Die Pumpe muss vor dem Start gefüllt werden.",
        "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
        "A cavitating impeller rattles: the suction pressure has fallen too low.",
    ];
    let queries = [
        "how do I start the pump",
        "when are payments due",
        "how do plants make sugar",
        "what does a rattling noise in a pump mean",
    ];
    let embed = |model: &LocalEmbedder, texts: &[&str]| model.embed(texts).unwrap();
    let (p32, p8) = (embed(&fp32, &passages), embed(&int8, &passages));
    let (q32, q8) = (embed(&fp32, &queries), embed(&int8, &queries));
    let mut worst = f64::MAX;
    for (a, b) in p32.iter().chain(&q32).zip(p8.iter().chain(&q8)) {
        let b: Vec<f64> = b.iter().map(|x| f64::from(*x)).collect();
        worst = worst.min(cosine(a, &b));
    }
    eprintln!("all-MiniLM-L6-v2, int8 against fp32: lowest cosine {worst:.5}");
    assert!(worst >= 0.98, "lowest cosine {worst}");
    let ranking = |query: &[f32], passages: &[Vec<f32>]| {
        let mut order: Vec<usize> = (0..passages.len()).collect();
        let score = |i: usize| -> f32 { query.iter().zip(&passages[i]).map(|(x, y)| x * y).sum() };
        order.sort_by(|&a, &b| score(b).total_cmp(&score(a)));
        order
    };
    // The passage each query is about; the order of the unrelated ones below it is noise
    // (their scores are close together), so only the top is compared.
    let judged = [0, 2, 4, 5];
    for ((i, query), expected) in queries.iter().enumerate().zip(judged) {
        let (exact, quantised) = (ranking(&q32[i], &p32), ranking(&q8[i], &p8));
        eprintln!("{query:?}: fp32 {exact:?}, int8 {quantised:?}");
        assert_eq!(exact[0], expected, "{query:?} in fp32: {exact:?}");
        assert_eq!(quantised[0], expected, "{query:?} in int8: {quantised:?}");
    }
}
