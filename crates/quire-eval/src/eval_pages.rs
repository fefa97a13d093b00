//! `quire eval pages`: page-accurate retrieval on long documents. Ingests every file of a
//! directory through the product's pipeline (as `quire eval retrieval` does: staging, the
//! parse worker, chunking, embedding, store, both indexes), asks each question of a JSONL
//! file through the product's search function at the API's default limit, and reports how
//! often the results land on a page that answers it (page recall@1/5/10), on the right
//! document (document recall@10), and the search latency.
//!
//! Questions are one JSON object a line: `{"question": "…", "document": "report.pdf",
//! "pages": [12, 13]}`, pages from 1 as the product cites them; `document` may leave out the
//! file's extension. `--format financebench` reads FinanceBench's own file instead
//! (`question`, `doc_name`, and `evidence[].evidence_page_num` counted from 0).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use quire_app::Services;
use quire_app::search::search;
use quire_core::SourceScope;
use quire_server::{Config, Parts};

use crate::bench::{Upload, ingest_files, ms, percentile, read_jsonl};
use crate::eval_retrieval::{
    EVAL_SOURCE, Mode, eval_app, ingested_names, needs_model, retrievals, use_model,
};
use crate::page_metrics::{Page, document_hit_at, page_recall_at};
use crate::progress::Progress;

/// Results per question, as `POST /api/v1/search` returns by default: what an agent reads.
const LIMIT: usize = 10;

/// Cut-offs of the page recall columns.
const PAGE_CUTOFFS: [usize; 3] = [1, 5, 10];

/// How the questions file is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QuestionFormat {
    /// `{question, document, pages}`, pages from 1.
    Quire,
    /// FinanceBench's `financebench_open_source.jsonl` (evidence pages from 0).
    Financebench,
}

/// Options of `quire eval pages`.
#[derive(Debug, Args)]
pub struct PagesEvalArgs {
    /// Directory of the documents the questions are about (every file directly in it).
    #[arg(long, value_name = "DIR")]
    documents: PathBuf,
    /// JSONL of questions with the document and pages that answer them.
    #[arg(long, value_name = "FILE")]
    questions: PathBuf,
    /// Layout of the questions file.
    #[arg(long, value_enum, default_value = "quire")]
    format: QuestionFormat,
    /// Retrievers to evaluate.
    #[arg(long, value_enum, default_value = "hybrid")]
    mode: Mode,
    /// Embedding model directory (vector and hybrid modes); defaults to the configured
    /// `embedding.model_dir`.
    #[arg(long, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// Keep the ingested documents in this data directory and, when it already holds them
    /// (from an earlier run on the same directory), skip ingestion.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Also print each question that found no evidence page in its results.
    #[arg(long)]
    misses: bool,
    /// Also answer each question as `POST /api/v1/generate` would (its retrieval, the
    /// configured generator: the extractive answerer unless `[llm]` is set) and report how
    /// often the answer cites an evidence page.
    #[arg(long)]
    answers: bool,
}

/// A question and the pages that answer it.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// What is asked, as the search query.
    pub text: String,
    /// The document's file name as the questions file gives it (the extension may be left out).
    pub document: String,
    /// Pages that answer it, from 1.
    pub pages: Vec<u32>,
}

/// What one retriever scored over the questions.
#[derive(Debug, Clone, PartialEq)]
pub struct PageScores {
    /// Retriever label.
    pub label: &'static str,
    /// Mean page recall at 1, 5 and 10 results.
    pub page_recall: [f64; 3],
    /// Share of questions with a result from the evidence document in the top 10.
    pub document_recall: f64,
    /// Median search latency.
    pub p50: Duration,
    /// 99th percentile search latency.
    pub p99: Duration,
}

/// Runs the evaluation and prints the report.
pub async fn pages(base: &Config, args: PagesEvalArgs) -> anyhow::Result<()> {
    let questions = read_questions(&args.questions, args.format)?;
    let files = document_files(&args.documents)?;
    let mut config = base.clone();
    config.pii.enabled = false;
    use_model(&mut config, args.mode, args.model_dir.as_ref());
    let (_scratch, app, config) = eval_app(&config, args.data_dir.as_ref()).await?;
    let state = app.services().clone();
    let parts = app.parts().clone();
    needs_model(&app, args.mode)?;
    let names = ingest_directory(&parts, &files, &config.data_dir).await?;
    if let Some(semantic) = parts.ingest.semantic() {
        println!(
            "embedder {} on {}",
            semantic.embedder().model_id(),
            semantic.embedder().engine()
        );
    }
    let scores = evaluate(&state, &names, &questions, args.mode, args.misses).await?;
    print_report(&scores);
    if args.answers {
        let cited = answer_citations(&state, &names, &questions, None).await?;
        println!(
            "\nanswers ({}): {} questions; citing an evidence page {:.3}, citing the evidence \
             document {:.3}, citing nothing {:.3}",
            cited.generator,
            cited.questions,
            cited.evidence_page,
            cited.evidence_document,
            cited.nothing
        );
    }
    Ok(())
}

/// How the answers to the questions cite: the share whose citations include an evidence
/// page, the evidence document, or nothing at all.
#[derive(Debug, Clone, PartialEq)]
pub struct CitationScores {
    /// What answered (`extractive`, or the model and server).
    pub generator: String,
    /// Questions answered.
    pub questions: usize,
    /// Share of answers citing an evidence page.
    pub evidence_page: f64,
    /// Share of answers citing a page of the evidence document.
    pub evidence_document: f64,
    /// Share of answers citing no passage.
    pub nothing: f64,
    /// How long each whole answer took.
    pub times: Vec<Duration>,
}

/// Answers every question about an ingested document as a generate call would (queue,
/// retrieval, the configured generator, citations from the answer's markers) and scores
/// the pages it cites.
pub async fn answer_citations(
    state: &Services,
    names: &HashMap<String, String>,
    questions: &[Question],
    mut dump: Option<&mut dyn std::io::Write>,
) -> anyhow::Result<CitationScores> {
    let asked = with_evidence(names, questions)?;
    let key = quire_core::KeyId::new();
    let mut progress = Progress::new("answers", u64::try_from(asked.len()).unwrap_or(u64::MAX));
    let (mut page, mut document, mut nothing) = (0.0, 0.0, 0.0);
    let mut generator = String::new();
    let mut times = Vec::with_capacity(asked.len());
    for (q, evidence) in &asked {
        let started = Instant::now();
        let answer =
            quire_app::answers::answer_collected(state, key, &SourceScope::All, &q.text, None)
                .await
                .map_err(|message| anyhow::anyhow!("answering {:?}: {message}", q.text))?;
        times.push(started.elapsed());
        generator = answer.generator;
        let cited: Vec<Page> = answer
            .citations
            .iter()
            .map(|c| (c.document_name.clone(), c.page))
            .collect();
        if cited.is_empty() {
            nothing += 1.0;
        }
        if cited.iter().any(|p| evidence.contains(p)) {
            page += 1.0;
        }
        document += document_hit_at(&cited, evidence, cited.len());
        if let Some(out) = dump.as_mut() {
            let line = serde_json::json!({
                "question": q.text,
                "evidence": evidence.iter().collect::<Vec<_>>(),
                "answer": answer.text,
                "cited": cited,
                "citesEvidence": cited.iter().any(|p| evidence.contains(p)),
                "retrieved": answer.retrieved.iter().map(|c| serde_json::json!({
                    "document": c.document_name,
                    "page": c.page,
                    "section": c.section,
                    "content": c.content,
                    "score": c.score,
                })).collect::<Vec<_>>(),
            });
            writeln!(out, "{line}")?;
        }
        progress.inc(1);
    }
    progress.finish();
    let n = asked.len() as f64;
    Ok(CitationScores {
        generator,
        questions: asked.len(),
        evidence_page: page / n,
        evidence_document: document / n,
        nothing: nothing / n,
        times,
    })
}

/// The questions about an ingested document, each with its evidence pages as (file name,
/// page); says how many were skipped, and fails when none is left.
fn with_evidence<'q>(
    names: &HashMap<String, String>,
    questions: &'q [Question],
) -> anyhow::Result<Vec<(&'q Question, HashSet<Page>)>> {
    let available: Vec<&str> = names.values().map(String::as_str).collect();
    let mut asked = Vec::new();
    let mut unknown = 0;
    for q in questions {
        match resolve_document(&q.document, &available) {
            Some(document) => {
                let evidence: HashSet<Page> =
                    q.pages.iter().map(|p| (document.to_owned(), *p)).collect();
                asked.push((q, evidence));
            }
            None => unknown += 1,
        }
    }
    if unknown > 0 {
        println!("{unknown} questions skipped: their document is not among the ingested ones");
    }
    if asked.is_empty() {
        bail!("no question is about an ingested document");
    }
    Ok(asked)
}

/// Ingests `files` unless the data directory already holds them; returns the file name of
/// each ready document by id.
pub(crate) async fn ingest_directory(
    parts: &Parts,
    files: &[PathBuf],
    data_dir: &Path,
) -> anyhow::Result<HashMap<String, String>> {
    match ingested_names(parts).await? {
        Some((total, names)) if total == files.len() => {
            println!(
                "documents {}  chunks {}  (ingested by an earlier run in {})",
                names.len(),
                parts.index.chunk_count(),
                data_dir.display()
            );
            if let Some(semantic) = parts.ingest.semantic() {
                // Another model's index was set aside on opening: embed everything again.
                let report = semantic.backfill(&*parts.store).await?;
                if report.documents > 0 {
                    println!("embedded {} documents for this model", report.documents);
                }
            }
            Ok(names)
        }
        Some(_) => bail!(
            "{} holds other documents (or an unfinished ingestion); use an empty directory",
            data_dir.display()
        ),
        None => {
            let started = Instant::now();
            let uploads = files.iter().map(|path| {
                let bytes = std::fs::read(path)
                    .with_context(|| format!("could not read {}", path.display()))?;
                Ok(Upload::bytes(file_name(path), None, bytes))
            });
            let (_, ids) = ingest_files(parts, EVAL_SOURCE, files.len(), uploads).await?;
            let seconds = started.elapsed().as_secs_f64();
            let chunks = parts.index.chunk_count();
            println!(
                "documents {}  chunks {chunks}  ingest {seconds:.1} s ({:.1} chunks/s, one worker)",
                files.len(),
                chunks as f64 / seconds
            );
            let ready = ingested_names(parts)
                .await?
                .map(|(_, n)| n)
                .unwrap_or_default();
            if ready.len() < ids.len() {
                println!(
                    "{} of {} documents failed to ingest",
                    ids.len() - ready.len(),
                    ids.len()
                );
            }
            Ok(ready)
        }
    }
}

/// Asks every question in each retriever of `mode` and scores the results. `names` gives the
/// file name of each ingested document by id.
pub async fn evaluate(
    state: &Services,
    names: &HashMap<String, String>,
    questions: &[Question],
    mode: Mode,
    show_misses: bool,
) -> anyhow::Result<Vec<PageScores>> {
    let asked = with_evidence(names, questions)?;
    println!("questions {}", asked.len());
    let scope = SourceScope::All;
    let mut out = Vec::new();
    for (label, retrieval) in retrievals(mode) {
        // A short warm-up, so the first questions do not pay for page faults.
        for (q, _) in asked.iter().take(5) {
            search(state, &scope, &q.text, LIMIT, Some(retrieval)).await?;
        }
        let mut recall = [0.0; 3];
        let mut documents = 0.0;
        let mut times = Vec::with_capacity(asked.len());
        let mut progress = Progress::new(
            &format!("{label} questions"),
            u64::try_from(asked.len()).unwrap_or(u64::MAX),
        );
        for (q, evidence) in &asked {
            let timed = Instant::now();
            let outcome = search(state, &scope, &q.text, LIMIT, Some(retrieval)).await?;
            times.push(timed.elapsed());
            let returned: Vec<Page> = outcome
                .results
                .iter()
                .map(|r| (r.document.name.clone(), r.metadata.page))
                .collect();
            for (sum, k) in recall.iter_mut().zip(PAGE_CUTOFFS) {
                *sum += page_recall_at(&returned, evidence, k);
            }
            documents += document_hit_at(&returned, evidence, LIMIT);
            if show_misses && page_recall_at(&returned, evidence, LIMIT) == 0.0 {
                let mut wanted: Vec<&Page> = evidence.iter().collect();
                wanted.sort();
                println!(
                    "miss ({label}): {:?}\n  wanted {wanted:?}\n  got {returned:?}",
                    q.text
                );
            }
            progress.inc(1);
        }
        progress.finish();
        times.sort();
        let n = asked.len() as f64;
        out.push(PageScores {
            label,
            page_recall: recall.map(|sum| sum / n),
            document_recall: documents / n,
            p50: percentile(&times, 0.50),
            p99: percentile(&times, 0.99),
        });
    }
    Ok(out)
}

fn print_report(scores: &[PageScores]) {
    println!(
        "\n{:<8} {:>9} {:>9} {:>10} {:>10} {:>8} {:>8}",
        "mode", "page R@1", "page R@5", "page R@10", "doc R@10", "p50 ms", "p99 ms"
    );
    for s in scores {
        println!(
            "{:<8} {:>9.3} {:>9.3} {:>10.3} {:>10.3} {:>8.2} {:>8.2}",
            s.label,
            s.page_recall[0],
            s.page_recall[1],
            s.page_recall[2],
            s.document_recall,
            ms(s.p50),
            ms(s.p99)
        );
    }
    println!(
        "(each question is one search at limit {LIMIT}, as the API answers by default; page R@k: \
         share of its evidence pages that are the page of one of the first k results; doc R@10: \
         a result from the evidence document among the 10; latency: the whole search call)"
    );
}

/// The file `document` names among `available`: the same name, or the same name without its
/// extension (FinanceBench names filings without `.pdf`).
fn resolve_document<'a>(document: &str, available: &[&'a str]) -> Option<&'a str> {
    available
        .iter()
        .find(|name| **name == document)
        .or_else(|| available.iter().find(|name| stem(name) == document))
        .copied()
}

fn stem(name: &str) -> &str {
    name.rsplit_once('.').map_or(name, |(stem, _)| stem)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The regular files directly in `dir`, by name.
pub(crate) fn document_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in
        std::fs::read_dir(dir).with_context(|| format!("could not read {}", dir.display()))?
    {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    if files.is_empty() {
        bail!("{} holds no files", dir.display());
    }
    Ok(files)
}

/// The questions of `path` in `format`; questions without evidence pages are left out.
pub fn read_questions(path: &Path, format: QuestionFormat) -> anyhow::Result<Vec<Question>> {
    let lines = read_jsonl(&path.to_path_buf(), usize::MAX)?;
    let mut out = Vec::with_capacity(lines.len());
    for (number, line) in lines.iter().enumerate() {
        let question = match format {
            QuestionFormat::Quire => quire_question(line),
            QuestionFormat::Financebench => financebench_question(line),
        }
        .with_context(|| format!("{}: question {}", path.display(), number + 1))?;
        if !question.pages.is_empty() {
            out.push(question);
        }
    }
    Ok(out)
}

fn text_field(line: &serde_json::Value, name: &str) -> anyhow::Result<String> {
    line[name]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("no string `{name}`"))
}

fn quire_question(line: &serde_json::Value) -> anyhow::Result<Question> {
    let pages = line["pages"]
        .as_array()
        .context("no `pages` array")?
        .iter()
        .map(|p| {
            p.as_u64()
                .and_then(|p| u32::try_from(p).ok())
                .filter(|p| *p >= 1)
                .context("a page is not a number from 1")
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(Question {
        text: text_field(line, "question")?,
        document: text_field(line, "document")?,
        pages,
    })
}

/// FinanceBench: the evidence's `evidence_page_num` counts from 0; the product's pages count
/// from 1.
fn financebench_question(line: &serde_json::Value) -> anyhow::Result<Question> {
    let document = text_field(line, "doc_name")?;
    let mut pages = Vec::new();
    for evidence in line["evidence"].as_array().context("no `evidence` array")? {
        if evidence["doc_name"]
            .as_str()
            .is_some_and(|name| name != document)
        {
            bail!("evidence from another document than `doc_name`");
        }
        let page = evidence["evidence_page_num"]
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .context("evidence without `evidence_page_num`")?;
        if !pages.contains(&(page + 1)) {
            pages.push(page + 1);
        }
    }
    Ok(Question {
        text: text_field(line, "question")?,
        document,
        pages,
    })
}

#[cfg(test)]
mod tests;
