//! Outlook messages (`.msg`, [MS-OXMSG]): the same shape as an `.eml` (see `email.rs`) — a
//! block with From, To, Cc, Subject and Date, then the plain body (or, when there is none, the
//! HTML body, or the compressed RTF body, converted with the HTML and RTF readers), then every
//! attachment parsed as a document of its own on the pages after the message, under
//! `Attachment: <name>`. Embedded messages are rendered the same way, as many levels deep as
//! e-mail attachments are followed.
//!
//! A message is a compound file whose properties are streams named `__substg1.0_IIIITTTT`
//! (property id and type in hex) plus a `__properties_version1.0` stream of fixed-size values;
//! recipients and attachments are storages of the same layout.

use crate::blocks::BlockBuilder;
use crate::email::append_all;
use crate::ocr::{LITTLE_TEXT, Ocr, visible_chars};
use crate::ole::{Ole, cp1252, u16_at, u32_at, utf16le};
use crate::raster::ImageKind;
use crate::rtf::code_page;
use crate::{Extracted, ParseError, ParseLimits, decode_text, html, parse_at_depth, plain_text};

const WHAT: &str = "Outlook message (.msg)";

/// Property ids ([MS-OXPROPS]).
mod tag {
    pub(super) const SUBJECT: u16 = 0x0037;
    pub(super) const CLIENT_SUBMIT_TIME: u16 = 0x0039;
    pub(super) const SENDER_NAME: u16 = 0x0C1A;
    pub(super) const SENDER_EMAIL: u16 = 0x0C1F;
    pub(super) const SENDER_SMTP: u16 = 0x5D01;
    pub(super) const SENT_REPRESENTING_NAME: u16 = 0x0042;
    pub(super) const SENT_REPRESENTING_SMTP: u16 = 0x5D02;
    pub(super) const DISPLAY_TO: u16 = 0x0E04;
    pub(super) const DISPLAY_CC: u16 = 0x0E03;
    pub(super) const DELIVERY_TIME: u16 = 0x0E06;
    pub(super) const BODY: u16 = 0x1000;
    pub(super) const RTF_COMPRESSED: u16 = 0x1009;
    pub(super) const HTML: u16 = 0x1013;
    pub(super) const INTERNET_CODEPAGE: u16 = 0x3FDE;
    pub(super) const MESSAGE_CODEPAGE: u16 = 0x3FFD;
    pub(super) const RECIPIENT_TYPE: u16 = 0x0C15;
    pub(super) const DISPLAY_NAME: u16 = 0x3001;
    pub(super) const EMAIL_ADDRESS: u16 = 0x3003;
    pub(super) const SMTP_ADDRESS: u16 = 0x39FE;
    pub(super) const ATTACH_DATA: u16 = 0x3701;
    pub(super) const ATTACH_FILENAME: u16 = 0x3704;
    pub(super) const ATTACH_LONG_FILENAME: u16 = 0x3707;
    pub(super) const ATTACH_MIME_TAG: u16 = 0x370E;
}

/// Most recipients or attachments read from one message: more is not a real message.
const MAX_CHILDREN: usize = 10_000;

pub(crate) fn parse(
    bytes: &[u8],
    limits: &ParseLimits,
    ocr: Option<&Ocr>,
    depth: u32,
) -> Result<Extracted, ParseError> {
    let mut ole = Ole::open(bytes, WHAT, limits)?;
    let mut out = BlockBuilder::new();
    render(&mut ole, "", 32, &mut out, limits, ocr, depth)?;
    Ok(out.into())
}

/// Renders the message stored at `base` (`""` for the file itself); its property stream has a
/// header of `header` bytes (32 at the top, 24 for an embedded message).
fn render(
    ole: &mut Ole<'_>,
    base: &str,
    header: usize,
    out: &mut BlockBuilder,
    limits: &ParseLimits,
    ocr: Option<&Ocr>,
    depth: u32,
) -> Result<(), ParseError> {
    let props = Props::read(ole, base, header)?;
    let codepage = props
        .long(tag::MESSAGE_CODEPAGE)
        .or(props.long(tag::INTERNET_CODEPAGE));
    let text = |ole: &mut Ole<'_>, id| string(ole, base, id, codepage);

    let from_name = text(ole, tag::SENDER_NAME)?.or(text(ole, tag::SENT_REPRESENTING_NAME)?);
    let from_addr = text(ole, tag::SENDER_SMTP)?
        .or(text(ole, tag::SENT_REPRESENTING_SMTP)?)
        .or(text(ole, tag::SENDER_EMAIL)?.filter(|a| a.contains('@')));
    let (to, cc) = recipients(ole, base, codepage)?;
    let mut headers = Vec::new();
    let mut add = |name: &str, value: Option<String>| {
        if let Some(value) = value.filter(|v| !v.trim().is_empty()) {
            headers.push(format!("{name}: {}", value.trim()));
        }
    };
    add("From", person(from_name, from_addr));
    add("To", to.or(text(ole, tag::DISPLAY_TO)?));
    add("Cc", cc.or(text(ole, tag::DISPLAY_CC)?));
    add("Subject", text(ole, tag::SUBJECT)?);
    add(
        "Date",
        props
            .time(tag::CLIENT_SUBMIT_TIME)
            .or(props.time(tag::DELIVERY_TIME)),
    );
    if !headers.is_empty() {
        out.push_block(&headers.join("\n"));
    }

    let body = if let Some(plain) = text(ole, tag::BODY)?.filter(|t| !t.trim().is_empty()) {
        plain_text(&plain)
    } else if let Some(page) = html_body(ole, base, codepage)? {
        html::parse(&page)
    } else if let Some(rtf) = ole.read(&stream(base, tag::RTF_COMPRESSED, 0x0102))? {
        // A body kept only as compressed RTF: unpacked and read like an .rtf upload.
        crate::rtf_compressed::decompress(&rtf, limits)
            .ok()
            .and_then(|rtf| crate::rtf::parse(&rtf).ok())
            .unwrap_or_else(|| plain_text(""))
    } else {
        plain_text("")
    };
    let body_chars = body.blocks.iter().map(|b| visible_chars(&b.text)).sum();
    for block in body.blocks {
        out.push_block(&block.text);
    }
    attachments(ole, base, out, limits, ocr, body_chars, depth)
}

/// `Name <address>`, or whichever of the two there is.
fn person(name: Option<String>, address: Option<String>) -> Option<String> {
    match (name, address) {
        (Some(name), Some(addr)) if name != addr => Some(format!("{name} <{addr}>")),
        (Some(name), _) => Some(name),
        (None, addr) => addr,
    }
}

/// The To and Cc lines built from the recipient storages (name and address each).
fn recipients(
    ole: &mut Ole<'_>,
    base: &str,
    codepage: Option<u32>,
) -> Result<(Option<String>, Option<String>), ParseError> {
    let (mut to, mut cc) = (Vec::new(), Vec::new());
    for name in children(ole, base, "__recip_version1.0_#")? {
        let path = format!("{base}/{name}");
        let props = Props::read(ole, &path, 8)?;
        let display = string(ole, &path, tag::DISPLAY_NAME, codepage)?;
        let address = string(ole, &path, tag::SMTP_ADDRESS, codepage)?.or(string(
            ole,
            &path,
            tag::EMAIL_ADDRESS,
            codepage,
        )?
        .filter(|a| a.contains('@')));
        let Some(line) = person(display, address) else {
            continue;
        };
        // 1 is To, 2 Cc, 3 Bcc (which a received message does not show).
        match props.long(tag::RECIPIENT_TYPE).unwrap_or(1) {
            2 => cc.push(line),
            3 => {}
            _ => to.push(line),
        }
    }
    let join = |list: Vec<String>| (!list.is_empty()).then(|| list.join(", "));
    Ok((join(to), join(cc)))
}

/// The HTML body, stored as bytes in the message's code page or as a string.
fn html_body(
    ole: &mut Ole<'_>,
    base: &str,
    codepage: Option<u32>,
) -> Result<Option<String>, ParseError> {
    if let Some(bytes) = ole.read(&stream(base, tag::HTML, 0x0102))? {
        let text = match codepage.and_then(|cp| code_page(i64::from(cp))) {
            Some(encoding) => encoding.decode(&bytes).0.into_owned(),
            None => decode_text(&bytes).text,
        };
        return Ok(Some(text));
    }
    string(ole, base, tag::HTML, codepage)
}

/// Every attachment of the message at `base`, parsed like an e-mail attachment: pictures are
/// OCRed only when the body (`body_chars` visible characters) says little itself.
fn attachments(
    ole: &mut Ole<'_>,
    base: &str,
    out: &mut BlockBuilder,
    limits: &ParseLimits,
    ocr: Option<&Ocr>,
    body_chars: usize,
    depth: u32,
) -> Result<(), ParseError> {
    for name in children(ole, base, "__attach_version1.0_#")? {
        if depth >= limits.max_attachment_depth {
            break;
        }
        let path = format!("{base}/{name}");
        let file_name = string(ole, &path, tag::ATTACH_LONG_FILENAME, None)?
            .or(string(ole, &path, tag::ATTACH_FILENAME, None)?)
            .or(string(ole, &path, tag::DISPLAY_NAME, None)?)
            .unwrap_or_else(|| "attachment".into());
        let section = format!("Attachment: {file_name}");
        let first_page = out.page() + 1;
        // An attached Outlook item is a storage in place of the data stream.
        let embedded = format!("{path}/__substg1.0_{:04X}000D", tag::ATTACH_DATA);
        if ole.exists(&embedded) && !ole.exists(&stream(&path, tag::ATTACH_DATA, 0x0102)) {
            let mut nested = BlockBuilder::new();
            render(ole, &embedded, 24, &mut nested, limits, ocr, depth + 1)?;
            append_all(out, nested.finish().0, first_page, &section);
            continue;
        }
        let Some(data) = ole.read(&stream(&path, tag::ATTACH_DATA, 0x0102))? else {
            continue;
        };
        let declared = string(ole, &path, tag::ATTACH_MIME_TAG, None)?.unwrap_or_default();
        // As with e-mail, an attachment that cannot be read (a picture, an unknown format) is
        // left out rather than failing the message.
        let is_picture = ImageKind::sniff(&data).is_some();
        let ocr = ocr.filter(|_| !is_picture || body_chars < LITTLE_TEXT);
        if let Ok(parsed) = parse_at_depth(&data, &file_name, &declared, limits, ocr, depth + 1) {
            append_all(out, parsed.blocks, first_page, &section);
        }
    }
    Ok(())
}

/// Names of the storages under `base` that start with `prefix`, in order, at most
/// [`MAX_CHILDREN`].
fn children(ole: &Ole<'_>, base: &str, prefix: &str) -> Result<Vec<String>, ParseError> {
    let mut names: Vec<String> = ole
        .children(if base.is_empty() { "/" } else { base })
        .into_iter()
        .filter(|n| n.starts_with(prefix))
        .collect();
    if names.len() > MAX_CHILDREN {
        return Err(ParseError::LimitExceeded(format!(
            "the {WHAT} has {} recipients or attachments, more than the limit of {MAX_CHILDREN}",
            names.len()
        )));
    }
    names.sort();
    Ok(names)
}

/// The path of the stream holding property `id` of type `kind` under `base`.
fn stream(base: &str, id: u16, kind: u16) -> String {
    format!("{base}/__substg1.0_{id:04X}{kind:04X}")
}

/// A string property: UTF-16 (type 001F) or 8-bit in the message's code page (001E).
fn string(
    ole: &mut Ole<'_>,
    base: &str,
    id: u16,
    codepage: Option<u32>,
) -> Result<Option<String>, ParseError> {
    let text = if let Some(bytes) = ole.read(&stream(base, id, 0x001F))? {
        utf16le(&bytes)
    } else if let Some(bytes) = ole.read(&stream(base, id, 0x001E))? {
        match codepage.and_then(|cp| code_page(i64::from(cp))) {
            Some(encoding) => encoding.decode(&bytes).0.into_owned(),
            None => cp1252(&bytes),
        }
    } else {
        return Ok(None);
    };
    let text = text.trim_end_matches('\0').to_owned();
    Ok((!text.trim().is_empty()).then_some(text))
}

/// The fixed-size properties of one object (`__properties_version1.0`): 16 bytes each, after a
/// header whose size depends on the object.
struct Props {
    entries: Vec<(u16, u16, [u8; 8])>,
}

impl Props {
    fn read(ole: &mut Ole<'_>, base: &str, header: usize) -> Result<Self, ParseError> {
        let bytes = ole
            .read(&format!("{base}/__properties_version1.0"))?
            .unwrap_or_default();
        let entries = bytes
            .get(header..)
            .unwrap_or_default()
            .chunks_exact(16)
            .filter_map(|entry| {
                let kind = u16_at(entry, 0)?;
                let id = u16_at(entry, 2)?;
                Some((id, kind, entry[8..16].try_into().ok()?))
            })
            .collect();
        Ok(Self { entries })
    }

    fn value(&self, id: u16, kind: u16) -> Option<&[u8; 8]> {
        self.entries
            .iter()
            .find(|(i, k, _)| *i == id && *k == kind)
            .map(|(_, _, v)| v)
    }

    /// A 32-bit integer property (PT_LONG).
    fn long(&self, id: u16) -> Option<u32> {
        self.value(id, 0x0003).and_then(|v| u32_at(v, 0))
    }

    /// A time property (PT_SYSTIME, a FILETIME) as RFC 3339.
    fn time(&self, id: u16) -> Option<String> {
        let ticks = u64::from_le_bytes(*self.value(id, 0x0040)?);
        // FILETIME counts 100 ns from 1601; zero means unset.
        let seconds = i64::try_from(ticks / 10_000_000).ok()? - 11_644_473_600;
        (ticks != 0 && seconds > 0)
            .then(|| mail_parser::DateTime::from_timestamp(seconds).to_rfc3339())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::compound;
    use crate::test_support::shape;

    fn utf16(text: &str) -> Vec<u8> {
        text.encode_utf16().flat_map(u16::to_le_bytes).collect()
    }

    /// A fixed property entry: type, id, flags, value.
    fn prop(kind: u16, id: u16, value: u64) -> Vec<u8> {
        let mut entry = kind.to_le_bytes().to_vec();
        entry.extend(id.to_le_bytes());
        entry.extend(6u32.to_le_bytes());
        entry.extend(value.to_le_bytes());
        entry
    }

    #[test]
    fn headers_body_recipients_and_attachments() {
        let mut props = vec![0u8; 32];
        // 2024-01-01T10:00:00Z as a FILETIME.
        props.extend(prop(
            0x0040,
            0x0039,
            (1_704_103_200 + 11_644_473_600) * 10_000_000,
        ));
        let mut cc_props = vec![0u8; 8];
        cc_props.extend(prop(0x0003, 0x0C15, 2));
        let (subject, body) = (
            utf16("Pump report"),
            utf16("The pump failed.\r\n\r\nSee the notes."),
        );
        let (sender, sender_addr) = (utf16("Ann Lee"), utf16("ann@example.com"));
        let (to_name, to_addr) = (utf16("Bob"), utf16("bob@example.com"));
        let cc_name = utf16("carol@example.com");
        let attach_name = utf16("notes.md");
        let file = compound(&[
            ("/__properties_version1.0", &props),
            ("/__substg1.0_0037001F", &subject),
            ("/__substg1.0_1000001F", &body),
            ("/__substg1.0_0C1A001F", &sender),
            ("/__substg1.0_5D01001F", &sender_addr),
            (
                "/__recip_version1.0_#00000000/__substg1.0_3001001F",
                &to_name,
            ),
            (
                "/__recip_version1.0_#00000000/__substg1.0_39FE001F",
                &to_addr,
            ),
            (
                "/__recip_version1.0_#00000001/__properties_version1.0",
                &cc_props,
            ),
            (
                "/__recip_version1.0_#00000001/__substg1.0_3001001F",
                &cc_name,
            ),
            (
                "/__attach_version1.0_#00000000/__substg1.0_3707001F",
                &attach_name,
            ),
            (
                "/__attach_version1.0_#00000000/__substg1.0_37010102",
                b"# Notes\n\nSeal worn.\n",
            ),
        ]);
        assert_eq!(crate::detect_format(&file, "mail", ""), crate::Format::Msg);
        let parsed = parse(&file, &ParseLimits::default(), None, 0).unwrap();
        let shape = shape(&parsed.blocks);
        assert_eq!(
            shape[0].2,
            "From: Ann Lee <ann@example.com>\nTo: Bob <bob@example.com>\nCc: carol@example.com\n\
             Subject: Pump report\nDate: 2024-01-01T10:00:00Z"
        );
        assert_eq!(shape[1], (1, "", "The pump failed."));
        assert_eq!(shape[2], (1, "", "See the notes."));
        assert_eq!(shape[3], (2, "Attachment: notes.md > Notes", "Seal worn."));
    }

    #[test]
    fn html_body_when_there_is_no_plain_one() {
        let file = compound(&[
            ("/__substg1.0_0037001F", &utf16("Hello")),
            (
                "/__substg1.0_10130102",
                b"<html><body><p>Meeting at <b>noon</b>.</p></body></html>",
            ),
        ]);
        let parsed = parse(&file, &ParseLimits::default(), None, 0).unwrap();
        let texts: Vec<_> = parsed.blocks.iter().map(|b| b.text.as_str()).collect();
        assert_eq!(texts, vec!["Subject: Hello", "Meeting at noon."]);
    }

    #[test]
    fn rtf_body_when_there_is_neither_plain_nor_html() {
        let rtf = br"{\rtf1\ansi{\pard Valve held at 12 bar.\par}}";
        // Stored uncompressed ("MELA"): size after the first field, raw size, type, CRC.
        let mut stream = ((rtf.len() + 12) as u32).to_le_bytes().to_vec();
        stream.extend((rtf.len() as u32).to_le_bytes());
        stream.extend(0x414C_454Du32.to_le_bytes());
        stream.extend(0u32.to_le_bytes());
        stream.extend(rtf);
        let file = compound(&[("/__substg1.0_10090102", &stream)]);
        let parsed = parse(&file, &ParseLimits::default(), None, 0).unwrap();
        assert_eq!(
            shape(&parsed.blocks),
            vec![(1, "", "Valve held at 12 bar.")]
        );
    }

    #[test]
    fn attachments_stop_at_the_depth_limit() {
        let inner = compound(&[("/__substg1.0_1000001F", &utf16("Inner body."))]);
        let file = compound(&[
            ("/__substg1.0_1000001F", &utf16("Outer body.")),
            (
                "/__attach_version1.0_#00000000/__substg1.0_3707001F",
                &utf16("inner.msg"),
            ),
            (
                "/__attach_version1.0_#00000000/__substg1.0_37010102",
                &inner,
            ),
        ]);
        let all = parse(&file, &ParseLimits::default(), None, 0).unwrap();
        assert_eq!(all.blocks.len(), 2);
        assert_eq!(all.blocks[1].section, "Attachment: inner.msg");
        let limits = ParseLimits {
            max_attachment_depth: 0,
            ..ParseLimits::default()
        };
        assert_eq!(parse(&file, &limits, None, 0).unwrap().blocks.len(), 1);
    }
}
