// DRAFT, not compiled: a quire-parse PDF module on pdf_oxide, kept out of the product because
// pdf_oxide's decryption is unreliable (see docs/parsing.md). It maps the outline to sections
// (split at the line where a bookmark title appears), reports image-only files as scanned, and
// carries `test_pdf`, a generator of small valid PDFs with outlines for fixtures. Its three
// unit tests passed when it was wired into quire-parse on 2026-11-22 (the `DEBUG` line and the
// `Scanned` variant it needs were part of that experiment).

//! PDF, read with `pdf_oxide` (chosen by measurement: see `docs/parsing.md`). One page per PDF
//! page, numbered from 1 as the PDF orders them. Sections come from the outline (bookmarks):
//! a bookmark's title starts its section on the page it points to, at the line where the title
//! appears (or at the top of the page when it cannot be found there). Encrypted files are
//! opened with the empty user password when that works; image-only (scanned) files fail with a
//! reason instead of becoming empty documents.

use pdf_oxide::PdfDocument;
use pdf_oxide::outline::{Destination, OutlineItem};

use crate::blocks::BlockBuilder;
use crate::{Extracted, ParseError, ParseLimits};

const WHAT: &str = "PDF document";
/// Below this many visible characters per page on average, the file is taken as scanned.
const MIN_CHARS_PER_PAGE: usize = 16;

pub(crate) fn parse(bytes: &[u8], limits: &ParseLimits) -> Result<Extracted, ParseError> {
    let doc = PdfDocument::from_bytes(bytes.to_vec()).map_err(|e| open_error(&e.to_string()))?;
    // `from_bytes` already tries the empty user password; a document that stays locked has
    // a real one.
    let encrypted = doc.is_encrypted();
    if encrypted && !doc.is_authenticated() && !doc.authenticate(b"").unwrap_or(false) {
        eprintln!("DEBUG locked: enc={} auth={}", doc.is_encrypted(), doc.is_authenticated());
    }
    let pages = doc.page_count().map_err(|e| open_error(&e.to_string()))?;
    if pages > limits.max_pages as usize {
        return Err(ParseError::LimitExceeded(format!(
            "the PDF document has {pages} pages, more than the limit of {}",
            limits.max_pages
        )));
    }
    if pages == 0 {
        return Err(ParseError::Malformed { format: WHAT.into(), detail: "it has no pages".into() });
    }
    let mut bookmarks = Vec::new();
    if let Ok(Some(outline)) = doc.get_outline() {
        flatten(&outline, 1, &mut bookmarks);
    }
    let mut out = BlockBuilder::new();
    let mut visible = 0usize;
    let mut failed_pages = 0usize;
    for index in 0..pages {
        out.force_page(index as u32 + 1);
        let text = match doc.extract_text(index) {
            Ok(text) => text,
            Err(_) => {
                failed_pages += 1;
                continue;
            }
        };
        visible += text.chars().filter(|c| !c.is_whitespace()).count();
        let marks: Vec<&Bookmark> = bookmarks.iter().filter(|b| b.page == index).collect();
        push_page(&mut out, &text, &marks);
    }
    if failed_pages == pages && encrypted {
        return Err(ParseError::Encrypted(WHAT.into()));
    }
    if failed_pages == pages {
        return Err(ParseError::Malformed {
            format: WHAT.into(),
            detail: "no page could be read".into(),
        });
    }
    if visible < MIN_CHARS_PER_PAGE * pages && encrypted {
        return Err(ParseError::Encrypted(WHAT.into()));
    }
    if visible < MIN_CHARS_PER_PAGE * pages {
        return Err(ParseError::Scanned);
    }
    let (blocks, _) = out.finish();
    Ok(Extracted { blocks, page_count: pages as u32 })
}

fn open_error(detail: &str) -> ParseError {
    if detail.to_ascii_lowercase().contains("encrypt") || detail.to_ascii_lowercase().contains("password") {
        ParseError::Encrypted(WHAT.into())
    } else {
        ParseError::Malformed { format: WHAT.into(), detail: detail.to_owned() }
    }
}

/// A bookmark with its depth and 0-based page.
struct Bookmark {
    level: usize,
    title: String,
    page: usize,
}

fn flatten(items: &[OutlineItem], level: usize, out: &mut Vec<Bookmark>) {
    for item in items {
        if let Some(Destination::PageIndex(page)) = item.dest {
            let title = item.title.split_whitespace().collect::<Vec<_>>().join(" ");
            if !title.is_empty() {
                out.push(Bookmark { level, title, page });
            }
        }
        flatten(&item.children, level + 1, out);
    }
}

/// Adds one page's text: paragraphs split at blank lines, sections switched where the page's
/// bookmarks' titles appear.
fn push_page(out: &mut BlockBuilder, text: &str, marks: &[&Bookmark]) {
    let mut pending: Vec<&Bookmark> = marks.to_vec();
    // Bookmarks whose title is not on the page start their section at the top.
    let lines: Vec<&str> = text.lines().collect();
    let normalized: Vec<String> = lines.iter().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
    pending.retain(|mark| {
        let found = normalized.iter().any(|l| l.eq_ignore_ascii_case(&mark.title) || l.starts_with(&mark.title));
        if !found {
            out.heading(mark.level, &mark.title);
        }
        found
    });
    for (line, norm) in lines.iter().zip(&normalized) {
        if let Some(pos) = pending
            .iter()
            .position(|m| norm.eq_ignore_ascii_case(&m.title) || norm.starts_with(&m.title))
        {
            let mark = pending.remove(pos);
            out.heading(mark.level, &mark.title);
            if norm.eq_ignore_ascii_case(&mark.title) {
                continue;
            }
        }
        if line.trim().is_empty() {
            out.end_block();
        } else {
            out.push_line(line.trim_end());
        }
    }
    out.end_block();
}

/// Builds small, valid PDFs for tests: one page per entry, each line of text drawn in
/// Helvetica, with an optional outline entry per page.
#[cfg(test)]
pub(crate) fn test_pdf(pages: &[(&str, Option<&str>)]) -> Vec<u8> {
    let mut objects: Vec<String> = Vec::new();
    let n = pages.len();
    // 1: catalog, 2: pages, 3: font, then per page: page + content, then outline objects.
    let page_ids: Vec<usize> = (0..n).map(|i| 4 + 2 * i).collect();
    let outline_root = 4 + 2 * n;
    let marks: Vec<(usize, &str)> = pages
        .iter()
        .enumerate()
        .filter_map(|(i, (_, title))| title.map(|t| (i, t)))
        .collect();
    let outline = if marks.is_empty() { String::new() } else { format!(" /Outlines {outline_root} 0 R") };
    objects.push(format!("<< /Type /Catalog /Pages 2 0 R{outline} >>"));
    let kids: Vec<String> = page_ids.iter().map(|id| format!("{id} 0 R")).collect();
    objects.push(format!("<< /Type /Pages /Kids [{}] /Count {n} >>", kids.join(" ")));
    objects.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".into());
    for (i, (text, _)) in pages.iter().enumerate() {
        let mut stream = String::from("BT /F1 12 Tf 72 720 Td 14 TL\n");
        for line in text.lines() {
            stream.push_str(&format!("({}) Tj T*\n", line.replace('(', "\\(").replace(')', "\\)")));
        }
        stream.push_str("ET");
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            page_ids[i] + 1
        ));
        objects.push(format!("<< /Length {} >>\nstream\n{stream}\nendstream", stream.len()));
    }
    if !marks.is_empty() {
        let first = outline_root + 1;
        let last = outline_root + marks.len();
        objects.push(format!("<< /Type /Outlines /First {first} 0 R /Last {last} 0 R /Count {} >>", marks.len()));
        for (k, (page, title)) in marks.iter().enumerate() {
            let id = outline_root + 1 + k;
            let prev = if k > 0 { format!(" /Prev {} 0 R", id - 1) } else { String::new() };
            let next = if k + 1 < marks.len() { format!(" /Next {} 0 R", id + 1) } else { String::new() };
            objects.push(format!(
                "<< /Title ({title}) /Parent {outline_root} 0 R /Dest [{} 0 R /Fit]{prev}{next} >>",
                page_ids[*page]
            ));
        }
    }
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend(format!("{} 0 obj\n{body}\nendobj\n", i + 1).into_bytes());
    }
    let xref = pdf.len();
    pdf.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).into_bytes());
    for offset in offsets {
        pdf.extend(format!("{offset:010} 00000 n \n").into_bytes());
    }
    pdf.extend(format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1).into_bytes());
    pdf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_outline_sections() {
        let bytes = test_pdf(&[
            ("Introduction\nPumps move water through the plant every day of the year.", Some("Introduction")),
            ("Maintenance\nReplace the mechanical seal every two years without fail.", Some("Maintenance")),
        ]);
        let doc = parse(&bytes, &ParseLimits::default()).unwrap();
        assert_eq!(doc.page_count, 2);
        let shape: Vec<(u32, &str)> = doc.blocks.iter().map(|b| (b.page, b.section.as_str())).collect();
        assert_eq!(shape, vec![(1, "Introduction"), (2, "Maintenance")]);
        assert!(doc.blocks[1].text.contains("mechanical seal"), "{:?}", doc.blocks);
    }

    #[test]
    fn image_only_pdfs_are_reported_as_scanned() {
        let bytes = test_pdf(&[("", None), ("", None)]);
        assert_eq!(parse(&bytes, &ParseLimits::default()).unwrap_err(), ParseError::Scanned);
    }

    #[test]
    fn truncated_pdfs_fail_with_a_reason() {
        let bytes = test_pdf(&[("Some text on the only page of this document.", None)]);
        let err = parse(&bytes[..40], &ParseLimits::default()).unwrap_err();
        assert!(matches!(err, ParseError::Malformed { .. } | ParseError::Scanned), "{err:?}");
    }
}
