//! EPUB books: the chapters in spine order (from the package document named by
//! `META-INF/container.xml`), each read as HTML and starting a new page, so a citation names
//! the chapter's position; headings inside chapters build the section path.

use std::collections::HashMap;

use crate::archive::Archive;
use crate::blocks::BlockBuilder;
use crate::xml::{XmlEvent, attr, for_each_event};
use crate::{Extracted, ParseError, ParseLimits, decode_text, html};

const WHAT: &str = "EPUB book";

pub(crate) fn parse(bytes: &[u8], limits: &ParseLimits) -> Result<Extracted, ParseError> {
    let mut archive = Archive::open(bytes, WHAT, limits)?;
    let container = archive.require_text("META-INF/container.xml")?;
    let mut package_path = None;
    for_each_event(&container, |event| {
        if let XmlEvent::Start {
            name: "rootfile",
            element,
        } = event
            && package_path.is_none()
        {
            package_path = attr(element, "full-path");
        }
    })
    .map_err(malformed)?;
    let package_path =
        package_path.ok_or_else(|| malformed("no package document is named".into()))?;
    let package = archive.require_text(&package_path)?;
    let base = package_path
        .rsplit_once('/')
        .map_or(String::new(), |(dir, _)| format!("{dir}/"));
    let mut manifest: HashMap<String, String> = HashMap::new();
    let mut spine: Vec<String> = Vec::new();
    for_each_event(&package, |event| match event {
        XmlEvent::Start {
            name: "item",
            element,
        } => {
            if let (Some(id), Some(href)) = (attr(element, "id"), attr(element, "href")) {
                manifest.insert(id, href);
            }
        }
        XmlEvent::Start {
            name: "itemref",
            element,
        } => {
            if let Some(id) = attr(element, "idref") {
                spine.push(id);
            }
        }
        _ => {}
    })
    .map_err(malformed)?;
    limits.check_pages("the EPUB book", spine.len(), "chapters")?;
    let mut out = BlockBuilder::new();
    let mut chapter = 0u32;
    for id in &spine {
        let Some(href) = manifest.get(id) else {
            continue;
        };
        let path = format!("{base}{}", href.split('#').next().unwrap_or(href));
        let Some(bytes) = archive.read(&path)? else {
            continue;
        };
        let text = html::parse(&decode_text(&bytes).text);
        if text.blocks.is_empty() {
            continue;
        }
        chapter += 1;
        out.force_page(chapter);
        out.set_section("", false);
        for block in text.blocks {
            out.append(crate::Block {
                page: chapter,
                ..block
            });
        }
    }
    let (blocks, _) = out.finish();
    Ok(Extracted {
        blocks,
        page_count: chapter.max(1),
    })
}

fn malformed(detail: String) -> ParseError {
    ParseError::Malformed {
        format: WHAT.into(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{shape, zip_package};

    #[test]
    fn chapters_in_spine_order_are_pages() {
        let bytes = zip_package(&[
            ("mimetype", "application/epub+zip"),
            (
                "META-INF/container.xml",
                r#"<container><rootfiles><rootfile full-path="OEBPS/book.opf"/></rootfiles></container>"#,
            ),
            (
                "OEBPS/book.opf",
                r#"<package><manifest><item id="a" href="one.xhtml"/><item id="b" href="two.xhtml"/></manifest>
                   <spine><itemref idref="b"/><itemref idref="a"/></spine></package>"#,
            ),
            (
                "OEBPS/one.xhtml",
                "<html><body><h1>Later</h1><p>Second in the spine.</p></body></html>",
            ),
            (
                "OEBPS/two.xhtml",
                "<html><body><h1>Opening</h1><p>First in the spine.</p></body></html>",
            ),
        ]);
        let doc = crate::parse(&bytes, "book.epub", "", &ParseLimits::default()).unwrap();
        let shape = shape(&doc.blocks);
        assert_eq!(
            shape,
            vec![
                (1, "Opening", "First in the spine."),
                (2, "Later", "Second in the spine.")
            ]
        );
        assert_eq!(doc.page_count, 2);
    }
}
