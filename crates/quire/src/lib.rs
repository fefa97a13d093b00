//! The `quire` binary's library: configuration, wiring ([`build`] and [`App::serve`], shared by
//! `main` and the integration tests) and the command-line interface.

pub mod admin_cli;
pub mod app;
pub mod bench;
pub mod bench_embed;
pub mod bench_generate;
pub mod bench_vectors;
pub mod cli;
pub mod config;
pub mod eval;
pub mod eval_pii;
pub mod eval_retrieval;
pub mod keys;
pub mod model_fetch;
mod retrieval_metrics;
pub mod review_cli;
mod text_quality;
pub mod webhooks_cli;

pub use app::{App, build, open_store};
pub use config::Config;
