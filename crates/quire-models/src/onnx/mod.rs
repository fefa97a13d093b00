//! The local encoder on ONNX Runtime: the graph is written in memory from the model
//! directory's safetensors ([`graph`]), the runtime is a shared library loaded when the
//! embedder starts ([`runtime`]). About twice candle's throughput on 2 cores (see
//! `docs/retrieval.md`), so it is preferred whenever the library is there.

mod graph;
mod pool;
mod proto;
mod runtime;
#[cfg(test)]
pub(crate) mod tests;

use std::path::PathBuf;

pub(crate) use graph::{Linear, cpu_has_vnni};
pub(crate) use runtime::OnnxEncoder;

/// Environment variable naming the ONNX Runtime library (the `ort` crate's own convention).
pub const LIBRARY_ENV: &str = "ORT_DYLIB_PATH";

/// The ONNX Runtime library to use when none is configured: `$ORT_DYLIB_PATH`, else
/// `onnxruntime/libonnxruntime.so` in the model cache (where `scripts/fetch-onnxruntime`
/// puts it), if that exists.
pub fn default_library() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(LIBRARY_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let cached = crate::fetch::model_cache_dir()?
        .join("onnxruntime")
        .join(library_file_name());
    cached.is_file().then_some(cached)
}

/// Where the model cache keeps the library (`onnxruntime/` in it, whether or not it is there
/// yet); `None` without a home directory.
pub fn cached_library() -> Option<PathBuf> {
    Some(
        crate::fetch::model_cache_dir()?
            .join("onnxruntime")
            .join(library_file_name()),
    )
}

/// The library's file name on this platform.
fn library_file_name() -> &'static str {
    if cfg!(target_os = "windows") {
        "onnxruntime.dll"
    } else if cfg!(target_os = "macos") {
        "libonnxruntime.dylib"
    } else {
        "libonnxruntime.so"
    }
}
