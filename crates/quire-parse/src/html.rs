//! HTML: the body text in reading order. `h1`–`h6` build the section path; paragraphs, list
//! items, preformatted text and table rows become blocks; scripts, styles and other
//! non-content elements are dropped; whitespace is collapsed as a browser would.
//!
//! A web page ([`parse_page`]) is read for its main content, as a screen reader's "skip to
//! main content" finds it: the page's one `<main>` (or `role="main"`) element when it has text,
//! otherwise the body without its banner, content-info and complementary landmarks (a
//! `header`, `footer` or `aside` that is not inside an article, section or other landmark).

use ego_tree::iter::Edge;
use ego_tree::{NodeId, NodeRef};
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

/// Elements inside which a `header`, `footer` or `aside` belongs to that content and is not
/// one of the page's landmarks (the HTML-AAM mapping of banner and contentinfo).
const SECTIONING: &[&str] = &["article", "aside", "main", "nav", "section"];

/// Landmarks that hold a page's boilerplate when they are not inside sectioning content.
const PAGE_LANDMARKS: &[&str] = &["header", "footer", "aside"];

/// All of an HTML fragment's text: e-book chapters and mail bodies, whose every part is content.
pub(crate) fn parse(text: &str) -> Extracted {
    let document = Html::parse_document(text);
    read(document.tree.root(), false)
}

/// A web page's main content (see the module's documentation); a page without any falls back
/// to all of its text, so nothing readable is ever lost to the selection.
pub(crate) fn parse_page(text: &str) -> Extracted {
    let document = Html::parse_document(text);
    if let Some(main) = main_element(&document) {
        let extracted = read(main, false);
        if !extracted.blocks.is_empty() {
            return extracted;
        }
    }
    let extracted = read(document.tree.root(), true);
    if !extracted.blocks.is_empty() {
        return extracted;
    }
    read(document.tree.root(), false)
}

/// The page's one main element: `<main>`, or else an element with `role="main"`. A page with
/// more than one of either has no single main content.
fn main_element(document: &Html) -> Option<NodeRef<'_, Node>> {
    for css in ["main", r#"[role="main" i]"#] {
        let selector = scraper::Selector::parse(css).expect("a valid built-in selector");
        let mut found = document.select(&selector);
        if let Some(first) = found.next() {
            return found.next().is_none().then(|| *first);
        }
    }
    None
}

fn read(root: NodeRef<'_, Node>, drop_landmarks: bool) -> Extracted {
    let mut walker = Walker {
        out: BlockBuilder::new(),
        line: String::new(),
        drop_landmarks,
    };
    walker.walk(root);
    walker.flush_line();
    walker.out.into()
}

struct Walker {
    out: BlockBuilder,
    /// The line being assembled from inline text.
    line: String,
    /// Whether the page's own header, footer and asides are passed over.
    drop_landmarks: bool,
}

impl Walker {
    /// Walks the tree in document order. ego-tree's traversal is a loop, not recursion, so
    /// markup nested a hundred thousand deep cannot overflow the stack (it did, when this was
    /// a recursive function: found by `quire bench fuzz`).
    fn walk(&mut self, root: NodeRef<'_, Node>) {
        // The element whose subtree is being passed over (skipped content, or a heading or
        // table already read whole), until its closing edge.
        let mut passing: Option<NodeId> = None;
        // How many `pre` elements the walk is inside.
        let mut preformatted = 0_usize;
        for edge in root.traverse() {
            match edge {
                Edge::Open(node) => {
                    if passing.is_none() && self.open(node, &mut preformatted) {
                        passing = Some(node.id());
                    }
                }
                Edge::Close(node) => {
                    if let Some(id) = passing {
                        if id == node.id() {
                            passing = None;
                        }
                        continue;
                    }
                    match element_name(node) {
                        Some("pre") => {
                            self.end_block();
                            preformatted = preformatted.saturating_sub(1);
                        }
                        Some(name) if BLOCK_LEVEL.contains(&name) => self.end_block(),
                        _ => {}
                    }
                }
            }
        }
    }

    /// Handles entering `node`; `true` when its subtree is to be passed over.
    fn open(&mut self, node: NodeRef<'_, Node>, preformatted: &mut usize) -> bool {
        let element = match node.value() {
            Node::Text(text) => {
                self.text(text, *preformatted > 0);
                return false;
            }
            Node::Element(element) => element,
            _ => return false,
        };
        let name = element.name();
        if SKIPPED.contains(&name) {
            return true;
        }
        if self.drop_landmarks && PAGE_LANDMARKS.contains(&name) && is_page_landmark(node) {
            return true;
        }
        if let Some(level) = heading_level(name) {
            self.end_block();
            self.out.heading(level, &inline_text(node, &[]));
            return true;
        }
        match name {
            "table" => {
                self.end_block();
                self.table(node);
                true
            }
            "br" => {
                self.flush_line();
                true
            }
            "pre" => {
                self.end_block();
                *preformatted += 1;
                false
            }
            _ => {
                if BLOCK_LEVEL.contains(&name) {
                    self.end_block();
                }
                if name == "li" {
                    self.line.push_str("- ");
                }
                false
            }
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

    /// A table is one block with a line per row, cells separated by ` | `. The rows of a
    /// nested table follow as rows of their own, so a cell's text leaves them out: read again
    /// for every enclosing cell, tables nested thousands deep took quadratic time (found by
    /// `quire bench fuzz`).
    fn table(&mut self, table: NodeRef<'_, Node>) {
        let mut rows = Vec::new();
        for row in visible(table, &[]).filter(|n| element_name(*n) == Some("tr")) {
            let cells: Vec<String> = row
                .children()
                .filter(|c| matches!(element_name(*c), Some("td" | "th")))
                .map(|cell| inline_text(cell, &["table"]))
                .collect();
            if let Some(line) = row_line(&cells) {
                rows.push(line);
            }
        }
        if let Some(caption) = table
            .children()
            .find(|c| element_name(*c) == Some("caption"))
            .map(|caption| inline_text(caption, &[]))
            .filter(|c| !c.is_empty())
        {
            rows.insert(0, caption);
        }
        if !rows.is_empty() {
            self.out.push_block(&rows.join("\n"));
        }
    }
}

/// Whether `node` (a header, footer or aside) is the page's own rather than a section's.
fn is_page_landmark(node: NodeRef<'_, Node>) -> bool {
    !node
        .ancestors()
        .any(|a| element_name(a).is_some_and(|name| SECTIONING.contains(&name)))
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

/// The nodes under `node` (itself included) in document order, leaving out the subtrees of
/// skipped elements and of the elements named in `also_left_out`. A left-out subtree is not
/// entered at all, so each node is visited at most once and no stack grows with the depth.
fn visible<'a>(
    node: NodeRef<'a, Node>,
    also_left_out: &'static [&'static str],
) -> impl Iterator<Item = NodeRef<'a, Node>> {
    let mut next = Some(node);
    std::iter::from_fn(move || {
        loop {
            let current = next?;
            let left_out = current.id() != node.id()
                && element_name(current)
                    .is_some_and(|name| SKIPPED.contains(&name) || also_left_out.contains(&name));
            next = if left_out {
                None
            } else {
                current.first_child()
            }
            .or_else(|| following(current, node));
            if !left_out {
                return Some(current);
            }
        }
    })
}

/// The node after `current`'s subtree in document order, within `root`'s subtree.
fn following<'a>(current: NodeRef<'a, Node>, root: NodeRef<'a, Node>) -> Option<NodeRef<'a, Node>> {
    let mut at = current;
    loop {
        if at.id() == root.id() {
            return None;
        }
        if let Some(sibling) = at.next_sibling() {
            return Some(sibling);
        }
        at = at.parent()?;
    }
}

/// The visible text under `node` on one line, leaving out elements named in `also_left_out`.
fn inline_text(node: NodeRef<'_, Node>, also_left_out: &'static [&'static str]) -> String {
    let parts: Vec<&str> = visible(node, also_left_out)
        .filter_map(|n| match n.value() {
            Node::Text(text) => Some(&**text),
            _ => None,
        })
        .collect();
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

    const PAGE: &str = "<html><body><header><a href=/>Home</a> Site banner</header>\
        <aside>Popular posts</aside>\
        <article><header><h1>Pumps</h1></header><p>Prime the pump.</p>\
        <aside>Note: valves first.</aside><footer>By Ann</footer></article>\
        <footer>Copyright 2026</footer></body></html>";

    #[test]
    fn a_page_without_main_loses_its_own_header_footer_and_asides_but_not_its_articles() {
        assert_eq!(
            shape(&parse_page(PAGE)),
            vec![
                ("Pumps", "Prime the pump."),
                ("Pumps", "Note: valves first."),
                ("Pumps", "By Ann"),
            ]
        );
        // Mail bodies and e-book chapters keep everything.
        assert_eq!(shape(&parse(PAGE)).len(), 6);
    }

    #[test]
    fn a_page_with_one_main_element_is_read_for_it_alone() {
        let page = "<body><div>Menu</div><main><h1>Valves</h1><p>Close slowly.</p></main>\
                    <div>Related links</div></body>";
        assert_eq!(shape(&parse_page(page)), vec![("Valves", "Close slowly.")]);
        let role = "<body><div>Menu</div><div role=MAIN><p>Only this.</p></div></body>";
        assert_eq!(shape(&parse_page(role)), vec![("", "Only this.")]);
    }

    #[test]
    fn a_page_whose_selection_holds_no_text_falls_back_to_all_of_it() {
        // An empty main (filled in by script in a browser), and two mains: neither is chosen.
        let empty = "<body><main></main><header><p>Only text here.</p></header></body>";
        assert_eq!(shape(&parse_page(empty)), vec![("", "Only text here.")]);
        let two = "<body><main><p>a</p></main><main><p>b</p></main></body>";
        assert_eq!(shape(&parse_page(two)), vec![("", "a"), ("", "b")]);
    }

    #[test]
    fn line_breaks_and_entities() {
        let e = parse("<p>one<br>two &amp; three&nbsp;four</p>");
        assert_eq!(shape(&e), vec![("", "one\ntwo & three four")]);
    }

    #[test]
    fn a_nested_table_is_its_own_rows_and_not_part_of_the_cell_around_it() {
        let page = "<table><tr><td>outer <table><tr><td>inner</td><td>1</td></tr></table></td>\
                    <td>2</td></tr><tr><td><template><tr><td>hidden</td></tr></template></td></tr>\
                    </table>";
        assert_eq!(shape(&parse(page)), vec![("", "outer | 2\ninner | 1")]);
    }

    /// Found by `quire bench fuzz`: markup nested 57,000 deep overflowed the parse worker's
    /// stack (the walk was recursive), and tables nested 13,000 deep ran past the time budget
    /// (each cell's text was read again for every enclosing cell).
    #[test]
    fn deep_nesting_neither_overflows_the_stack_nor_takes_quadratic_time() {
        let deep = format!("{}deep <b>text</b>", "<div><w:tc>".repeat(20_000));
        // A thread with a small stack: a recursive walk over this depth would overflow it.
        let parsed = std::thread::Builder::new()
            .stack_size(1024 * 1024)
            .spawn(move || parse(&deep))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(shape(&parsed), vec![("", "deep text")]);

        let levels = 20_000;
        let tables = format!(
            "{}cell{}",
            "<table><tr><td>".repeat(levels),
            "</td></tr></table>".repeat(levels)
        );
        let started = std::time::Instant::now();
        let parsed = parse(&tables);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(shape(&parsed), vec![("", "cell")]);
    }
}
