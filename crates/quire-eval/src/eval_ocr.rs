//! `quire eval ocr DIR`: OCR quality and speed on PDFs that carry a text layer. Each chosen page
//! is rendered to an image by poppler's `pdftoppm` (a separate program, for measuring only:
//! the product never renders PDFs), read back through Quire's own OCR path (an image document
//! parsed with OCR), and compared with the page's text layer by token F1.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use quire_parse::{Ocr, ParseLimits, parse, parse_with_ocr};

use crate::eval::{collect, ocr_for_eval, page_texts, short_path};
use crate::text_quality::{median, token_f1, word_count};

/// Options of `quire eval ocr`.
#[derive(Debug, Args)]
pub struct OcrEvalArgs {
    /// Directory to read (recursively); its PDFs with a text layer are used.
    dir: PathBuf,
    /// Resolution the pages are rendered at, as a scanner would (dots per inch).
    #[arg(long, default_value_t = 300)]
    dpi: u32,
    /// Pages taken from each PDF (the first ones with enough text).
    #[arg(long, default_value_t = 2)]
    pages_per_file: usize,
    /// Most pages in all.
    #[arg(long, default_value_t = 60)]
    max_pages: usize,
    /// Print one line per page.
    #[arg(long)]
    verbose: bool,
}

/// Reference pages with fewer words say little about OCR quality.
const MIN_WORDS: usize = 50;

/// Runs the evaluation and prints the report.
pub fn ocr(args: OcrEvalArgs) -> anyhow::Result<()> {
    let Some(settings) = ocr_for_eval(false, 600) else {
        bail!("OCR is not available: install tesseract-ocr (scripts/ocr-deps)");
    };
    if Command::new("pdftoppm").arg("-v").output().is_err() {
        bail!("pdftoppm (poppler-utils) renders the pages for this measurement; install it");
    }
    let mut files = Vec::new();
    collect(&args.dir, &mut files)
        .with_context(|| format!("could not read {}", args.dir.display()))?;
    files.sort();
    let mut scores = Vec::new();
    let mut ocr_seconds = 0.0;
    let mut text_layer_seconds = 0.0;
    let mut text_layer_pages = 0u32;
    for path in files.iter().filter(|p| is_pdf(p)) {
        if scores.len() >= args.max_pages {
            break;
        }
        let bytes = std::fs::read(path)?;
        let started = Instant::now();
        let Ok(doc) = parse(&bytes, "a.pdf", "", &ParseLimits::default()) else {
            continue;
        };
        text_layer_seconds += started.elapsed().as_secs_f64();
        text_layer_pages += doc.page_count;
        let texts = page_texts(&doc);
        let chosen = texts
            .iter()
            .enumerate()
            .filter(|(_, t)| word_count(t) >= MIN_WORDS)
            .take(args.pages_per_file);
        for (index, reference) in chosen {
            let Some(png) = render(path, index + 1, args.dpi) else {
                continue;
            };
            let ocr = Ocr::new(settings.clone());
            let started = Instant::now();
            let read = parse_with_ocr(&png, "page.png", "", &ParseLimits::default(), Some(&ocr));
            ocr_seconds += started.elapsed().as_secs_f64();
            let text = read.map(|d| page_texts(&d).join("\n")).unwrap_or_default();
            let f1 = token_f1(&text, reference);
            if args.verbose {
                println!("{:.3}  {} p.{}", f1, short_path(path, &args.dir), index + 1);
            }
            scores.push(f1);
        }
    }
    let pages = scores.len();
    if pages == 0 {
        bail!("no PDF page with a text layer of at least {MIN_WORDS} words was found");
    }
    let below = scores.iter().filter(|f| **f < 0.9).count();
    println!(
        "OCR at {} dpi: {pages} pages, token F1 against the text layer: median {:.3}, \
         {below} pages below 0.90",
        args.dpi,
        median(&mut scores)
    );
    println!(
        "speed: {:.2} pages/s OCR ({:.2} s a page, one page at a time); the text layer: {:.0} \
         pages/s",
        pages as f64 / ocr_seconds,
        ocr_seconds / pages as f64,
        f64::from(text_layer_pages) / text_layer_seconds.max(1e-9)
    );
    Ok(())
}

fn is_pdf(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("pdf"))
}

/// Page `page` of `path` as a greyscale PNG at `dpi`, by `pdftoppm`.
fn render(path: &Path, page: usize, dpi: u32) -> Option<Vec<u8>> {
    let output = Command::new("pdftoppm")
        .args(["-png", "-gray", "-r", &dpi.to_string()])
        .args([
            "-f",
            &page.to_string(),
            "-l",
            &page.to_string(),
            "-singlefile",
        ])
        .arg(path)
        .output()
        .ok()?;
    (output.status.success() && !output.stdout.is_empty()).then_some(output.stdout)
}
