//! Plain text and Markdown: blocks of text, each knowing its page and its heading path. A form
//! feed (`\f`) starts a new page, as printers and `pdftotext` use it.

use crate::blocks::{Block, BlockBuilder};

/// The text of a document, in reading order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Extracted {
    /// Text blocks.
    pub blocks: Vec<Block>,
    /// Number of pages (at least 1).
    pub page_count: u32,
}

impl From<BlockBuilder> for Extracted {
    fn from(builder: BlockBuilder) -> Self {
        let (blocks, page_count) = builder.finish();
        Self { blocks, page_count }
    }
}

/// Feeds one line of text to `out`: a form feed starts a new page, a blank line ends the
/// current block, anything else goes to `content`.
fn feed_line(out: &mut BlockBuilder, line: &str, mut content: impl FnMut(&mut BlockBuilder, &str)) {
    let mut parts = line.split('\u{c}');
    let first = parts.next().unwrap_or("");
    feed_part(out, first, &mut content);
    for part in parts {
        out.end_block();
        out.force_page(out.page() + 1);
        feed_part(out, part, &mut content);
    }
}

fn feed_part(
    out: &mut BlockBuilder,
    line: &str,
    content: &mut impl FnMut(&mut BlockBuilder, &str),
) {
    if line.trim().is_empty() {
        out.end_block();
    } else {
        content(out, line);
    }
}

/// Splits plain text into paragraphs (blank-line separated) and pages (form feeds).
pub fn plain_text(text: &str) -> Extracted {
    let mut out = BlockBuilder::new();
    for line in text.lines() {
        feed_line(&mut out, line, |out, line| out.push_line(line));
    }
    out.into()
}

/// Reads Markdown: ATX (`## Title`) and setext (underlined) headings build the section path;
/// fenced code, lists and tables stay whole blocks.
pub fn markdown(text: &str) -> Extracted {
    let mut out = BlockBuilder::new();
    let mut fence: Option<String> = None;
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if let Some(marker) = &fence {
            if line.trim().is_empty() {
                // Blank lines belong to the code block, not between blocks.
                out.push_blank_line();
            } else {
                feed_line(&mut out, line, |out, line| out.push_line(line));
            }
            if line.trim_start().starts_with(marker.as_str()) {
                fence = None;
                out.end_block();
            }
            continue;
        }
        feed_line(&mut out, line, |out, line| {
            let trimmed = line.trim_start();
            if let Some(marker) = fence_marker(trimmed) {
                out.end_block();
                fence = Some(marker);
                out.push_line(line);
            } else if is_thematic_break(trimmed) {
                out.end_block();
            } else if let Some((level, title)) = atx_heading(trimmed) {
                out.heading(level, title);
            } else if let Some(level) = lines.get(i).and_then(|next| setext_level(next))
                && !trimmed.is_empty()
                && out.block_is_empty()
            {
                i += 1;
                out.heading(level, trimmed.trim());
            } else if is_structural_start(trimmed) != is_structural_start(out.last_line()) {
                // A list or table starting or ending mid-paragraph starts a new block.
                out.end_block();
                out.push_line(line);
            } else {
                out.push_line(line);
            }
        });
    }
    out.into()
}

fn fence_marker(line: &str) -> Option<String> {
    ["```", "~~~"]
        .into_iter()
        .find(|m| line.starts_with(m))
        .map(str::to_owned)
}

fn atx_heading(line: &str) -> Option<(usize, &str)> {
    let level = line.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &line[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let title = rest.trim().trim_end_matches('#').trim();
    Some((level, title))
}

fn setext_level(line: &str) -> Option<usize> {
    let t = line.trim();
    if t.len() >= 2 && t.bytes().all(|b| b == b'=') {
        Some(1)
    } else if t.len() >= 2 && t.bytes().all(|b| b == b'-') {
        Some(2)
    } else {
        None
    }
}

fn is_thematic_break(line: &str) -> bool {
    let t: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    t.len() >= 3
        && ["-", "*", "_"]
            .iter()
            .any(|m| t.chars().all(|c| c.to_string() == *m))
}

fn is_structural_start(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("- ")
        || t.starts_with("* ")
        || t.starts_with("+ ")
        || t.starts_with('|')
        || t.split_once(". ").is_some_and(|(n, _)| {
            !n.is_empty() && n.len() <= 3 && n.bytes().all(|b| b.is_ascii_digit())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(e: &Extracted) -> Vec<(u32, &str, &str)> {
        crate::test_support::shape(&e.blocks)
    }

    #[test]
    fn headings_build_a_section_path() {
        let doc = markdown(
            "Intro text.\n\n# Guide\n\nFirst.\n\n## Install\n\nRun it.\n\n### Linux\n\nUse apt.\n\n## Use\n\nCall it.\n",
        );
        assert_eq!(
            sections(&doc),
            vec![
                (1, "", "Intro text."),
                (1, "Guide", "First."),
                (1, "Guide > Install", "Run it."),
                (1, "Guide > Install > Linux", "Use apt."),
                (1, "Guide > Use", "Call it."),
            ]
        );
        assert_eq!(doc.page_count, 1);
    }

    #[test]
    fn setext_headings_and_closing_hashes() {
        let doc = markdown(
            "Title\n=====\n\nBody.\n\n## Part ##\n\nMore.\n\nSub\n---\ntext\n\n***\n\nend",
        );
        assert_eq!(
            sections(&doc),
            vec![
                (1, "Title", "Body."),
                (1, "Title > Part", "More."),
                (1, "Title > Sub", "text"),
                (1, "Title > Sub", "end"),
            ]
        );
    }

    #[test]
    fn hashes_inside_code_fences_are_not_headings() {
        let doc = markdown("# A\n\n```sh\n# comment\n\nls\n```\nafter");
        assert_eq!(doc.blocks.len(), 2);
        assert_eq!(doc.blocks[0].section, "A");
        assert!(
            doc.blocks[0].text.contains("# comment\n\nls"),
            "{:?}",
            doc.blocks[0].text
        );
        assert_eq!(doc.blocks[1].text, "after");
    }

    #[test]
    fn form_feeds_start_pages() {
        let doc = plain_text("one\n\u{c}two\nthree\u{c}four");
        assert_eq!(
            sections(&doc),
            vec![(1, "", "one"), (2, "", "two\nthree"), (3, "", "four")]
        );
        assert_eq!(doc.page_count, 3);
    }

    #[test]
    fn lists_are_their_own_blocks() {
        let doc = markdown("Steps:\n- one\n- two\nDone.");
        assert_eq!(doc.blocks.len(), 3);
        assert_eq!(doc.blocks[1].text, "- one\n- two");
    }
}
