//! `quire eval …` and `quire bench …`: quality and performance measured on real or synthetic
//! data. Each command is a clap `Args` struct and a function that runs it; the binary only
//! routes its subcommands here. Commands that need the whole service build it with
//! [`quire_server::build`], as `quire serve` does.

pub mod bench;
pub mod bench_cluster;
pub mod bench_embed;
pub mod bench_filters;
pub mod bench_fuzz;
pub mod bench_generate;
pub mod bench_ingest;
pub mod bench_queries;
mod bench_server;
pub mod bench_sync;
pub mod bench_vectors;
pub mod eval;
pub mod eval_answers;
pub mod eval_ocr;
pub mod eval_pages;
pub mod eval_pii;
pub mod eval_retrieval;
mod page_metrics;
mod pg_alternatives;
mod progress;
mod retrieval_metrics;
mod text_quality;
