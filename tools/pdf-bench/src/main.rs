//! Compares Rust PDF text extractors on a folder of PDFs against `pdftotext -layout` (from
//! poppler-utils, used only as a yardstick here, never by the product).
//!
//! `pdf-bench compare DIR` runs every engine on every PDF in a child process (so a crash, hang
//! or memory blow-up is contained and measured) and prints, per engine: files extracted,
//! errors, crashes, timeouts, median per-page token F1 against the reference by folder, pages
//! per second and peak memory. `pdf-bench extract ENGINE FILE` is the child's mode.

use std::collections::{BTreeMap, HashMap};
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ENGINES: &[&str] = &[
    "pdf_oxide",
    "lopdf+pdf_oxide",
    "pdf-extract",
    "lopdf",
    "oxidize-pdf",
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("extract") => extract_mode(&args[2], Path::new(&args[3])),
        Some("compare") => compare(
            Path::new(&args[2]),
            args.get(3).map_or(60, |t| t.parse().unwrap()),
        ),
        _ => eprintln!("usage: pdf-bench compare DIR [TIMEOUT_S] | pdf-bench extract ENGINE FILE"),
    }
}

fn extract_mode(engine: &str, file: &Path) {
    let bytes = std::fs::read(file).unwrap();
    let started = Instant::now();
    let result = extract(engine, &bytes);
    let seconds = started.elapsed().as_secs_f64();
    let peak_kb = peak_memory_kb();
    let out = match result {
        Ok(pages) => serde_json::json!({"pages": pages, "seconds": seconds, "peak_kb": peak_kb}),
        Err(e) => serde_json::json!({"error": e, "seconds": seconds, "peak_kb": peak_kb}),
    };
    println!("{out}");
}

fn extract(engine: &str, bytes: &[u8]) -> Result<Vec<String>, String> {
    match engine {
        "pdf_oxide" => {
            let doc =
                pdf_oxide::PdfDocument::from_bytes(bytes.to_vec()).map_err(|e| e.to_string())?;
            let n = doc.page_count().map_err(|e| e.to_string())?;
            (0..n)
                .map(|i| doc.extract_text(i).map_err(|e| e.to_string()))
                .collect()
        }
        "lopdf+pdf_oxide" => {
            let bytes = decrypt_with_lopdf(bytes)?;
            extract("pdf_oxide", &bytes)
        }
        "pdf-extract" => {
            pdf_extract::extract_text_from_mem_by_pages(bytes).map_err(|e| e.to_string())
        }
        "lopdf" => {
            let mut doc = lopdf::Document::load_mem(bytes).map_err(|e| e.to_string())?;
            if doc.is_encrypted() {
                doc.decrypt("").map_err(|e| e.to_string())?;
            }
            let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
            Ok(pages
                .iter()
                .map(|p| doc.extract_text(&[*p]).unwrap_or_default())
                .collect())
        }
        "oxidize-pdf" => {
            let reader = oxidize_pdf::parser::PdfReader::new(Cursor::new(bytes.to_vec()))
                .map_err(|e| e.to_string())?;
            let doc = oxidize_pdf::parser::PdfDocument::new(reader);
            let n = doc.page_count().map_err(|e| e.to_string())?;
            (0..n)
                .map(|i| {
                    doc.extract_text_from_page(i)
                        .map(|t| t.text)
                        .map_err(|e| e.to_string())
                })
                .collect()
        }
        other => Err(format!("unknown engine {other}")),
    }
}

/// Encrypted files: lopdf tries the empty user password and writes an unencrypted copy.
fn decrypt_with_lopdf(bytes: &[u8]) -> Result<Vec<u8>, String> {
    if !bytes.windows(8).any(|w| w == b"/Encrypt") {
        return Ok(bytes.to_vec());
    }
    let mut doc = match lopdf::Document::load_mem(bytes) {
        Ok(doc) => doc,
        Err(e) => return Err(format!("lopdf: {e}")),
    };
    if doc.is_encrypted() {
        doc.decrypt("").map_err(|e| format!("locked: {e}"))?;
    }
    let mut out = Vec::new();
    doc.save_to(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

fn peak_memory_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

#[derive(Default)]
struct Stats {
    files: usize,
    ok: usize,
    errors: usize,
    crashes: usize,
    timeouts: usize,
    pages: usize,
    seconds: f64,
    peak_kb: u64,
    f1_by_folder: BTreeMap<String, Vec<f64>>,
    /// Page F1s by file, to compare engines on the files every engine opened.
    f1_by_file: HashMap<PathBuf, Vec<f64>>,
    garbled_pages: usize,
}

fn compare(dir: &Path, timeout: u64) {
    let mut files = Vec::new();
    collect(dir, &mut files);
    files.retain(|f| f.extension().is_some_and(|e| e.eq_ignore_ascii_case("pdf")));
    files.sort();
    let me = std::env::current_exe().unwrap();
    let mut stats: HashMap<&str, Stats> = HashMap::new();
    for file in &files {
        let folder = file
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let reference = reference_pages(file);
        for engine in ENGINES {
            let s = stats.entry(engine).or_default();
            s.files += 1;
            match run_child(&me, engine, file, Duration::from_secs(timeout)) {
                Child::Timeout => s.timeouts += 1,
                Child::Crash => s.crashes += 1,
                Child::Done(v) => {
                    s.peak_kb = s.peak_kb.max(v["peak_kb"].as_u64().unwrap_or(0));
                    if v.get("error").is_some() {
                        s.errors += 1;
                        continue;
                    }
                    s.ok += 1;
                    let pages: Vec<String> = v["pages"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|p| p.as_str().unwrap_or("").to_owned())
                        .collect();
                    s.pages += pages.len();
                    s.seconds += v["seconds"].as_f64().unwrap_or(0.0);
                    s.garbled_pages += pages.iter().filter(|p| garbled(p)).count();
                    if let Some(reference) = &reference {
                        for (i, expected) in reference.iter().enumerate() {
                            // Only pages with a text layer are comparable.
                            if tokens(expected).len() < 20 {
                                continue;
                            }
                            let got = pages.get(i).map(String::as_str).unwrap_or("");
                            let score = f1(expected, got);
                            s.f1_by_folder
                                .entry(folder.clone())
                                .or_default()
                                .push(score);
                            s.f1_by_file.entry(file.clone()).or_default().push(score);
                        }
                    }
                }
            }
        }
    }
    let folders: Vec<String> = {
        let mut all: Vec<String> = stats
            .values()
            .flat_map(|s| s.f1_by_folder.keys().cloned())
            .collect();
        all.sort();
        all.dedup();
        all
    };
    let common: Vec<&PathBuf> = files
        .iter()
        .filter(|f| ENGINES.iter().all(|e| stats[e].f1_by_file.contains_key(*f)))
        .collect();
    print!("| engine | files | ok | errors | crashes | timeouts |");
    for f in &folders {
        print!(" median F1 {f} |");
    }
    println!(
        " median F1 on the {} files all engines read | pages/s | garbled pages | peak RSS |",
        common.len()
    );
    for engine in ENGINES {
        let s = &stats[engine];
        print!(
            "| {engine} | {} | {} | {} | {} | {} |",
            s.files, s.ok, s.errors, s.crashes, s.timeouts
        );
        for f in &folders {
            match s.f1_by_folder.get(f) {
                Some(v) => print!(" {:.3} (n={}) |", median(v), v.len()),
                None => print!(" - |"),
            }
        }
        let on_common: Vec<f64> = common
            .iter()
            .flat_map(|f| s.f1_by_file[*f].iter().copied())
            .collect();
        print!(" {:.3} (n={}) |", median(&on_common), on_common.len());
        println!(
            " {:.0} | {} | {} MiB |",
            s.pages as f64 / s.seconds.max(1e-9),
            s.garbled_pages,
            s.peak_kb / 1024
        );
    }
}

enum Child {
    Done(serde_json::Value),
    Crash,
    Timeout,
}

fn run_child(me: &Path, engine: &str, file: &Path, timeout: Duration) -> Child {
    let mut child = Command::new(me)
        .args(["extract", engine, file.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Read the output while the child runs: a large result would fill the pipe and block it.
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut out).ok();
        out
    });
    let started = Instant::now();
    loop {
        match child.try_wait().unwrap() {
            Some(status) => {
                let out = reader.join().unwrap_or_default();
                if !status.success() {
                    return Child::Crash;
                }
                return serde_json::from_str(&out)
                    .map(Child::Done)
                    .unwrap_or(Child::Crash);
            }
            None if started.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Child::Timeout;
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// `pdftotext -layout` per page (pages are separated by form feeds).
fn reference_pages(file: &Path) -> Option<Vec<String>> {
    let out = Command::new("pdftotext")
        .args(["-layout", "-q"])
        .arg(file)
        .arg("-")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut pages: Vec<String> = text.split('\u{c}').map(str::to_owned).collect();
    if pages.last().is_some_and(|p| p.trim().is_empty()) {
        pages.pop();
    }
    Some(pages)
}

fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn f1(expected: &str, got: &str) -> f64 {
    let mut counts: HashMap<String, i64> = HashMap::new();
    let e = tokens(expected);
    let g = tokens(got);
    for t in &e {
        *counts.entry(t.clone()).or_default() += 1;
    }
    let mut overlap = 0;
    for t in &g {
        if let Some(c) = counts.get_mut(t)
            && *c > 0
        {
            *c -= 1;
            overlap += 1;
        }
    }
    if e.is_empty() || g.is_empty() || overlap == 0 {
        return 0.0;
    }
    let p = overlap as f64 / g.len() as f64;
    let r = overlap as f64 / e.len() as f64;
    2.0 * p * r / (p + r)
}

/// Mostly replacement characters, or long runs of letters without spaces.
fn garbled(page: &str) -> bool {
    let chars: Vec<char> = page.chars().filter(|c| !c.is_whitespace()).collect();
    if chars.len() < 100 {
        return false;
    }
    let replacement = chars.iter().filter(|&&c| c == '\u{fffd}').count();
    let words: Vec<&str> = page.split_whitespace().collect();
    let long = words
        .iter()
        .filter(|w| w.chars().count() > 30)
        .map(|w| w.len())
        .sum::<usize>();
    replacement * 2 > chars.len() || long * 2 > chars.len()
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else {
            out.push(path);
        }
    }
}
