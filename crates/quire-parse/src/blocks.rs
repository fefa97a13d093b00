//! The output of every parser: blocks of text in reading order, each knowing its page and its
//! heading path, built through one [`BlockBuilder`] so all formats agree on what a section and
//! a page are.

/// One unit of text that chunking keeps together when it can: a paragraph, a list, a table, a
/// code block or a spreadsheet row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Page number, from 1 (slides and sheets count as pages).
    pub page: u32,
    /// Heading path such as `Install > Linux`; empty before the first heading.
    pub section: String,
    /// The block's text.
    pub text: String,
}

/// Accumulates blocks. Text is added line by line to the current block; a heading or a page
/// break ends it.
#[derive(Debug)]
pub(crate) struct BlockBuilder {
    blocks: Vec<Block>,
    current: Vec<String>,
    page: u32,
    headings: Vec<(usize, String)>,
    text_on_page: bool,
    /// The title of the last heading while no text has followed it; a heading with nothing
    /// under it (a slide that is only a title, an outline) is kept as text of its own.
    bare_heading: Option<String>,
}

impl BlockBuilder {
    pub(crate) fn new() -> Self {
        Self {
            blocks: Vec::new(),
            current: Vec::new(),
            page: 1,
            headings: Vec::new(),
            text_on_page: false,
            bare_heading: None,
        }
    }

    /// Adds a line to the current block (trailing whitespace dropped).
    pub(crate) fn push_line(&mut self, line: &str) {
        self.current.push(line.trim_end().to_owned());
    }

    /// Adds an empty line inside the current block (as code blocks have).
    pub(crate) fn push_blank_line(&mut self) {
        self.current.push(String::new());
    }

    /// Adds a whole block of text at once.
    pub(crate) fn push_block(&mut self, text: &str) {
        self.end_block();
        for line in text.lines() {
            self.push_line(line);
        }
        self.end_block();
    }

    /// Adds a paragraph as a block of its own.
    pub(crate) fn push_paragraph(&mut self, text: &str) {
        self.end_block();
        for line in text.lines() {
            self.push_line(line);
        }
        self.end_block();
    }

    /// Adds a list item as `- text`; consecutive items share one block.
    pub(crate) fn push_list_item(&mut self, text: &str) {
        if !self.last_line().starts_with("- ") {
            self.end_block();
        }
        self.push_line(&format!("- {text}"));
    }

    /// True when the current block has no lines yet.
    pub(crate) fn block_is_empty(&self) -> bool {
        self.current.is_empty()
    }

    /// The last line added to the current block.
    pub(crate) fn last_line(&self) -> &str {
        self.current.last().map(String::as_str).unwrap_or("")
    }

    /// Starts a section at `level` (1 = top); deeper sections below it are closed.
    pub(crate) fn heading(&mut self, level: usize, title: &str) {
        self.label(level, title);
        if let Some((l, title)) = self.headings.last()
            && *l == level
        {
            self.bare_heading = Some(title.clone());
        }
    }

    fn keep_bare_heading(&mut self) {
        if let Some(title) = self.bare_heading.take() {
            self.current.push(title);
            self.end_block();
        }
    }

    /// Sets the heading at `level` (deeper ones closed) as a label only: unlike
    /// [`BlockBuilder::heading`], it never becomes a block of text, even with nothing under it
    /// (a document's metadata title, a PDF page's title, which its text already holds). An
    /// empty title just closes `level` and below.
    pub(crate) fn label(&mut self, level: usize, title: &str) {
        self.end_block();
        self.keep_bare_heading();
        self.headings.retain(|(l, _)| *l < level);
        let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
        if !title.is_empty() {
            self.headings.push((level, title));
        }
    }

    /// Replaces the whole heading path (slides and sheets have exactly one level). With
    /// `keep_if_bare` the title is kept as text when nothing follows it (a title-only slide);
    /// without, it is only a label (an empty sheet's name is not content).
    pub(crate) fn set_section(&mut self, title: &str, keep_if_bare: bool) {
        self.end_block();
        self.keep_bare_heading();
        self.headings.clear();
        self.heading(1, title);
        if !keep_if_bare {
            self.bare_heading = None;
        }
    }

    /// Starts a new page, unless nothing was written since the last one (a manual break
    /// followed by Word's rendered-break marker is one break, not two).
    pub(crate) fn page_break(&mut self) {
        self.end_block();
        if self.text_on_page {
            self.page += 1;
            self.text_on_page = false;
        }
    }

    /// Starts a new page even if the current one is empty (slides, sheets, PDF pages).
    pub(crate) fn force_page(&mut self, page: u32) {
        self.end_block();
        self.keep_bare_heading();
        self.page = page.max(1);
        self.text_on_page = false;
    }

    fn section(&self) -> String {
        self.headings
            .iter()
            .map(|(_, t)| t.as_str())
            .collect::<Vec<_>>()
            .join(" > ")
    }

    /// Closes the current block.
    pub(crate) fn end_block(&mut self) {
        if self.current.is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.current).join("\n");
        let text = text.trim_matches('\n');
        if !text.trim().is_empty() {
            self.text_on_page = true;
            self.bare_heading = None;
            self.blocks.push(Block {
                page: self.page,
                section: self.section(),
                text: text.to_owned(),
            });
        }
    }

    /// Appends a block parsed elsewhere (an attachment), keeping its page and section.
    pub(crate) fn append(&mut self, block: Block) {
        self.end_block();
        self.keep_bare_heading();
        self.page = self.page.max(block.page);
        self.text_on_page = true;
        self.blocks.push(block);
    }

    /// The current page number.
    pub(crate) fn page(&self) -> u32 {
        self.page
    }

    /// The blocks and the number of pages.
    pub(crate) fn finish(mut self) -> (Vec<Block>, u32) {
        self.end_block();
        self.keep_bare_heading();
        (self.blocks, self.page)
    }
}
