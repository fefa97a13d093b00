//! OpenDocument text (ODT) and presentations (ODP), from `content.xml`. ODT: `text:h` headings
//! (with their outline level) build the section path, `text:soft-page-break` (the page breaks
//! LibreOffice recorded at its last layout) and explicit breaks start pages, tables become one
//! block with a line per row. ODP: one page per `draw:page`, its title frame as the section.

use crate::archive::Archive;
use crate::blocks::BlockBuilder;
use crate::table::TableText;
use crate::xml::{XmlEvent, attr, for_each_event};
use crate::{Extracted, ParseError, ParseLimits};

pub(crate) fn parse(
    bytes: &[u8],
    presentation: bool,
    limits: &ParseLimits,
) -> Result<Extracted, ParseError> {
    let what = if presentation {
        "ODP presentation"
    } else {
        "ODT document"
    };
    let mut archive = Archive::open(bytes, what, limits)?;
    let content = archive.require_text("content.xml")?;
    let mut walker = Walker::new(presentation);
    for_each_event(&content, |event| walker.event(event)).map_err(|detail| {
        ParseError::Malformed {
            format: what.into(),
            detail,
        }
    })?;
    let slides = walker.slides;
    let (blocks, pages) = walker.out.finish();
    Ok(Extracted {
        blocks,
        page_count: if presentation { slides.max(1) } else { pages },
    })
}

struct Walker {
    out: BlockBuilder,
    presentation: bool,
    slides: u32,
    /// Text of the paragraph or heading being read, and the heading level if it is one.
    text: Option<String>,
    heading: Option<usize>,
    /// Inside a title frame of a slide.
    title_frame: bool,
    title: String,
    table_depth: usize,
    table: TableText,
    list_depth: usize,
}

impl Walker {
    fn new(presentation: bool) -> Self {
        Self {
            out: BlockBuilder::new(),
            presentation,
            slides: 0,
            text: None,
            heading: None,
            title_frame: false,
            title: String::new(),
            table_depth: 0,
            table: TableText::default(),
            list_depth: 0,
        }
    }

    fn event(&mut self, event: XmlEvent<'_, '_>) {
        match event {
            XmlEvent::Start { name, element } => match name {
                "page" if self.presentation => {
                    self.slides += 1;
                    self.out.force_page(self.slides);
                    self.out.set_section("", true);
                    self.title.clear();
                }
                "frame" if self.presentation => {
                    self.title_frame = attr(element, "class").as_deref() == Some("title");
                }
                "h" => {
                    self.text = Some(String::new());
                    self.heading = Some(
                        attr(element, "outline-level")
                            .and_then(|l| l.parse().ok())
                            .unwrap_or(1),
                    );
                }
                "p" if self.text.is_none() => {
                    self.text = Some(String::new());
                    self.heading = None;
                }
                "s" => self.push(" "),
                "tab" => self.push("\t"),
                "line-break" => self.push("\n"),
                "soft-page-break" if !self.presentation && self.table_depth == 0 => {
                    self.out.page_break()
                }
                "list" => self.list_depth += 1,
                "table" => {
                    if self.table_depth == 0 {
                        self.out.end_block();
                    }
                    self.table_depth += 1;
                }
                "table-row" if self.table_depth == 1 => self.table.start_row(),
                "table-cell" if self.table_depth == 1 => self.table.start_cell(),
                _ => {}
            },
            XmlEvent::End { name } => match name {
                "h" | "p" => self.end_paragraph(name == "h"),
                "frame" => {
                    if self.title_frame && !self.title.is_empty() {
                        let title = std::mem::take(&mut self.title);
                        self.out.set_section(&title, true);
                    }
                    self.title_frame = false;
                }
                "list" => self.list_depth = self.list_depth.saturating_sub(1),
                "table-cell" if self.table_depth == 1 => self.table.end_cell(),
                "table-row" if self.table_depth == 1 => self.table.end_row(),
                "table" => {
                    self.table_depth = self.table_depth.saturating_sub(1);
                    if self.table_depth == 0
                        && let Some(table) = self.table.finish()
                    {
                        self.out.push_block(&table);
                    }
                }
                _ => {}
            },
            XmlEvent::Text(text) => self.push(text),
        }
    }

    fn push(&mut self, text: &str) {
        if let Some(current) = &mut self.text {
            current.push_str(text);
        }
    }

    fn end_paragraph(&mut self, is_heading: bool) {
        let Some(text) = self.text.take() else {
            return;
        };
        let text = text.trim().to_owned();
        if text.is_empty() {
            return;
        }
        if self.table_depth > 0 {
            self.table.push_text(&text);
        } else if self.title_frame {
            if !self.title.is_empty() {
                self.title.push(' ');
            }
            self.title.push_str(&text);
        } else if is_heading {
            self.out.heading(self.heading.unwrap_or(1), &text);
        } else if self.list_depth > 0 {
            self.out.push_list_item(&text);
        } else {
            self.out.push_paragraph(&text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{shape, zip_package};

    fn package(mimetype: &str, content: &str) -> Vec<u8> {
        zip_package(&[("mimetype", mimetype), ("content.xml", content)])
    }

    const NS: &str =
        r#"xmlns:office="o" xmlns:text="t" xmlns:table="tb" xmlns:draw="d" xmlns:presentation="p""#;

    #[test]
    fn odt_headings_pages_and_tables() {
        let content = format!(
            "<office:document-content {NS}><office:body><office:text>\
             <text:h text:outline-level=\"1\">Pumps</text:h><text:p>Prime<text:s/>it first.</text:p>\
             <text:p><text:soft-page-break/>Second page text.</text:p>\
             <text:h text:outline-level=\"2\">Parts</text:h>\
             <table:table><table:table-row><table:table-cell><text:p>Seal</text:p></table:table-cell>\
             <table:table-cell><text:p>2</text:p></table:table-cell></table:table-row></table:table>\
             </office:text></office:body></office:document-content>"
        );
        let bytes = package("application/vnd.oasis.opendocument.text", &content);
        let doc = crate::parse(&bytes, "a.odt", "", &ParseLimits::default()).unwrap();
        let shape = shape(&doc.blocks);
        assert_eq!(
            shape,
            vec![
                (1, "Pumps", "Prime it first."),
                (2, "Pumps", "Second page text."),
                (2, "Pumps > Parts", "Seal | 2"),
            ]
        );
    }

    #[test]
    fn odp_slides_with_titles() {
        let content = format!(
            "<office:document-content {NS}><office:body><office:presentation>\
             <draw:page draw:name=\"a\"><draw:frame presentation:class=\"title\"><draw:text-box><text:p>Roadmap</text:p></draw:text-box></draw:frame>\
             <draw:frame presentation:class=\"outline\"><draw:text-box><text:p>Ship it</text:p></draw:text-box></draw:frame></draw:page>\
             <draw:page draw:name=\"b\"><draw:frame presentation:class=\"title\"><draw:text-box><text:p>Risks</text:p></draw:text-box></draw:frame></draw:page>\
             </office:presentation></office:body></office:document-content>"
        );
        let bytes = package("application/vnd.oasis.opendocument.presentation", &content);
        let doc = crate::parse(&bytes, "a.odp", "", &ParseLimits::default()).unwrap();
        assert_eq!(doc.page_count, 2);
        let shape = shape(&doc.blocks);
        assert_eq!(
            shape,
            vec![(1, "Roadmap", "Ship it"), (2, "Risks", "Risks")]
        );
    }
}
