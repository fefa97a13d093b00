//! `quire bench embed`: embedding throughput of the local model on this machine. Chunks come
//! from a BEIR corpus cut by the product's own chunker (or from a built-in English text), are
//! embedded one after another as ingestion does, and the report gives chunks/second, tokens per
//! chunk, the achieved GFLOP/s and that rate as a fraction of the same tensor library's measured
//! single-precision matrix-multiply rate on this machine. With several `--precision`s, each
//! is loaded and their timed rounds alternate, so a machine that gets busier or quieter during
//! the run weighs on them alike, and the report gives their ratio.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use quire_ingest::{ChunkingParams, chunk_blocks, embedding_text};
use quire_models::LocalEmbedder;
use throughput::{forward_flops, matmul_gflops};

mod throughput;

/// Options of `quire bench embed`.
#[derive(Debug, Args)]
pub struct EmbedBenchArgs {
    /// Model directory (`config.json`, `vocab.txt`, `model.safetensors`).
    #[arg(long, value_name = "DIR")]
    model_dir: PathBuf,
    /// BEIR `corpus.jsonl` whose documents are chunked and embedded; a built-in English text
    /// when omitted.
    #[arg(long, value_name = "FILE")]
    corpus: Option<PathBuf>,
    /// Chunks to embed.
    #[arg(long, default_value_t = 200)]
    chunks: usize,
    /// Timed rounds over the chunks; the report gives the median round.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// BEIR `queries.jsonl`: also time embedding each query alone, as search does.
    #[arg(long, value_name = "FILE")]
    queries: Option<PathBuf>,
    /// Inference engine: `auto` (ONNX Runtime when its library is found), `onnxruntime` or
    /// `candle`, as `embedding.engine`.
    #[arg(long, default_value = "auto")]
    engine: String,
    /// The ONNX Runtime library (default: `ORT_DYLIB_PATH`, then the model cache).
    #[arg(long, value_name = "FILE")]
    onnxruntime_library: Option<PathBuf>,
    /// Precision of the linear layers, as `embedding.precision`: `auto`, `fp32` or `int8`;
    /// several (`--precision fp32,int8`) are compared in one run.
    #[arg(long, value_delimiter = ',', default_value = "auto")]
    precision: Vec<String>,
}

/// Runs the benchmark and prints its report.
pub fn embed(args: EmbedBenchArgs) -> anyhow::Result<()> {
    let mut embedders = Vec::new();
    for precision in &args.precision {
        let options = quire_server::config::EmbeddingConfig {
            engine: args.engine.clone(),
            onnxruntime_library: args.onnxruntime_library.clone(),
            precision: precision.clone(),
            ..Default::default()
        }
        .engine_options()?;
        let embedder = LocalEmbedder::load_with(&args.model_dir, &options)
            .with_context(|| format!("could not load the model in {}", args.model_dir.display()))?;
        if let Some(reason) = embedder.engine_fallback() {
            eprintln!("ONNX Runtime not used: {reason}");
        }
        embedders.push(embedder);
    }
    let first = &embedders[0];
    let chunks = match &args.corpus {
        Some(path) => corpus_chunks(path, args.chunks)?,
        None => builtin_chunks(args.chunks),
    };
    anyhow::ensure!(!chunks.is_empty(), "no text to embed");
    let texts: Vec<&str> = chunks.iter().map(String::as_str).collect();
    let token_counts: Vec<usize> = texts
        .iter()
        .map(|t| first.token_ids(t).map_or(0, |ids| ids.len()))
        .collect();
    let flops: f64 = token_counts
        .iter()
        .map(|n| forward_flops(first.config(), *n))
        .sum();
    let mean_tokens = token_counts.iter().sum::<usize>() as f64 / texts.len() as f64;

    for embedder in &embedders {
        embedder.embed(&texts[..texts.len().min(4)])?;
    }
    // Round r of every embedder runs before round r + 1 of any.
    let mut seconds = vec![Vec::new(); embedders.len()];
    for _ in 0..args.rounds.max(1) {
        for (embedder, times) in embedders.iter().zip(&mut seconds) {
            let started = Instant::now();
            embedder.embed(&texts)?;
            times.push(started.elapsed().as_secs_f64());
        }
    }
    let medians: Vec<f64> = seconds
        .iter_mut()
        .map(|times| {
            times.sort_by(f64::total_cmp);
            times[times.len() / 2]
        })
        .collect();

    let hidden = first.config().hidden_size;
    let typical = mean_tokens.round() as usize;
    let shaped = matmul_gflops(typical.max(1), hidden, hidden * 4, 20, 5);
    let square = matmul_gflops(1024, 1024, 1024, 5, 5);

    println!("model                   {}", first.name());
    println!("chunks                  {}", texts.len());
    println!("tokens per chunk        {mean_tokens:.1} (mean, with [CLS] and [SEP])");
    println!(
        "matmul {typical}x{hidden}x{} {shaped:.1} GFLOP/s (fp32)",
        hidden * 4
    );
    println!("matmul 1024^3           {square:.1} GFLOP/s (fp32)");
    for (embedder, median) in embedders.iter().zip(&medians) {
        let achieved = flops / median / 1e9;
        println!();
        println!("engine                  {}", embedder.engine());
        println!(
            "chunks/second           {:.1} (median of {} rounds)",
            texts.len() as f64 / median,
            args.rounds.max(1)
        );
        println!(
            "tokens/second           {:.0}",
            mean_tokens * texts.len() as f64 / median
        );
        println!(
            "achieved                {achieved:.1} GFLOP/s ({:.2} GFLOP per chunk)",
            flops / texts.len() as f64 / 1e9
        );
        println!(
            "fraction of matmul rate {:.0}% of the model-shaped product, {:.0}% of the square one",
            100.0 * achieved / shaped,
            100.0 * achieved / square
        );
        if let Some(path) = &args.queries {
            query_latency(embedder, path)?;
        }
    }
    if embedders.len() > 1 {
        println!();
        // How far a reduced precision moves the vectors: the cosine between each chunk's
        // vector and the first precision's (1 is the same direction).
        let reference = first.embed(&texts)?;
        for (embedder, median) in embedders.iter().zip(&medians).skip(1) {
            let vectors = embedder.embed(&texts)?;
            let cosines: Vec<f32> = reference
                .iter()
                .zip(&vectors)
                .map(|(a, b)| a.iter().zip(b).map(|(x, y)| x * y).sum())
                .collect();
            let mean = cosines.iter().sum::<f32>() / cosines.len() as f32;
            let least = cosines.iter().copied().fold(f32::INFINITY, f32::min);
            println!(
                "{} against {}: {:.2}x the chunks/second, cosine to its vectors mean {mean:.5}, \
                 least {least:.5}",
                embedder.precision().as_str(),
                first.precision().as_str(),
                medians[0] / median
            );
        }
    }
    Ok(())
}

/// Embeds each query on its own, as a search does, and prints the latency percentiles.
fn query_latency(embedder: &LocalEmbedder, path: &PathBuf) -> anyhow::Result<()> {
    let queries: Vec<String> = crate::bench::read_jsonl(path, 1000)?
        .into_iter()
        .filter_map(|v| v["text"].as_str().map(str::to_owned))
        .collect();
    anyhow::ensure!(!queries.is_empty(), "no queries in {}", path.display());
    for q in queries.iter().take(10) {
        embedder.embed(&[q.as_str()])?;
    }
    let mut times = Vec::with_capacity(queries.len());
    let mut tokens = 0;
    for q in &queries {
        tokens += embedder.token_ids(q)?.len();
        let started = Instant::now();
        embedder.embed(&[q.as_str()])?;
        times.push(started.elapsed());
    }
    times.sort();
    println!(
        "query embedding         p50 {:.2} ms  p99 {:.2} ms  ({} queries, {:.1} tokens each)",
        crate::bench::ms(crate::bench::percentile(&times, 0.5)),
        crate::bench::ms(crate::bench::percentile(&times, 0.99)),
        queries.len(),
        tokens as f64 / queries.len() as f64
    );
    Ok(())
}

/// Chunks of the corpus's documents as ingestion cuts them (title as a heading, then text).
fn corpus_chunks(path: &PathBuf, max: usize) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("could not read {}", path.display()))?;
    let mut chunks = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let doc: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("bad JSON line in {}", path.display()))?;
        let markdown = format!(
            "# {}\n\n{}",
            doc["title"].as_str().unwrap_or(""),
            doc["text"].as_str().unwrap_or("")
        );
        let blocks = quire_parse::markdown(&markdown).blocks;
        for chunk in chunk_blocks(&blocks, ChunkingParams::default()) {
            // A BEIR id (`{id}.md` once ingested) carries no words, so ingestion gives no title.
            chunks.push(embedding_text("", &chunk));
            if chunks.len() == max {
                return Ok(chunks);
            }
        }
    }
    Ok(chunks)
}

/// Paragraph-sized English chunks of about 200 words.
fn builtin_chunks(n: usize) -> Vec<String> {
    const TEXT: &str = "The centrifugal pump moves cooling water from the intake basin to the \
        heat exchangers. Before it is started, the casing must be primed so that the impeller \
        never runs dry, because a dry start destroys the mechanical seal within seconds. \
        Operators check the suction pressure, open the discharge valve slowly and listen for \
        cavitation, a rattling noise that means the pressure at the impeller eye has fallen \
        below the vapour pressure of the water. Bearings are greased every three months and \
        their temperature is logged at every shift change. ";
    (0..n)
        .map(|i| format!("Section {i}. {}", TEXT.repeat(2)))
        .collect()
}
