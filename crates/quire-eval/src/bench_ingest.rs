//! `quire bench ingest`: ingest throughput as a client sees it. The product's server (`build`
//! and `App::serve` on 127.0.0.1:0, with its background workers) runs on a fresh temporary
//! data directory; the bench creates a source and bulk-uploads a BEIR corpus (each document as
//! Markdown, `# title` then the text) or a directory of files through the real HTTP API, then
//! waits until every document is `ready`, `failed` or held for review. The report gives
//! documents/s and chunks/s from the first upload to the last document finished, the seconds
//! each stage took (the workers' own `quire_ingest_stage_duration_seconds` histogram, read from
//! the process's Prometheus recorder), the process's peak resident memory, and the embedder's
//! own rate on the same machine in the same run: the first documents' chunks embedded again,
//! one document per call from as many callers side by side as there are workers, as the
//! workers embed them, with nothing else running.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use futures_util::StreamExt;
use quire_core::DocumentId;
use quire_core::embed::Purpose;
use quire_ingest::{STAGE_SECONDS, document_title, embedding_text};
use quire_server::{Config, Parts};

use crate::bench::read_jsonl;
use crate::bench_server::BenchServer;
use crate::eval_retrieval::corpus_documents;
use crate::progress::Progress;

/// The stages in pipeline order, as the stage histogram labels them.
const STAGES: [&str; 5] = ["parse", "screen", "embed", "index", "store"];

/// Options of `quire bench ingest`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["corpus", "dir"])))]
pub struct IngestBenchArgs {
    /// BEIR `corpus.jsonl` (`_id`, `title`, `text` per line); each document is uploaded as
    /// `{_id}.md` holding `# title` and the text.
    #[arg(long, value_name = "FILE")]
    corpus: Option<PathBuf>,
    /// A directory whose files (recursively, in path order) are uploaded as they are.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Take only the first N documents (or files).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    #[command(flatten)]
    pipeline: PipelineArgs,
    /// Files per bulk-upload request (at most the configured `limits.max_bulk_files`).
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Bulk-upload requests in flight at once, as a client with several connections sends
    /// them (1: one after another).
    #[arg(long, default_value_t = 1)]
    uploads_in_flight: usize,
    /// Chunks the embedder embeds again on its own after the ingestion, for its own rate.
    #[arg(long, default_value_t = 300)]
    embed_sample: usize,
}

/// How a benched server processes documents, for the benches that ingest (`ingest`,
/// `cluster`): which embedder, and how many workers.
#[derive(Debug, Args)]
pub(crate) struct PipelineArgs {
    /// Embedding model directory; defaults to the configured `embedding.model_dir`.
    #[arg(long, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// No embedder: parse, chunk, keyword index and store only.
    #[arg(long, conflicts_with = "model_dir")]
    pub(crate) keyword_only: bool,
    /// Background workers (per node; default: the configured `workers.count`).
    #[arg(long)]
    workers: Option<usize>,
}

impl PipelineArgs {
    /// `config` with these choices made.
    pub(crate) fn apply(&self, config: &mut Config) {
        if let Some(workers) = self.workers {
            config.workers.count = workers;
        }
        if self.keyword_only {
            config.embedding.model_dir = None;
            config.embedding.base_url = None;
            config.embedding.use_cached_model = false;
        } else if let Some(dir) = &self.model_dir {
            config.embedding.model_dir = Some(dir.clone());
            config.embedding.base_url = None;
        }
    }
}

/// One file to upload: its name and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InputFile {
    /// The file name it is uploaded under.
    pub(crate) name: String,
    /// Its content.
    pub(crate) bytes: Vec<u8>,
}

/// Total seconds and count of one stage's histogram.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct StageTime {
    seconds: f64,
    count: u64,
}

/// The embedder alone: `chunks` embedded in `seconds`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct EmbedderRate {
    chunks: usize,
    seconds: f64,
}

/// What one run measured; [`IngestReport::lines`] turns it into the printed report.
#[derive(Debug, Clone, Default)]
pub(crate) struct IngestReport {
    documents: usize,
    ready: u64,
    failed: u64,
    held: u64,
    chunks: usize,
    /// From the first upload to the last document finished.
    seconds: f64,
    /// Of which the uploads (the client's requests, answered once the files are staged and
    /// queued; workers process meanwhile).
    upload_seconds: f64,
    workers: usize,
    stages: BTreeMap<String, StageTime>,
    peak_rss_kib: Option<u64>,
    embedder: Option<(String, EmbedderRate)>,
}

impl IngestReport {
    /// The report, one line per figure.
    fn lines(&self) -> Vec<String> {
        let seconds = self.seconds.max(1e-9);
        let mut out = vec![
            format!(
                "documents               {} ({} ready, {} failed, {} held for review)",
                self.documents, self.ready, self.failed, self.held
            ),
            format!(
                "chunks                  {} ({:.2} per ready document)",
                self.chunks,
                self.chunks as f64 / (self.ready.max(1)) as f64
            ),
            format!(
                "ingest                  {:.1} s with {} workers (uploads took {:.1} s of it)",
                self.seconds, self.workers, self.upload_seconds
            ),
            format!(
                "documents/second        {:.1}",
                self.documents as f64 / seconds
            ),
            format!(
                "chunks/second           {:.1}",
                self.chunks as f64 / seconds
            ),
        ];
        let busy: f64 = self.stages.values().map(|s| s.seconds).sum();
        out.push(format!(
            "stage seconds           summed over documents and workers ({busy:.1} s in all; \
             workers run side by side, so the sum can exceed the wall time)"
        ));
        for stage in STAGES {
            let time = self.stages.get(stage).copied().unwrap_or_default();
            out.push(format!(
                "  {stage:<8} {:>9.1} s {:>5.1}%  {:>8.2} ms per document ({} timed)",
                time.seconds,
                100.0 * time.seconds / busy.max(1e-9),
                1000.0 * time.seconds / (time.count.max(1)) as f64,
                time.count
            ));
        }
        if let Some(kib) = self.peak_rss_kib {
            out.push(format!(
                "peak RSS                {:.0} MiB (the server process; parse workers are \
                 separate processes, each held to parsing.memory_limit_mb)",
                kib as f64 / 1024.0
            ));
        }
        if let Some((model, rate)) = &self.embedder {
            let alone = rate.chunks as f64 / rate.seconds.max(1e-9);
            out.push(format!(
                "embedder alone          {alone:.1} chunks/s ({} chunks, {:.1} s; {model}, one \
                 document per call from {} callers side by side, as the workers embed)",
                rate.chunks, rate.seconds, self.workers
            ));
            let embed = self.stages.get("embed").copied().unwrap_or_default();
            if embed.seconds > 0.0 {
                out.push(format!(
                    "embed stage             {:.1} chunks/s per worker; the embedder alone \
                     would take {:.1} s for all chunks, {:.0}% of the ingest time",
                    self.chunks as f64 / embed.seconds,
                    self.chunks as f64 / alone.max(1e-9),
                    100.0 * self.chunks as f64 / alone.max(1e-9) / seconds
                ));
            }
        }
        out
    }
}

/// Runs the benchmark and prints its report.
pub async fn ingest(base: &Config, args: IngestBenchArgs) -> anyhow::Result<()> {
    let limit = args.limit.unwrap_or(usize::MAX);
    let files = match (&args.corpus, &args.dir) {
        (Some(corpus), _) => corpus_files(corpus, limit)?,
        (None, Some(dir)) => directory_files(dir, limit)?,
        (None, None) => bail!("pass --corpus FILE or --dir DIR"),
    };
    if files.is_empty() {
        bail!("nothing to ingest");
    }
    let scratch = tempfile::tempdir().context("could not create a scratch directory")?;
    let mut config = base.clone();
    config.data_dir = scratch.path().to_path_buf();
    args.pipeline.apply(&mut config);
    anyhow::ensure!(
        config.workers.count > 0,
        "the bench needs at least one worker"
    );
    // The stage histogram is recorded through the `metrics` facade, a no-op until a recorder
    // is installed; the bench reads it from the recorder, as a scrape of `/metrics` would.
    let metrics = quire_server::metrics::recorder()?;
    let server = BenchServer::start(&config, "quire bench ingest").await?;
    let parts = server.parts.clone();
    if !args.pipeline.keyword_only && parts.ingest.semantic().is_none() {
        bail!(
            "no embedding model ({}): pass --model-dir DIR, set QUIRE_EMBEDDING_MODEL_DIR, or \
             measure --keyword-only",
            server.state.semantic_note()
        );
    }
    let client = &server.client;

    let source = client.create_source("bench").await?;
    let batch = args.batch.clamp(1, config.limits.max_bulk_files.max(1));
    let started = Instant::now();
    let mut uploaded = Progress::new("uploading", count(files.len()));
    let mut ids = Vec::with_capacity(files.len());
    {
        let mut requests = futures_util::stream::iter(files.chunks(batch))
            .map(|part| async { (part.len(), client.upload(&source, part).await) })
            .buffered(args.uploads_in_flight.max(1));
        while let Some((files, answer)) = requests.next().await {
            ids.extend(answer?);
            uploaded.inc(count(files));
        }
    }
    uploaded.finish();
    let upload_seconds = started.elapsed().as_secs_f64();
    let (ready, failed, held) = server.wait_until_finished(files.len()).await?;
    let seconds = started.elapsed().as_secs_f64();
    let peak_rss_kib = peak_rss_kib();

    let embedder = match parts.ingest.semantic() {
        Some(semantic) => {
            let rate = embed_alone(
                &parts,
                semantic.embedder().as_ref(),
                &ids,
                args.embed_sample,
                config.workers.count,
            )
            .await?;
            Some((
                format!(
                    "{} on {}",
                    semantic.embedder().model_id(),
                    semantic.embedder().engine()
                ),
                rate,
            ))
        }
        None => None,
    };
    let report = IngestReport {
        documents: files.len(),
        ready,
        failed,
        held,
        chunks: usize::try_from(parts.index.chunk_count()).unwrap_or(usize::MAX),
        seconds,
        upload_seconds,
        workers: config.workers.count,
        stages: stage_times(&metrics.render()),
        peak_rss_kib,
        embedder,
    };
    for line in report.lines() {
        println!("{line}");
    }
    drop(parts);
    server.stop().await
}

/// Embeds the chunks of the first documents again, one document per call as the workers do,
/// until `sample` chunks, from `callers` callers side by side (one per worker, each with every
/// `callers`-th document); the embedder's own rate with nothing else running.
async fn embed_alone(
    parts: &Parts,
    embedder: &dyn quire_core::embed::Embedder,
    ids: &[DocumentId],
    sample: usize,
    callers: usize,
) -> anyhow::Result<EmbedderRate> {
    let mut documents = Vec::new();
    let mut chunks = 0;
    for id in ids {
        if chunks >= sample {
            break;
        }
        // The texts the workers embedded: each chunk with its document's title and section.
        let title = match parts.store.find_document(*id).await? {
            Some(document) => document_title(&document.name),
            None => continue,
        };
        let texts: Vec<String> = parts
            .store
            .document_chunks(*id)
            .await?
            .iter()
            .map(|chunk| embedding_text(&title, chunk))
            .collect();
        chunks += texts.len();
        if !texts.is_empty() {
            documents.push(texts);
        }
    }
    // One call first, so loading and first-call costs are not timed.
    if let Some(first) = documents.first() {
        embedder.embed(first, Purpose::Document).await?;
    }
    let callers = callers.max(1);
    let started = Instant::now();
    let documents = &documents;
    let caller = |first: usize| async move {
        for texts in documents.iter().skip(first).step_by(callers) {
            embedder.embed(texts, Purpose::Document).await?;
        }
        Ok::<_, quire_core::embed::ModelError>(())
    };
    futures_util::future::try_join_all((0..callers).map(caller)).await?;
    Ok(EmbedderRate {
        chunks,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Each stage's total seconds and count from the Prometheus text rendering of the stage
/// histogram (`…_sum{stage="parse"} 1.5`, `…_count{stage="parse"} 3`).
pub(crate) fn stage_times(rendered: &str) -> BTreeMap<String, StageTime> {
    let mut out: BTreeMap<String, StageTime> = BTreeMap::new();
    for line in rendered.lines() {
        let Some(rest) = line.strip_prefix(STAGE_SECONDS) else {
            continue;
        };
        let (kind, rest) = if let Some(rest) = rest.strip_prefix("_sum{") {
            ("sum", rest)
        } else if let Some(rest) = rest.strip_prefix("_count{") {
            ("count", rest)
        } else {
            continue;
        };
        let Some((labels, value)) = rest.split_once('}') else {
            continue;
        };
        let Some(stage) = labels.split(',').find_map(|label| {
            label
                .trim()
                .strip_prefix("stage=\"")
                .and_then(|v| v.strip_suffix('"'))
        }) else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let entry = out.entry(stage.to_owned()).or_default();
        if kind == "sum" {
            entry.seconds = value;
        } else {
            entry.count = value as u64;
        }
    }
    out
}

/// The first `limit` documents of a BEIR corpus as the Markdown files they are uploaded as.
pub(crate) fn corpus_files(path: &Path, limit: usize) -> anyhow::Result<Vec<InputFile>> {
    let corpus = read_jsonl(&path.to_path_buf(), limit)?;
    Ok(corpus_documents(&corpus)
        .into_iter()
        .map(|(name, text)| InputFile {
            name,
            bytes: text.into_bytes(),
        })
        .collect())
}

/// The first `limit` files under `dir` (recursively, hidden entries skipped), in path order,
/// each named by its file name.
pub(crate) fn directory_files(dir: &Path, limit: usize) -> anyhow::Result<Vec<InputFile>> {
    let mut paths = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let entries = std::fs::read_dir(&next)
            .with_context(|| format!("could not list {}", next.display()))?;
        for entry in entries {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                paths.push(entry.path());
            }
        }
    }
    paths.sort();
    paths
        .into_iter()
        .take(limit)
        .map(|path| {
            Ok(InputFile {
                name: path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                bytes: std::fs::read(&path)
                    .with_context(|| format!("could not read {}", path.display()))?,
            })
        })
        .collect()
}

/// The most memory this process has had resident (Linux's `VmHWM`), in KiB; `None` where the
/// system does not say.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// A length as a progress count.
fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_times_are_read_from_the_prometheus_rendering() {
        let rendered = format!(
            "# TYPE {m} histogram\n\
             {m}_bucket{{stage=\"parse\",le=\"0.005\"}} 1\n\
             {m}_sum{{stage=\"parse\"}} 1.5\n\
             {m}_count{{stage=\"parse\"}} 3\n\
             {m}_sum{{stage=\"embed\"}} 12.25\n\
             {m}_count{{stage=\"embed\"}} 4\n\
             quire_other_sum{{stage=\"parse\"}} 99\n",
            m = STAGE_SECONDS
        );
        let stages = stage_times(&rendered);
        assert_eq!(
            stages["parse"],
            StageTime {
                seconds: 1.5,
                count: 3
            }
        );
        assert_eq!(
            stages["embed"],
            StageTime {
                seconds: 12.25,
                count: 4
            }
        );
        assert_eq!(stages.len(), 2);
    }

    #[test]
    fn the_report_divides_by_the_wall_time_and_shares_by_the_stage_sum() {
        let mut stages = BTreeMap::new();
        stages.insert(
            "embed".to_owned(),
            StageTime {
                seconds: 30.0,
                count: 100,
            },
        );
        stages.insert(
            "index".to_owned(),
            StageTime {
                seconds: 10.0,
                count: 100,
            },
        );
        let report = IngestReport {
            documents: 100,
            ready: 99,
            failed: 1,
            held: 0,
            chunks: 150,
            seconds: 20.0,
            upload_seconds: 2.0,
            workers: 2,
            stages,
            peak_rss_kib: Some(2048),
            embedder: Some((
                "m".to_owned(),
                EmbedderRate {
                    chunks: 50,
                    seconds: 5.0,
                },
            )),
        };
        let lines = report.lines().join("\n");
        assert!(lines.contains("documents/second        5.0"), "{lines}");
        assert!(lines.contains("chunks/second           7.5"), "{lines}");
        assert!(lines.contains("(1.52 per ready document)"), "{lines}");
        assert!(
            lines.contains("embed         30.0 s  75.0%    300.00 ms per document (100 timed)"),
            "{lines}"
        );
        assert!(lines.contains("parse          0.0 s   0.0%"), "{lines}");
        assert!(lines.contains("peak RSS                2 MiB"), "{lines}");
        // 150 chunks at 10 chunks/s alone: 15 s of the 20 s.
        assert!(
            lines.contains("embedder alone          10.0 chunks/s"),
            "{lines}"
        );
        assert!(
            lines.contains("would take 15.0 s for all chunks, 75% of the ingest time"),
            "{lines}"
        );
    }

    #[test]
    fn a_corpus_becomes_markdown_files_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("corpus.jsonl");
        std::fs::write(
            &path,
            "{\"_id\":\"1\",\"title\":\"T\",\"text\":\"body one\"}\n\n\
             {\"_id\":\"2\",\"title\":\"U\",\"text\":\"body two\"}\n\
             {\"_id\":\"3\",\"title\":\"V\",\"text\":\"body three\"}\n",
        )
        .unwrap();
        let files = corpus_files(&path, 2).unwrap();
        assert_eq!(
            files,
            vec![
                InputFile {
                    name: "1.md".into(),
                    bytes: b"# T\n\nbody one".to_vec()
                },
                InputFile {
                    name: "2.md".into(),
                    bytes: b"# U\n\nbody two".to_vec()
                },
            ]
        );
    }

    #[test]
    fn a_directory_is_read_recursively_in_path_order_without_hidden_entries() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("b")).unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join("b/inner.txt"), "inner").unwrap();
        std::fs::write(dir.path().join("a.md"), "a").unwrap();
        std::fs::write(dir.path().join("c.txt"), "c").unwrap();
        std::fs::write(dir.path().join(".hidden"), "h").unwrap();
        std::fs::write(dir.path().join(".git/config"), "g").unwrap();
        let names =
            |files: Vec<InputFile>| -> Vec<String> { files.into_iter().map(|f| f.name).collect() };
        assert_eq!(
            names(directory_files(dir.path(), usize::MAX).unwrap()),
            ["a.md", "inner.txt", "c.txt"]
        );
        assert_eq!(
            names(directory_files(dir.path(), 2).unwrap()),
            ["a.md", "inner.txt"]
        );
    }
}
