//! Quire's parsers: format detection from the bytes, and text extraction into [`Block`]s that
//! know their page and heading path, for plain text (any common encoding), Markdown, HTML, CSV
//! and TSV, PDF, DOCX, PPTX, XLSX, legacy Office (DOC, PPT, XLS), OpenDocument (ODT, ODP, ODS),
//! RTF, and e-mail (`.eml` and Outlook `.msg`) with its attachments. Pure and blocking: no
//! I/O beyond the bytes given, and every container is read under [`ParseLimits`].
//!
//! With [`Ocr`] (given to [`parse_with_ocr`]), scanned PDF pages, images (PNG, JPEG, TIFF,
//! WebP), and the pictures of DOCX and PPTX files with little text are read by Tesseract, run
//! as a separate program; that is the one exception to "no I/O", and it runs under the OCR
//! settings' page and time bounds.

mod archive;
mod blocks;
mod detect;
mod doc;
mod docx;
mod email;
mod encoding;
mod epub;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
mod html;
mod msg;
mod ocr;
mod ole;
mod opendocument;
mod page_titles;
mod pdf;
mod pictures;
mod ppt;
mod pptx;
pub mod progress;
mod raster;
mod rtf;
mod rtf_compressed;
mod spreadsheet;
mod table;
mod tabular;
#[cfg(test)]
mod test_support;
mod text;
mod xml;

pub use blocks::Block;
pub use detect::{Format, SNIFF_BYTES, detect_format, guess_content_type};
pub use encoding::{Decoded, decode_text};
pub use ocr::{Ocr, OcrSettings, Probed, probe};
pub use raster::ImageKind;
pub use table::CELL_SEPARATOR;
pub use text::{Extracted, markdown, plain_text};

/// Formats that can be parsed, for error messages.
pub const SUPPORTED_FORMATS: &str = "PDF, plain text, Markdown, HTML, CSV/TSV, DOCX, PPTX, XLSX, \
     DOC, PPT, XLS (Office 97-2003), ODT, ODP, ODS, EPUB, RTF, e-mail (.eml, Outlook .msg), and \
     with OCR PNG, JPEG, TIFF and WebP images";

/// How to turn OCR on, for the reasons of documents that need it.
pub const OCR_HOWTO: &str = "OCR would read it: install Tesseract (scripts/ocr-deps, or \
     apt-get install tesseract-ocr tesseract-ocr-eng) and set ocr.enabled = auto or true \
     (QUIRE_OCR_ENABLED)";

/// Bounds on what one document may make the parser do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseLimits {
    /// Most pages (slides, sheets) in a document.
    pub max_pages: u32,
    /// Most bytes unpacked from a container (DOCX, XLSX, …) or decoded attachments.
    pub max_unpacked_bytes: u64,
    /// Most entries in a container.
    pub max_archive_entries: usize,
    /// How deep attachments of attachments are followed.
    pub max_attachment_depth: u32,
}

impl Default for ParseLimits {
    fn default() -> Self {
        Self {
            max_pages: 5000,
            max_unpacked_bytes: 512 * 1024 * 1024,
            max_archive_entries: 20_000,
            max_attachment_depth: 3,
        }
    }
}

impl ParseLimits {
    /// Fails when `what` has more than `max_pages` pages (`unit` names them: slides, sheets).
    pub(crate) fn check_pages(
        &self,
        what: &str,
        count: usize,
        unit: &str,
    ) -> Result<(), ParseError> {
        if count > self.max_pages as usize {
            return Err(ParseError::LimitExceeded(format!(
                "{what} has {count} {unit}, more than the limit of {}",
                self.max_pages
            )));
        }
        Ok(())
    }
}

/// Why a document could not be parsed. The `Display` text is written for the person who
/// uploaded the file and becomes the document's `error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A format Quire does not read.
    #[error("unsupported format: {0} is not supported (supported: {SUPPORTED_FORMATS})")]
    Unsupported(String),
    /// The file is password-protected.
    #[error("the {0} is encrypted (password-protected); upload a copy without a password")]
    Encrypted(String),
    /// The file is damaged or truncated.
    #[error("the {format} is damaged or truncated: {detail}")]
    Malformed {
        /// What the file was taken to be.
        format: String,
        /// What was wrong.
        detail: String,
    },
    /// A kind of file Quire reads, in a variant it does not (Word 6.0/95, a PowerPoint 95
    /// deck); the text says what would work.
    #[error("the {what} cannot be read: {reason}; {remedy}")]
    Unreadable {
        /// What the file was taken to be.
        what: String,
        /// Why it cannot be read.
        reason: String,
        /// What the person could do instead, such as saving it in a newer format.
        remedy: String,
    },
    /// The file is over a limit.
    #[error("{0}")]
    LimitExceeded(String),
    /// The file has no text to index.
    #[error("the document contains no text")]
    Empty,
    /// A PDF whose pages are images without a text layer.
    #[error(
        "no extractable text; the file appears to be scanned (its pages are images without a \
         text layer, and OCR is not enabled); {OCR_HOWTO}"
    )]
    Scanned,
    /// An image document, and OCR is off.
    #[error("the {0} has no text layer and OCR is not enabled; {OCR_HOWTO}")]
    NeedsOcr(String),
    /// A DOCX or PPTX without text whose pictures OCR would read (a deck of slide images),
    /// and OCR is off.
    #[error("the {0} holds only pictures and OCR is not enabled; {OCR_HOWTO}")]
    PicturesOnly(String),
    /// OCR could not read a page (the program failed, or an image could not be decoded).
    #[error("{0}")]
    Ocr(String),
}

/// A parsed document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedDocument {
    /// What the file was.
    pub format: Format,
    /// Text blocks in reading order.
    pub blocks: Vec<Block>,
    /// Number of pages (slides, sheets), at least 1.
    pub page_count: u32,
}

/// Detects the format of `bytes` and extracts its text, without OCR.
pub fn parse(
    bytes: &[u8],
    name: &str,
    declared_type: &str,
    limits: &ParseLimits,
) -> Result<ParsedDocument, ParseError> {
    parse_at_depth(bytes, name, declared_type, limits, None, 0)
}

/// Detects the format of `bytes` and extracts its text, reading scanned pages and images with
/// `ocr` when given.
pub fn parse_with_ocr(
    bytes: &[u8],
    name: &str,
    declared_type: &str,
    limits: &ParseLimits,
    ocr: Option<&Ocr>,
) -> Result<ParsedDocument, ParseError> {
    parse_at_depth(bytes, name, declared_type, limits, ocr, 0)
}

pub(crate) fn parse_at_depth(
    bytes: &[u8],
    name: &str,
    declared_type: &str,
    limits: &ParseLimits,
    ocr: Option<&Ocr>,
    depth: u32,
) -> Result<ParsedDocument, ParseError> {
    let format = detect_format(bytes, name, declared_type);
    let extracted = match &format {
        Format::Markdown => markdown(&decode_text(bytes).text),
        Format::PlainText => plain_text(&decode_text(bytes).text),
        Format::Csv => tabular::delimited(&decode_text(bytes).text, None),
        Format::Tsv => tabular::delimited(&decode_text(bytes).text, Some(b'\t')),
        Format::Html => html::parse_page(&decode_text(bytes).text),
        Format::Docx => docx::parse(bytes, limits, ocr)?,
        Format::Pptx => pptx::parse(bytes, limits, ocr)?,
        Format::Xlsx | Format::Ods | Format::Xls => spreadsheet::parse(bytes, &format, limits)?,
        Format::Odt => opendocument::parse(bytes, false, limits)?,
        Format::Odp => opendocument::parse(bytes, true, limits)?,
        Format::Epub => epub::parse(bytes, limits)?,
        Format::Email => email::parse(bytes, limits, ocr, depth)?,
        Format::Rtf => rtf::parse(bytes)?,
        Format::Msg => msg::parse(bytes, limits, ocr, depth)?,
        Format::Doc => doc::parse(bytes, limits)?,
        Format::Ppt => ppt::parse(bytes, limits)?,
        Format::EncryptedOffice => return Err(ParseError::Encrypted(format.describe().to_owned())),
        Format::Pdf => pdf::parse(bytes, limits, ocr)?,
        Format::Image(kind) => raster::parse(bytes, *kind, limits, ocr)?,
        Format::Unsupported(kind) => return Err(ParseError::Unsupported(kind.clone())),
    };
    limits.check_pages(
        &format!("the {}", format.describe()),
        extracted.page_count as usize,
        "pages",
    )?;
    if extracted.blocks.is_empty() {
        return Err(ParseError::Empty);
    }
    Ok(ParsedDocument {
        format,
        blocks: extracted.blocks,
        page_count: extracted.page_count.max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_over_the_page_limit_fail_with_the_count() {
        let limits = ParseLimits {
            max_pages: 2,
            ..ParseLimits::default()
        };
        let err = parse(b"one\x0ctwo\x0cthree", "a.txt", "", &limits).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the text file has 3 pages, more than the limit of 2"
        );
        assert!(parse(b"one\x0ctwo", "a.txt", "", &limits).is_ok());
    }

    #[test]
    fn unsupported_formats_name_themselves() {
        let err = parse(b"GIF89a", "a.gif", "", &ParseLimits::default()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("unsupported format: GIF image is not supported"),
            "{err}"
        );
    }
}
