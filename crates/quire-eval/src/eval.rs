//! `quire eval parse DIR`: runs the parsers over every file below a directory and reports, per
//! format, how many files parsed, failed with a reason, or crashed or hung (which must be
//! none), with pages, text volume and parse speed; for PDFs, per-page agreement with
//! `pdftotext` (when installed; a yardstick only) by folder; for every format, pages that look
//! garbled; and the peak memory of parsing one file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use quire_parse::{
    Format, OcrSettings, ParseLimits, ParsedDocument, detect_format, parse_with_ocr,
};

use crate::progress::Progress;
use crate::text_quality::{
    is_garbled, median, pdftotext_available, pdftotext_pages, peak_memory_bytes, reset_peak_memory,
    token_f1, word_count,
};

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
    /// Skip the comparison of PDF pages with `pdftotext`.
    #[arg(long)]
    no_reference: bool,
    /// Parse without OCR (by default scanned pages and images are read when Tesseract is
    /// found, as `ocr.enabled = auto` does in the server).
    #[arg(long)]
    no_ocr: bool,
}

/// OCR as the server's `ocr.enabled = auto` would have it (off with `--no-ocr`), each file's
/// OCR stopping itself a little before `timeout_seconds`.
pub(crate) fn ocr_for_eval(no_ocr: bool, timeout_seconds: u64) -> Option<OcrSettings> {
    if no_ocr {
        return None;
    }
    match quire_server::config::OcrConfig::default().resolve() {
        Ok((settings, note)) => {
            println!("{note}");
            settings.map(|mut s| {
                s.document_timeout_seconds = timeout_seconds.saturating_sub(2).max(1);
                s
            })
        }
        Err(e) => {
            println!("OCR off: {e:#}");
            None
        }
    }
}

/// Agreement with the reference for the PDFs of one folder.
#[derive(Default)]
struct PdfFolder {
    files: usize,
    pages: u64,
    seconds: f64,
    f1: Vec<f64>,
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
    garbled_pages: u64,
    reasons: BTreeMap<String, usize>,
}

/// The file that needed the most memory, and the largest file.
#[derive(Default)]
struct MemoryReport {
    peak: (u64, String),
    largest: (u64, u64, String),
}

pub(crate) enum Outcome {
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
    let reference = !args.no_reference && pdftotext_available();
    let ocr = ocr_for_eval(args.no_ocr, args.timeout);
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let mut pdf_folders: BTreeMap<String, PdfFolder> = BTreeMap::new();
    let mut memory = MemoryReport::default();
    let mut progress = Progress::new(
        "parsing files",
        u64::try_from(files.len()).unwrap_or(u64::MAX),
    );
    for path in &files {
        progress.inc(1);
        let bytes = std::fs::read(path)?;
        let size = bytes.len() as u64;
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_owned();
        let detected = detect_format(&bytes, &name, "");
        let format: String = detected.describe().chars().take(40).collect();
        reset_peak_memory();
        let started = Instant::now();
        let outcome = run_one(bytes, name, ocr.clone(), Duration::from_secs(args.timeout));
        let seconds = started.elapsed().as_secs_f64();
        let peak = peak_memory_bytes();
        let shown = short_path(path, &args.dir);
        if peak > memory.peak.0 {
            memory.peak = (peak, shown.clone());
        }
        if size >= memory.largest.0 {
            memory.largest = (size, peak, shown.clone());
        }
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
                let texts = page_texts(&doc);
                let garbled = texts.iter().filter(|t| is_garbled(t)).count();
                tally.garbled_pages += garbled as u64;
                if detected == Format::Pdf {
                    let folder = pdf_folders.entry(folder_of(path)).or_default();
                    folder.files += 1;
                    folder.pages += u64::from(pages);
                    folder.seconds += seconds;
                    if reference {
                        folder.f1.extend(agreement(path, &texts));
                    }
                }
                tally.parsed += 1;
                tally.pages += u64::from(pages);
                tally.chars += chars as u64;
                let note = if garbled > 0 {
                    format!(", {garbled} garbled")
                } else {
                    String::new()
                };
                format!("ok       {pages:>4} pages {chars:>8} chars{note}")
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
    progress.finish();
    println!(
        "\n{:<44} {:>5} {:>6} {:>6} {:>7} {:>4} {:>6} {:>10} {:>9} {:>7}",
        "format",
        "files",
        "parsed",
        "failed",
        "crashed",
        "hung",
        "pages",
        "chars",
        "pages/s",
        "garbled"
    );
    for (format, t) in &tallies {
        println!(
            "{:<44} {:>5} {:>6} {:>6} {:>7} {:>4} {:>6} {:>10} {:>9.0} {:>7}",
            format,
            t.files,
            t.parsed,
            t.failed,
            t.crashed,
            t.hung,
            t.pages,
            t.chars,
            t.pages as f64 / t.seconds.max(1e-9),
            t.garbled_pages
        );
    }
    print_pdf_folders(&mut pdf_folders, reference);
    println!(
        "\npeak memory of one parse: {:.0} MiB ({}); largest file: {} ({:.1} MiB) at {:.0} MiB",
        mib(memory.peak.0),
        memory.peak.1,
        memory.largest.2,
        mib(memory.largest.0),
        mib(memory.largest.1)
    );
    println!("\nfailure reasons:");
    for (format, t) in &tallies {
        for (reason, n) in &t.reasons {
            println!("  {format}: {n} × {reason}");
        }
    }
    Ok(())
}

fn print_pdf_folders(folders: &mut BTreeMap<String, PdfFolder>, reference: bool) {
    if folders.is_empty() {
        return;
    }
    let heading = if reference {
        "median page F1 vs pdftotext"
    } else {
        "(pdftotext not run)"
    };
    println!(
        "\n{:<20} {:>6} {:>6} {:>9} {:>10}  {heading}",
        "PDF folder", "files", "pages", "pages/s", "F1 pages"
    );
    for (folder, f) in folders.iter_mut() {
        let f1 = median(&mut f.f1);
        println!(
            "{:<20} {:>6} {:>6} {:>9.0} {:>10}  {}",
            folder,
            f.files,
            f.pages,
            f.pages as f64 / f.seconds.max(1e-9),
            f.f1.len(),
            if reference {
                format!("{f1:.3}")
            } else {
                "-".into()
            }
        );
    }
}

/// The text of each page, in page order (pages without blocks are empty).
pub(crate) fn page_texts(doc: &ParsedDocument) -> Vec<String> {
    let mut pages = vec![String::new(); doc.page_count as usize];
    for block in &doc.blocks {
        if let Some(page) = pages.get_mut(block.page.saturating_sub(1) as usize) {
            page.push_str(&block.text);
            page.push('\n');
        }
    }
    pages
}

/// Per-page token F1 against `pdftotext` over the pages that have a text layer (at least
/// 20 words in the reference); none when the reference cannot read the file.
fn agreement(path: &Path, ours: &[String]) -> Vec<f64> {
    let Some(reference) = pdftotext_pages(path) else {
        return Vec::new();
    };
    reference
        .iter()
        .enumerate()
        .filter(|(_, page)| word_count(page) >= MIN_REFERENCE_WORDS)
        .map(|(i, page)| token_f1(ours.get(i).map_or("", String::as_str), page))
        .collect()
}

/// Reference pages with fewer words are image-only or nearly blank and say nothing about
/// extraction quality.
const MIN_REFERENCE_WORDS: usize = 20;

fn folder_of(path: &Path) -> String {
    path.parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Parses on a separate thread so a panic or a hang is reported instead of stopping the run.
pub(crate) fn run_one(
    bytes: Vec<u8>,
    name: String,
    ocr: Option<OcrSettings>,
    timeout: Duration,
) -> Outcome {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let ocr = ocr.map(quire_parse::Ocr::new);
        // The OCR page counter is a Cell; a panic abandons it with the document.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            parse_with_ocr(&bytes, &name, "", &ParseLimits::default(), ocr.as_ref())
        }));
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

pub(crate) fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
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

pub(crate) fn short_path(path: &Path, base: &Path) -> String {
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
