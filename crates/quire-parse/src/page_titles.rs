//! Titles: a document's metadata title when it says something ([`metadata_title`]), and page
//! titles for PDFs without an outline: the heading printed at the top of a page
//! ("Consolidated Statements of Cash Flows"), so every chunk of the page carries it as its
//! section. A filing's cash-flow table is cut into several chunks and only the first holds the
//! heading; without it, "cash flow statement" finds the words around the table, not its
//! numbers. Measured on FinanceBench in `docs/retrieval.md` ("Page titles").
//!
//! A page's title is its first one or two lines that read as a heading, after the running
//! headers and footers (lines printed on many pages, such as "Table of Contents" or the
//! company's name) and lines without letters (page numbers). A line reads as a heading when it
//! starts with a capital, does not end a sentence or lead into a list, holds few figures, and
//! most of its longer words are capitalised; prose that runs over from the previous page does
//! not. Pages without such a line get no title: a wrong title on every chunk of a page would
//! mislead search more than no title does.

use std::collections::{HashMap, HashSet};

/// Lines looked at from the top of a page for its title.
const TOP_LINES: usize = 6;
/// Lines at each end of a page checked for running headers and footers.
const EDGE_LINES: usize = 4;
/// A line on at least this share of the pages (and on three or more) runs on every page.
const RUNNING_SHARE: f64 = 0.2;
/// Words kept of a title: statement headings run on with the period they cover.
const MAX_TITLE_WORDS: usize = 12;
/// Numbers a heading may hold (the years of "Results of Operations - 2022 Compared to 2021").
const MAX_NUMBERS: usize = 2;

/// Each page's title, or an empty string where the page has none.
pub(crate) fn page_titles(pages: &[Option<&str>]) -> Vec<String> {
    let running = running_lines(pages);
    pages
        .iter()
        .map(|text| text.map_or_else(String::new, |text| title(text, &running)))
        .collect()
}

/// Titles that tools write for every file, which say nothing about this one.
const PLACEHOLDER_TITLES: &[&str] = &[
    "untitled",
    "title",
    "document",
    "cover page",
    "powerpoint presentation",
    "slide 1",
    "word document",
    "pdf document",
];
/// Words a metadata title may have; longer ones are abstracts or whole sentences.
const MAX_METADATA_WORDS: usize = 20;

/// A document's metadata title (a PDF's `/Title`) when it says something about the document:
/// without the "Microsoft Word - " that Word's PDF printer puts before the file name, nor a
/// file extension; `None` for placeholders ("Untitled", "Cover Page"), single words (file
/// names and codes such as "F20_10K"), and titles over twenty words.
pub(crate) fn metadata_title(raw: &str) -> Option<String> {
    let mut title = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some(rest) = title.strip_prefix("Microsoft Word - ") {
        title = rest.to_owned();
    }
    if let Some((stem, extension)) = title.rsplit_once('.') {
        let extension = extension.to_ascii_lowercase();
        if [
            "pdf", "doc", "docx", "indd", "ps", "rtf", "xls", "xlsx", "ppt", "pptx",
        ]
        .contains(&extension.as_str())
        {
            title = stem.trim().to_owned();
        }
    }
    let words = title
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count();
    let placeholder = PLACEHOLDER_TITLES.contains(&title.to_lowercase().as_str());
    let has_letters = title.chars().any(char::is_alphabetic);
    ((2..=MAX_METADATA_WORDS).contains(&words) && has_letters && !placeholder).then_some(title)
}

/// A line as it is compared across pages: lower case, digits as `#` (page numbers and dates
/// differ from page to page), whitespace collapsed.
fn shape(line: &str) -> String {
    line.split_whitespace()
        .map(|word| {
            word.chars()
                .map(|c| {
                    if c.is_ascii_digit() {
                        '#'
                    } else {
                        c.to_ascii_lowercase()
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The shapes of the lines printed near the top or bottom of many pages.
fn running_lines(pages: &[Option<&str>]) -> HashSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for text in pages.iter().flatten() {
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let mut edges: Vec<String> = lines
            .iter()
            .take(EDGE_LINES)
            .chain(lines.iter().rev().take(EDGE_LINES))
            .map(|l| shape(l))
            .collect();
        edges.sort();
        edges.dedup();
        for edge in edges {
            *seen.entry(edge).or_default() += 1;
        }
    }
    let least = ((pages.len() as f64 * RUNNING_SHARE).ceil() as usize).max(3);
    seen.into_iter()
        .filter(|(_, count)| *count >= least)
        .map(|(line, _)| line)
        .collect()
}

fn title(text: &str, running: &HashSet<String>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let candidates = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(TOP_LINES)
        .filter(|l| l.chars().any(char::is_alphabetic))
        .filter(|l| !running.contains(&shape(l)));
    for line in candidates {
        // A long line is judged by its start: a heading that runs on with the period it
        // covers still starts as a heading.
        let head = line
            .split_whitespace()
            .take(MAX_TITLE_WORDS)
            .collect::<Vec<_>>()
            .join(" ");
        if !reads_as_heading(&head) {
            break;
        }
        parts.push(head);
        if parts.len() == 2 {
            break;
        }
    }
    let words: Vec<&str> = parts.iter().flat_map(|p| p.split_whitespace()).collect();
    words[..words.len().min(MAX_TITLE_WORDS)].join(" ")
}

fn reads_as_heading(line: &str) -> bool {
    let starts_capital = line.chars().next().is_some_and(char::is_uppercase);
    let ends_prose = line.ends_with(['.', ',', ';', ':']);
    let words: Vec<&str> = line.split_whitespace().collect();
    let numbers = words
        .iter()
        .filter(|w| w.chars().any(|c| c.is_ascii_digit()))
        .count();
    let long: Vec<&&str> = words
        .iter()
        .filter(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 4)
        .collect();
    let capitalised = long
        .iter()
        .filter(|w| {
            w.chars()
                .find(|c| c.is_alphabetic())
                .is_some_and(char::is_uppercase)
        })
        .count();
    starts_capital && !ends_prose && numbers <= MAX_NUMBERS && capitalised * 2 >= long.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filing() -> Vec<String> {
        let mut pages: Vec<String> = (1..=10)
            .map(|n| {
                format!(
                    "Table of Contents\n\nwhich the Company expects to continue in the \
                     coming years, as described below.\nMore prose follows here.\n{n}"
                )
            })
            .collect();
        pages[3] = "Table of Contents\n\nAmcor plc and Subsidiaries\nConsolidated Statements of \
                    Cash Flows\n($ in millions)\nNet income $ 1,058 $ 805\n4"
            .into();
        pages[4] = "Table of Contents\nNote 2 - Significant Accounting Policies\n\nBasis of \
                    Presentation: The consolidated financial statements include the accounts.\n5"
            .into();
        pages[5] = "Table of Contents\nConsolidated Statement of Income PepsiCo, Inc. and \
                    Subsidiaries Fiscal years ended December 31, 2022, December 25, 2021\n6"
            .into();
        pages
    }

    #[test]
    fn statement_and_note_headings_become_titles() {
        let pages = filing();
        let pages: Vec<Option<&str>> = pages.iter().map(|p| Some(p.as_str())).collect();
        let titles = page_titles(&pages);
        assert_eq!(
            titles[3],
            "Amcor plc and Subsidiaries Consolidated Statements of Cash Flows"
        );
        assert_eq!(titles[4], "Note 2 - Significant Accounting Policies");
        // Cut at twelve words: the heading, not the period it covers.
        assert_eq!(
            titles[5],
            "Consolidated Statement of Income PepsiCo, Inc. and Subsidiaries Fiscal years ended \
             December"
        );
    }

    #[test]
    fn running_headers_and_prose_give_no_title() {
        let pages = filing();
        let pages: Vec<Option<&str>> = pages.iter().map(|p| Some(p.as_str())).collect();
        let titles = page_titles(&pages);
        // "Table of Contents" is on every page; what follows it runs on from the page before.
        for n in [0, 1, 2, 6, 9] {
            assert_eq!(titles[n], "", "page {n}");
        }
    }

    #[test]
    fn a_short_document_has_no_running_lines_and_unreadable_pages_no_title() {
        let pages = [Some("Annual Report\nRevenue grew."), None];
        assert_eq!(
            page_titles(&pages),
            vec!["Annual Report".to_owned(), String::new()]
        );
    }

    #[test]
    fn metadata_titles_that_say_nothing_are_dropped() {
        assert_eq!(
            metadata_title("Amcor  4Q 2023 Exhibit 99.1").as_deref(),
            Some("Amcor 4Q 2023 Exhibit 99.1")
        );
        assert_eq!(
            metadata_title("Microsoft Word - Annual Report 2015.docx").as_deref(),
            Some("Annual Report 2015")
        );
        for junk in [
            "",
            "Cover Page",
            "Untitled",
            "Microsoft Word - F20_10K.docx",
            "report.pdf",
            "2015 10",
        ] {
            assert_eq!(metadata_title(junk), None, "{junk:?}");
        }
        assert_eq!(metadata_title(&"word ".repeat(21)), None);
    }

    #[test]
    fn lines_that_read_as_prose_or_figures_are_not_headings() {
        assert!(reads_as_heading("Consolidated Balance Sheets"));
        assert!(reads_as_heading(
            "Results of Operations - 2022 Compared to 2021"
        ));
        assert!(!reads_as_heading("2022 2021 Change"));
        assert!(!reads_as_heading(
            "The table below summarizes our cash activity:"
        ));
        assert!(!reads_as_heading(
            "investment to its fair value if we concluded"
        ));
        assert!(!reads_as_heading("Net sales $ 14,694 $ 14,544 $ 12,861"));
        assert!(!reads_as_heading(
            "The Company recognizes the funded status of each plan"
        ));
    }
}
