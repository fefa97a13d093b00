//! RTF: a tokenizer over the control words that carry text and structure. Paragraphs end at
//! `\par`, pages at `\page`; headings come from `\outlinelevelN` or from a paragraph style the
//! style sheet names `heading N`; table cells are joined with ` | `, a row per line. Font
//! tables, style sheets, pictures, fields' instructions and every `{\* …}` destination are
//! skipped. Bytes written as `\'hh` are decoded in the document's code page (`\ansicpgN`,
//! Windows-1252 by default); `\uN` characters are Unicode, followed by `\ucN` fallback
//! characters that are skipped.

use std::collections::HashMap;

use encoding_rs::{Encoding, WINDOWS_1252};

use crate::blocks::BlockBuilder;
use crate::{Extracted, ParseError};

/// Destinations whose text is not document content.
const SKIPPED_DESTINATIONS: &[&str] = &[
    "fonttbl",
    "colortbl",
    "info",
    "pict",
    "object",
    "header",
    "headerl",
    "headerr",
    "headerf",
    "footer",
    "footerl",
    "footerr",
    "footerf",
    "fldinst",
    "listtable",
    "listoverridetable",
    "rsidtbl",
    "generator",
    "xmlnstbl",
    "themedata",
    "colorschememapping",
    "datastore",
    "latentstyles",
    "pgdsctbl",
    "bkmkstart",
    "bkmkend",
    "revtbl",
    "filetbl",
];

/// State that a group (`{…}`) saves and restores.
#[derive(Debug, Clone, Copy)]
struct GroupState {
    skip: bool,
    in_stylesheet: bool,
    /// Fallback characters after `\uN`.
    unicode_skip: usize,
}

/// Reads an RTF document.
pub(crate) fn parse(bytes: &[u8]) -> Result<Extracted, ParseError> {
    if !bytes.starts_with(b"{\\rtf") {
        return Err(ParseError::Malformed {
            format: "RTF document".into(),
            detail: "it does not start with {\\rtf".into(),
        });
    }
    let mut reader = Reader::new(bytes);
    reader.run();
    Ok(reader.out.into())
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    state: GroupState,
    stack: Vec<GroupState>,
    encoding: &'static Encoding,
    /// `\'hh` bytes waiting to be decoded together (a multi-byte character spans several).
    pending_bytes: Vec<u8>,
    /// Characters still to skip after a `\uN`.
    skip_chars: usize,
    paragraph: String,
    outline_level: Option<usize>,
    style: Option<u32>,
    in_table: bool,
    /// Style number → heading level, from the style sheet.
    heading_styles: HashMap<u32, usize>,
    /// The style sheet entry being read: its number and name.
    style_entry: Option<(u32, String)>,
    out: BlockBuilder,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            pos: 0,
            state: GroupState {
                skip: false,
                in_stylesheet: false,
                unicode_skip: 1,
            },
            stack: Vec::new(),
            encoding: WINDOWS_1252,
            pending_bytes: Vec::new(),
            skip_chars: 0,
            paragraph: String::new(),
            outline_level: None,
            style: None,
            in_table: false,
            heading_styles: HashMap::new(),
            style_entry: None,
            out: BlockBuilder::new(),
        }
    }

    fn run(&mut self) {
        while self.pos < self.bytes.len() {
            let byte = self.bytes[self.pos];
            self.pos += 1;
            match byte {
                b'{' => {
                    self.flush_bytes();
                    self.stack.push(self.state);
                }
                b'}' => {
                    self.flush_bytes();
                    if self.state.in_stylesheet {
                        self.end_style_entry();
                    }
                    if let Some(state) = self.stack.pop() {
                        self.state = state;
                    }
                }
                b'\\' => self.control(),
                b'\r' | b'\n' => {}
                _ => {
                    self.flush_bytes();
                    self.text_char(char::from(byte));
                }
            }
        }
        self.flush_bytes();
        self.end_paragraph();
    }

    /// Reads what follows a backslash.
    fn control(&mut self) {
        let Some(&next) = self.bytes.get(self.pos) else {
            return;
        };
        if !next.is_ascii_alphabetic() {
            self.pos += 1;
            match next {
                b'\'' => {
                    let hex = self.bytes.get(self.pos..self.pos + 2).unwrap_or_default();
                    self.pos += hex.len();
                    if let Some(value) = std::str::from_utf8(hex)
                        .ok()
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                    {
                        if self.skip_chars > 0 {
                            self.skip_chars -= 1;
                        } else if !self.state.skip {
                            self.pending_bytes.push(value);
                        }
                    }
                    return;
                }
                b'*' => self.state.skip = true,
                b'~' => self.literal('\u{a0}'),
                b'_' => self.literal('-'),
                b'\\' | b'{' | b'}' => self.literal(char::from(next)),
                b'\r' | b'\n' => self.paragraph_break(),
                _ => {}
            }
            return;
        }
        let start = self.pos;
        while self
            .bytes
            .get(self.pos)
            .is_some_and(u8::is_ascii_alphabetic)
        {
            self.pos += 1;
        }
        let word = String::from_utf8_lossy(&self.bytes[start..self.pos]).into_owned();
        let number_start = self.pos;
        if self.bytes.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        while self.bytes.get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
        let param: Option<i64> = std::str::from_utf8(&self.bytes[number_start..self.pos])
            .ok()
            .and_then(|n| n.parse().ok());
        if self.bytes.get(self.pos) == Some(&b' ') {
            self.pos += 1;
        }
        self.control_word(&word, param);
    }

    fn control_word(&mut self, word: &str, param: Option<i64>) {
        if word != "u" {
            self.flush_bytes();
        }
        if SKIPPED_DESTINATIONS.contains(&word) {
            self.state.skip = true;
            return;
        }
        match word {
            "stylesheet" => {
                self.state.skip = true;
                self.state.in_stylesheet = true;
            }
            "ansicpg" => {
                if let Some(encoding) = param.and_then(code_page) {
                    self.encoding = encoding;
                }
            }
            "bin" => {
                // Raw binary data of `param` bytes.
                let length = param.unwrap_or(0).max(0) as usize;
                self.pos = (self.pos + length).min(self.bytes.len());
            }
            "uc" => self.state.unicode_skip = param.unwrap_or(1).max(0) as usize,
            "u" => {
                if let Some(code) = param {
                    // Negative values are the upper half of the 16-bit range.
                    let code = if code < 0 { code + 65536 } else { code };
                    self.flush_bytes();
                    if let Some(c) = u32::try_from(code).ok().and_then(char::from_u32) {
                        self.literal(c);
                    }
                    self.skip_chars = self.state.unicode_skip;
                }
            }
            "s" if self.state.in_stylesheet => {
                self.style_entry = param.map(|n| (n as u32, String::new()));
            }
            "s" => self.style = param.map(|n| n as u32),
            "pard" => {
                self.outline_level = None;
                self.style = None;
                self.in_table = false;
            }
            "outlinelevel" => self.outline_level = param.map(|n| n.max(0) as usize + 1),
            "intbl" => self.in_table = true,
            "par" => self.paragraph_break(),
            "line" => self.literal('\n'),
            "tab" => self.literal('\t'),
            "cell" => self.paragraph.push_str(crate::table::CELL_SEPARATOR),
            "row" => self.end_row(),
            "page" => {
                self.end_paragraph();
                self.out.force_page(self.out.page() + 1);
            }
            "emdash" => self.literal('—'),
            "endash" => self.literal('–'),
            "bullet" => self.literal('•'),
            "lquote" => self.literal('‘'),
            "rquote" => self.literal('’'),
            "ldblquote" => self.literal('“'),
            "rdblquote" => self.literal('”'),
            _ => {}
        }
    }

    fn text_char(&mut self, c: char) {
        if self.skip_chars > 0 {
            self.skip_chars -= 1;
            return;
        }
        self.literal(c);
    }

    /// A character of content (or of a style sheet entry's name).
    fn literal(&mut self, c: char) {
        if self.state.in_stylesheet {
            if let Some((_, name)) = &mut self.style_entry {
                name.push(c);
            }
            return;
        }
        if !self.state.skip {
            self.paragraph.push(c);
        }
    }

    fn flush_bytes(&mut self) {
        if self.pending_bytes.is_empty() {
            return;
        }
        let bytes = std::mem::take(&mut self.pending_bytes);
        let (text, _, _) = self.encoding.decode(&bytes);
        for c in text.chars() {
            self.literal(c);
        }
    }

    fn end_style_entry(&mut self) {
        if let Some((number, name)) = self.style_entry.take() {
            let name = name
                .trim()
                .trim_end_matches(';')
                .trim()
                .to_ascii_lowercase();
            if let Some(level) = name
                .strip_prefix("heading ")
                .and_then(|n| n.trim().parse::<usize>().ok())
            {
                self.heading_styles.insert(number, level);
            }
        }
    }

    fn paragraph_break(&mut self) {
        if self.state.skip {
            return;
        }
        if self.in_table {
            // A paragraph inside a cell: keep the cell on the row's line.
            self.paragraph.push(' ');
            return;
        }
        self.end_paragraph();
    }

    fn end_row(&mut self) {
        let row = std::mem::take(&mut self.paragraph);
        let row = row.trim().trim_end_matches('|').trim();
        if !row.is_empty() {
            self.out.push_line(row);
        }
    }

    fn end_paragraph(&mut self) {
        let text = std::mem::take(&mut self.paragraph);
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        let level = self.outline_level.or_else(|| {
            self.style
                .and_then(|s| self.heading_styles.get(&s).copied())
        });
        match level {
            Some(level) => self.out.heading(level, text),
            None => self.out.push_paragraph(text),
        }
    }
}

/// The encoding of a Windows code page number.
pub(crate) fn code_page(number: i64) -> Option<&'static Encoding> {
    let label = match number {
        932 => "shift_jis".to_owned(),
        936 => "gbk".to_owned(),
        949 => "euc-kr".to_owned(),
        950 => "big5".to_owned(),
        65001 => "utf-8".to_owned(),
        n => format!("windows-{n}"),
    };
    Encoding::for_label(label.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(rtf: &str) -> Vec<(u32, String, String)> {
        parse(rtf.as_bytes())
            .unwrap()
            .blocks
            .into_iter()
            .map(|b| (b.page, b.section, b.text))
            .collect()
    }

    #[test]
    fn paragraphs_headings_and_pages() {
        let rtf = r"{\rtf1\ansi\deff0{\fonttbl{\f0 Times New Roman;}}{\info{\title Hidden}}
{\pard\outlinelevel0\b Safety\par}
{\pard The pump must be primed.\par}
\page
{\pard\outlinelevel1 Seals\par}
{\pard Replace the gasket\line every year.\par}
}";
        assert_eq!(
            blocks(rtf),
            vec![
                (1, "Safety".into(), "The pump must be primed.".into()),
                (
                    2,
                    "Safety > Seals".into(),
                    "Replace the gasket\nevery year.".into()
                ),
            ]
        );
    }

    #[test]
    fn heading_styles_from_the_style_sheet() {
        let rtf = r"{\rtf1{\stylesheet{\s0 Normal;}{\s1\b heading 1;}}
\pard\s1 Overview\par
\pard\s0 Body text here.\par}";
        assert_eq!(
            blocks(rtf),
            vec![(1, "Overview".into(), "Body text here.".into())]
        );
    }

    #[test]
    fn escapes_code_pages_and_unicode() {
        let rtf = r"{\rtf1\ansi\ansicpg1252 Caf\'e9 \{ok\} \u8364? and \uc2\u955xy done\par}";
        assert_eq!(blocks(rtf)[0].2, "Café {ok} € and λ done");
        let cyrillic = r"{\rtf1\ansi\ansicpg1251 \'cf\'f0\'e8\'e2\'e5\'f2\par}";
        assert_eq!(blocks(cyrillic)[0].2, "Привет");
    }

    #[test]
    fn tables_are_rows_of_cells_and_skipped_groups_stay_out() {
        let rtf = r"{\rtf1
{\*\generator Writer;}{\pict\pngblip 89504e47}
{\trowd\cellx3000\cellx6000
\pard\intbl Part\cell Interval\cell\row
\pard\intbl Bearing\cell quarterly\cell\row
}
\pard After the table.\par}";
        assert_eq!(
            blocks(rtf),
            vec![
                (
                    1,
                    String::new(),
                    "Part | Interval\nBearing | quarterly".into()
                ),
                (1, String::new(), "After the table.".into()),
            ]
        );
    }

    #[test]
    fn not_rtf_is_malformed() {
        assert!(matches!(parse(b"plain"), Err(ParseError::Malformed { .. })));
    }
}
