//! Text extraction for plain text and Markdown: blocks of text, each knowing its page and its
//! heading path. A form feed (`\f`) starts a new page, as printers and `pdftotext` use it.

/// One unit of text that chunking keeps together when it can: a paragraph, a list, a table or
/// a code block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Page number, from 1.
    pub page: u32,
    /// Heading path such as `Install > Linux`; empty before the first heading.
    pub section: String,
    /// The block's text.
    pub text: String,
}

/// The text of a document, in reading order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Extracted {
    /// Text blocks.
    pub blocks: Vec<Block>,
    /// Number of pages (at least 1).
    pub page_count: u32,
}

/// Splits plain text into paragraphs (blank-line separated) and pages (form feeds).
pub fn plain_text(text: &str) -> Extracted {
    let mut out = Builder::new();
    for line in text.lines() {
        out.line(line, |out, line| out.push_line(line));
    }
    out.finish()
}

/// Reads Markdown: ATX (`## Title`) and setext (underlined) headings build the section path;
/// fenced code, lists and tables stay whole blocks.
pub fn markdown(text: &str) -> Extracted {
    let mut out = Builder::new();
    let mut fence: Option<String> = None;
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if let Some(marker) = &fence {
            if line.trim().is_empty() {
                // Blank lines belong to the code block, not between blocks.
                out.current.push(String::new());
            } else {
                out.line(line, |out, line| out.push_line(line));
            }
            if line.trim_start().starts_with(marker.as_str()) {
                fence = None;
                out.end_block();
            }
            continue;
        }
        out.line(line, |out, line| {
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
                && out.current.is_empty()
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
    out.finish()
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

struct Builder {
    blocks: Vec<Block>,
    current: Vec<String>,
    page: u32,
    headings: Vec<(usize, String)>,
}

impl Builder {
    fn new() -> Self {
        Self {
            blocks: Vec::new(),
            current: Vec::new(),
            page: 1,
            headings: Vec::new(),
        }
    }

    /// Handles page breaks and blank lines, passing the rest of each line to `content`.
    fn line(&mut self, line: &str, mut content: impl FnMut(&mut Self, &str)) {
        let mut parts = line.split('\u{c}');
        let first = parts.next().unwrap_or("");
        self.content_or_blank(first, &mut content);
        for part in parts {
            self.end_block();
            self.page += 1;
            self.content_or_blank(part, &mut content);
        }
    }

    fn content_or_blank(&mut self, line: &str, content: &mut impl FnMut(&mut Self, &str)) {
        if line.trim().is_empty() {
            self.end_block();
        } else {
            content(self, line);
        }
    }

    fn push_line(&mut self, line: &str) {
        self.current.push(line.trim_end().to_owned());
    }

    fn last_line(&self) -> &str {
        self.current.last().map(String::as_str).unwrap_or("")
    }

    fn heading(&mut self, level: usize, title: &str) {
        self.end_block();
        self.headings.retain(|(l, _)| *l < level);
        if !title.is_empty() {
            self.headings.push((level, title.to_owned()));
        }
    }

    fn section(&self) -> String {
        self.headings
            .iter()
            .map(|(_, t)| t.as_str())
            .collect::<Vec<_>>()
            .join(" > ")
    }

    fn end_block(&mut self) {
        if self.current.is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.current).join("\n");
        if !text.trim().is_empty() {
            self.blocks.push(Block {
                page: self.page,
                section: self.section(),
                text,
            });
        }
    }

    fn finish(mut self) -> Extracted {
        self.end_block();
        Extracted {
            blocks: self.blocks,
            page_count: self.page,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(e: &Extracted) -> Vec<(u32, &str, &str)> {
        e.blocks
            .iter()
            .map(|b| (b.page, b.section.as_str(), b.text.as_str()))
            .collect()
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
