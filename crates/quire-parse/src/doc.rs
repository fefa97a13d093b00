//! Word 97–2003 documents (`.doc`, [MS-DOC]): the main text, paragraph by paragraph.
//!
//! The File Information Block at the start of the `WordDocument` stream says how long the main
//! text is (`ccpText`), which table stream holds the rest (`0Table` or `1Table`) and where in
//! it the piece table is (`fcClx`/`lcbClx`). Each piece maps a run of character positions to
//! bytes of `WordDocument`, either 8-bit (Windows-1252, "compressed") or UTF-16. Paragraphs end
//! at `\r`; field codes (between the field-begin and field-separator marks) are dropped and
//! their results kept; table cells are joined with ` | `; a manual page break starts a page.
//! Paragraphs in Word's built-in heading styles become sections (their style index comes from
//! the paragraph property pages, the style's identity from the style sheet). Headers, footers,
//! footnotes and text boxes are not read.

use std::collections::HashMap;

use crate::blocks::BlockBuilder;
use crate::ole::{Ole, cp1252, malformed, u16_at, u32_at, utf16le};
use crate::{Extracted, ParseError, ParseLimits};

const WHAT: &str = "Word 97-2003 document (.doc)";
const SAVE_AS: &str = "open it in Word or LibreOffice and save it as .docx";

/// `wIdent` of a Word 97+ FIB.
const WORD_MAGIC: u16 = 0xA5EC;
/// `nFib` below this is Word 6.0/95 or older (Word 97 writes 0x00C1; some writers 0x00C0).
const FIRST_WORD97_NFIB: u16 = 0x00C0;
/// Most pieces in a piece table; each is at least one character, and real files have a few
/// hundred at most.
const MAX_PIECES: usize = 1_000_000;

pub(crate) fn parse(bytes: &[u8], limits: &ParseLimits) -> Result<Extracted, ParseError> {
    let mut ole = Ole::open(bytes, WHAT, limits)?;
    let word = ole.require("/WordDocument")?;
    let fib = Fib::read(&word)?;
    let table = ole.read(fib.table_stream())?.ok_or_else(|| {
        malformed(
            WHAT,
            &format!("the table stream {} is missing", fib.table_stream()),
        )
    })?;
    let (text, marks) = main_text(&word, &table, &fib)?;
    let levels = heading_styles(&table, fib.styles);
    let runs = paragraph_styles(&word, &table, fib.paragraphs);
    let heading_level = |fc: u32| {
        let i = runs.partition_point(|(start, _, _)| *start <= fc);
        let (_, end, istd) = runs.get(i.checked_sub(1)?)?;
        (fc < *end).then(|| levels.get(istd).copied()).flatten()
    };
    let mut out = BlockBuilder::new();
    push_paragraphs(&mut out, &text, marks.into_iter().map(heading_level));
    Ok(out.into())
}

/// The parts of the File Information Block this reader needs.
struct Fib {
    one_table: bool,
    ccp_text: u32,
    fc_clx: u32,
    lcb_clx: u32,
    /// The style sheet (`fcStshf`/`lcbStshf`) in the table stream.
    styles: (u32, u32),
    /// The paragraph property index (`fcPlcfBtePapx`/`lcbPlcfBtePapx`) in the table stream.
    paragraphs: (u32, u32),
}

impl Fib {
    fn read(word: &[u8]) -> Result<Self, ParseError> {
        let short = || malformed(WHAT, "the file information block is truncated");
        let ident = u16_at(word, 0).ok_or_else(short)?;
        let n_fib = u16_at(word, 2).ok_or_else(short)?;
        if ident != WORD_MAGIC {
            return Err(malformed(
                WHAT,
                "the WordDocument stream has no Word signature",
            ));
        }
        if n_fib < FIRST_WORD97_NFIB {
            return Err(ParseError::Unreadable {
                what: WHAT.into(),
                reason: "it was saved by Word 6.0/95 or older".into(),
                remedy: SAVE_AS.into(),
            });
        }
        let flags = u16_at(word, 0x0A).ok_or_else(short)?;
        // fEncrypted (0x0100) and fObfuscated (0x8000): the text is unreadable without the key.
        if flags & 0x0100 != 0 || flags & 0x8000 != 0 {
            return Err(ParseError::Encrypted(WHAT.into()));
        }
        // FibBase (32 bytes), then csw 16-bit words, then cslw 32-bit words, then the
        // fc/lcb pairs; each part's size is read from the file rather than assumed.
        let csw = usize::from(u16_at(word, 32).ok_or_else(short)?);
        let rg_lw = 34 + csw * 2;
        let cslw = usize::from(u16_at(word, rg_lw).ok_or_else(short)?);
        let rg_lw = rg_lw + 2;
        let ccp_text = u32_at(word, rg_lw + 3 * 4).ok_or_else(short)?;
        let rg_fc_lcb = rg_lw + cslw * 4 + 2;
        let cb_rg_fc_lcb = usize::from(u16_at(word, rg_fc_lcb - 2).ok_or_else(short)?);
        // fcClx is the 34th pair of FibRgFcLcb97.
        if cb_rg_fc_lcb < 34 {
            return Err(short());
        }
        let fc_clx = u32_at(word, rg_fc_lcb + 33 * 8).ok_or_else(short)?;
        let lcb_clx = u32_at(word, rg_fc_lcb + 33 * 8 + 4).ok_or_else(short)?;
        let pair = |index: usize| -> Result<(u32, u32), ParseError> {
            let at = rg_fc_lcb + index * 8;
            Ok((
                u32_at(word, at).ok_or_else(short)?,
                u32_at(word, at + 4).ok_or_else(short)?,
            ))
        };
        Ok(Self {
            one_table: flags & 0x0200 != 0,
            ccp_text,
            fc_clx,
            lcb_clx,
            styles: pair(1)?,
            paragraphs: pair(13)?,
        })
    }

    fn table_stream(&self) -> &'static str {
        if self.one_table { "/1Table" } else { "/0Table" }
    }
}

/// One piece of the piece table: character positions `start..end` stored at byte `fc` of
/// `WordDocument`, 8-bit when `compressed`.
struct Piece {
    start: u32,
    end: u32,
    fc: u32,
    compressed: bool,
}

/// The main document text (the first `ccpText` characters), with Word's marks still in it,
/// and the file offset of each paragraph mark (`\r`) in it, in order.
fn main_text(word: &[u8], table: &[u8], fib: &Fib) -> Result<(String, Vec<u32>), ParseError> {
    let clx = usize::try_from(fib.fc_clx)
        .ok()
        .zip(usize::try_from(fib.lcb_clx).ok())
        .and_then(|(at, len)| table.get(at..at.checked_add(len)?))
        .ok_or_else(|| malformed(WHAT, "the piece table lies outside the table stream"))?;
    let pieces = pieces(clx)?;
    let mut text = String::new();
    let mut marks = Vec::new();
    for piece in pieces {
        let end = piece.end.min(fib.ccp_text);
        if piece.start >= end {
            continue;
        }
        let count = (end - piece.start) as usize;
        let (at, width) = if piece.compressed {
            (piece.fc as usize / 2, 1)
        } else {
            (piece.fc as usize, 2)
        };
        let bytes = at
            .checked_add(count * width)
            .and_then(|stop| word.get(at..stop))
            .ok_or_else(|| malformed(WHAT, "a piece of text lies outside the document stream"))?;
        if piece.compressed {
            text.push_str(&cp1252(bytes));
            marks.extend(
                (0..bytes.len())
                    .filter(|&i| bytes[i] == b'\r')
                    .map(|i| (at + i) as u32),
            );
        } else {
            text.push_str(&utf16le(bytes));
            marks.extend(
                (0..bytes.len() / 2)
                    .filter(|&i| bytes[2 * i] == b'\r' && bytes[2 * i + 1] == 0)
                    .map(|i| (at + 2 * i) as u32),
            );
        }
    }
    Ok((text, marks))
}

/// Heading levels by style index: Word's built-in styles `heading 1`–`heading 9` have the
/// style identifiers 1–9 whatever their display name. An unreadable style sheet means no
/// headings, not a failed document.
fn heading_styles(table: &[u8], (at, len): (u32, u32)) -> HashMap<u16, usize> {
    let mut levels = HashMap::new();
    let Some(stsh) = table.get(at as usize..(at as usize).saturating_add(len as usize)) else {
        return levels;
    };
    let (Some(header_len), Some(count)) = (u16_at(stsh, 0), u16_at(stsh, 2)) else {
        return levels;
    };
    let mut pos = 2 + usize::from(header_len);
    for istd in 0..count {
        let Some(size) = u16_at(stsh, pos) else {
            break;
        };
        if size >= 2
            && let Some(sti) = u16_at(stsh, pos + 2).map(|v| v & 0x0FFF)
            && (1..=9).contains(&sti)
        {
            levels.insert(istd, usize::from(sti));
        }
        pos += 2 + usize::from(size);
    }
    levels
}

/// The style index of the paragraph whose mark is at each file offset, from the paragraph
/// property pages (`PlcBtePapx` → 512-byte `PapxFkp` pages of `WordDocument`).
fn paragraph_styles(word: &[u8], table: &[u8], (at, len): (u32, u32)) -> Vec<(u32, u32, u16)> {
    let mut runs = Vec::new();
    let Some(plc) = table.get(at as usize..(at as usize).saturating_add(len as usize)) else {
        return runs;
    };
    if plc.len() < 4 {
        return runs;
    }
    let n = (plc.len() - 4) / 8;
    for i in 0..n {
        let Some(pn) = u32_at(plc, (n + 1) * 4 + i * 4).map(|v| (v & 0x3F_FFFF) as usize) else {
            break;
        };
        let Some(page) = word.get(pn * 512..pn * 512 + 512) else {
            continue;
        };
        let runs_on_page = usize::from(page[511]);
        for r in 0..runs_on_page {
            let (Some(start), Some(end)) = (u32_at(page, r * 4), u32_at(page, r * 4 + 4)) else {
                break;
            };
            let Some(&offset) = page.get(4 * (runs_on_page + 1) + 13 * r) else {
                break;
            };
            let at = usize::from(offset) * 2;
            let istd = match page.get(at) {
                _ if offset == 0 => Some(0),
                Some(0) => u16_at(page, at + 2),
                Some(_) => u16_at(page, at + 1),
                None => None,
            };
            if let Some(istd) = istd {
                runs.push((start, end, istd));
            }
        }
    }
    runs.sort_unstable();
    runs
}

/// The pieces of a Clx: property runs (`Prc`, type 1) are skipped, then the `Pcdt` (type 2)
/// holds the character positions and piece descriptors.
fn pieces(clx: &[u8]) -> Result<Vec<Piece>, ParseError> {
    let damaged = || malformed(WHAT, "the piece table is damaged");
    let mut at = 0;
    while clx.get(at) == Some(&1) {
        let size = u16_at(clx, at + 1).ok_or_else(damaged)? as usize;
        at += 3 + size;
    }
    if clx.get(at) != Some(&2) {
        return Err(damaged());
    }
    let len = u32_at(clx, at + 1).ok_or_else(damaged)? as usize;
    let plc = clx
        .get(at + 5..)
        .and_then(|rest| rest.get(..len))
        .ok_or_else(damaged)?;
    // n + 1 character positions (4 bytes each) and n descriptors (8 bytes each).
    if plc.len() < 4 || (plc.len() - 4) % 12 != 0 {
        return Err(damaged());
    }
    let n = (plc.len() - 4) / 12;
    if n > MAX_PIECES {
        return Err(damaged());
    }
    (0..n)
        .map(|i| {
            let start = u32_at(plc, i * 4).ok_or_else(damaged)?;
            let end = u32_at(plc, i * 4 + 4).ok_or_else(damaged)?;
            let fc = u32_at(plc, (n + 1) * 4 + i * 8 + 2).ok_or_else(damaged)?;
            Ok(Piece {
                start,
                end,
                fc: fc & 0x3FFF_FFFF,
                compressed: fc & 0x4000_0000 != 0,
            })
        })
        .collect()
}

/// Splits Word's text into paragraphs, dropping field codes and control marks.
/// `levels` gives, for each paragraph mark in turn, the heading level of its paragraph.
fn push_paragraphs(
    out: &mut BlockBuilder,
    text: &str,
    mut levels: impl Iterator<Item = Option<usize>>,
) {
    let mut paragraph = String::new();
    // For each open field: whether its separator has been seen (its result is visible).
    let mut fields: Vec<bool> = Vec::new();
    let mut last_was_cell = false;
    let mut level = None;
    let flush = |out: &mut BlockBuilder, paragraph: &mut String, level: Option<usize>| {
        let line = paragraph.trim().trim_end_matches('|').trim_end().to_owned();
        match level {
            Some(level) if !line.is_empty() => out.heading(level, &line),
            _ if !line.is_empty() => out.push_paragraph(&line),
            _ => {}
        }
        paragraph.clear();
    };
    for c in text.chars() {
        if c == '\r' {
            level = levels.next().flatten();
        }
        let cell = c == '\u{7}';
        match c {
            '\u{13}' => fields.push(false),
            '\u{14}' => {
                if let Some(separated) = fields.last_mut() {
                    *separated = true;
                }
            }
            '\u{15}' => {
                fields.pop();
            }
            _ if fields.iter().any(|separated| !separated) => {}
            '\r' | '\u{0E}' => flush(out, &mut paragraph, level.take()),
            '\u{0C}' => {
                flush(out, &mut paragraph, None);
                out.page_break();
            }
            // A cell ends with a cell mark; a second mark in a row ends the table row.
            '\u{7}' if last_was_cell || paragraph.trim().is_empty() => {
                flush(out, &mut paragraph, None)
            }
            '\u{7}' => {
                paragraph.truncate(paragraph.trim_end().len());
                paragraph.push_str(crate::table::CELL_SEPARATOR);
            }
            '\u{0B}' => paragraph.push('\n'),
            '\t' => paragraph.push('\t'),
            '\u{1E}' => paragraph.push('-'),
            '\u{A0}' => paragraph.push(' '),
            // Pictures, footnote and comment anchors, optional hyphens and other marks.
            c if c.is_control() || c == '\u{1F}' => {}
            c => paragraph.push(c),
        }
        last_was_cell = cell;
    }
    flush(out, &mut paragraph, None);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word_file(text: &str, compressed: bool, flags: u16) -> Vec<u8> {
        crate::fixtures::doc(text, compressed, flags)
    }

    fn texts(bytes: &[u8]) -> Vec<(u32, String)> {
        parse(bytes, &ParseLimits::default())
            .unwrap()
            .blocks
            .into_iter()
            .map(|b| (b.page, b.text))
            .collect()
    }

    #[test]
    fn paragraphs_fields_tables_and_page_breaks() {
        let text = "Pump report\rSee \u{13} HYPERLINK \"http://x\" \u{14}the manual\u{15}.\r\
                    Part\u{7}Qty\u{7}\u{7}Seal\u{7}2\u{7}\u{7}\u{0C}Next\u{0B}line\u{1}\r";
        let expected = vec![
            (1, "Pump report".to_owned()),
            (1, "See the manual.".to_owned()),
            (1, "Part | Qty".to_owned()),
            (1, "Seal | 2".to_owned()),
            (2, "Next\nline".to_owned()),
        ];
        assert_eq!(texts(&word_file(text, false, 0)), expected);
        assert_eq!(texts(&word_file(text, true, 0)), expected);
        let file = word_file("Caf\u{e9} \u{20ac}\r", false, 0);
        assert_eq!(crate::detect_format(&file, "x", ""), crate::Format::Doc);
        assert_eq!(texts(&file), vec![(1, "Café €".to_owned())]);
    }

    #[test]
    fn encrypted_and_old_documents_say_what_would_work() {
        let err = parse(&word_file("x\r", true, 0x0100), &ParseLimits::default()).unwrap_err();
        assert_eq!(err, ParseError::Encrypted(WHAT.into()));
        let mut word = word_file("x\r", true, 0);
        // Patch nFib inside the compound file: Word 95 wrote 0x0065.
        let at = word
            .windows(4)
            .position(|w| w == [0xEC, 0xA5, 0xC1, 0x00])
            .unwrap();
        word[at + 2] = 0x65;
        let err = parse(&word, &ParseLimits::default()).unwrap_err();
        assert!(err.to_string().contains("save it as .docx"), "{err}");
    }

    #[test]
    fn damaged_piece_tables_fail_with_a_reason() {
        // A piece that points past the end of the stream.
        let file = word_file("hello\r", false, 0);
        let mut ole = Ole::open(&file, WHAT, &ParseLimits::default()).unwrap();
        let mut word = ole.require("/WordDocument").unwrap();
        let table = ole.require("/1Table").unwrap();
        let fib = Fib::read(&word).unwrap();
        word.truncate(word.len() - 4);
        assert!(matches!(
            main_text(&word, &table, &fib),
            Err(ParseError::Malformed { .. })
        ));
        // A Clx whose declared length runs past the table stream.
        assert!(pieces(&[2, 0xFF, 0xFF, 0xFF, 0x7F, 0, 0]).is_err());
        // A run of property blocks that never reaches the piece table.
        assert!(pieces(&[1, 0, 0, 1, 0, 0]).is_err());
        assert!(Fib::read(&[0xEC, 0xA5]).is_err());
    }
}
