//! Quire's models, behind the [`Embedder`] trait: the local sentence embedder
//! ([`LocalEmbedder`], all-MiniLM-L6-v2 by default), a BERT encoder run on the CPU from a model
//! directory of `config.json`, `vocab.txt` and `model.safetensors`, producing what
//! sentence-transformers produces (pooling, normalisation and prompts as the directory's
//! sentence-transformers files say, see [`sentence`]); and [`OpenAiEmbedder`], a
//! client for any server speaking OpenAI's `/v1/embeddings` (OpenAI, Ollama,
//! text-embeddings-inference, vLLM); [`HttpReranker`], a client for reranking servers
//! (`/rerank`: Cohere, Jina, text-embeddings-inference, vLLM, Infinity, llama.cpp). [`fetch`] downloads a model directory from the model hub.

mod bert;
pub mod fetch;
mod fused;
pub mod generate;
mod http;
mod local;
pub mod onnx;
mod openai;
pub mod package_index;
mod rerank;
pub mod sentence;
mod token_count;
pub mod tokenizer;

pub use bert::BertConfig;
pub use local::{BF16_REFUSAL, Engine, EngineOptions, LocalEmbedder, Precision};
pub use openai::{OpenAiEmbedder, OpenAiSettings};
pub use quire_core::embed::{Embedder, ModelError, Purpose, normalize};
pub use quire_core::rerank::Reranker;
pub use rerank::{HttpReranker, RerankSettings};
pub use token_count::ModelTokens;
