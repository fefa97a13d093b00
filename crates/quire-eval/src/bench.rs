//! `quire bench search`: ingests documents through the real pipeline (staging, extraction,
//! chunking, store, index) into a temporary data directory, then times keyword searches through
//! the same function the HTTP handler calls. Prints medians and tails, not single timings.

use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use quire_core::{
    DocumentId, NewSource, SearchLimit, SearchQuery, SourceDescription, SourceId, SourceName,
    SourceRecord, SourceScope, SourceType, SystemClock,
};
use quire_store::Created;

use crate::progress::Progress;
use tempfile::TempDir;

use quire_server::{App, Parts};

use quire_server::Config;

/// Options of `quire bench search`.
#[derive(Debug, Args)]
pub struct SearchBenchArgs {
    /// BEIR `corpus.jsonl` to ingest (one document per line); synthetic text when omitted.
    #[arg(long, value_name = "FILE")]
    corpus: Option<PathBuf>,
    /// BEIR `queries.jsonl`; queries are drawn from the corpus vocabulary when omitted.
    #[arg(long, value_name = "FILE")]
    queries: Option<PathBuf>,
    /// Documents to ingest (at most).
    #[arg(long, default_value_t = 2000)]
    documents: usize,
    /// Queries to time (at most).
    #[arg(long, default_value_t = 500)]
    query_count: usize,
    /// Results per query.
    #[arg(long, default_value_t = 10)]
    limit: i64,
}

struct Doc {
    name: String,
    text: String,
}

/// Runs the search benchmark and prints its report.
pub async fn search(base: &Config, args: SearchBenchArgs) -> anyhow::Result<()> {
    let docs = match &args.corpus {
        Some(path) => read_corpus(path, args.documents)?,
        None => synthetic_corpus(args.documents),
    };
    let queries = match &args.queries {
        Some(path) => read_queries(path, args.query_count)?,
        None => synthetic_queries(&docs, args.query_count),
    };
    if docs.is_empty() || queries.is_empty() {
        bail!("nothing to benchmark: no documents or no queries");
    }
    let (_scratch, app, _) = scratch_app(base).await?;
    let state = app.services().clone();
    let parts = app.parts().clone();
    let started = Instant::now();
    let (source, _) = ingest_markdown(
        &parts,
        "bench",
        docs.iter().map(|d| (d.name.clone(), d.text.clone())),
    )
    .await?;
    let ingested = started.elapsed();
    let chunks = parts.index.chunk_count();

    let limit = SearchLimit::parse(args.limit)?;
    let scopes = [
        ("all sources", SourceScope::All),
        ("one source", SourceScope::only([source.id])),
    ];
    println!(
        "documents: {}  chunks: {chunks}  queries: {}",
        docs.len(),
        queries.len()
    );
    println!(
        "ingest: {:.1} s ({:.0} chunks/s)",
        ingested.as_secs_f64(),
        chunks as f64 / ingested.as_secs_f64(),
    );
    for (label, scope) in &scopes {
        // One warm-up pass so the first queries do not pay for page faults.
        for q in queries.iter().take(20) {
            quire_app::search::search(&state, scope, q.as_str(), limit.get(), None).await?;
        }
        let mut times = Vec::with_capacity(queries.len());
        for q in &queries {
            let t = Instant::now();
            quire_app::search::search(&state, scope, q.as_str(), limit.get(), None).await?;
            times.push(t.elapsed());
        }
        times.sort();
        println!(
            "keyword search ({label}, limit {}): p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
            limit.get(),
            ms(percentile(&times, 0.50)),
            ms(percentile(&times, 0.99)),
            ms(*times.last().unwrap_or(&Duration::ZERO)),
        );
    }
    Ok(())
}

/// The application on a temporary data directory, with no background workers (the caller
/// drives the jobs), and the configuration it was built with. Keep the directory alive as
/// long as the application.
pub(crate) async fn scratch_app(base: &Config) -> anyhow::Result<(TempDir, App, Config)> {
    let scratch = tempfile::tempdir().context("could not create a scratch directory")?;
    let mut config = base.clone();
    config.data_dir = scratch.path().to_path_buf();
    config.workers.count = 0;
    // A benchmark corpus must be indexed whole for its judgements to mean anything; screening
    // for personal data is measured on its own by `quire eval pii`.
    config.pii.enabled = false;
    let app = quire_server::build(&config, Arc::new(SystemClock)).await?;
    Ok((scratch, app, config))
}

/// Creates a source named `name` and ingests `(file name, Markdown)` documents into it through
/// the real pipeline (staging, acceptance, the parse worker, chunking, store, index), until no
/// job is left. Returns the source and the documents' ids in input order.
pub(crate) async fn ingest_markdown(
    parts: &Parts,
    name: &str,
    documents: impl Iterator<Item = (String, String)>,
) -> anyhow::Result<(SourceRecord, Vec<DocumentId>)> {
    let documents: Vec<(String, String)> = documents.collect();
    let total = documents.len();
    ingest_files(
        parts,
        name,
        total,
        documents.into_iter().map(|(file_name, text)| {
            Ok(Upload::bytes(
                file_name,
                Some("text/markdown"),
                text.into_bytes(),
            ))
        }),
    )
    .await
}

/// What [`ingest_files`] stages: a file's name, its content type (`None`: guessed from the
/// name, as for an upload without one) and its bytes.
pub(crate) struct Upload {
    name: String,
    content_type: Option<String>,
    bytes: Vec<u8>,
}

impl Upload {
    pub(crate) fn bytes(name: String, content_type: Option<&str>, bytes: Vec<u8>) -> Self {
        Self {
            name,
            content_type: content_type.map(str::to_owned),
            bytes,
        }
    }
}

/// Creates a source named `name` and ingests `total` files into it through the real pipeline
/// (staging, acceptance, the parse worker, chunking, embedding, store, indexes), until no job
/// is left. The files are read one at a time, so a directory of large PDFs is never all in
/// memory. Returns the source and the documents' ids in input order.
pub(crate) async fn ingest_files(
    parts: &Parts,
    name: &str,
    total: usize,
    files: impl Iterator<Item = anyhow::Result<Upload>>,
) -> anyhow::Result<(SourceRecord, Vec<DocumentId>)> {
    let source = parts
        .store
        .create_source(NewSource {
            id: SourceId::new(),
            name: SourceName::parse(name)?,
            description: SourceDescription::default(),
            source_type: SourceType::Network,
            created_at: quire_core::Clock::now(&SystemClock),
        })
        .await?;
    let total = u64::try_from(total).unwrap_or(u64::MAX);
    let mut stored = Progress::new("storing documents", total);
    let mut ids = Vec::new();
    for file in files {
        let file = file?;
        let mut staged = parts.ingest.stage().await?;
        staged.write(&file.bytes).await?;
        let upload = quire_ingest::Upload {
            name: file.name,
            content_type: file.content_type,
            staged: staged.finish().await?,
            metadata: None,
            external_id: None,
        };
        let document = match parts
            .ingest
            .accept(&SourceScope::All, source.id, upload)
            .await?
        {
            Created::New(d) | Created::Existing(d) | Created::Version(d) => d,
        };
        ids.push(document.id);
        stored.inc(1);
    }
    stored.finish();
    let mut processed = Progress::new("processing documents", total);
    parts
        .ingest
        .process_queued(name, || processed.inc(1))
        .await?;
    processed.finish();
    Ok((source, ids))
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

pub(crate) fn read_jsonl(path: &PathBuf, max: usize) -> anyhow::Result<Vec<serde_json::Value>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("could not open {}", path.display()))?;
    let mut out = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        // Blank lines are not records: `max` counts records.
        if out.len() == max {
            break;
        }
        out.push(
            serde_json::from_str(&line)
                .with_context(|| format!("bad JSON line in {}", path.display()))?,
        );
    }
    Ok(out)
}

fn read_corpus(path: &PathBuf, max: usize) -> anyhow::Result<Vec<Doc>> {
    Ok(read_jsonl(path, max)?
        .into_iter()
        .map(|v| {
            let title = v["title"].as_str().unwrap_or("");
            let text = v["text"].as_str().unwrap_or("");
            Doc {
                name: format!("{}.md", v["_id"].as_str().unwrap_or("doc")),
                text: if title.is_empty() {
                    text.to_owned()
                } else {
                    format!("# {title}\n\n{text}")
                },
            }
        })
        .collect())
}

fn read_queries(path: &PathBuf, max: usize) -> anyhow::Result<Vec<SearchQuery>> {
    read_jsonl(path, max)?
        .into_iter()
        .filter_map(|v| v["text"].as_str().map(SearchQuery::parse))
        .map(|q| q.map_err(|e| anyhow::anyhow!(e.0)))
        .collect()
}

/// A deterministic pseudo-random stream (xorshift), so synthetic runs are comparable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Zipf-like pick in `0..n`: small indexes are much more frequent, like words in text.
    fn zipf(&mut self, n: usize) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((n as f64).powf(u) as usize).saturating_sub(1).min(n - 1)
    }
}

fn vocabulary() -> Vec<String> {
    let syllables = [
        "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "pe", "da", "zu", "fi",
    ];
    let mut words = Vec::new();
    for a in syllables {
        for b in syllables {
            for c in ["", "n", "ter", "ment", "ing"] {
                words.push(format!("{a}{b}{c}"));
            }
        }
    }
    words
}

fn synthetic_corpus(n: usize) -> Vec<Doc> {
    let words = vocabulary();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    (0..n)
        .map(|i| {
            let mut text = format!("# Document {i}\n\n");
            for _ in 0..(3 + rng.next() % 6) {
                let sentence: Vec<&str> = (0..(40 + rng.next() % 60))
                    .map(|_| words[rng.zipf(words.len())].as_str())
                    .collect();
                text.push_str(&sentence.join(" "));
                text.push_str(".\n\n");
            }
            Doc {
                name: format!("doc-{i}.md"),
                text,
            }
        })
        .collect()
}

fn synthetic_queries(docs: &[Doc], n: usize) -> Vec<SearchQuery> {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    (0..n)
        .filter_map(|_| {
            let doc = &docs[(rng.next() as usize) % docs.len()];
            let words: Vec<&str> = doc
                .text
                .split_whitespace()
                .filter(|w| !w.starts_with('#'))
                .collect();
            if words.is_empty() {
                return None;
            }
            let start = (rng.next() as usize) % words.len();
            let query: Vec<&str> = words.iter().cycle().skip(start).take(4).copied().collect();
            SearchQuery::parse(&query.join(" ")).ok()
        })
        .collect()
}
