//! DOCX (WordprocessingML). Headings come from paragraph styles (`Heading 1`…, `Title`, or any
//! style with an outline level) and build the section path; pages come from explicit page
//! breaks and from the page breaks Word recorded when it last laid the document out
//! (`w:lastRenderedPageBreak`), so citations match the pages the author saw. Tables become one
//! block with a line per row; list items get a `- ` prefix.
//!
//! With OCR, a document with little text ([`LITTLE_TEXT`]: a letter pasted in as a scan) has its
//! pictures read, each picture's text placed after the paragraph (or table) that holds it, so
//! it lands on that page; a picture drawn twice is read and placed once (see `pictures.rs`).
//! Without OCR, a document with no text whose pictures OCR would read fails with a reason that
//! says so.

use std::collections::{HashMap, HashSet};

use crate::archive::Archive;
use crate::blocks::BlockBuilder;
use crate::ocr::{LITTLE_TEXT, Ocr, visible_chars};
use crate::pictures::{
    Pictures, any_worth_reading, paths_of, picture_reference, picture_relationships,
};
use crate::table::TableText;
use crate::xml::{XmlEvent, attr, for_each_event};
use crate::{Extracted, ParseError, ParseLimits};

const WHAT: &str = "DOCX document";
const DOCUMENT: &str = "word/document.xml";

pub(crate) fn parse(
    bytes: &[u8],
    limits: &ParseLimits,
    ocr: Option<&Ocr>,
) -> Result<Extracted, ParseError> {
    let mut archive = Archive::open(bytes, WHAT, limits)?;
    let document = archive.require_text(DOCUMENT)?;
    let styles = match archive.read_text("word/styles.xml")? {
        Some(xml) => heading_styles(&xml)?,
        None => HashMap::new(),
    };
    let mut walker = Walker::new(styles.clone(), None);
    for_each_event(&document, |event| walker.event(event)).map_err(malformed)?;
    if walker.visible >= LITTLE_TEXT || walker.pictures.is_empty() {
        return Ok(walker.out.into());
    }
    let relationships = picture_relationships(&mut archive, DOCUMENT)?;
    let paths = paths_of(&walker.pictures, &relationships);
    let Some(ocr) = ocr else {
        if walker.visible == 0 && any_worth_reading(&mut archive, &paths)? {
            return Err(ParseError::PicturesOnly(WHAT.into()));
        }
        return Ok(walker.out.into());
    };
    let pictures = Pictures::load(&mut archive, &paths, ocr, WHAT)?;
    if pictures.count() == 0 {
        return Ok(walker.out.into());
    }
    // Walked again, now reading each picture where it stands, so its text gets the page the
    // walk is on there.
    let mut reader = Walker::new(
        styles,
        Some(PictureReader {
            relationships,
            pictures,
            placed: HashSet::new(),
            done: 0,
        }),
    );
    for_each_event(&document, |event| reader.event(event)).map_err(malformed)?;
    match reader.error {
        Some(error) => Err(error),
        None => Ok(reader.out.into()),
    }
}

fn malformed(detail: String) -> ParseError {
    ParseError::Malformed {
        format: WHAT.into(),
        detail,
    }
}

/// Style id → heading level, from `styles.xml`.
fn heading_styles(xml: &str) -> Result<HashMap<String, usize>, ParseError> {
    let mut levels = HashMap::new();
    let mut current: Option<String> = None;
    for_each_event(xml, |event| match event {
        XmlEvent::Start {
            name: "style",
            element,
        } => current = attr(element, "styleId"),
        XmlEvent::Start {
            name: "name",
            element,
        } => {
            if let (Some(id), Some(name)) = (&current, attr(element, "val"))
                && let Some(level) = level_from_style_name(&name)
            {
                levels.insert(id.clone(), level);
            }
        }
        XmlEvent::Start {
            name: "outlineLvl",
            element,
        } => {
            if let (Some(id), Some(level)) = (
                &current,
                attr(element, "val").and_then(|v| v.parse::<usize>().ok()),
            ) && level < 9
            {
                levels.entry(id.clone()).or_insert(level + 1);
            }
        }
        XmlEvent::End { name: "style" } => current = None,
        _ => {}
    })
    .map_err(malformed)?;
    Ok(levels)
}

fn level_from_style_name(name: &str) -> Option<usize> {
    let lower = name.to_ascii_lowercase().replace(' ', "");
    if lower == "title" {
        return Some(1);
    }
    lower
        .strip_prefix("heading")?
        .parse::<usize>()
        .ok()
        .filter(|l| (1..=9).contains(l))
}

/// Reads the pictures of `document.xml` as the walk comes to them.
struct PictureReader<'o> {
    /// Relationship id → the picture's path in the package.
    relationships: HashMap<String, String>,
    pictures: Pictures<'o>,
    /// Paths whose text has been placed: a picture drawn twice (a drawing and its VML
    /// fallback) is placed once.
    placed: HashSet<String>,
    /// Pictures read so far, for progress.
    done: u32,
}

/// Walks `document.xml`, one paragraph at a time.
struct Walker<'o> {
    out: BlockBuilder,
    styles: HashMap<String, usize>,
    /// Nesting of `w:p` (text boxes put paragraphs inside paragraphs).
    paragraph_depth: usize,
    paragraph: String,
    heading_level: Option<usize>,
    list_item: bool,
    in_text: bool,
    /// Nesting of tables, and the outermost table being collected.
    table_depth: usize,
    table: TableText,
    /// Inside parts that are not body text (deleted revisions, field codes).
    skip_depth: usize,
    /// Visible characters of the body text.
    visible: usize,
    /// Relationship ids of the pictures, in document order.
    pictures: Vec<String>,
    /// Reads pictures on the second walk of a document with little text.
    reader: Option<PictureReader<'o>>,
    /// Text of pictures read, placed when their paragraph or table ends.
    pending: Vec<String>,
    /// The first failure of OCR; the rest of the walk reads no more pictures.
    error: Option<ParseError>,
}

impl<'o> Walker<'o> {
    fn new(styles: HashMap<String, usize>, reader: Option<PictureReader<'o>>) -> Self {
        Self {
            out: BlockBuilder::new(),
            styles,
            paragraph_depth: 0,
            paragraph: String::new(),
            heading_level: None,
            list_item: false,
            in_text: false,
            table_depth: 0,
            table: TableText::default(),
            skip_depth: 0,
            visible: 0,
            pictures: Vec::new(),
            reader,
            pending: Vec::new(),
            error: None,
        }
    }

    fn event(&mut self, event: XmlEvent<'_, '_>) {
        match event {
            XmlEvent::Start { name, element } => match name {
                "del" | "instrText" | "delText" => self.skip_depth += 1,
                "p" => {
                    self.paragraph_depth += 1;
                    if self.paragraph_depth == 1 {
                        self.paragraph.clear();
                        self.heading_level = None;
                        self.list_item = false;
                    }
                }
                "pStyle" if self.paragraph_depth == 1 => {
                    if let Some(style) = attr(element, "val") {
                        self.heading_level = self
                            .styles
                            .get(&style)
                            .copied()
                            .or_else(|| level_from_style_name(&style));
                    }
                }
                "outlineLvl" if self.paragraph_depth == 1 => {
                    if let Some(level) = attr(element, "val").and_then(|v| v.parse::<usize>().ok())
                        && level < 9
                    {
                        self.heading_level = Some(level + 1);
                    }
                }
                "numPr" => self.list_item = true,
                "t" => self.in_text = true,
                "tab" if self.paragraph_depth > 0 => self.paragraph.push('\t'),
                "br" | "cr" if self.paragraph_depth > 0 => {
                    if attr(element, "type").as_deref() == Some("page") {
                        self.page_break();
                    } else {
                        self.paragraph.push('\n');
                    }
                }
                "lastRenderedPageBreak" => self.page_break(),
                "pageBreakBefore" if attr(element, "val").as_deref() != Some("0") => {
                    self.page_break()
                }
                "tbl" => {
                    if self.table_depth == 0 {
                        self.out.end_block();
                    }
                    self.table_depth += 1;
                }
                "tr" if self.table_depth == 1 => self.table.start_row(),
                "tc" if self.table_depth == 1 => self.table.start_cell(),
                _ => {
                    if let Some(id) = picture_reference(name, element) {
                        self.picture(id);
                    }
                }
            },
            XmlEvent::End { name } => match name {
                "del" | "instrText" | "delText" => {
                    self.skip_depth = self.skip_depth.saturating_sub(1)
                }
                "t" => self.in_text = false,
                "p" => {
                    self.paragraph_depth = self.paragraph_depth.saturating_sub(1);
                    if self.paragraph_depth == 0 {
                        self.end_paragraph();
                        if self.table_depth == 0 {
                            self.place_pictures();
                        }
                    } else {
                        self.paragraph.push(' ');
                    }
                }
                "tc" if self.table_depth == 1 => self.table.end_cell(),
                "tr" if self.table_depth == 1 => self.table.end_row(),
                "tbl" => {
                    self.table_depth = self.table_depth.saturating_sub(1);
                    if self.table_depth == 0 {
                        if let Some(table) = self.table.finish() {
                            self.out.push_block(&table);
                        }
                        self.place_pictures();
                    }
                }
                _ => {}
            },
            XmlEvent::Text(text) => {
                if self.in_text && self.skip_depth == 0 && self.paragraph_depth > 0 {
                    self.visible += visible_chars(text);
                    self.paragraph.push_str(text);
                }
            }
        }
    }

    fn page_break(&mut self) {
        if self.table_depth > 0 {
            return;
        }
        // Text before the break belongs to the old page.
        let before = std::mem::take(&mut self.paragraph);
        self.emit(&before, false);
        self.place_pictures();
        self.out.page_break();
    }

    /// A picture drawn here: noted, and on the reading walk read (once per picture).
    fn picture(&mut self, id: String) {
        let page = self.out.page();
        let Some(reader) = self.reader.as_mut().filter(|_| self.error.is_none()) else {
            self.pictures.push(id);
            return;
        };
        let Some(path) = reader.relationships.get(&id) else {
            return;
        };
        if !reader.placed.insert(path.clone()) {
            return;
        }
        match reader.pictures.text(path, page) {
            Ok(Some(text)) => {
                reader.done += 1;
                crate::progress::page_done(reader.done, reader.pictures.count() as u32);
                self.pending.push(text);
            }
            Ok(None) => {}
            Err(error) => self.error = Some(error),
        }
    }

    /// Adds the text of the pictures read since the last call, after what is there.
    fn place_pictures(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.out.end_block();
        for text in std::mem::take(&mut self.pending) {
            crate::raster::push_text(&mut self.out, &text);
        }
    }

    fn end_paragraph(&mut self) {
        let text = std::mem::take(&mut self.paragraph);
        if self.table_depth > 0 {
            self.table.push_text(&text);
            return;
        }
        if let Some(level) = self.heading_level {
            let title = text.trim();
            if !title.is_empty() {
                self.out.heading(level, title);
            }
            return;
        }
        self.emit(&text, self.list_item);
        if !self.list_item {
            // Any other paragraph, even an empty one, ends a list.
            self.out.end_block();
        }
    }

    /// Adds paragraph text; consecutive list items share a block.
    fn emit(&mut self, text: &str, list_item: bool) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        if list_item {
            self.out.push_list_item(text);
        } else {
            self.out.push_paragraph(text);
        }
    }
}
