//! Recognising what a file is, from its bytes first: magic numbers, then the contents of ZIP
//! containers, then (for text) the name and the declared media type. A PDF called `notes.txt`
//! is a PDF.

use std::io::Cursor;

use crate::encoding::looks_binary;
use crate::ole::{self, OleKind};

/// What a file turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// PDF.
    Pdf,
    /// Word (Office Open XML).
    Docx,
    /// PowerPoint (Office Open XML).
    Pptx,
    /// Excel (Office Open XML).
    Xlsx,
    /// OpenDocument spreadsheet.
    Ods,
    /// OpenDocument text.
    Odt,
    /// OpenDocument presentation.
    Odp,
    /// EPUB book.
    Epub,
    /// Comma-separated (or semicolon/pipe-separated) values.
    Csv,
    /// Tab-separated values.
    Tsv,
    /// HTML page.
    Html,
    /// Markdown.
    Markdown,
    /// Plain text in any common encoding.
    PlainText,
    /// An e-mail message (RFC 5322, `.eml`).
    Email,
    /// Rich Text Format.
    Rtf,
    /// Word 97–2003 (`.doc`, an OLE compound file).
    Doc,
    /// Excel 97–2003 (`.xls`, an OLE compound file).
    Xls,
    /// PowerPoint 97–2003 (`.ppt`, an OLE compound file).
    Ppt,
    /// An Outlook message (`.msg`, an OLE compound file).
    Msg,
    /// An image (PNG, JPEG, TIFF, WebP), read by OCR.
    Image(crate::raster::ImageKind),
    /// A password-protected DOCX, XLSX or PPTX (stored as an OLE container).
    EncryptedOffice,
    /// Something Quire does not read; the text names it for people.
    Unsupported(String),
}

impl Format {
    /// A name for people, used in errors.
    pub fn describe(&self) -> &str {
        match self {
            Self::Pdf => "PDF document",
            Self::Docx => "DOCX document",
            Self::Pptx => "PPTX presentation",
            Self::Xlsx => "XLSX workbook",
            Self::Ods => "ODS spreadsheet",
            Self::Odt => "ODT document",
            Self::Odp => "ODP presentation",
            Self::Epub => "EPUB book",
            Self::Csv => "CSV file",
            Self::Tsv => "TSV file",
            Self::Html => "HTML page",
            Self::Markdown => "Markdown document",
            Self::PlainText => "text file",
            Self::Email => "e-mail message",
            Self::Rtf => "RTF document",
            Self::Doc => "Word 97-2003 document (.doc)",
            Self::Xls => "Excel 97-2003 workbook (.xls)",
            Self::Ppt => "PowerPoint 97-2003 presentation (.ppt)",
            Self::Msg => "Outlook message (.msg)",
            Self::Image(kind) => kind.describe(),
            Self::EncryptedOffice => "Office document (DOCX, XLSX or PPTX)",
            Self::Unsupported(kind) => kind,
        }
    }
}

/// Bytes from the start of a file used for sniffing text formats.
pub const SNIFF_BYTES: usize = 8192;

const MARKDOWN_EXTENSIONS: &[&str] = &["md", "markdown", "mdown", "mkd", "mdx"];

/// Decides the format of `bytes`, using its `name` and the client's `declared_type` only where
/// the bytes cannot tell (text formats).
pub fn detect_format(bytes: &[u8], name: &str, declared_type: &str) -> Format {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES)];
    let ext = extension(name);
    if head[..head.len().min(1024)]
        .windows(5)
        .any(|w| w == b"%PDF-")
    {
        return Format::Pdf;
    }
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return zip_format(bytes, ext.as_deref());
    }
    if head.starts_with(ole::SIGNATURE) {
        return ole_format(bytes, ext.as_deref());
    }
    if head.starts_with(b"{\\rtf") {
        return Format::Rtf;
    }
    if let Some(kind) = crate::raster::ImageKind::sniff(head) {
        return Format::Image(kind);
    }
    if let Some(kind) = binary_kind(head) {
        return Format::Unsupported(kind.to_owned());
    }
    if looks_binary(head) {
        return Format::Unsupported("binary data of an unrecognised type".into());
    }
    let declared = declared_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let ext = ext.as_deref();
    let text_head = String::from_utf8_lossy(head);
    if matches!(ext, Some("html" | "htm" | "xhtml"))
        || declared == "text/html"
        || looks_like_html(&text_head)
    {
        Format::Html
    } else if ext == Some("eml") || declared == "message/rfc822" || looks_like_email(&text_head) {
        Format::Email
    } else if ext == Some("tsv") || declared == "text/tab-separated-values" {
        Format::Tsv
    } else if ext == Some("csv") || declared == "text/csv" {
        Format::Csv
    } else if ext.is_some_and(|e| MARKDOWN_EXTENSIONS.contains(&e)) || declared == "text/markdown" {
        Format::Markdown
    } else {
        Format::PlainText
    }
}

/// Looks inside a ZIP container for the parts that identify Office and OpenDocument files.
fn zip_format(bytes: &[u8], ext: Option<&str>) -> Format {
    let Ok(mut zip) = zip::ZipArchive::new(Cursor::new(bytes)) else {
        // Unreadable: trust the name, so the parser can say which kind of file is damaged.
        return match ext {
            Some("docx") => Format::Docx,
            Some("pptx") => Format::Pptx,
            Some("xlsx") => Format::Xlsx,
            Some("ods") => Format::Ods,
            Some("odt") => Format::Odt,
            Some("odp") => Format::Odp,
            Some("epub") => Format::Epub,
            _ => Format::Unsupported("damaged or truncated ZIP archive".into()),
        };
    };
    let has = |zip: &zip::ZipArchive<_>, name: &str| zip.index_for_name(name).is_some();
    if has(&zip, "word/document.xml") {
        return Format::Docx;
    }
    if has(&zip, "ppt/presentation.xml") {
        return Format::Pptx;
    }
    if has(&zip, "xl/workbook.xml") {
        return Format::Xlsx;
    }
    let mimetype = zip.by_name("mimetype").ok().and_then(|mut entry| {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(&mut entry, 200), &mut text).ok()?;
        Some(text.trim().to_owned())
    });
    match mimetype.as_deref() {
        Some("application/vnd.oasis.opendocument.spreadsheet") => Format::Ods,
        Some("application/vnd.oasis.opendocument.text") => Format::Odt,
        Some("application/vnd.oasis.opendocument.presentation") => Format::Odp,
        Some("application/epub+zip") => Format::Epub,
        _ => Format::Unsupported("ZIP archive".into()),
    }
}

/// Tells compound files apart by their streams; one that cannot be opened is taken by its name,
/// so the parser can say which kind of file is damaged.
fn ole_format(bytes: &[u8], ext: Option<&str>) -> Format {
    match ole::kind(bytes) {
        Some(OleKind::EncryptedOoxml) => Format::EncryptedOffice,
        Some(OleKind::Doc) => Format::Doc,
        Some(OleKind::Xls) => Format::Xls,
        Some(OleKind::Ppt) => Format::Ppt,
        Some(OleKind::Msg) => Format::Msg,
        None if is_encrypted_ooxml(bytes) => Format::EncryptedOffice,
        None => match ext {
            Some("doc" | "dot") => Format::Doc,
            Some("xls" | "xlt") => Format::Xls,
            Some("ppt" | "pot" | "pps") => Format::Ppt,
            Some("msg") => Format::Msg,
            _ => Format::Unsupported("OLE compound file of an unrecognised kind".into()),
        },
    }
}

/// Office encrypts a DOCX, XLSX or PPTX by wrapping it in an OLE container whose directory
/// names an `EncryptedPackage` stream (stored as UTF-16).
fn is_encrypted_ooxml(bytes: &[u8]) -> bool {
    let marker: Vec<u8> = "EncryptedPackage"
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    bytes.windows(marker.len()).any(|w| w == marker.as_slice())
}

/// A media type for a file whose client sent none (or only `application/octet-stream`).
pub fn guess_content_type(name: &str) -> &'static str {
    match extension(name).as_deref() {
        Some(e) if MARKDOWN_EXTENSIONS.contains(&e) => "text/markdown",
        Some("txt" | "text" | "log") => "text/plain",
        Some("csv") => "text/csv",
        Some("tsv") => "text/tab-separated-values",
        Some("html" | "htm") => "text/html",
        Some("pdf") => "application/pdf",
        Some("docx") => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        Some("pptx") => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        Some("xlsx") => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        Some("ods") => "application/vnd.oasis.opendocument.spreadsheet",
        Some("odt") => "application/vnd.oasis.opendocument.text",
        Some("odp") => "application/vnd.oasis.opendocument.presentation",
        Some("epub") => "application/epub+zip",
        Some("eml") => "message/rfc822",
        Some("rtf") => "application/rtf",
        Some("doc") => "application/msword",
        Some("xls") => "application/vnd.ms-excel",
        Some("ppt") => "application/vnd.ms-powerpoint",
        Some("msg") => "application/vnd.ms-outlook",
        _ => "application/octet-stream",
    }
}

fn extension(name: &str) -> Option<String> {
    let (_, ext) = name.rsplit_once('.')?;
    Some(ext.to_ascii_lowercase())
}

fn binary_kind(head: &[u8]) -> Option<&'static str> {
    const MAGIC: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "PNG image"),
        (b"\xFF\xD8\xFF", "JPEG image"),
        (b"GIF87a", "GIF image"),
        (b"GIF89a", "GIF image"),
        (b"II*\x00", "TIFF image"),
        (b"MM\x00*", "TIFF image"),
        (b"\x1F\x8B", "gzip archive"),
        (b"7z\xBC\xAF\x27\x1C", "7-Zip archive"),
        (b"Rar!", "RAR archive"),
        (b"ID3", "MP3 audio"),
        (b"\x7FELF", "executable (ELF)"),
        (b"MZ", "Windows executable"),
    ];
    MAGIC
        .iter()
        .find(|(magic, _)| head.starts_with(magic))
        .map(|(_, kind)| *kind)
}

fn looks_like_html(text: &str) -> bool {
    let start = text
        .trim_start_matches('\u{feff}')
        .trim_start()
        .to_ascii_lowercase();
    start.starts_with("<!doctype html") || start.starts_with("<html") || start.starts_with("<head")
}

/// True when the text starts with RFC 5322 headers that only mail has.
fn looks_like_email(text: &str) -> bool {
    const MAIL_HEADERS: &[&str] = &[
        "from",
        "to",
        "subject",
        "date",
        "received",
        "message-id",
        "mime-version",
        "return-path",
        "delivered-to",
        "cc",
        "reply-to",
        "content-type",
        "x-mailer",
    ];
    let mut found = 0;
    for line in text.lines().take(40) {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let Some((name, _)) = line.split_once(':') else {
            return false;
        };
        if name.contains(' ') {
            return false;
        }
        if MAIL_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            found += 1;
        }
    }
    found >= 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_numbers_beat_file_names() {
        assert_eq!(
            detect_format(b"%PDF-1.7\n...", "notes.txt", "text/plain"),
            Format::Pdf
        );
        assert_eq!(detect_format(b"PK\x03\x04junk", "a.docx", ""), Format::Docx);
        assert!(
            matches!(detect_format(b"PK\x03\x04junk", "a.zip", ""), Format::Unsupported(k) if k.contains("damaged"))
        );
        // A compound file too damaged to open is taken by its name.
        assert_eq!(
            detect_format(b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1", "a.doc", ""),
            Format::Doc
        );
        assert!(matches!(
            detect_format(b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1", "a.bin", ""),
            Format::Unsupported(_)
        ));
    }

    #[test]
    fn encrypted_office_files_are_told_apart_from_legacy_ones() {
        let mut bytes = b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1".to_vec();
        bytes.extend([0u8; 64]);
        bytes.extend("EncryptedPackage".encode_utf16().flat_map(u16::to_le_bytes));
        assert_eq!(
            detect_format(&bytes, "secret.docx", ""),
            Format::EncryptedOffice
        );
    }

    #[test]
    fn text_formats_by_content_name_or_declared_type() {
        assert_eq!(detect_format(b"# Title", "a.md", ""), Format::Markdown);
        assert_eq!(
            detect_format(b"# Title", "a", "text/markdown; charset=utf-8"),
            Format::Markdown
        );
        assert_eq!(
            detect_format(b"hello", "a.txt", "text/plain"),
            Format::PlainText
        );
        assert_eq!(detect_format(b"a,b\n1,2", "a.csv", ""), Format::Csv);
        assert_eq!(detect_format(b"a\tb\n1\t2", "a.tsv", ""), Format::Tsv);
        assert_eq!(
            detect_format(b"<!DOCTYPE html><html>", "page", ""),
            Format::Html
        );
        let mail = b"From: a@example.com\r\nTo: b@example.com\r\nSubject: hi\r\nDate: Mon, 1 Jan 2024 10:00:00 +0000\r\n\r\nbody";
        assert_eq!(detect_format(mail, "message.txt", ""), Format::Email);
        assert_eq!(
            detect_format(b"Note: this is text\nAnother: line", "n.txt", ""),
            Format::PlainText
        );
        assert!(matches!(
            detect_format(b"ab\0cd\x01\x02", "a.bin", ""),
            Format::Unsupported(_)
        ));
    }

    #[test]
    fn content_types_from_extensions() {
        assert_eq!(guess_content_type("Guide.MD"), "text/markdown");
        assert_eq!(guess_content_type("x.pdf"), "application/pdf");
        assert_eq!(guess_content_type("noext"), "application/octet-stream");
    }
}
