//! Choosing ONNX Runtime without a usable library. A test binary of its own: a process loads
//! ONNX Runtime at most once, and these tests must run before any good library is loaded.

use std::path::PathBuf;

use quire_models::{Engine, EngineOptions, LocalEmbedder, Precision};

fn model_dir() -> PathBuf {
    std::env::var_os("QUIRE_TEST_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
            home.join(".cache/quire-models/all-MiniLM-L6-v2")
        })
}

fn not_a_library() -> PathBuf {
    let path =
        std::env::temp_dir().join(format!("quire-not-onnxruntime-{}.so", std::process::id()));
    std::fs::write(&path, b"not a shared library").unwrap();
    path
}

#[test]
fn a_required_runtime_that_cannot_load_is_a_clear_error() {
    for library in [
        PathBuf::from("/nonexistent/libonnxruntime.so"),
        not_a_library(),
    ] {
        let options = EngineOptions {
            engine: Engine::OnnxRuntime,
            onnxruntime_library: Some(library.clone()),
            precision: Precision::Fp32,
            sessions: 1,
        };
        let err = LocalEmbedder::load_with(&model_dir(), &options)
            .unwrap_err()
            .to_string();
        assert!(err.contains("ONNX Runtime"), "{err}");
        assert!(err.contains(&library.display().to_string()), "{err}");
    }
}

#[test]
fn auto_falls_back_to_candle_and_says_why() {
    let options = EngineOptions {
        engine: Engine::Auto,
        onnxruntime_library: Some(not_a_library()),
        precision: Precision::Auto,
        sessions: 1,
    };
    let embedder = LocalEmbedder::load_with(&model_dir(), &options).unwrap();
    assert_eq!(embedder.engine(), "candle");
    let reason = embedder.engine_fallback().expect("a reason");
    assert!(reason.contains("could not load ONNX Runtime"), "{reason}");
    let vector = embedder.embed(&["still works"]).unwrap().remove(0);
    assert_eq!(vector.len(), 384);
}

/// int8 asked for explicitly must not quietly become candle's fp32 when the library is bad.
#[test]
fn int8_never_falls_back_to_candle() {
    let options = EngineOptions {
        engine: Engine::Auto,
        onnxruntime_library: Some(not_a_library()),
        precision: Precision::Int8,
        sessions: 1,
    };
    let err = LocalEmbedder::load_with(&model_dir(), &options)
        .unwrap_err()
        .to_string();
    assert!(err.contains("could not load ONNX Runtime"), "{err}");
}

#[test]
fn precisions_no_engine_has_are_refused_before_loading() {
    for (engine, precision, expected) in [
        (
            Engine::Candle,
            Precision::Int8,
            "needs the ONNX Runtime engine",
        ),
        (Engine::Candle, Precision::Bf16, "bfloat16 MatMul"),
        (Engine::OnnxRuntime, Precision::Bf16, "bfloat16 MatMul"),
        (Engine::Auto, Precision::Bf16, "bfloat16 MatMul"),
    ] {
        let options = EngineOptions {
            engine,
            onnxruntime_library: None,
            precision,
            sessions: 1,
        };
        // Refused even for a directory without a model: the setting is checked first.
        let err = LocalEmbedder::load_with(&std::env::temp_dir(), &options)
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{engine:?} {precision:?}: {err}");
    }
}
