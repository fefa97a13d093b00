//! `quire bench fuzz`: every parser fed damaged files for a fixed time, each through the parse
//! worker process exactly as the server parses an upload (`quire_ingest::run_worker`, with the
//! configured memory budget and parse limits), so a parser that crashes fails one input, never
//! this process. Seeds are the files below `--corpus` and a few built-in files per format; the
//! inputs come from [`mutate`], one generator per input number, so any input can be built
//! again with `--seed S --replay N`.
//!
//! Every input must end parsed or failed with a reason. The report counts, per format, inputs
//! parsed, failed with a reason, panicked, crashed (the worker killed by a signal or gone
//! without an answer), timed out and out of memory; crashes, panics, reasonless failures,
//! timeouts and memory kills are saved with `--save-findings` for replay. The run fails when
//! any input crashed, panicked or failed without a reason.

mod mutate;
mod seeds;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use quire_ingest::{ParseJob, WorkerCommand, WorkerEnd, WorkerRun, run_worker};
use quire_server::Config;

use self::mutate::{Mutant, generator, mutate};
use self::seeds::{Seed, Seeds};

/// Time between two progress lines.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Characters of a failure reason the report groups by.
const REASON_CHARS: usize = 90;

/// Options of `quire bench fuzz`.
#[derive(Debug, Args)]
pub struct FuzzBenchArgs {
    /// Seconds to start new inputs for (inputs under way are finished).
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Seed of the run: the same seed, seed files and input number build the same input.
    /// Default: from the clock (printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Directory whose files (recursively) are seeds, besides the built-in ones.
    #[arg(long, value_name = "DIR")]
    corpus: Option<PathBuf>,
    /// Seed files larger than this many KiB are left out: small inputs parse many per second.
    #[arg(long, default_value_t = 2048, value_name = "KIB")]
    max_seed_kib: u64,
    /// Directory to write the inputs that crashed the worker, panicked, timed out, ran out of
    /// memory or failed without a reason to, each with a note on how to build it again.
    #[arg(long, value_name = "DIR")]
    save_findings: Option<PathBuf>,
    /// Parse workers run side by side.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Seconds one input may take before its worker is killed (the server's budget is
    /// `workers.time_budget_seconds`; a damaged small file should need far less).
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// Build and parse only input N of the run with `--seed`, print how, and save it to
    /// `--save-findings` if given.
    #[arg(long, value_name = "N", requires = "seed")]
    replay: Option<u64>,
}

/// How one input ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// Parsed and chunked: the document would be ready.
    Ready,
    /// Failed with a reason.
    Failed(String),
    /// Failed, but the reason is empty: no person could act on it.
    NoReason,
    /// A parser panicked (the worker caught it and failed the document).
    Panicked,
    /// The worker died without an answer: `how` is its exit status or what went wrong.
    Crashed(String),
    /// The worker ran past `--timeout` and was killed.
    TimedOut,
    /// The worker ran out of its memory budget.
    OutOfMemory,
}

impl Outcome {
    fn of(run: &WorkerRun) -> Self {
        match (&run.end, &run.result) {
            (WorkerEnd::Answered, Ok(_)) => Self::Ready,
            (_, Err(reason)) if reason.trim().is_empty() => Self::NoReason,
            (WorkerEnd::Answered, Err(reason)) => Self::Failed(reason.clone()),
            (WorkerEnd::Panicked, _) => Self::Panicked,
            (WorkerEnd::Crashed { how }, _) => Self::Crashed(how.clone()),
            (WorkerEnd::TimedOut, _) => Self::TimedOut,
            (WorkerEnd::OutOfMemory, _) => Self::OutOfMemory,
        }
    }

    /// The finding's kind, for the saved file's name; `None` for an ordinary end.
    fn finding(&self) -> Option<&'static str> {
        match self {
            Self::Ready | Self::Failed(_) => None,
            Self::NoReason => Some("no-reason"),
            Self::Panicked => Some("panicked"),
            Self::Crashed(_) => Some("crashed"),
            Self::TimedOut => Some("timeout"),
            Self::OutOfMemory => Some("memory"),
        }
    }
}

/// Counts of one format's inputs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tally {
    inputs: u64,
    ready: u64,
    failed: u64,
    no_reason: u64,
    panicked: u64,
    crashed: u64,
    timed_out: u64,
    out_of_memory: u64,
    /// Inputs whose worker printed a panic that a parser caught itself (the `cfb` guard):
    /// the input ended as counted above, but the panic is worth a look.
    caught_panics: u64,
}

impl Tally {
    fn count(&mut self, outcome: &Outcome, caught_panic: bool) {
        self.inputs += 1;
        let field = match outcome {
            Outcome::Ready => &mut self.ready,
            Outcome::Failed(_) => &mut self.failed,
            Outcome::NoReason => &mut self.no_reason,
            Outcome::Panicked => &mut self.panicked,
            Outcome::Crashed(_) => &mut self.crashed,
            Outcome::TimedOut => &mut self.timed_out,
            Outcome::OutOfMemory => &mut self.out_of_memory,
        };
        *field += 1;
        self.caught_panics += u64::from(caught_panic);
    }

    fn add(&mut self, other: &Tally) {
        self.inputs += other.inputs;
        self.ready += other.ready;
        self.failed += other.failed;
        self.no_reason += other.no_reason;
        self.panicked += other.panicked;
        self.crashed += other.crashed;
        self.timed_out += other.timed_out;
        self.out_of_memory += other.out_of_memory;
        self.caught_panics += other.caught_panics;
    }

    fn bugs(&self) -> u64 {
        self.no_reason + self.panicked + self.crashed
    }
}

/// What a run measured; [`FuzzReport::lines`] turns it into the printed summary.
#[derive(Debug, Default)]
struct FuzzReport {
    seed: u64,
    jobs: usize,
    seconds: f64,
    formats: BTreeMap<String, Tally>,
    reasons: BTreeMap<String, u64>,
    /// One line per finding: kind, input number, format, and what was seen.
    findings: Vec<String>,
}

impl FuzzReport {
    fn record(&mut self, format: &str, outcome: &Outcome, caught_panic: bool) {
        self.formats
            .entry(format.to_owned())
            .or_default()
            .count(outcome, caught_panic);
        if let Outcome::Failed(reason) = outcome {
            let short: String = reason.chars().take(REASON_CHARS).collect();
            *self.reasons.entry(short).or_default() += 1;
        }
    }

    fn total(&self) -> Tally {
        let mut total = Tally::default();
        for tally in self.formats.values() {
            total.add(tally);
        }
        total
    }

    fn lines(&self) -> Vec<String> {
        let total = self.total();
        let mut out = vec![
            format!(
                "inputs                  {} in {:.1} s ({:.1} inputs/s) with {} parse workers, seed {}",
                total.inputs,
                self.seconds,
                total.inputs as f64 / self.seconds.max(1e-9),
                self.jobs,
                self.seed
            ),
            format!(
                "outcomes                {} ready, {} failed with a reason, {} failed without \
                 one, {} panicked, {} worker crashed, {} timed out, {} out of memory",
                total.ready,
                total.failed,
                total.no_reason,
                total.panicked,
                total.crashed,
                total.timed_out,
                total.out_of_memory
            ),
            String::new(),
            format!(
                "{:<40} {:>7} {:>6} {:>6} {:>9} {:>8} {:>7} {:>7} {:>6} {:>7}",
                "format",
                "inputs",
                "ready",
                "failed",
                "no reason",
                "panicked",
                "crashed",
                "timeout",
                "memory",
                "caught"
            ),
        ];
        let rows = self
            .formats
            .iter()
            .map(|(format, tally)| (format.as_str(), tally))
            .chain([("total", &total)]);
        for (format, t) in rows {
            let name: String = format.chars().take(40).collect();
            out.push(format!(
                "{name:<40} {:>7} {:>6} {:>6} {:>9} {:>8} {:>7} {:>7} {:>6} {:>7}",
                t.inputs,
                t.ready,
                t.failed,
                t.no_reason,
                t.panicked,
                t.crashed,
                t.timed_out,
                t.out_of_memory,
                t.caught_panics
            ));
        }
        out.push(String::new());
        out.push("most common failure reasons:".into());
        let mut reasons: Vec<(&String, &u64)> = self.reasons.iter().collect();
        reasons.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (reason, n) in reasons.into_iter().take(15) {
            out.push(format!("  {n:>6} × {reason}"));
        }
        out.push(String::new());
        out.push(format!("findings                {}", self.findings.len()));
        out.extend(self.findings.iter().map(|f| format!("  {f}")));
        out
    }
}

/// Everything the workers share.
struct Run {
    seeds: Seeds,
    seed: u64,
    command: WorkerCommand,
    job: ParseJob,
    timeout: Duration,
    scratch: tempfile::TempDir,
    save: Option<PathBuf>,
    corpus: Option<PathBuf>,
    max_seed_kib: u64,
}

/// One input, built and parsed.
struct Tried {
    index: u64,
    seed: Seed,
    mutant: Mutant,
    run: WorkerRun,
    outcome: Outcome,
    caught_panic: bool,
}

/// Runs the fuzzer and prints its report; fails when an input crashed its worker, panicked
/// or failed without a reason.
pub async fn fuzz(config: &Config, args: FuzzBenchArgs) -> anyhow::Result<()> {
    let seeds = Seeds::load(
        args.corpus.as_deref(),
        args.max_seed_kib.saturating_mul(1024),
    )?;
    if !config.parsing.isolate {
        bail!("bench fuzz parses in the parse worker; set parsing.isolate = true");
    }
    // One process per input, whatever `documents_per_worker` says: the fuzzer reads how
    // each worker ended.
    let command = config.parsing.worker_command()?;
    let seed = args.seed.unwrap_or_else(clock_seed);
    if let Some(dir) = &args.save_findings {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("could not create {}", dir.display()))?;
    }
    let run = Arc::new(Run {
        seeds,
        seed,
        command,
        job: ParseJob {
            path: PathBuf::new(),
            name: String::new(),
            content_type: String::new(),
            chunking: config.chunking,
            limits: config.parsing.limits(),
            // OCR runs an outside program on images; the parsers are what is fuzzed here.
            ocr: None,
            output: config.parsing.output_limits(),
        },
        timeout: Duration::from_secs(args.timeout.max(1)),
        scratch: tempfile::tempdir().context("could not create a scratch directory")?,
        save: args.save_findings.clone(),
        corpus: args.corpus.clone(),
        max_seed_kib: args.max_seed_kib,
    });
    println!("{}", run.seeds.describe());
    if let Some(index) = args.replay {
        return replay(&run, index).await;
    }
    let report = Arc::new(Mutex::new(FuzzReport {
        seed,
        jobs: args.jobs.max(1),
        ..FuzzReport::default()
    }));
    let started = Instant::now();
    let budget = Duration::from_secs(args.seconds);
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..args.jobs.max(1) {
        let (run, report, next, done) = (run.clone(), report.clone(), next.clone(), done.clone());
        workers.spawn(async move {
            while started.elapsed() < budget {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let tried = try_input(&run, index).await?;
                let finding = save_finding(&run, &tried)?;
                let mut report = report.lock().unwrap_or_else(|p| p.into_inner());
                report.record(&tried.seed.format, &tried.outcome, tried.caught_panic);
                report.findings.extend(finding);
                done.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        });
    }
    let ticker = tokio::spawn(progress(started, budget, done.clone(), report.clone()));
    while let Some(joined) = workers.join_next().await {
        joined.context("a fuzzing task stopped")??;
    }
    ticker.abort();
    let mut report = std::mem::take(&mut *report.lock().unwrap_or_else(|p| p.into_inner()));
    report.seconds = started.elapsed().as_secs_f64();
    for line in report.lines() {
        println!("{line}");
    }
    let bugs = report.total().bugs();
    if bugs > 0 {
        bail!("{bugs} inputs crashed a parse worker, panicked or failed without a reason");
    }
    Ok(())
}

/// A seed from the clock for a run without `--seed`.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A line on stderr every few seconds: inputs so far, their rate, and findings.
async fn progress(
    started: Instant,
    budget: Duration,
    done: Arc<AtomicU64>,
    report: Arc<Mutex<FuzzReport>>,
) {
    let mut every = tokio::time::interval(PROGRESS_EVERY);
    every.tick().await;
    loop {
        every.tick().await;
        let seconds = started.elapsed().as_secs_f64();
        let inputs = done.load(Ordering::Relaxed);
        let (total, findings) = {
            let report = report.lock().unwrap_or_else(|p| p.into_inner());
            (report.total(), report.findings.len())
        };
        eprintln!(
            "fuzzing: {inputs} inputs ({:.1}/s), {seconds:.0}/{} s, {} failed, {} timed out, \
             {} out of memory, {findings} findings",
            inputs as f64 / seconds.max(1e-9),
            budget.as_secs(),
            total.failed,
            total.timed_out,
            total.out_of_memory
        );
    }
}

/// Builds input `index` and parses it in a worker.
async fn try_input(run: &Arc<Run>, index: u64) -> anyhow::Result<Tried> {
    let built = run.clone();
    let (seed, mutant) = tokio::task::spawn_blocking(move || {
        let mut rng = generator(built.seed, index);
        let (seed, donor) = built.seeds.pick(&mut rng);
        let mutant = mutate(&seed.bytes, &donor.bytes, &mut rng);
        (seed.clone(), mutant)
    })
    .await
    .context("building an input failed")?;
    let path = run.scratch.path().join(format!("input-{index}"));
    tokio::fs::write(&path, &mutant.bytes)
        .await
        .with_context(|| format!("could not write {}", path.display()))?;
    let job = ParseJob {
        path: path.clone(),
        name: seed.name.clone(),
        ..run.job.clone()
    };
    let worker = run_worker(&run.command, job, run.timeout).await;
    let _ = tokio::fs::remove_file(&path).await;
    let outcome = Outcome::of(&worker);
    let caught_panic = outcome != Outcome::Panicked && worker.stderr.contains("panicked at");
    Ok(Tried {
        index,
        seed,
        mutant,
        run: worker,
        outcome,
        caught_panic,
    })
}

/// Writes a finding's input and its note to the findings directory, and returns the report's
/// line for it; `None` for an ordinary end.
fn save_finding(run: &Run, tried: &Tried) -> anyhow::Result<Option<String>> {
    let kind = match (tried.outcome.finding(), tried.caught_panic) {
        (Some(kind), _) => kind,
        (None, true) => "caught-panic",
        (None, false) => return Ok(None),
    };
    let seen = match &tried.outcome {
        Outcome::Crashed(how) => how.clone(),
        _ => last_line(&tried.run.stderr),
    };
    let mut line = format!(
        "{kind:<12} input {:>7}  {:<24} {}",
        tried.index,
        tried.seed.format.chars().take(24).collect::<String>(),
        seen.chars().take(120).collect::<String>()
    );
    if let Some(dir) = &run.save {
        let stem = format!("{kind}-{}-{}", run.seed, tried.index);
        // The seed's name goes last: format detection reads its extension.
        let input = dir.join(format!("{stem}-{}", tried.seed.name));
        std::fs::write(&input, &tried.mutant.bytes)
            .with_context(|| format!("could not write {}", input.display()))?;
        let note = dir.join(format!("{stem}.txt"));
        std::fs::write(&note, note_text(run, tried, kind))
            .with_context(|| format!("could not write {}", note.display()))?;
        line.push_str(&format!(" → {}", input.display()));
    }
    Ok(Some(line))
}

/// What a saved finding's note says: how the input was built, how to build it again, and how
/// the worker ended.
fn note_text(run: &Run, tried: &Tried, kind: &str) -> String {
    let corpus = run
        .corpus
        .as_ref()
        .map(|c| format!(" --corpus {}", c.display()))
        .unwrap_or_default();
    let result = match &tried.run.result {
        Ok(processed) => format!("ready, {} chunks", processed.chunks.len()),
        Err(reason) => format!("failed: {reason}"),
    };
    format!(
        "kind: {kind}\nrun seed: {}\ninput: {}\nseed file: {} ({})\nname given to the parser: \
         {}\nsteps:\n{}\nworker end: {:?}\ndocument: {result}\nreplay: quire bench fuzz{corpus} \
         --max-seed-kib {} --seed {} --replay {}\nworker stderr (end):\n{}\n",
        run.seed,
        tried.index,
        tried.seed.origin,
        tried.seed.format,
        tried.seed.name,
        tried
            .mutant
            .steps
            .iter()
            .map(|s| format!("  {s}"))
            .collect::<Vec<_>>()
            .join("\n"),
        tried.run.end,
        run.max_seed_kib,
        run.seed,
        tried.index,
        tried.run.stderr
    )
}

/// The last line of a worker's stderr that says something (not Rust's backtrace hint).
fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.starts_with("note: "))
        .unwrap_or("")
        .trim()
        .to_owned()
}

/// `--replay N`: input N of the run alone, described.
async fn replay(run: &Arc<Run>, index: u64) -> anyhow::Result<()> {
    let tried = try_input(run, index).await?;
    println!(
        "input {index}: {} bytes from {} ({})",
        tried.mutant.bytes.len(),
        tried.seed.origin,
        tried.seed.format
    );
    for step in &tried.mutant.steps {
        println!("  {step}");
    }
    println!("outcome: {:?}", tried.outcome);
    if !tried.run.stderr.is_empty() {
        println!("worker stderr (end):\n{}", tried.run.stderr);
    }
    if let Some(dir) = &run.save {
        let input = dir.join(format!("replay-{}-{index}-{}", run.seed, tried.seed.name));
        std::fs::write(&input, &tried.mutant.bytes)
            .with_context(|| format!("could not write {}", input.display()))?;
        println!("saved to {}", input.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_every_outcome_per_format() {
        let mut report = FuzzReport {
            seed: 9,
            jobs: 2,
            seconds: 2.0,
            ..FuzzReport::default()
        };
        report.record("PDF document", &Outcome::Ready, false);
        report.record("PDF document", &Outcome::Failed("damaged".into()), true);
        report.record("PDF document", &Outcome::Failed("damaged".into()), false);
        report.record("CSV file", &Outcome::Crashed("signal: 11".into()), false);
        report.record("CSV file", &Outcome::TimedOut, false);
        let lines = report.lines();
        assert_eq!(
            lines[0],
            "inputs                  5 in 2.0 s (2.5 inputs/s) with 2 parse workers, seed 9"
        );
        assert!(lines[1].starts_with("outcomes                1 ready, 2 failed with a reason, 0 failed without one, 0 panicked, 1 worker crashed, 1 timed out, 0 out of memory"), "{}", lines[1]);
        let row = |name: &str| {
            lines
                .iter()
                .find(|l| l.starts_with(name))
                .unwrap()
                .split_whitespace()
                .rev()
                .take(9)
                .collect::<Vec<_>>()
        };
        // Read from the right: caught, memory, timeout, crashed, panicked, no reason,
        // failed, ready, inputs.
        assert_eq!(
            row("PDF document"),
            ["1", "0", "0", "0", "0", "0", "2", "1", "3"]
        );
        assert_eq!(row("total"), ["1", "0", "1", "1", "0", "0", "2", "1", "5"]);
        assert!(
            lines.contains(&"       2 × damaged".to_owned()),
            "{lines:?}"
        );
        assert_eq!(report.total().bugs(), 1);
    }

    #[test]
    fn only_crashes_panics_and_reasonless_failures_are_bugs() {
        let mut tally = Tally::default();
        for outcome in [
            Outcome::Ready,
            Outcome::Failed("x".into()),
            Outcome::TimedOut,
            Outcome::OutOfMemory,
        ] {
            tally.count(&outcome, true);
        }
        assert_eq!(
            tally.bugs(),
            0,
            "limits at work and caught panics are not bugs"
        );
        for outcome in [
            Outcome::NoReason,
            Outcome::Panicked,
            Outcome::Crashed("signal: 6".into()),
        ] {
            tally.count(&outcome, false);
        }
        assert_eq!(tally.bugs(), 3);
    }
}
