//! Pictures inside Office Open XML packages (DOCX, PPTX), for OCR when the text around them is
//! little: a deck whose slides are screenshots of text, a letter pasted into Word as a scan.
//!
//! A part finds its pictures through its relationships (`dir/_rels/name.xml.rels`, those of
//! type `…/image`, resolved against the part's folder), and draws them where its XML names
//! their relationship ids (`a:blip r:embed`, VML `v:imagedata r:id`), which gives the reading
//! order. Pictures linked from outside the file are not in it and are left out.
//!
//! Every picture to read is taken out of the package (under the package's unpacking budget) and
//! sized from its header before the first one is recognised, so their number is checked
//! against `ocr.max_pages` up front. Pictures OCR cannot use are skipped, not failed: formats
//! the decoders do not read (EMF, WMF, GIF, SVG), images under [`MIN_PICTURE_SIDE`] on a side,
//! and damaged images.

use std::collections::{HashMap, HashSet};

use crate::ParseError;
use crate::archive::Archive;
use crate::ocr::{MIN_PICTURE_SIDE, Ocr};
use crate::raster::{self, ImageKind};
use crate::xml::{XmlEvent, attr, for_each_event};

/// The relationship id a drawing element names its picture by, if `name` is one: `a:blip`
/// (DrawingML, `r:embed`; `r:link` is an outside file) or `v:imagedata` (VML, `r:id`).
pub(crate) fn picture_reference(
    name: &str,
    element: &quick_xml::events::BytesStart<'_>,
) -> Option<String> {
    match name {
        "blip" => attr(element, "embed"),
        "imagedata" => attr(element, "id"),
        _ => None,
    }
}

/// The pictures `part` links to inside the package: relationship id → the picture's path.
pub(crate) fn picture_relationships(
    archive: &mut Archive<'_>,
    part: &str,
) -> Result<HashMap<String, String>, ParseError> {
    let (folder, file) = part.rsplit_once('/').unwrap_or(("", part));
    let rels_path = if folder.is_empty() {
        format!("_rels/{file}.rels")
    } else {
        format!("{folder}/_rels/{file}.rels")
    };
    let mut pictures = HashMap::new();
    let Some(rels) = archive.read_text(&rels_path)? else {
        return Ok(pictures);
    };
    let result = for_each_event(&rels, |event| {
        if let XmlEvent::Start {
            name: "Relationship",
            element,
        } = event
            && attr(element, "Type").is_some_and(|t| t.ends_with("/image"))
            && attr(element, "TargetMode").as_deref() != Some("External")
            && let (Some(id), Some(target)) = (attr(element, "Id"), attr(element, "Target"))
        {
            pictures.insert(id, resolve(folder, &target));
        }
    });
    // Damaged relationships lose the pictures, not the document's text.
    if result.is_err() {
        pictures.clear();
    }
    Ok(pictures)
}

/// `target` (a relationship's URI, relative to `folder` unless it starts with `/`) as a path
/// in the package.
fn resolve(folder: &str, target: &str) -> String {
    let mut path: Vec<&str> = match target.strip_prefix('/') {
        Some(_) => Vec::new(),
        None => folder.split('/').filter(|s| !s.is_empty()).collect(),
    };
    for segment in target.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                path.pop();
            }
            segment => path.push(segment),
        }
    }
    path.join("/")
}

/// The paths `ids` name through `relationships`, in order, each once.
pub(crate) fn paths_of(ids: &[String], relationships: &HashMap<String, String>) -> Vec<String> {
    let mut seen = HashSet::new();
    ids.iter()
        .filter_map(|id| relationships.get(id))
        .filter(|path| seen.insert(path.as_str()))
        .cloned()
        .collect()
}

/// A picture OCR can read, from its header: a kind the decoders read, big enough to hold text.
/// Damaged headers are not worth reading either.
fn worth_reading(bytes: &[u8]) -> Option<ImageKind> {
    let kind = ImageKind::sniff(bytes)?;
    let (width, height) = raster::dimensions(bytes, kind).ok()?;
    (width >= MIN_PICTURE_SIDE && height >= MIN_PICTURE_SIDE).then_some(kind)
}

/// Whether any of the pictures at `paths` is one OCR would read (for the reason of a document
/// that fails without OCR); stops at the first.
pub(crate) fn any_worth_reading<'p>(
    archive: &mut Archive<'_>,
    paths: impl IntoIterator<Item = &'p String>,
) -> Result<bool, ParseError> {
    for path in paths {
        if archive
            .read(path)?
            .is_some_and(|bytes| worth_reading(&bytes).is_some())
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The pictures of one document that OCR will read, taken out of the package, and the text of
/// those read so far.
pub(crate) struct Pictures<'o> {
    ocr: &'o Ocr,
    /// Path → kind and bytes of the pictures not read yet.
    unread: HashMap<String, (ImageKind, Vec<u8>)>,
    /// Path → text of the pictures read: a picture drawn on several slides is read once.
    read: HashMap<String, String>,
    /// How many pictures there are to read.
    count: usize,
}

impl<'o> Pictures<'o> {
    /// Takes the pictures at `paths` out of `archive` (repeats once) and keeps those worth
    /// reading; fails, before any is recognised, when there are more than `ocr.max_pages` of
    /// them (`what` names the document in the reason).
    pub(crate) fn load<'p>(
        archive: &mut Archive<'_>,
        paths: impl IntoIterator<Item = &'p String>,
        ocr: &'o Ocr,
        what: &str,
    ) -> Result<Self, ParseError> {
        let most = ocr.settings().max_pages as usize;
        let mut unread = HashMap::new();
        let mut counted = HashSet::new();
        for path in paths {
            if counted.contains(path) {
                continue;
            }
            let Some(bytes) = archive.read(path)? else {
                continue;
            };
            let Some(kind) = worth_reading(&bytes) else {
                continue;
            };
            counted.insert(path.clone());
            // Past the limit the document fails below; the bytes are not kept meanwhile, only
            // counted, so the reason can say how many there are.
            if counted.len() <= most {
                unread.insert(path.clone(), (kind, bytes));
            }
        }
        ocr.check_pictures(&format!("the {what}"), counted.len())?;
        Ok(Self {
            ocr,
            count: unread.len(),
            unread,
            read: HashMap::new(),
        })
    }

    /// How many pictures there are to read.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The text of the picture at `path`, recognised as part of page `page` (for the reasons
    /// of OCR failures); `None` for a picture not worth reading or that cannot be decoded.
    pub(crate) fn text(&mut self, path: &str, page: u32) -> Result<Option<String>, ParseError> {
        if let Some(text) = self.read.get(path) {
            return Ok(Some(text.clone()));
        }
        let Some((kind, bytes)) = self.unread.remove(path) else {
            return Ok(None);
        };
        let image = match raster::decode(&bytes, kind) {
            Ok(image) => image,
            // An image too big to decode fails the document, as a scan of that size does.
            Err(ParseError::LimitExceeded(reason)) => {
                return Err(ParseError::LimitExceeded(format!("{reason} ({path})")));
            }
            // A damaged picture is left out, as e-mail leaves out attachments it cannot read.
            Err(_) => return Ok(None),
        };
        drop(bytes);
        let text = self.ocr.recognize(&image, None, page)?;
        self.read.insert(path.to_owned(), text.clone());
        Ok(Some(text))
    }
}

#[cfg(test)]
mod tests;
