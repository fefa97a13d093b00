//! HTML: the body text in reading order. `h1`–`h6` build the section path; paragraphs, list
//! items, preformatted text and table rows become blocks; scripts, styles and other
//! non-content elements are dropped; whitespace is collapsed as a browser would.

use ego_tree::NodeRef;
use scraper::{Html, Node};

use crate::Extracted;
use crate::blocks::BlockBuilder;
use crate::table::row_line;

/// Elements whose content is never text for a reader.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "head", "svg", "math", "iframe", "object", "canvas",
    "select", "button", "nav",
];

/// Elements that start and end a block.
const BLOCK_LEVEL: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "aside",
    "blockquote",
    "figure",
    "figcaption",
    "form",
    "fieldset",
    "address",
    "details",
    "summary",
    "dl",
    "dt",
    "dd",
    "ul",
    "ol",
    "li",
    "hr",
    "body",
    "caption",
    "center",
];

pub(crate) fn parse(text: &str) -> Extracted {
    let document = Html::parse_document(text);
    let mut walker = Walker {
        out: BlockBuilder::new(),
        line: String::new(),
    };
    walker.walk(document.tree.root(), false);
    walker.flush_line();
    walker.out.into()
}

struct Walker {
    out: BlockBuilder,
    /// The line being assembled from inline text.
    line: String,
}

impl Walker {
    fn walk(&mut self, node: NodeRef<'_, Node>, preformatted: bool) {
        match node.value() {
            Node::Text(text) => self.text(text, preformatted),
            Node::Element(element) => {
                let name = element.name();
                if SKIPPED.contains(&name) {
                    return;
                }
                if let Some(level) = heading_level(name) {
                    self.end_block();
                    self.out.heading(level, &inline_text(node));
                    return;
                }
                match name {
                    "table" => {
                        self.end_block();
                        self.table(node);
                        return;
                    }
                    "br" => {
                        self.flush_line();
                        return;
                    }
                    "pre" => {
                        self.end_block();
                        for child in node.children() {
                            self.walk(child, true);
                        }
                        self.end_block();
                        return;
                    }
                    _ => {}
                }
                let block = BLOCK_LEVEL.contains(&name);
                if block {
                    self.end_block();
                }
                if name == "li" {
                    self.line.push_str("- ");
                }
                for child in node.children() {
                    self.walk(child, preformatted);
                }
                if block {
                    self.end_block();
                }
            }
            Node::Document | Node::Fragment => {
                for child in node.children() {
                    self.walk(child, preformatted);
                }
            }
            _ => {}
        }
    }

    fn text(&mut self, text: &str, preformatted: bool) {
        if preformatted {
            let mut lines = text.split('\n');
            if let Some(first) = lines.next() {
                self.line.push_str(first);
            }
            for line in lines {
                self.flush_line();
                self.line.push_str(line);
            }
            return;
        }
        let starts_with_space = text.starts_with(char::is_whitespace);
        let ends_with_space = text.ends_with(char::is_whitespace);
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.is_empty() {
            if !text.is_empty() && !self.line.is_empty() && !self.line.ends_with(' ') {
                self.line.push(' ');
            }
            return;
        }
        if starts_with_space && !self.line.is_empty() && !self.line.ends_with(' ') {
            self.line.push(' ');
        }
        self.line.push_str(&words.join(" "));
        if ends_with_space {
            self.line.push(' ');
        }
    }

    fn flush_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        let line = line.trim_end();
        if line.trim().is_empty() || line.trim() == "-" {
            return;
        }
        self.out.push_line(line);
    }

    fn end_block(&mut self) {
        self.flush_line();
        self.out.end_block();
    }

    /// A table is one block with a line per row, cells separated by ` | `.
    fn table(&mut self, table: NodeRef<'_, Node>) {
        let mut rows = Vec::new();
        for row in table
            .descendants()
            .filter(|n| element_name(*n) == Some("tr"))
        {
            // Cells of nested tables belong to their own rows.
            let cells: Vec<String> = row
                .children()
                .filter(|c| matches!(element_name(*c), Some("td" | "th")))
                .map(inline_text)
                .collect();
            if let Some(line) = row_line(&cells) {
                rows.push(line);
            }
        }
        if let Some(caption) = table
            .children()
            .find(|c| element_name(*c) == Some("caption"))
            .map(inline_text)
            .filter(|c| !c.is_empty())
        {
            rows.insert(0, caption);
        }
        if !rows.is_empty() {
            self.out.push_block(&rows.join("\n"));
        }
    }
}

fn element_name(node: NodeRef<'_, Node>) -> Option<&str> {
    match node.value() {
        Node::Element(e) => Some(e.name()),
        _ => None,
    }
}

fn heading_level(name: &str) -> Option<usize> {
    match name {
        "h1" => Some(1),
        "h2" => Some(2),
        "h3" => Some(3),
        "h4" => Some(4),
        "h5" => Some(5),
        "h6" => Some(6),
        _ => None,
    }
}

/// The visible text under `node` on one line.
fn inline_text(node: NodeRef<'_, Node>) -> String {
    let mut parts = Vec::new();
    for descendant in node.descendants() {
        if let Node::Text(text) = descendant.value() {
            let hidden = descendant
                .ancestors()
                .any(|a| element_name(a).is_some_and(|n| SKIPPED.contains(&n)));
            if !hidden {
                parts.push(text.to_string());
            }
        }
    }
    parts
        .concat()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(e: &Extracted) -> Vec<(&str, &str)> {
        e.blocks
            .iter()
            .map(|b| (b.section.as_str(), b.text.as_str()))
            .collect()
    }

    #[test]
    fn headings_paragraphs_lists_and_tables() {
        let page = "<html><head><title>T</title><style>p{}</style></head><body>\
            <nav>menu</nav><h1>Guide</h1><p>Intro <b>bold</b>\ntext.</p>\
            <h2>Parts</h2><ul><li>pump</li><li>valve</li></ul>\
            <table><tr><th>Part</th><th>Qty</th></tr><tr><td>Seal</td><td>2</td></tr></table>\
            <script>var x = 1;</script><pre>a  b\n  c</pre></body></html>";
        assert_eq!(
            shape(&parse(page)),
            vec![
                ("Guide", "Intro bold text."),
                ("Guide > Parts", "- pump"),
                ("Guide > Parts", "- valve"),
                ("Guide > Parts", "Part | Qty\nSeal | 2"),
                ("Guide > Parts", "a  b\n  c"),
            ]
        );
    }

    #[test]
    fn line_breaks_and_entities() {
        let e = parse("<p>one<br>two &amp; three&nbsp;four</p>");
        assert_eq!(shape(&e), vec![("", "one\ntwo & three four")]);
    }
}
