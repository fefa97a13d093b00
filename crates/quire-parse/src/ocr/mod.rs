//! OCR: page images read by Tesseract 5, run as a separate program (`tesseract`) for each page.
//!
//! Why a program and not a library binding: Debian's `tesseract-ocr` package is all a machine
//! needs, nothing is compiled against `libtesseract` (no bindgen, no C++ build on 2 cores),
//! and a crash or a runaway page in Tesseract ends a process we can kill at the page's time
//! budget, not the parse worker. Start-up costs some 40 ms a page, small beside the
//! recognition itself (see `docs/parsing.md`).
//!
//! Every page image is decoded under [`crate::raster`]'s pixel limits first, so Tesseract only
//! ever sees images of a bounded size, handed over on its stdin as PGM.

mod tesseract;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use image::GrayImage;

use crate::ParseError;

pub use tesseract::{Probed, probe};

/// How OCR runs: which program, which languages, and its bounds. Built from the server's
/// `[ocr]` configuration and carried to the parse worker in its request (the worker gets no
/// environment, so everything it needs is here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OcrSettings {
    /// The `tesseract` program.
    pub program: PathBuf,
    /// Tesseract language codes, joined with `+` on its command line (`["eng"]`).
    pub languages: Vec<String>,
    /// Where the language data lives (`TESSDATA_PREFIX`); `None` for the program's default.
    pub tessdata_dir: Option<PathBuf>,
    /// Most pages one document may have OCRed; more fails the document with a reason.
    pub max_pages: u32,
    /// Longest one page may take, in seconds.
    pub page_timeout_seconds: u64,
    /// The resolution page images are brought to before recognition (dots per inch).
    pub dpi: u32,
    /// Longest all of one document's OCR may take, in seconds (0: no limit besides the pages'):
    /// set a little below the document's processing time budget, so the worker stops with a
    /// reason before the server kills it.
    pub document_timeout_seconds: u64,
}

impl OcrSettings {
    /// Tesseract's `-l` argument.
    pub fn language_arg(&self) -> String {
        self.languages.join("+")
    }
}

/// Below this many visible characters, a document's pictures are read by OCR: a message whose
/// only content is a photographed letter, a Word file that is a pasted scan. Beside more text
/// than this, pictures are mostly logos, signatures and illustrations.
pub(crate) const LITTLE_TEXT: usize = 200;

/// Images smaller than this on either side are marks, logos, icons or rules, too small to hold
/// a line of text worth reading.
pub(crate) const MIN_PICTURE_SIDE: u32 = 64;

/// The characters of `text` that are not whitespace: what "little text" is measured in.
pub(crate) fn visible_chars(text: &str) -> usize {
    text.chars().filter(|c| !c.is_whitespace()).count()
}

/// OCR for one document: the settings plus the document's clock and page count.
#[derive(Debug)]
pub struct Ocr {
    settings: OcrSettings,
    started: Instant,
    /// Pages read so far (atomic: a PDF is read on a thread of its own).
    pages: AtomicU32,
}

impl Ocr {
    /// Starts the document's OCR clock now.
    pub fn new(settings: OcrSettings) -> Self {
        Self {
            settings,
            started: Instant::now(),
            pages: AtomicU32::new(0),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &OcrSettings {
        &self.settings
    }

    /// Fails when `what` needs `count` OCRed pages, more than `ocr.max_pages`; checked before
    /// any page is read, so a 2,000-page scan fails at once.
    pub(crate) fn check_pages(&self, what: &str, count: usize) -> Result<(), ParseError> {
        self.check_count(what, count, "pages")
    }

    /// Fails when `what` has `count` pictures to OCR, more than `ocr.max_pages` (each picture
    /// is a page to Tesseract); checked before any picture is read.
    pub(crate) fn check_pictures(&self, what: &str, count: usize) -> Result<(), ParseError> {
        self.check_count(what, count, "pictures")
    }

    fn check_count(&self, what: &str, count: usize, unit: &str) -> Result<(), ParseError> {
        if count > self.settings.max_pages as usize {
            return Err(ParseError::LimitExceeded(format!(
                "{what} has {count} {unit} that need OCR, more than the limit of {} \
                 (ocr.max_pages)",
                self.settings.max_pages
            )));
        }
        Ok(())
    }

    /// Reads the text of one page image, scanned at `source_dpi` (when known), as page `page`
    /// of the document (for messages).
    pub(crate) fn recognize(
        &self,
        image: &GrayImage,
        source_dpi: Option<f32>,
        page: u32,
    ) -> Result<String, ParseError> {
        let done = self.pages.load(Ordering::Relaxed);
        if done >= self.settings.max_pages {
            return Err(ParseError::LimitExceeded(format!(
                "the document has more than {} pages that need OCR (ocr.max_pages)",
                self.settings.max_pages
            )));
        }
        self.pages.store(done + 1, Ordering::Relaxed);
        let page_budget = Duration::from_secs(self.settings.page_timeout_seconds.max(1));
        let (timeout, whole_document) = match self.settings.document_timeout_seconds {
            0 => (page_budget, false),
            seconds => {
                let left = Duration::from_secs(seconds).saturating_sub(self.started.elapsed());
                if left < page_budget {
                    (left, true)
                } else {
                    (page_budget, false)
                }
            }
        };
        if timeout.is_zero() {
            return Err(self.out_of_time(page, done));
        }
        let scaled = crate::raster::to_dpi(image, source_dpi, self.settings.dpi);
        match tesseract::recognize(&self.settings, &scaled, timeout) {
            Ok(text) => Ok(text),
            Err(tesseract::Failure::TimedOut) if whole_document => {
                Err(self.out_of_time(page, done))
            }
            Err(tesseract::Failure::TimedOut) => Err(ParseError::LimitExceeded(format!(
                "OCR of page {page} took longer than the {}-second limit per page \
                 (ocr.page_timeout_seconds)",
                page_budget.as_secs()
            ))),
            Err(tesseract::Failure::Failed(detail)) => Err(ParseError::Ocr(format!(
                "OCR of page {page} failed: {detail}"
            ))),
        }
    }

    fn out_of_time(&self, page: u32, done: u32) -> ParseError {
        ParseError::LimitExceeded(format!(
            "OCR ran out of the document's time budget at page {page}, after {done} pages \
             (workers.time_budget_seconds; ocr.max_pages bounds the pages read)"
        ))
    }
}

#[cfg(test)]
mod tests;
