//! Helpers shared by the parsers' unit tests.

use std::io::{Cursor, Write};

use zip::ZipWriter;
use zip::write::SimpleFileOptions;

use crate::Block;

/// A ZIP container with the given `(path, content)` entries, in order.
pub(crate) fn zip_package(entries: &[(&str, &str)]) -> Vec<u8> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    for (path, content) in entries {
        zip.start_file(*path, SimpleFileOptions::default()).unwrap();
        zip.write_all(content.as_bytes()).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// Blocks as `(page, section, text)`, for comparing with what a test expects.
pub(crate) fn shape(blocks: &[Block]) -> Vec<(u32, &str, &str)> {
    blocks
        .iter()
        .map(|b| (b.page, b.section.as_str(), b.text.as_str()))
        .collect()
}

/// The `tesseract` program the OCR tests use, from `QUIRE_TEST_TESSERACT` (which
/// `scripts/test` sets from `scripts/ocr-deps`). Unset, the OCR tests fail: they must not pass
/// by testing nothing.
pub(crate) fn tesseract() -> std::path::PathBuf {
    std::env::var_os("QUIRE_TEST_TESSERACT")
        .filter(|p| !p.is_empty())
        .map(Into::into)
        .expect("QUIRE_TEST_TESSERACT must name the tesseract program (run scripts/ocr-deps)")
}

/// OCR settings for tests: `program`, English, generous bounds.
pub(crate) fn ocr_settings(program: std::path::PathBuf) -> crate::OcrSettings {
    crate::OcrSettings {
        program,
        languages: vec!["eng".into()],
        tessdata_dir: None,
        max_pages: 50,
        page_timeout_seconds: 60,
        dpi: 300,
        document_timeout_seconds: 0,
    }
}

/// OCR with the real Tesseract.
pub(crate) fn real_ocr() -> crate::Ocr {
    crate::Ocr::new(ocr_settings(tesseract()))
}

/// Lower-case words of `text`, for comparing OCR output with what was drawn.
pub(crate) fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether `text` holds the words of `phrase` in order, next to each other.
pub(crate) fn has_phrase(text: &str, phrase: &str) -> bool {
    let (text, phrase) = (words(text), words(phrase));
    text.windows(phrase.len()).any(|w| w == phrase.as_slice())
}

/// Token F1 of `ours` against `reference`: words compared as multisets, lower-cased.
pub(crate) fn token_f1(ours: &str, reference: &str) -> f64 {
    use std::collections::HashMap;
    let count = |text: &str| {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for word in words(text) {
            *counts.entry(word).or_default() += 1;
        }
        counts
    };
    let (ours, reference) = (count(ours), count(reference));
    let total = |c: &HashMap<String, usize>| c.values().sum::<usize>() as f64;
    let common: usize = ours
        .iter()
        .map(|(w, n)| (*n).min(reference.get(w).copied().unwrap_or(0)))
        .sum();
    if common == 0 {
        return 0.0;
    }
    let precision = common as f64 / total(&ours);
    let recall = common as f64 / total(&reference);
    2.0 * precision * recall / (precision + recall)
}

/// The text of page `page` of `doc`: its blocks' text, a line each.
pub(crate) fn page_text(doc: &crate::ParsedDocument, page: u32) -> String {
    doc.blocks
        .iter()
        .filter(|b| b.page == page)
        .map(|b| b.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}
