//! `quire bench generate`: `POST /api/v1/generate` measured end to end in one process, over
//! real HTTP. The product's server (`build` and `App::serve` on 127.0.0.1:0) answers from an
//! ingested BEIR corpus (SciFact), a fake OpenAI-compatible chat server stands in for the
//! model, and HTTP clients read the event stream. Client, server and fake share one clock, so
//! `Instant`s taken in any of them compare.
//!
//! It reports the time from sending a question to the model being asked (authentication,
//! queueing, hybrid retrieval, prompt building), the latency the server adds to each piece the
//! model streams, the memory of streams idle in the queue, and how often the built-in
//! extractive answerer cites a document judged relevant to a SciFact claim.

mod events;
mod fake_model;
mod idle;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use quire_app::Services;
use quire_app::keys::KeySpec;
use quire_core::{Permission, SourceScope, SystemClock};
use serde_json::{Value, json};

use self::events::EventReader;
use self::fake_model::{FakeModel, Script};
use self::idle::{IdleReport, idle_streams};
use crate::bench::{ingest_markdown, ms, percentile, read_jsonl};
use crate::bench_server::{BenchServer, UNLIMITED};
use crate::eval_retrieval::{
    EVAL_SOURCE, corpus_documents, corpus_id, ingested_before, read_qrels, read_queries,
};
use quire_server::App;
use quire_server::{Config, Parts};

/// The model name the server is configured with; the fake answers under any name.
const FAKE_MODEL: &str = "bench-fake-model";

/// Questions asked before timing, so the first timed ones do not pay for page faults.
const WARM_UP: usize = 10;

/// A delta held back longer than this is counted as late: well above scheduling noise, well
/// below the 40 ms of a delayed ACK that Nagle's algorithm waits for.
const LATE_DELTA: Duration = Duration::from_millis(10);

/// Longest wait for one whole answer or one idle stream's first event.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// Options of `quire bench generate`.
#[derive(Debug, Args)]
pub struct GenerateBenchArgs {
    /// BEIR `corpus.jsonl` (`_id`, `title`, `text` per line).
    #[arg(long, value_name = "FILE")]
    corpus: PathBuf,
    /// BEIR `queries.jsonl` (`_id`, `text` per line): the questions asked.
    #[arg(long, value_name = "FILE")]
    queries: PathBuf,
    /// BEIR qrels TSV; its judged queries are the claims put to the extractive answerer.
    #[arg(long, value_name = "FILE")]
    qrels: PathBuf,
    /// Keep the ingested corpus in this data directory and reuse it when it already holds it,
    /// as `quire eval retrieval --data-dir` does (the two commands share such directories).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Embedding model directory (default: the configured `embedding.model_dir`).
    #[arg(long, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// Questions timed, one after another, for the retrieval overhead.
    #[arg(long, value_name = "N", default_value_t = 200)]
    queries_timed: usize,
    /// Pieces the fake model streams per answer, one every 2 ms.
    #[arg(long, value_name = "K", default_value_t = 50)]
    deltas: usize,
    /// Answers streamed for the added latency per piece.
    #[arg(long, value_name = "N", default_value_t = 50)]
    answers: usize,
    /// Streams left waiting in the queue for the memory measurement.
    #[arg(long, value_name = "N", default_value_t = 500)]
    idle_streams: usize,
    /// Claims put to the extractive answerer at most (default: every judged query).
    #[arg(long, value_name = "N")]
    claims: Option<usize>,
    /// Claims shown whose answer cites no judged-relevant document.
    #[arg(long, value_name = "N", default_value_t = 3)]
    examples: usize,
}

/// A judged query of the qrels.
struct Claim {
    text: String,
    /// Corpus ids judged relevant (score above 0).
    relevant: HashSet<String>,
}

/// The files the benchmark reads.
struct Inputs {
    corpus: Vec<Value>,
    /// The questions timed, in file order.
    timed: Vec<String>,
    /// The claims put to the extractive answerer.
    claims: Vec<Claim>,
}

impl Inputs {
    fn read(args: &GenerateBenchArgs) -> anyhow::Result<Self> {
        let corpus = read_jsonl(&args.corpus, usize::MAX)?;
        let queries = read_queries(&args.queries)?;
        let claims = judged_claims(&queries, &args.qrels, args.claims.unwrap_or(usize::MAX))?;
        let timed: Vec<String> = queries
            .into_iter()
            .map(|(_, text)| text)
            .take(args.queries_timed)
            .collect();
        if corpus.is_empty() || timed.is_empty() || claims.is_empty() {
            bail!(
                "nothing to benchmark: no documents, no queries (or --queries-timed 0) or no \
                 judged queries"
            );
        }
        Ok(Self {
            corpus,
            timed,
            claims,
        })
    }
}

/// Runs the benchmark and prints its report.
pub async fn generate(base: &Config, args: GenerateBenchArgs) -> anyhow::Result<()> {
    let inputs = Inputs::read(&args)?;
    let (_scratch, data_dir) = match &args.data_dir {
        Some(dir) => (None, dir.clone()),
        None => {
            let scratch = tempfile::tempdir().context("could not create a scratch directory")?;
            let dir = scratch.path().to_path_buf();
            (Some(scratch), dir)
        }
    };
    let config = bench_config(base, &args, &data_dir);
    let mut report = Report::default();
    let corpus_id_of = with_fake_model(&config, &args, &inputs, &mut report).await?;
    with_extractive_answerer(&config, &inputs.claims, &corpus_id_of, &mut report).await?;
    report.print(&inputs.claims, args.examples);
    Ok(())
}

/// Parts 1 to 3, on a server whose `[llm]` is the fake model (ingesting the corpus first if
/// the data directory does not hold it). Returns the corpus id of each document by id.
async fn with_fake_model(
    config: &Config,
    args: &GenerateBenchArgs,
    inputs: &Inputs,
    report: &mut Report,
) -> anyhow::Result<HashMap<String, String>> {
    let mut fake = FakeModel::start().await?;
    let app = quire_server::build(
        &fake_model_config(config, &fake.url, args.idle_streams),
        Arc::new(SystemClock),
    )
    .await?;
    let corpus_id_of = prepare_corpus(&app, &inputs.corpus, &config.data_dir).await?;
    report.describe(app.parts(), config, inputs);
    let timed = &inputs.timed;
    report.search_alone = search_times(app.services(), timed, config.llm.passages).await?;
    let server = serve(app).await?;
    eprintln!("timing retrieval overhead on {} questions…", timed.len());
    report.overhead = retrieval_overhead(&server, &mut fake, timed).await?;
    eprintln!(
        "streaming {} answers of {} pieces…",
        args.answers, args.deltas
    );
    report.deltas = added_latency(&server, &mut fake, timed, args.answers, args.deltas).await?;
    eprintln!("opening {} idle streams…", args.idle_streams);
    report.idle = Some(idle_streams(&server, &mut fake, &timed[0], args.idle_streams).await?);
    server.stop().await?;
    Ok(corpus_id_of)
}

/// Part 4, on a server without `[llm]`: the built-in extractive answerer.
async fn with_extractive_answerer(
    config: &Config,
    claims: &[Claim],
    corpus_id_of: &HashMap<String, String>,
    report: &mut Report,
) -> anyhow::Result<()> {
    let app = quire_server::build(config, Arc::new(SystemClock)).await?;
    let retrieved = retrieved_documents(app.services(), claims, config, corpus_id_of).await?;
    let server = serve(app).await?;
    eprintln!("asking {} claims of the extractive answerer…", claims.len());
    report.claims = Some(extractive_claims(&server, claims, &retrieved, corpus_id_of).await?);
    server.stop().await
}

/// The configuration both servers share: the data directory, the model, no background
/// workers, no rate limit and no `[llm]` (the extractive answerer).
fn bench_config(base: &Config, args: &GenerateBenchArgs, data_dir: &Path) -> Config {
    let mut config = base.clone();
    config.data_dir = data_dir.to_path_buf();
    config.workers.count = 0;
    // A benchmark corpus must be indexed whole for its judgements to mean anything; screening
    // for personal data is measured on its own by `quire eval pii`.
    config.pii.enabled = false;
    if let Some(dir) = &args.model_dir {
        config.embedding.model_dir = Some(dir.clone());
        config.embedding.base_url = None;
    }
    config.limits.search_per_minute = UNLIMITED;
    config.limits.generate_per_minute = UNLIMITED;
    config.llm.base_url = None;
    config.llm.model = None;
    config.llm.api_key = None;
    config
}

/// `config` with the fake model as `[llm]`, one answer at a time and room in the queue for
/// `idle` waiting streams.
fn fake_model_config(config: &Config, url: &str, idle: usize) -> Config {
    let mut config = config.clone();
    config.llm.base_url = Some(url.to_owned());
    config.llm.model = Some(FAKE_MODEL.to_owned());
    config.llm.max_concurrent = 1;
    config.llm.max_queue = config.llm.max_queue.max(idle + 16);
    // Every stream of the bench asks with one key.
    config.llm.max_queue_per_key = config.llm.max_queue;
    // The memory measurement holds the slot for a while; the model must not time out.
    config.llm.timeout_seconds = config.llm.timeout_seconds.max(ANSWER_TIMEOUT.as_secs());
    config
}

/// The queries the qrels judge (at most `max`), with their relevant corpus ids.
fn judged_claims(
    queries: &[(String, String)],
    qrels: &PathBuf,
    max: usize,
) -> anyhow::Result<Vec<Claim>> {
    let judgements = read_qrels(qrels)?;
    let relevant: HashMap<&str, HashSet<String>> = judgements
        .iter()
        .map(|(query, judged)| {
            let relevant = judged
                .iter()
                .filter(|(_, grade)| **grade > 0)
                .map(|(document, _)| document.clone())
                .collect();
            (query.as_str(), relevant)
        })
        .collect();
    Ok(queries
        .iter()
        .filter_map(|(id, text)| {
            let relevant = relevant.get(id.as_str())?.clone();
            Some(Claim {
                text: text.clone(),
                relevant,
            })
        })
        .take(max)
        .collect())
}

/// Makes sure the data directory holds the corpus, embedded: reuses an earlier ingestion
/// (embedding again for another model) or ingests through the product's pipeline. Returns
/// the corpus id of each ready document by document id.
async fn prepare_corpus(
    app: &App,
    corpus: &[Value],
    data_dir: &Path,
) -> anyhow::Result<HashMap<String, String>> {
    let parts = app.parts();
    let Some(semantic) = parts.ingest.semantic() else {
        bail!(
            "the benchmark needs an embedding model ({}): pass --model-dir DIR or set \
             QUIRE_EMBEDDING_MODEL_DIR",
            app.services().semantic_note()
        );
    };
    if let Some((total, corpus_id_of)) = ingested_before(parts).await? {
        let expected = corpus.len();
        if total != expected {
            bail!(
                "{} holds another corpus ({total} documents, not {expected}) or an unfinished \
                 ingestion; use an empty directory",
                data_dir.display(),
            );
        }
        let embedded = semantic.backfill(&*parts.store).await?;
        if embedded.documents > 0 {
            eprintln!("embedded {} documents for this model", embedded.documents);
        }
        eprintln!("reusing the corpus ingested in {}", data_dir.display());
        return Ok(corpus_id_of);
    }
    let started = Instant::now();
    eprintln!(
        "ingesting {} documents into {}…",
        corpus.len(),
        data_dir.display()
    );
    let documents = corpus_documents(corpus);
    let names: Vec<String> = documents.iter().map(|(name, _)| name.clone()).collect();
    let (_, ids) = ingest_markdown(parts, EVAL_SOURCE, documents.into_iter()).await?;
    eprintln!("ingested in {:.1} s", started.elapsed().as_secs_f64());
    Ok(ids
        .iter()
        .zip(&names)
        .map(|(id, name)| (id.to_string(), corpus_id(name).to_owned()))
        .collect())
}

/// The product's search call alone, in process, for the timed questions at the number of
/// passages an answer gets: what retrieval costs without HTTP, queue and prompt.
async fn search_times(
    state: &Services,
    questions: &[String],
    passages: usize,
) -> anyhow::Result<Vec<Duration>> {
    let scope = SourceScope::All;
    for question in questions.iter().take(WARM_UP) {
        quire_app::search::search(state, &scope, question, passages, None).await?;
    }
    let mut times = Vec::with_capacity(questions.len());
    for question in questions {
        let started = Instant::now();
        quire_app::search::search(state, &scope, question, passages, None).await?;
        times.push(started.elapsed());
    }
    times.sort();
    Ok(times)
}

/// For each claim, the corpus ids of the passages retrieval hands the answerer, best first
/// (the same search the generate handler makes).
async fn retrieved_documents(
    state: &Services,
    claims: &[Claim],
    config: &Config,
    corpus_id_of: &HashMap<String, String>,
) -> anyhow::Result<Vec<Vec<String>>> {
    let mut out = Vec::with_capacity(claims.len());
    for claim in claims {
        let outcome = quire_app::search::search(
            state,
            &SourceScope::All,
            &claim.text,
            config.llm.passages,
            None,
        )
        .await?;
        out.push(
            outcome
                .results
                .iter()
                .filter_map(|r| corpus_id_of.get(&r.document.id).cloned())
                .collect(),
        );
    }
    Ok(out)
}

/// The server of `app` with a read key for the bench.
async fn serve(app: App) -> anyhow::Result<BenchServer> {
    let key = KeySpec {
        name: "quire bench generate".to_owned(),
        permission: Permission::Read,
        scope: SourceScope::All,
        rate_limit: Some(UNLIMITED),
    };
    BenchServer::serve(app, key).await
}

/// Asks `question` of `server` and returns its event stream (the response must be 200).
async fn ask(server: &BenchServer, question: &str) -> anyhow::Result<EventReader> {
    let response = server
        .client
        .post("/generate")
        .json(&json!({ "query": question }))
        .send()
        .await
        .context("generate request failed")?;
    if response.status() != reqwest::StatusCode::OK {
        let status = response.status();
        bail!("generate answered {status}: {}", response.text().await?);
    }
    Ok(EventReader::new(response))
}

/// Part 1: from sending each question to the fake model receiving the streaming chat
/// request, one question at a time.
async fn retrieval_overhead(
    server: &BenchServer,
    fake: &mut FakeModel,
    questions: &[String],
) -> anyhow::Result<Timing> {
    fake.set_script(Script::SHORT);
    for question in questions.iter().take(WARM_UP) {
        ask(server, question).await?.answer().await?.done()?;
    }
    fake.drain_arrivals();
    let mut timing = Timing::default();
    for question in questions {
        let sent = Instant::now();
        ask(server, question).await?.answer().await?.done()?;
        // The request reached the model before the answer could end.
        match fake.arrivals.try_recv() {
            Ok(arrived) => timing.times.push(arrived.saturating_duration_since(sent)),
            Err(_) => timing.missed += 1,
        }
    }
    timing.times.sort();
    Ok(timing)
}

/// Part 2: `answers` answers of `pieces` pieces each; for every `delta`, its arrival at the
/// client minus the moment the fake model sent the piece.
async fn added_latency(
    server: &BenchServer,
    fake: &mut FakeModel,
    questions: &[String],
    answers: usize,
    pieces: usize,
) -> anyhow::Result<Timing> {
    fake.set_script(Script {
        pieces,
        gated: false,
    });
    let mut timing = Timing::default();
    for question in questions.iter().cycle().take(answers) {
        let answer = ask(server, question).await?.answer().await?;
        answer.done()?;
        for (text, received) in &answer.deltas {
            match fake.take_sent(text) {
                Some(sent) => timing.times.push(received.saturating_duration_since(sent)),
                None => timing.missed += 1,
            }
        }
    }
    fake.drain_arrivals();
    timing.times.sort();
    Ok(timing)
}

/// Durations, sorted, and how many could not be measured.
#[derive(Default)]
struct Timing {
    times: Vec<Duration>,
    missed: usize,
}

/// What part 4 measured.
#[derive(Default)]
struct ClaimsReport {
    times: Vec<Duration>,
    cites_relevant: usize,
    first_relevant: usize,
    no_answer: usize,
    errors: usize,
    /// Claims with a judged-relevant document among the retrieved passages.
    retrievable: usize,
    /// Claims whose answer cites no relevant document although a passage was relevant.
    misses: Vec<Miss>,
}

/// A claim answered without citing the relevant passage it was given.
struct Miss {
    claim: usize,
    retrieved: Vec<String>,
    cited: Vec<String>,
    answer: String,
}

/// Part 4: every claim through the API with the extractive answerer.
async fn extractive_claims(
    server: &BenchServer,
    claims: &[Claim],
    retrieved: &[Vec<String>],
    corpus_id_of: &HashMap<String, String>,
) -> anyhow::Result<ClaimsReport> {
    let mut report = ClaimsReport::default();
    for (index, (claim, passages)) in claims.iter().zip(retrieved).enumerate() {
        let retrievable = passages.iter().any(|id| claim.relevant.contains(id));
        report.retrievable += usize::from(retrievable);
        let sent = Instant::now();
        let answer = ask(server, &claim.text).await?.answer().await?;
        report.times.push(sent.elapsed());
        let Ok(done) = answer.done() else {
            report.errors += 1;
            continue;
        };
        let cited: Vec<String> = done["citations"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|c| {
                let id = c["documentId"].as_str().unwrap_or_default();
                corpus_id_of
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| id.to_owned())
            })
            .collect();
        let relevant = cited.iter().any(|id| claim.relevant.contains(id));
        report.cites_relevant += usize::from(relevant);
        report.first_relevant +=
            usize::from(cited.first().is_some_and(|id| claim.relevant.contains(id)));
        report.no_answer += usize::from(cited.is_empty());
        if retrievable && !relevant {
            report.misses.push(Miss {
                claim: index,
                retrieved: passages.clone(),
                cited,
                answer: answer.text(),
            });
        }
    }
    report.times.sort();
    Ok(report)
}

/// Everything printed at the end.
#[derive(Default)]
struct Report {
    context: String,
    passages: usize,
    search_alone: Vec<Duration>,
    overhead: Timing,
    deltas: Timing,
    idle: Option<IdleReport>,
    claims: Option<ClaimsReport>,
}

impl Report {
    /// Notes the corpus, model and machine the numbers come from.
    fn describe(&mut self, parts: &Parts, config: &Config, inputs: &Inputs) {
        let embedder = parts
            .ingest
            .semantic()
            .map(|s| format!("{} on {}", s.embedder().model_id(), s.embedder().engine()))
            .unwrap_or_else(|| "none".to_owned());
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        self.passages = config.llm.passages;
        self.context = format!(
            "documents {}  chunks {}  embedder {embedder}  passages per answer {}  search {}  cores {cores}",
            inputs.corpus.len(),
            parts.index.chunk_count(),
            config.llm.passages,
            config.search.fusion,
        );
    }

    fn print(&self, claims: &[Claim], examples: usize) {
        println!("{}", self.context);
        println!(
            "\n{:<58} {:>6} {:>11} {:>11}",
            "measure (one run, sequential requests)", "N", "p50", "p99"
        );
        let rows = [
            (
                "retrieval overhead: request sent → model asked",
                &self.overhead.times,
            ),
            (
                "  for reference: the search call alone, in process",
                &self.search_alone,
            ),
            (
                "added latency per streamed delta: model → client",
                &self.deltas.times,
            ),
        ];
        for (label, times) in rows {
            row(label, times, 2);
        }
        if let Some(claims) = &self.claims {
            row(
                "extractive answer: request sent → end of stream",
                &claims.times,
                1,
            );
        }
        for (what, missed) in [
            ("overhead", self.overhead.missed),
            ("delta", self.deltas.missed),
        ] {
            if missed > 0 {
                println!("({missed} {what} samples could not be matched and are left out)");
            }
        }
        let deltas = &self.deltas.times;
        let late = deltas.iter().filter(|d| **d > LATE_DELTA).count();
        println!(
            "deltas later than {} ms: {late} of {} (max {:.2} ms)",
            LATE_DELTA.as_millis(),
            deltas.len(),
            ms(deltas.last().copied().unwrap_or_default()),
        );
        println!(
            "(deltas: the fake model streams each answer's pieces 2 ms apart, stamping each as it \
             hands it to the socket; the overhead covers auth, rate limit, queue, hybrid \
             retrieval and prompt)"
        );
        if let Some(idle) = &self.idle {
            idle.print();
        }
        if let Some(report) = &self.claims {
            report.print(claims, self.passages, examples);
        }
    }
}

fn row(label: &str, times: &[Duration], decimals: usize) {
    println!(
        "{label:<58} {:>6} {:>8.decimals$} ms {:>8.decimals$} ms",
        times.len(),
        ms(percentile(times, 0.50)),
        ms(percentile(times, 0.99)),
    );
}

impl ClaimsReport {
    fn print(&self, claims: &[Claim], passages: usize, examples: usize) {
        let n = self.times.len();
        let rate = |count: usize| format!("{:.3} ({count}/{n})", count as f64 / n.max(1) as f64);
        println!("\nextractive answers (no [llm]) on {n} judged claims:");
        println!(
            "  cites a judged-relevant document     {}",
            rate(self.cites_relevant)
        );
        println!(
            "  first citation relevant              {}",
            rate(self.first_relevant)
        );
        println!(
            "  no answer (done, zero citations)     {}",
            rate(self.no_answer)
        );
        println!(
            "  error events                         {}",
            rate(self.errors)
        );
        println!(
            "  for reference: a judged-relevant document among the {passages} passages \
             retrieved: {}",
            rate(self.retrievable)
        );
        let refused = self.misses.iter().filter(|m| m.cited.is_empty()).count();
        let first = self
            .misses
            .iter()
            .filter(|m| {
                let relevant = &claims[m.claim].relevant;
                m.retrieved.first().is_some_and(|id| relevant.contains(id))
            })
            .count();
        println!(
            "  relevant passage given but not cited: {}; of these, no answer {refused}, the \
             relevant passage ranked first {first}",
            rate(self.misses.len())
        );
        for miss in self.misses.iter().take(examples) {
            let claim = &claims[miss.claim];
            let mut relevant: Vec<&String> = claim.relevant.iter().collect();
            relevant.sort();
            let answer: String = miss.answer.chars().take(300).collect();
            println!("\n  claim: {}", claim.text);
            println!("    relevant {relevant:?}  retrieved {:?}", miss.retrieved);
            println!("    cited {:?}", miss.cited);
            println!("    answer: {}", answer.replace('\n', " "));
        }
    }
}
