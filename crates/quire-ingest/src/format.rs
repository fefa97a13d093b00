//! Recognising what a file is from its first bytes (and, for text, its name). Only plain text
//! and Markdown are processed so far; everything else is named precisely so the failure says
//! what was uploaded.

/// What a file turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// Markdown text.
    Markdown,
    /// Plain UTF-8 text.
    PlainText,
    /// A format Quire cannot process yet; the string names it for people.
    Unsupported(String),
}

/// Bytes from the start of a file that [`detect_format`] needs.
pub const SNIFF_BYTES: usize = 8192;

const MARKDOWN_EXTENSIONS: &[&str] = &["md", "markdown", "mdown", "mkd", "mdx"];

/// Decides the format of a file from its leading bytes `head`, its `name` and the media type
/// the client declared. Magic numbers win over names: a PDF called `notes.txt` is a PDF.
pub fn detect_format(head: &[u8], name: &str, declared_type: &str) -> Format {
    if let Some(kind) = binary_kind(head) {
        return Format::Unsupported(kind.to_owned());
    }
    let text = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    if text.contains(&0) {
        return Format::Unsupported(utf16_or_binary(head).to_owned());
    }
    if !is_utf8_prefix(text) {
        return Format::Unsupported(
            "text in an encoding other than UTF-8 (only UTF-8 text is supported so far)".into(),
        );
    }
    let ext = extension(name);
    let declared = declared_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if matches!(ext.as_deref(), Some("html" | "htm" | "xhtml"))
        || declared == "text/html"
        || looks_like_html(text)
    {
        return Format::Unsupported("HTML document".into());
    }
    if ext
        .as_deref()
        .is_some_and(|e| MARKDOWN_EXTENSIONS.contains(&e))
        || declared == "text/markdown"
    {
        Format::Markdown
    } else {
        Format::PlainText
    }
}

/// A media type for a file whose client sent none (or only `application/octet-stream`).
pub fn guess_content_type(name: &str) -> &'static str {
    match extension(name).as_deref() {
        Some(e) if MARKDOWN_EXTENSIONS.contains(&e) => "text/markdown",
        Some("txt" | "text" | "log") => "text/plain",
        Some("csv") => "text/csv",
        Some("html" | "htm") => "text/html",
        Some("pdf") => "application/pdf",
        Some("docx") => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        Some("pptx") => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        Some("xlsx") => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        Some("eml") => "message/rfc822",
        _ => "application/octet-stream",
    }
}

fn extension(name: &str) -> Option<String> {
    let (_, ext) = name.rsplit_once('.')?;
    Some(ext.to_ascii_lowercase())
}

fn binary_kind(head: &[u8]) -> Option<&'static str> {
    const MAGIC: &[(&[u8], &str)] = &[
        (b"%PDF-", "PDF document"),
        (
            b"PK\x03\x04",
            "ZIP container (such as DOCX, XLSX, PPTX, ODT or EPUB)",
        ),
        (
            b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1",
            "legacy Microsoft Office document (.doc/.xls/.ppt)",
        ),
        (b"{\\rtf", "RTF document"),
        (b"\x89PNG\r\n\x1a\n", "PNG image"),
        (b"\xFF\xD8\xFF", "JPEG image"),
        (b"GIF87a", "GIF image"),
        (b"GIF89a", "GIF image"),
        (b"\x1F\x8B", "gzip archive"),
        (b"7z\xBC\xAF\x27\x1C", "7-Zip archive"),
        (b"Rar!", "RAR archive"),
        (b"\x7FELF", "executable (ELF)"),
        (b"MZ", "Windows executable"),
    ];
    MAGIC
        .iter()
        .find(|(magic, _)| head.starts_with(magic))
        .map(|(_, kind)| *kind)
}

fn utf16_or_binary(head: &[u8]) -> &'static str {
    if head.starts_with(b"\xFF\xFE") || head.starts_with(b"\xFE\xFF") {
        "UTF-16 text (only UTF-8 text is supported so far)"
    } else {
        "binary data of an unrecognised type"
    }
}

/// True when `bytes` is valid UTF-8, allowing a character cut off at the end of the sample.
fn is_utf8_prefix(bytes: &[u8]) -> bool {
    match std::str::from_utf8(bytes) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none() && bytes.len() - e.valid_up_to() < 4,
    }
}

fn looks_like_html(text: &[u8]) -> bool {
    let start: Vec<u8> = text
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .take(15)
        .map(u8::to_ascii_lowercase)
        .collect();
    start.starts_with(b"<!doctype html") || start.starts_with(b"<html")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_numbers_beat_file_names() {
        assert_eq!(
            detect_format(b"%PDF-1.7\n...", "notes.txt", "text/plain"),
            Format::Unsupported("PDF document".into())
        );
        assert!(
            matches!(detect_format(b"PK\x03\x04rest", "a.docx", ""), Format::Unsupported(k) if k.contains("DOCX"))
        );
    }

    #[test]
    fn text_is_markdown_by_name_or_declared_type() {
        assert_eq!(detect_format(b"# Title", "a.md", ""), Format::Markdown);
        assert_eq!(
            detect_format(b"# Title", "a", "text/markdown; charset=utf-8"),
            Format::Markdown
        );
        assert_eq!(
            detect_format(b"hello", "a.txt", "text/plain"),
            Format::PlainText
        );
        assert_eq!(
            detect_format(b"\xEF\xBB\xBFhello", "a", ""),
            Format::PlainText
        );
    }

    #[test]
    fn non_utf8_and_binary_are_named() {
        assert!(
            matches!(detect_format(b"caf\xE9 au lait", "a.txt", ""), Format::Unsupported(k) if k.contains("UTF-8"))
        );
        assert!(
            matches!(detect_format(b"\xFF\xFEh\0i\0", "a.txt", ""), Format::Unsupported(k) if k.contains("UTF-16"))
        );
        assert!(
            matches!(detect_format(b"ab\0cd", "a.bin", ""), Format::Unsupported(k) if k.contains("binary"))
        );
        assert!(
            matches!(detect_format(b"<!DOCTYPE html><html>", "a", ""), Format::Unsupported(k) if k.contains("HTML"))
        );
    }

    #[test]
    fn a_character_cut_at_the_sample_end_is_still_utf8() {
        let mut bytes = "é".repeat(10).into_bytes();
        bytes.push(0xC3);
        assert!(is_utf8_prefix(&bytes));
    }

    #[test]
    fn content_types_from_extensions() {
        assert_eq!(guess_content_type("Guide.MD"), "text/markdown");
        assert_eq!(guess_content_type("x.pdf"), "application/pdf");
        assert_eq!(guess_content_type("noext"), "application/octet-stream");
    }
}
