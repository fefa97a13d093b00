//! PowerPoint 97–2003 presentations (`.ppt`, [MS-PPT]): one page per slide, in presentation
//! order; the title placeholder is the slide's section, other text one block per text frame.
//!
//! The `PowerPoint Document` stream is a tree of records (an 8-byte header: version and
//! instance, type, length; version 0xF marks a container). The document's
//! `SlideListWithText` lists the slides in order, each a `SlidePersistAtom` followed by the
//! text of its placeholders (`TextHeaderAtom` giving the kind, then `TextCharsAtom` in UTF-16
//! or `TextBytesAtom` in 8-bit). Text boxes that are not placeholders live in the slide's own
//! container, found through the persist directory; their text is added after the
//! placeholders'. Notes and masters are not read.

use std::collections::HashMap;

use crate::blocks::BlockBuilder;
use crate::ole::{Ole, malformed, u16_at, u32_at, utf16le};
use crate::{Extracted, ParseError, ParseLimits};

const WHAT: &str = "PowerPoint 97-2003 presentation (.ppt)";
/// Containers nest a handful of levels in real files; deeper is a crafted file.
const MAX_DEPTH: usize = 32;

/// Record types ([MS-PPT] 2.13.24).
mod rt {
    pub(super) const DOCUMENT: u16 = 0x03E8;
    pub(super) const SLIDE: u16 = 0x03EE;
    pub(super) const SLIDE_PERSIST_ATOM: u16 = 0x03F3;
    pub(super) const TEXT_HEADER_ATOM: u16 = 0x0F9F;
    pub(super) const TEXT_CHARS_ATOM: u16 = 0x0FA0;
    pub(super) const TEXT_BYTES_ATOM: u16 = 0x0FA8;
    pub(super) const SLIDE_LIST_WITH_TEXT: u16 = 0x0FF0;
    pub(super) const PERSIST_DIRECTORY_ATOM: u16 = 0x1772;
}

/// `TextHeaderAtom` kinds that are titles (title, centred title).
const TITLE_KINDS: [u32; 2] = [0, 6];
/// `TextHeaderAtom` kind of notes text, which is not slide text.
const NOTES_KIND: u32 = 2;

pub(crate) fn parse(bytes: &[u8], limits: &ParseLimits) -> Result<Extracted, ParseError> {
    let mut ole = Ole::open(bytes, WHAT, limits)?;
    if ole.exists("/EncryptedSummary") {
        return Err(ParseError::Encrypted(WHAT.into()));
    }
    let stream = ole.require("/PowerPoint Document")?;
    let top = records(&stream, 0)?;
    let persist = persist_directory(&top);
    // An incrementally saved file appends a new document record; the last one is current.
    let Some(document) = top.iter().rev().find(|r| r.kind == rt::DOCUMENT) else {
        return Err(ParseError::Unreadable {
            what: WHAT.into(),
            reason: "it has no PowerPoint 97 document record (PowerPoint 95 or older wrote it)"
                .into(),
            remedy: "open it in PowerPoint or LibreOffice and save it as .pptx".into(),
        });
    };
    let mut slides = slide_list(document)?;
    limits.check_pages("the presentation", slides.len(), "slides")?;
    for slide in &mut slides {
        let Some(&offset) = persist.get(&slide.persist_id) else {
            continue;
        };
        let Some(record) = stream
            .get(offset as usize..)
            .and_then(|rest| records(rest, 0).ok())
            .and_then(|mut list| list.drain(..).next())
        else {
            continue;
        };
        if record.kind == rt::SLIDE {
            let mut frames = Vec::new();
            collect_text(&record, 0, &mut frames)?;
            for (kind, text) in frames {
                slide.add(kind, text);
            }
        }
    }
    let mut out = BlockBuilder::new();
    for (number, slide) in slides.iter().enumerate() {
        out.force_page(number as u32 + 1);
        out.set_section(&slide.title, true);
        for frame in &slide.frames {
            out.push_block(frame);
        }
    }
    let (blocks, _) = out.finish();
    Ok(Extracted {
        blocks,
        page_count: slides.len().max(1) as u32,
    })
}

/// One record: its type, instance, whether it is a container, and its body.
struct Record<'a> {
    kind: u16,
    instance: u16,
    container: bool,
    body: &'a [u8],
}

/// The records that follow one another in `data`. A record whose length runs past its parent
/// is damage; a few stray bytes at the end (padding some writers leave) are ignored.
fn records(data: &[u8], depth: usize) -> Result<Vec<Record<'_>>, ParseError> {
    if depth > MAX_DEPTH {
        return Err(malformed(WHAT, "records are nested too deeply"));
    }
    let mut list = Vec::new();
    let mut at = 0usize;
    while at + 8 <= data.len() {
        let (Some(head), Some(kind), Some(len)) =
            (u16_at(data, at), u16_at(data, at + 2), u32_at(data, at + 4))
        else {
            break;
        };
        let body = (at + 8)
            .checked_add(len as usize)
            .and_then(|end| data.get(at + 8..end))
            .ok_or_else(|| malformed(WHAT, "a record runs past the end of its container"))?;
        list.push(Record {
            kind,
            instance: head >> 4,
            container: head & 0xF == 0xF,
            body,
        });
        at += 8 + len as usize;
    }
    Ok(list)
}

/// Persist object id → stream offset, from every `PersistDirectoryAtom` (later ones, written
/// by later saves, win).
fn persist_directory(top: &[Record<'_>]) -> HashMap<u32, u32> {
    let mut map = HashMap::new();
    for record in top.iter().filter(|r| r.kind == rt::PERSIST_DIRECTORY_ATOM) {
        let body = record.body;
        let mut at = 0;
        while let Some(entry) = u32_at(body, at) {
            let (first, count) = (entry & 0xF_FFFF, entry >> 20);
            at += 4;
            for i in 0..count {
                let Some(offset) = u32_at(body, at) else {
                    break;
                };
                map.insert(first + i, offset);
                at += 4;
            }
        }
    }
    map
}

/// The text of one slide as it is collected.
#[derive(Default)]
struct Slide {
    persist_id: u32,
    title: String,
    frames: Vec<String>,
}

impl Slide {
    /// Adds a text frame of `kind`, once: placeholders can be stored both in the slide list
    /// and in the slide itself.
    fn add(&mut self, kind: u32, text: String) {
        let text = text.trim().to_owned();
        if text.is_empty()
            || kind == NOTES_KIND
            || self.title == text
            || self.frames.contains(&text)
        {
            return;
        }
        if TITLE_KINDS.contains(&kind) && self.title.is_empty() {
            self.title = text.split_whitespace().collect::<Vec<_>>().join(" ");
        } else {
            self.frames.push(text);
        }
    }
}

/// The slides of the document's `SlideListWithText` for slides (instance 0), in order, with
/// the placeholder text stored there.
fn slide_list(document: &Record<'_>) -> Result<Vec<Slide>, ParseError> {
    let mut slides: Vec<Slide> = Vec::new();
    for list in records(document.body, 1)?
        .iter()
        .filter(|r| r.kind == rt::SLIDE_LIST_WITH_TEXT && r.instance == 0)
    {
        let mut kind = 4;
        for record in records(list.body, 2)? {
            match record.kind {
                rt::SLIDE_PERSIST_ATOM => slides.push(Slide {
                    persist_id: u32_at(record.body, 0).unwrap_or(0),
                    ..Slide::default()
                }),
                rt::TEXT_HEADER_ATOM => kind = u32_at(record.body, 0).unwrap_or(4),
                rt::TEXT_CHARS_ATOM | rt::TEXT_BYTES_ATOM => {
                    if let Some(slide) = slides.last_mut() {
                        slide.add(kind, atom_text(&record));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(slides)
}

/// Every text atom under `record`, with the kind its `TextHeaderAtom` gave it.
fn collect_text(
    record: &Record<'_>,
    depth: usize,
    frames: &mut Vec<(u32, String)>,
) -> Result<(), ParseError> {
    let mut kind = 4;
    for child in records(record.body, depth + 1)? {
        match child.kind {
            rt::TEXT_HEADER_ATOM => kind = u32_at(child.body, 0).unwrap_or(4),
            rt::TEXT_CHARS_ATOM | rt::TEXT_BYTES_ATOM => frames.push((kind, atom_text(&child))),
            _ if child.container => collect_text(&child, depth + 1, frames)?,
            _ => {}
        }
    }
    Ok(())
}

/// The text of a `TextCharsAtom` (UTF-16) or `TextBytesAtom` (the low bytes of UTF-16, that
/// is Latin-1), with PowerPoint's paragraph (`\r`) and line (`\v`) breaks as newlines.
fn atom_text(record: &Record<'_>) -> String {
    let text = if record.kind == rt::TEXT_CHARS_ATOM {
        utf16le(record.body)
    } else {
        record.body.iter().map(|&b| char::from(b)).collect()
    };
    text.chars()
        .map(|c| if c == '\r' || c == '\u{0B}' { '\n' } else { c })
        .filter(|c| *c == '\n' || !c.is_control())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::compound;
    use crate::test_support::shape;

    fn record(kind: u16, instance: u16, container: bool, body: &[u8]) -> Vec<u8> {
        let head = (instance << 4) | if container { 0xF } else { 0 };
        let mut out = head.to_le_bytes().to_vec();
        out.extend(kind.to_le_bytes());
        out.extend((body.len() as u32).to_le_bytes());
        out.extend(body);
        out
    }

    fn chars(text: &str) -> Vec<u8> {
        record(
            rt::TEXT_CHARS_ATOM,
            0,
            false,
            &text
                .encode_utf16()
                .flat_map(u16::to_le_bytes)
                .collect::<Vec<_>>(),
        )
    }

    fn header(kind: u32) -> Vec<u8> {
        record(rt::TEXT_HEADER_ATOM, 0, false, &kind.to_le_bytes())
    }

    fn persist(id: u32) -> Vec<u8> {
        let mut body = id.to_le_bytes().to_vec();
        body.extend([0u8; 16]);
        record(rt::SLIDE_PERSIST_ATOM, 0, false, &body)
    }

    /// A deck of two slides: the first with a title and body placeholder and a text box
    /// in its own container, the second with only 8-bit body text.
    fn deck() -> Vec<u8> {
        let mut list = persist(1);
        list.extend(header(0));
        list.extend(chars("Pump report"));
        list.extend(header(1));
        list.extend(chars("Seal worn\rBearing fine"));
        list.extend(persist(2));
        list.extend(header(1));
        list.extend(record(rt::TEXT_BYTES_ATOM, 0, false, b"Caf\xe9 opens"));
        let document = record(
            rt::DOCUMENT,
            0,
            true,
            &record(rt::SLIDE_LIST_WITH_TEXT, 0, true, &list),
        );
        // Slide 1's own container: a drawing with a text box holding a TextCharsAtom.
        let mut textbox = header(4);
        textbox.extend(chars("Call Ann"));
        let drawing = record(0x040C, 0, true, &record(0xF00D, 0, true, &textbox));
        let slide = record(rt::SLIDE, 0, true, &drawing);
        let mut stream = document.clone();
        let slide_at = stream.len() as u32;
        stream.extend(slide);
        let mut directory = (1u32 | (1 << 20)).to_le_bytes().to_vec();
        directory.extend(slide_at.to_le_bytes());
        stream.extend(record(rt::PERSIST_DIRECTORY_ATOM, 0, false, &directory));
        compound(&[("/PowerPoint Document", &stream), ("/Current User", b"")])
    }

    #[test]
    fn slides_become_pages_with_titles_and_text_boxes() {
        let file = deck();
        assert_eq!(crate::detect_format(&file, "deck", ""), crate::Format::Ppt);
        let parsed = parse(&file, &ParseLimits::default()).unwrap();
        assert_eq!(
            shape(&parsed.blocks),
            vec![
                (1, "Pump report", "Seal worn\nBearing fine"),
                (1, "Pump report", "Call Ann"),
                (2, "", "Café opens"),
            ]
        );
        assert_eq!(parsed.page_count, 2);
    }

    #[test]
    fn corrupt_records_fail_with_a_reason() {
        // A record that claims more bytes than its container has.
        let mut bad = record(rt::DOCUMENT, 0, true, &[0u8; 8]);
        bad[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        let file = compound(&[("/PowerPoint Document", &bad)]);
        assert!(matches!(
            parse(&file, &ParseLimits::default()),
            Err(ParseError::Malformed { .. })
        ));
        // Containers nested deeper than any real file.
        let mut nested = chars("deep");
        for _ in 0..(MAX_DEPTH + 4) {
            nested = record(0x040C, 0, true, &nested);
        }
        let record = Record {
            kind: rt::SLIDE,
            instance: 0,
            container: true,
            body: &nested,
        };
        assert!(collect_text(&record, 0, &mut Vec::new()).is_err());
        // No document record: the reason names what would work.
        let file = compound(&[("/PowerPoint Document", &chars("x"))]);
        let err = parse(&file, &ParseLimits::default()).unwrap_err();
        assert!(err.to_string().contains("save it as .pptx"), "{err}");
    }
}
