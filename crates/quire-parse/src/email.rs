//! E-mail (RFC 5322 / MIME): a block with the From, To, Cc, Subject and Date headers, then the
//! text bodies (HTML bodies converted to text), then every attachment parsed as a document of
//! its own, on the pages after the message, under the section `Attachment: <name>`.
//! Attachments that cannot be read (unsupported formats, and images without OCR) are left out.
//! With OCR, picture attachments are read when the message itself has little text (a scanned
//! letter sent as a photo); beside a real body they are mostly logos and signatures.

use mail_parser::{Address, Message, MessageParser, MimeHeaders};

use crate::blocks::{Block, BlockBuilder};
use crate::encoding::{decode_text, utf16_without_bom};
use crate::ocr::{LITTLE_TEXT, Ocr, visible_chars};
use crate::raster::ImageKind;
use crate::{Extracted, ParseError, ParseLimits, parse_at_depth, plain_text};

const WHAT: &str = "e-mail message";

pub(crate) fn parse(
    bytes: &[u8],
    limits: &ParseLimits,
    ocr: Option<&Ocr>,
    depth: u32,
) -> Result<Extracted, ParseError> {
    // A message saved as UTF-16 is re-encoded so the MIME parser can read its headers.
    let utf8;
    let bytes =
        if encoding_rs::Encoding::for_bom(bytes).is_some() || utf16_without_bom(bytes).is_some() {
            utf8 = decode_text(bytes).text.into_bytes();
            &utf8[..]
        } else {
            bytes
        };
    let message = MessageParser::default()
        .parse(bytes)
        .ok_or_else(|| ParseError::Malformed {
            format: WHAT.into(),
            detail: "no message headers could be read".into(),
        })?;
    let mut out = BlockBuilder::new();
    render(&message, &mut out, limits, ocr, depth);
    Ok(out.into())
}

fn render(
    message: &Message<'_>,
    out: &mut BlockBuilder,
    limits: &ParseLimits,
    ocr: Option<&Ocr>,
    depth: u32,
) {
    let mut headers = Vec::new();
    let mut add = |name: &str, value: Option<String>| {
        if let Some(value) = value.filter(|v| !v.trim().is_empty()) {
            headers.push(format!("{name}: {}", value.trim()));
        }
    };
    add("From", message.from().map(addresses));
    add("To", message.to().map(addresses));
    add("Cc", message.cc().map(addresses));
    add("Subject", message.subject().map(str::to_owned));
    add("Date", message.date().map(|d| d.to_rfc3339()));
    if !headers.is_empty() {
        out.push_block(&headers.join("\n"));
    }
    let mut body_chars = 0;
    for index in 0..message.text_body_count() {
        if let Some(body) = message.body_text(index) {
            body_chars += visible_chars(&body);
            for block in plain_text(&body).blocks {
                out.push_block(&block.text);
            }
        }
    }
    for attachment in message.attachments() {
        let name = attachment
            .attachment_name()
            .unwrap_or("attachment")
            .to_owned();
        let section = format!("Attachment: {name}");
        let first_page = out.page() + 1;
        if let Some(inner) = attachment.message() {
            if depth < limits.max_attachment_depth {
                let mut nested = BlockBuilder::new();
                render(inner, &mut nested, limits, ocr, depth + 1);
                append_all(out, nested.finish().0, first_page, &section);
            }
            continue;
        }
        if depth >= limits.max_attachment_depth {
            continue;
        }
        let declared = attachment
            .content_type()
            .map(|ct| format!("{}/{}", ct.ctype(), ct.subtype().unwrap_or("")))
            .unwrap_or_default();
        let contents = attachment.contents();
        let is_picture = ImageKind::sniff(contents).is_some();
        let ocr = ocr.filter(|_| !is_picture || body_chars < LITTLE_TEXT);
        if let Ok(parsed) = parse_at_depth(contents, &name, &declared, limits, ocr, depth + 1) {
            append_all(out, parsed.blocks, first_page, &section);
        }
    }
}

/// Appends an attachment's blocks, its page 1 becoming `first_page`.
pub(crate) fn append_all(
    out: &mut BlockBuilder,
    blocks: Vec<Block>,
    first_page: u32,
    section: &str,
) {
    for block in blocks {
        let section = if block.section.is_empty() {
            section.to_owned()
        } else {
            format!("{section} > {}", block.section)
        };
        out.append(Block {
            page: first_page + block.page - 1,
            section,
            text: block.text,
        });
    }
}

fn addresses(address: &Address<'_>) -> String {
    address
        .iter()
        .map(|a| match (a.name(), a.address()) {
            (Some(name), Some(addr)) => format!("{name} <{addr}>"),
            (None, Some(addr)) => addr.to_owned(),
            (Some(name), None) => name.to_owned(),
            (None, None) => String::new(),
        })
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::shape;

    #[test]
    fn headers_body_and_attachments() {
        let mail = "From: Ann Lee <ann@example.com>\r\nTo: bob@example.com\r\nSubject: Pump report\r\n\
            Date: Mon, 1 Jan 2024 10:00:00 +0000\r\nMIME-Version: 1.0\r\n\
            Content-Type: multipart/mixed; boundary=XX\r\n\r\n\
            --XX\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nThe pump failed.\r\n\r\nSee the notes.\r\n\
            --XX\r\nContent-Type: text/markdown\r\nContent-Disposition: attachment; filename=notes.md\r\n\r\n\
            # Notes\r\n\r\nSeal worn.\r\n--XX--\r\n";
        let parsed = parse(mail.as_bytes(), &ParseLimits::default(), None, 0).unwrap();
        let shape = shape(&parsed.blocks);
        assert_eq!(
            shape[0].2,
            "From: Ann Lee <ann@example.com>\nTo: bob@example.com\nSubject: Pump report\nDate: 2024-01-01T10:00:00Z"
        );
        assert_eq!(shape[1], (1, "", "The pump failed."));
        assert_eq!(shape[2], (1, "", "See the notes."));
        assert_eq!(shape[3], (2, "Attachment: notes.md > Notes", "Seal worn."));
        assert_eq!(parsed.page_count, 2);
    }
}
