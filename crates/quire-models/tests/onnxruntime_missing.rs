//! Choosing ONNX Runtime without a usable library. A test binary of its own: a process loads
//! ONNX Runtime at most once, and these tests must run before any good library is loaded.

use std::path::PathBuf;

use quire_models::{Engine, EngineOptions, LocalEmbedder};

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
    };
    let embedder = LocalEmbedder::load_with(&model_dir(), &options).unwrap();
    assert_eq!(embedder.engine(), "candle");
    let reason = embedder.engine_fallback().expect("a reason");
    assert!(reason.contains("could not load ONNX Runtime"), "{reason}");
    let vector = embedder.embed(&["still works"]).unwrap().remove(0);
    assert_eq!(vector.len(), 384);
}
