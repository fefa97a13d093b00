//! Text-quality measures for `quire eval parse`: token F1 of a page against a reference
//! extractor's page, and a reference-free check for garbled pages.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// Token F1 between two texts: tokens are lower-cased runs of letters and digits, counted as a
/// multiset, so order and layout (columns, hyphenation points, spacing) do not matter but lost,
/// extra, merged or split words do.
pub fn token_f1(ours: &str, reference: &str) -> f64 {
    let ours = token_counts(ours);
    let reference = token_counts(reference);
    let ours_total: usize = ours.values().sum();
    let reference_total: usize = reference.values().sum();
    if ours_total == 0 && reference_total == 0 {
        return 1.0;
    }
    if ours_total == 0 || reference_total == 0 {
        return 0.0;
    }
    let common: usize = ours
        .iter()
        .map(|(token, n)| (*n).min(reference.get(token).copied().unwrap_or(0)))
        .sum();
    let precision = common as f64 / ours_total as f64;
    let recall = common as f64 / reference_total as f64;
    if common == 0 {
        0.0
    } else {
        2.0 * precision * recall / (precision + recall)
    }
}

fn token_counts(text: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for token in tokens(text) {
        *counts.entry(token.to_lowercase()).or_default() += 1;
    }
    counts
}

/// Runs of letters and digits: the words the F1 compares.
fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
}

/// Number of words as [`token_f1`] counts them.
pub fn word_count(text: &str) -> usize {
    tokens(text).count()
}

/// Words longer than this are taken as several words run together (German compounds and
/// chemical names aside, English text has almost none).
const RUN_TOGETHER_CHARS: usize = 25;

/// True when a page's text is mostly replacement or control characters, or when most of its
/// letters sit in implausibly long "words" (the spaces between words were lost).
pub fn is_garbled(page: &str) -> bool {
    let visible: Vec<char> = page.chars().filter(|c| !c.is_whitespace()).collect();
    if visible.len() < 20 {
        return false;
    }
    let broken = visible
        .iter()
        .filter(|c| **c == '\u{FFFD}' || c.is_control())
        .count();
    if broken * 2 > visible.len() {
        return true;
    }
    let letters_in_runs: usize = page
        .split_whitespace()
        .filter(|w| w.chars().count() > RUN_TOGETHER_CHARS)
        .map(|w| w.chars().count())
        .sum();
    letters_in_runs * 2 > visible.len()
}

/// Page texts of a PDF as `pdftotext -layout` (poppler-utils) reads them, or `None` when the
/// tool is missing or cannot read the file. Only a yardstick for the evaluation.
pub fn pdftotext_pages(path: &Path) -> Option<Vec<String>> {
    let output = Command::new("pdftotext")
        .arg("-layout")
        .arg("-q")
        .arg(path)
        .arg("-")
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let mut pages: Vec<String> = text.split('\u{c}').map(str::to_owned).collect();
    // pdftotext ends every page with a form feed, so the last piece is empty.
    if pages.last().is_some_and(|p| p.trim().is_empty()) {
        pages.pop();
    }
    Some(pages)
}

/// True when `pdftotext` can be run.
pub fn pdftotext_available() -> bool {
    Command::new("pdftotext")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success() || !o.stderr.is_empty())
}

/// The median of `values` (0 when empty).
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// Resets this process's peak resident set size so the next reading covers one file only
/// (Linux `clear_refs`; a no-op elsewhere).
pub fn reset_peak_memory() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident set size since the last reset, in bytes (Linux; 0 elsewhere).
pub fn peak_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f1_ignores_layout_but_not_lost_words() {
        assert_eq!(token_f1("The pump, primed.", "the   PUMP\nprimed"), 1.0);
        let f1 = token_f1("the pump", "the pump is primed");
        assert!((f1 - 2.0 * 1.0 * 0.5 / 1.5).abs() < 1e-9, "{f1}");
        assert_eq!(token_f1("", ""), 1.0);
        assert_eq!(token_f1("words", ""), 0.0);
        assert_eq!(token_f1("thepumpisprimed", "the pump is primed"), 0.0);
    }

    #[test]
    fn garbled_pages_are_caught_and_ordinary_ones_are_not() {
        let normal = "Pumps move water through the plant every day of the year, and seals wear.";
        assert!(!is_garbled(normal));
        assert!(is_garbled(&"\u{FFFD}".repeat(40)));
        assert!(is_garbled(
            "Pumpsmovewaterthroughtheplanteverydayoftheyear andsealswearoutaftertwoyearsofuse"
        ));
        assert!(!is_garbled("short"));
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }
}
