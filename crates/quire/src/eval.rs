//! `quire eval parse DIR`: runs the parsers over every file below a directory and reports, per
//! format, how many files parsed, failed with a reason, or crashed or hung (which must be
//! none), with pages, text volume and parse speed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use quire_parse::{ParseLimits, ParsedDocument, detect_format, parse};

/// Options of `quire eval parse`.
#[derive(Debug, Args)]
pub struct ParseEvalArgs {
    /// Directory to read (recursively).
    dir: PathBuf,
    /// Seconds one file may take before it counts as hung.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Print one line per file.
    #[arg(long)]
    verbose: bool,
    /// Print every extracted block (page, section, text) of every file.
    #[arg(long)]
    dump: bool,
}

#[derive(Default)]
struct Tally {
    files: usize,
    parsed: usize,
    failed: usize,
    crashed: usize,
    hung: usize,
    pages: u64,
    chars: u64,
    seconds: f64,
    reasons: BTreeMap<String, usize>,
}

enum Outcome {
    Parsed(ParsedDocument),
    Failed(String),
    Crashed,
    Hung,
}

/// Runs the evaluation and prints the report.
pub fn parse_dir(args: ParseEvalArgs) -> anyhow::Result<()> {
    let mut files = Vec::new();
    collect(&args.dir, &mut files)
        .with_context(|| format!("could not read {}", args.dir.display()))?;
    files.sort();
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    for path in &files {
        let bytes = std::fs::read(path)?;
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_owned();
        let format: String = detect_format(&bytes, &name, "")
            .describe()
            .chars()
            .take(40)
            .collect();
        let started = Instant::now();
        let outcome = run_one(bytes, name, Duration::from_secs(args.timeout));
        let seconds = started.elapsed().as_secs_f64();
        if args.dump {
            dump(path, &outcome);
        }
        let tally = tallies.entry(format.clone()).or_default();
        tally.files += 1;
        tally.seconds += seconds;
        let line = match outcome {
            Outcome::Parsed(doc) => {
                let pages = doc.page_count;
                let chars: usize = doc.blocks.iter().map(|b| b.text.chars().count()).sum();
                tally.parsed += 1;
                tally.pages += u64::from(pages);
                tally.chars += chars as u64;
                format!("ok       {pages:>4} pages {chars:>8} chars")
            }
            Outcome::Failed(reason) => {
                tally.failed += 1;
                let short: String = reason.chars().take(90).collect();
                *tally.reasons.entry(short.clone()).or_default() += 1;
                format!("failed   {short}")
            }
            Outcome::Crashed => {
                tally.crashed += 1;
                "CRASHED".into()
            }
            Outcome::Hung => {
                tally.hung += 1;
                "HUNG".into()
            }
        };
        if args.verbose {
            println!(
                "{:<60} {:<22} {line} ({:.0} ms)",
                short_path(path, &args.dir),
                format,
                seconds * 1000.0
            );
        }
    }
    println!(
        "\n{:<44} {:>5} {:>6} {:>6} {:>7} {:>4} {:>6} {:>10} {:>9}",
        "format", "files", "parsed", "failed", "crashed", "hung", "pages", "chars", "pages/s"
    );
    for (format, t) in &tallies {
        println!(
            "{:<44} {:>5} {:>6} {:>6} {:>7} {:>4} {:>6} {:>10} {:>9.0}",
            format,
            t.files,
            t.parsed,
            t.failed,
            t.crashed,
            t.hung,
            t.pages,
            t.chars,
            t.pages as f64 / t.seconds.max(1e-9)
        );
    }
    println!("\nfailure reasons:");
    for (format, t) in &tallies {
        for (reason, n) in &t.reasons {
            println!("  {format}: {n} × {reason}");
        }
    }
    Ok(())
}

/// Parses on a separate thread so a panic or a hang is reported instead of stopping the run.
fn run_one(bytes: Vec<u8>, name: String, timeout: Duration) -> Outcome {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let result = std::panic::catch_unwind(|| parse(&bytes, &name, "", &ParseLimits::default()));
        let _ = tx.send(result);
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(Ok(doc))) => Outcome::Parsed(doc),
        Ok(Ok(Err(e))) => Outcome::Failed(e.to_string()),
        Ok(Err(_)) => Outcome::Crashed,
        Err(_) => Outcome::Hung,
    }
}

fn dump(path: &Path, outcome: &Outcome) {
    println!("=== {}", path.display());
    match outcome {
        Outcome::Parsed(doc) => {
            for block in &doc.blocks {
                println!(
                    "--- page {} | {}\n{}",
                    block.page, block.section, block.text
                );
            }
        }
        Outcome::Failed(reason) => println!("(failed: {reason})"),
        Outcome::Crashed => println!("(crashed)"),
        Outcome::Hung => println!("(hung)"),
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

fn short_path(path: &Path, base: &Path) -> String {
    let relative = path
        .strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string();
    if relative.chars().count() > 58 {
        let tail: String = relative
            .chars()
            .rev()
            .take(57)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    } else {
        relative
    }
}
