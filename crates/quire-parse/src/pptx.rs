//! PPTX (PresentationML): one page per slide, in presentation order; the slide's title
//! placeholder is its section; other text frames become paragraphs and tables one block each.

use std::collections::HashMap;

use crate::archive::Archive;
use crate::blocks::BlockBuilder;
use crate::table::TableText;
use crate::xml::{XmlEvent, attr, attribute_value, for_each_event};
use crate::{Extracted, ParseError, ParseLimits};

const WHAT: &str = "PPTX presentation";

pub(crate) fn parse(bytes: &[u8], limits: &ParseLimits) -> Result<Extracted, ParseError> {
    let mut archive = Archive::open(bytes, WHAT, limits)?;
    let slides = slide_order(&mut archive)?;
    limits.check_pages("the presentation", slides.len(), "slides")?;
    let mut out = BlockBuilder::new();
    for (number, path) in slides.iter().enumerate() {
        out.force_page(number as u32 + 1);
        let Some(xml) = archive.read_text(path)? else {
            continue;
        };
        let slide = read_slide(&xml).map_err(malformed)?;
        out.set_section(&slide.title, true);
        for paragraph in slide.paragraphs {
            out.push_block(&paragraph);
        }
    }
    let (blocks, _) = out.finish();
    Ok(Extracted {
        blocks,
        page_count: slides.len().max(1) as u32,
    })
}

fn malformed(detail: String) -> ParseError {
    ParseError::Malformed {
        format: WHAT.into(),
        detail,
    }
}

/// Slide parts in the order `presentation.xml` lists them; falls back to `slideN.xml` order.
fn slide_order(archive: &mut Archive<'_>) -> Result<Vec<String>, ParseError> {
    let mut ids = Vec::new();
    let presentation = archive.require_text("ppt/presentation.xml")?;
    for_each_event(&presentation, |event| {
        if let XmlEvent::Start {
            name: "sldId",
            element,
        } = event
            && let Some(id) = attr_r_id(element)
        {
            ids.push(id);
        }
    })
    .map_err(malformed)?;
    let mut targets = HashMap::new();
    if let Some(rels) = archive.read_text("ppt/_rels/presentation.xml.rels")? {
        for_each_event(&rels, |event| {
            if let XmlEvent::Start {
                name: "Relationship",
                element,
            } = event
                && let (Some(id), Some(target)) = (attr(element, "Id"), attr(element, "Target"))
            {
                targets.insert(id, target);
            }
        })
        .map_err(malformed)?;
    }
    let ordered: Vec<String> = ids
        .iter()
        .filter_map(|id| targets.get(id))
        .map(|target| {
            format!(
                "ppt/{}",
                target.trim_start_matches("/ppt/").trim_start_matches('/')
            )
        })
        .collect();
    if !ordered.is_empty() {
        return Ok(ordered);
    }
    let mut numbered: Vec<(u32, String)> = archive
        .names()
        .into_iter()
        .filter_map(|name| {
            let n = name
                .strip_prefix("ppt/slides/slide")?
                .strip_suffix(".xml")?
                .parse()
                .ok()?;
            Some((n, name))
        })
        .collect();
    numbered.sort();
    Ok(numbered.into_iter().map(|(_, name)| name).collect())
}

/// The relationship id of a `p:sldId` (`r:id`), distinct from its numeric `id`.
fn attr_r_id(element: &quick_xml::events::BytesStart<'_>) -> Option<String> {
    element.attributes().flatten().find_map(|a| {
        let key: &str = a.key.as_ref();
        key.ends_with(":id").then(|| attribute_value(&a)).flatten()
    })
}

struct Slide {
    title: String,
    paragraphs: Vec<String>,
}

fn read_slide(xml: &str) -> Result<Slide, String> {
    let mut slide = Slide {
        title: String::new(),
        paragraphs: Vec::new(),
    };
    let mut in_shape = false;
    let mut shape_is_title = false;
    let mut shape_paragraphs: Vec<String> = Vec::new();
    let mut paragraph = String::new();
    let mut in_text = false;
    let mut table_depth = 0usize;
    let mut table = TableText::default();
    for_each_event(xml, |event| match event {
        XmlEvent::Start { name, element } => match name {
            "sp" => {
                in_shape = true;
                shape_is_title = false;
                shape_paragraphs.clear();
            }
            "ph" if in_shape => {
                shape_is_title =
                    matches!(attr(element, "type").as_deref(), Some("title" | "ctrTitle"));
            }
            "p" => paragraph.clear(),
            "t" => in_text = true,
            "br" => paragraph.push('\n'),
            "tbl" => table_depth += 1,
            "tr" => table.start_row(),
            "tc" => table.start_cell(),
            _ => {}
        },
        XmlEvent::End { name } => match name {
            "t" => in_text = false,
            "p" => {
                let text = paragraph.trim().to_owned();
                if text.is_empty() {
                    return;
                }
                if table_depth > 0 {
                    table.push_text(&text);
                } else {
                    shape_paragraphs.push(text);
                }
            }
            "tc" => table.end_cell(),
            "tr" => table.end_row(),
            "tbl" => {
                table_depth = table_depth.saturating_sub(1);
                if let Some(text) = table.finish() {
                    slide.paragraphs.push(text);
                }
            }
            "sp" => {
                in_shape = false;
                if shape_is_title && slide.title.is_empty() {
                    slide.title = shape_paragraphs.join(" ");
                } else if !shape_paragraphs.is_empty() {
                    slide.paragraphs.push(shape_paragraphs.join("\n"));
                }
                shape_paragraphs.clear();
            }
            _ => {}
        },
        XmlEvent::Text(text) => {
            if in_text {
                paragraph.push_str(text);
            }
        }
    })?;
    Ok(slide)
}
