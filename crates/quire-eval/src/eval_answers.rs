//! `quire eval answers`: answers measured as a client meets them. Ingests the contexts of a
//! question set through the product's pipeline, asks every question as
//! `POST /api/v1/generate` would (queue, hybrid retrieval over all the contexts, the
//! configured generator: the extractive answerer unless `[llm]` is set, citations from the
//! answer's markers) and reports:
//!
//! - SQuAD 2.0 (`--format squad`, `questions.jsonl` + `contexts.jsonl`): the share of
//!   answerable questions whose answer contains a gold answer and cites its paragraph, and the
//!   share of unanswerable ones the answerer abstains on (an answer citing nothing);
//! - FinanceBench (`--format financebench`, its JSONL and a directory of its filings): the
//!   share of answers citing an evidence page, the evidence filing, or nothing;
//!
//! and the latency of whole answers.

mod squad;

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use quire_app::Services;
use quire_app::answers::{CollectedAnswer, answer_collected};
use quire_core::{KeyId, SourceScope};
use quire_server::{Config, Parts};

use self::squad::{Outcome, read_contexts, read_squad_questions};
use crate::bench::{Upload, ingest_files, ms, percentile};
use crate::eval_pages::{QuestionFormat, answer_citations, read_questions};
use crate::eval_retrieval::{EVAL_SOURCE, Mode, eval_app, ingested_names, use_model};
use crate::progress::Progress;

/// How the questions file is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AnswerFormat {
    /// SQuAD 2.0 flattened: `{id, question, context_id, is_impossible, answers[{text}]}` a
    /// line, with `--contexts` giving `{context_id, title, text}` a line.
    Squad,
    /// FinanceBench's `financebench_open_source.jsonl`, with `--documents` holding its filings.
    Financebench,
}

/// Options of `quire eval answers`.
#[derive(Debug, Args)]
pub struct AnswersEvalArgs {
    /// JSONL of questions.
    #[arg(long, value_name = "FILE")]
    questions: PathBuf,
    /// Layout of the questions file.
    #[arg(long, value_enum, default_value = "squad")]
    format: AnswerFormat,
    /// SQuAD: the paragraphs (`context_id`, `title`, `text` a line), one document each.
    #[arg(long, value_name = "FILE", required_if_eq("format", "squad"))]
    contexts: Option<PathBuf>,
    /// FinanceBench: the directory of filings the questions are about.
    #[arg(long, value_name = "DIR", required_if_eq("format", "financebench"))]
    documents: Option<PathBuf>,
    /// Embedding model directory; defaults to the configured `embedding.model_dir`. Without
    /// a model, answers draw on keyword search alone, as the product does.
    #[arg(long, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// Keep the ingested documents in this data directory and, when it already holds them,
    /// skip ingestion (shared with `quire eval pages --data-dir` for FinanceBench).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Ask only this many questions, spread evenly over the file (for slow models).
    #[arg(long, value_name = "N")]
    sample: Option<usize>,
    /// Print this many examples of each kind of miss (SQuAD).
    #[arg(long, value_name = "N", default_value_t = 0)]
    examples: usize,
    /// Write every question's answer, citations and outcome to this JSONL file (SQuAD).
    #[arg(long, value_name = "FILE")]
    dump: Option<PathBuf>,
}

/// Runs the evaluation and prints the report.
pub async fn answers(base: &Config, args: AnswersEvalArgs) -> anyhow::Result<()> {
    let mut config = base.clone();
    config.pii.enabled = false;
    use_model(&mut config, Mode::Hybrid, args.model_dir.as_ref());
    let (_scratch, app, _config) = eval_app(&config, args.data_dir.as_ref()).await?;
    let services = app.services().clone();
    let parts = app.parts().clone();
    match parts.ingest.semantic() {
        Some(semantic) => println!(
            "retrieval: hybrid, embedder {} on {}",
            semantic.embedder().model_id(),
            semantic.embedder().engine()
        ),
        None => println!("retrieval: keyword only (no embedding model)"),
    }
    match args.format {
        AnswerFormat::Squad => squad_eval(&services, &parts, &args).await,
        AnswerFormat::Financebench => financebench_eval(&services, &parts, &args).await,
    }
}

async fn squad_eval(
    services: &Services,
    parts: &Parts,
    args: &AnswersEvalArgs,
) -> anyhow::Result<()> {
    let contexts_path = args.contexts.as_ref().context("--contexts is required")?;
    let contexts = read_contexts(contexts_path)?;
    let questions = sample(read_squad_questions(&args.questions)?, args.sample);
    let names = ingest_contexts(parts, &contexts).await?;
    let mut outcomes = Vec::with_capacity(questions.len());
    let mut times = Vec::with_capacity(questions.len());
    let mut generator = String::new();
    let mut dump = open_dump(args.dump.as_deref())?;
    let mut progress = Progress::new("answers", questions.len() as u64);
    // A model server may fail an answer now and then: counted, not fatal to the run.
    let mut errors = 0usize;
    for question in &questions {
        let Some(document) = names.get(&question.context_id) else {
            bail!(
                "question {} is about context {}, which is not among the contexts",
                question.id,
                question.context_id
            );
        };
        let (answer, took) = match ask(services, &question.text).await {
            Ok(answered) => answered,
            Err(e) => {
                errors += 1;
                eprintln!("{e}");
                progress.inc(1);
                continue;
            }
        };
        generator.clone_from(&answer.generator);
        times.push(took);
        let outcome = Outcome::of(question, document, &answer);
        if let Some(out) = dump.as_mut() {
            writeln!(out, "{}", squad::dump_line(question, &answer, &outcome))?;
        }
        outcomes.push(outcome);
        progress.inc(1);
    }
    progress.finish();
    close_dump(dump)?;
    if errors > 0 {
        println!("{errors} questions got an error instead of an answer and are left out");
    }
    let asked: Vec<&squad::SquadQuestion> = questions
        .iter()
        .filter(|q| outcomes.iter().any(|o| o.id == q.id))
        .collect();
    let report = squad::Report::of(&outcomes);
    report.print(&generator, &asked, &outcomes, args.examples);
    print_latency(times);
    Ok(())
}

async fn financebench_eval(
    services: &Services,
    parts: &Parts,
    args: &AnswersEvalArgs,
) -> anyhow::Result<()> {
    let dir = args.documents.as_ref().context("--documents is required")?;
    let questions = sample(
        read_questions(&args.questions, QuestionFormat::Financebench)?,
        args.sample,
    );
    let files = crate::eval_pages::document_files(dir)?;
    let data_dir = args
        .data_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("(a temporary directory)"));
    let names = crate::eval_pages::ingest_directory(parts, &files, &data_dir).await?;
    let mut dump = open_dump(args.dump.as_deref())?;
    let scores = answer_citations(
        services,
        &names,
        &questions,
        dump.as_mut().map(|d| d as &mut dyn std::io::Write),
    )
    .await?;
    close_dump(dump)?;
    println!(
        "\nanswers ({}): {} questions\n  citing an evidence page   {:.3}\n  citing the evidence filing {:.3}\n  citing nothing (abstained) {:.3}",
        scores.generator,
        scores.questions,
        scores.evidence_page,
        scores.evidence_document,
        scores.nothing
    );
    print_latency(scores.times);
    Ok(())
}

/// The `--dump` file, created (or emptied), when one is asked for.
fn open_dump(path: Option<&Path>) -> anyhow::Result<Option<BufWriter<File>>> {
    path.map(|path| {
        File::create(path)
            .map(BufWriter::new)
            .with_context(|| format!("could not create {}", path.display()))
    })
    .transpose()
}

/// Writes out what the `--dump` file still buffers.
fn close_dump(dump: Option<BufWriter<File>>) -> anyhow::Result<()> {
    if let Some(mut out) = dump {
        out.flush()?;
    }
    Ok(())
}

/// Asks `question` over everything ingested, as a generate call without a conversation would.
pub(crate) async fn ask(
    services: &Services,
    question: &str,
) -> anyhow::Result<(CollectedAnswer, Duration)> {
    let started = Instant::now();
    let answer = answer_collected(services, KeyId::new(), &SourceScope::All, question, None)
        .await
        .map_err(|message| anyhow::anyhow!("answering {question:?}: {message}"))?;
    Ok((answer, started.elapsed()))
}

fn print_latency(mut times: Vec<Duration>) {
    times.sort();
    println!(
        "latency of a whole answer (queue, retrieval, generation): p50 {:.1} ms, p99 {:.1} ms",
        ms(percentile(&times, 0.50)),
        ms(percentile(&times, 0.99))
    );
}

/// `n` items spread evenly over `items` (all of them when `n` is `None` or not smaller).
fn sample<T>(items: Vec<T>, n: Option<usize>) -> Vec<T> {
    match n {
        Some(n) if n < items.len() => {
            let step = items.len() as f64 / n.max(1) as f64;
            let picked: Vec<usize> = (0..n).map(|i| (i as f64 * step) as usize).collect();
            items
                .into_iter()
                .enumerate()
                .filter(|(i, _)| picked.binary_search(i).is_ok())
                .map(|(_, item)| item)
                .collect()
        }
        _ => items,
    }
}

/// Ingests each context as a plain-text document named after it, unless the data directory
/// already holds them; returns each context id's document name.
async fn ingest_contexts(
    parts: &Parts,
    contexts: &[squad::Context],
) -> anyhow::Result<HashMap<String, String>> {
    let names: HashMap<String, String> = contexts
        .iter()
        .map(|c| (c.id.clone(), squad::document_name(&c.id)))
        .collect();
    match ingested_names(parts).await? {
        Some((total, _)) if total == contexts.len() => {
            println!("contexts {total} (ingested by an earlier run)");
        }
        Some(_) => bail!("the data directory holds other documents; use an empty one"),
        None => {
            let started = Instant::now();
            let uploads = contexts.iter().map(|c| {
                Ok(Upload::bytes(
                    squad::document_name(&c.id),
                    Some("text/plain"),
                    c.text.clone().into_bytes(),
                ))
            });
            ingest_files(parts, EVAL_SOURCE, contexts.len(), uploads).await?;
            println!(
                "contexts {} ingested in {:.1} s",
                contexts.len(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::sample;

    #[test]
    fn a_sample_spreads_over_the_whole_file() {
        let items: Vec<usize> = (0..10).collect();
        assert_eq!(sample(items.clone(), Some(5)), vec![0, 2, 4, 6, 8]);
        assert_eq!(sample(items.clone(), Some(3)), vec![0, 3, 6]);
        assert_eq!(sample(items.clone(), None), items);
        assert_eq!(sample(items.clone(), Some(20)), items);
    }
}
