//! PPTX (PresentationML): one page per slide, in presentation order; the slide's title
//! placeholder is its section; other text frames become paragraphs and tables one block each.
//!
//! With OCR, the pictures of a slide with little text ([`SLIDE_LITTLE_TEXT`]) are read and
//! their text added to the slide's page after its own text, so a deck whose slides are images
//! of text is searchable slide by slide (see `pictures.rs`). Without OCR, a deck with no text
//! whose pictures OCR would read fails with a reason that says so.

use std::collections::HashMap;

use crate::archive::Archive;
use crate::blocks::BlockBuilder;
use crate::ocr::{Ocr, visible_chars};
use crate::pictures::{
    Pictures, any_worth_reading, paths_of, picture_reference, picture_relationships,
};
use crate::table::TableText;
use crate::xml::{XmlEvent, attr, attribute_value, for_each_event};
use crate::{Extracted, ParseError, ParseLimits};

const WHAT: &str = "PPTX presentation";

/// Below this many visible characters, a slide's pictures are read by OCR: room for a title
/// and a short caption over a picture of text ("Quarterly revenue by region, 2024"). A slide
/// of bullets has far more (the decks of `docs/parsing.md`'s measurements average some 330),
/// and its pictures are mostly illustrations.
pub(crate) const SLIDE_LITTLE_TEXT: usize = 60;

pub(crate) fn parse(
    bytes: &[u8],
    limits: &ParseLimits,
    ocr: Option<&Ocr>,
) -> Result<Extracted, ParseError> {
    let mut archive = Archive::open(bytes, WHAT, limits)?;
    let paths = slide_order(&mut archive)?;
    limits.check_pages("the presentation", paths.len(), "slides")?;
    let mut slides = Vec::with_capacity(paths.len());
    for path in &paths {
        slides.push(match archive.read_text(path)? {
            Some(xml) => read_slide(&xml).map_err(malformed)?,
            None => Slide::default(),
        });
    }
    // The pictures of each slide with little text, as paths in the package.
    let mut pictures_on: Vec<Vec<String>> = Vec::with_capacity(slides.len());
    for (path, slide) in paths.iter().zip(&slides) {
        let sparse = slide.visible_chars() < SLIDE_LITTLE_TEXT && !slide.pictures.is_empty();
        pictures_on.push(if sparse {
            paths_of(&slide.pictures, &picture_relationships(&mut archive, path)?)
        } else {
            Vec::new()
        });
    }
    let mut pictures = match ocr {
        Some(ocr) => Some(Pictures::load(
            &mut archive,
            pictures_on.iter().flatten(),
            ocr,
            WHAT,
        )?),
        None => {
            if slides.iter().all(|s| s.visible_chars() == 0)
                && any_worth_reading(&mut archive, pictures_on.iter().flatten())?
            {
                return Err(ParseError::PicturesOnly(WHAT.into()));
            }
            None
        }
    };
    let total = slides.len() as u32;
    let mut out = BlockBuilder::new();
    for (index, slide) in slides.into_iter().enumerate() {
        let number = index as u32 + 1;
        out.force_page(number);
        out.set_section(&slide.title, true);
        for paragraph in slide.paragraphs {
            out.push_block(&paragraph);
        }
        if let Some(pictures) = pictures.as_mut() {
            for path in &pictures_on[index] {
                if let Some(text) = pictures.text(path, number)? {
                    crate::raster::push_text(&mut out, &text);
                }
            }
        }
        crate::progress::page_done(number, total);
    }
    let (blocks, _) = out.finish();
    Ok(Extracted {
        blocks,
        page_count: total.max(1),
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

/// What one slide says, and the pictures it draws.
#[derive(Default)]
struct Slide {
    title: String,
    paragraphs: Vec<String>,
    /// Relationship ids of the pictures, in drawing order (the background first).
    pictures: Vec<String>,
}

impl Slide {
    fn visible_chars(&self) -> usize {
        visible_chars(&self.title)
            + self
                .paragraphs
                .iter()
                .map(|p| visible_chars(p))
                .sum::<usize>()
    }
}

fn read_slide(xml: &str) -> Result<Slide, String> {
    let mut slide = Slide::default();
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
            _ => {
                if let Some(id) = picture_reference(name, element) {
                    slide.pictures.push(id);
                }
            }
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
