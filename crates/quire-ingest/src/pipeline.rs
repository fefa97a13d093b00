//! From an original file to chunks: parse it (format detection and text extraction by page
//! and section, in `quire-parse`) and chunk the blocks. Pure and blocking; the worker runs it
//! off the async runtime.

use std::path::Path;

use quire_core::ChunkDraft;
use quire_parse::{Ocr, OcrSettings, ParseError, ParseLimits, parse_with_ocr};
use serde::{Deserialize, Serialize};

use crate::chunker::{ChunkingParams, chunk_blocks};

/// Why a document could not be processed. The message is stored as the document's `error` and
/// is written for the person who uploaded the file.
#[derive(Debug, thiserror::Error)]
pub enum ProcessingError {
    /// The file could not be parsed; the parse error says why.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// The original could not be read.
    #[error("could not read the stored file: {0}")]
    Io(#[from] std::io::Error),
}

/// What processing made of a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Processed {
    /// Chunks in reading order.
    pub chunks: Vec<ChunkDraft>,
    /// Number of pages.
    pub page_count: u32,
}

/// Reads the original at `path` and cuts it into chunks; scanned pages and images are read by
/// OCR when `ocr` is given.
pub fn process_file(
    path: &Path,
    name: &str,
    content_type: &str,
    chunking: ChunkingParams,
    limits: &ParseLimits,
    ocr: Option<&OcrSettings>,
) -> Result<Processed, ProcessingError> {
    let bytes = std::fs::read(path)?;
    let ocr = ocr.map(|settings| Ocr::new(settings.clone()));
    let parsed = parse_with_ocr(&bytes, name, content_type, limits, ocr.as_ref())?;
    let chunks = chunk_blocks(&parsed.blocks, chunking);
    if chunks.is_empty() {
        return Err(ParseError::Empty.into());
    }
    Ok(Processed {
        chunks,
        page_count: parsed.page_count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, bytes: &[u8]) -> Result<Processed, ProcessingError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, bytes).unwrap();
        process_file(
            &path,
            name,
            "",
            ChunkingParams::default(),
            &ParseLimits::default(),
            None,
        )
    }

    #[test]
    fn markdown_becomes_chunks_with_sections_and_pages() {
        let out = run("a.md", b"# Pump\n\nPrime it.\n\x0c## Valve\n\nClose it.").unwrap();
        assert_eq!(out.page_count, 2);
        let shape: Vec<_> = out
            .chunks
            .iter()
            .map(|c| (c.page, c.section.as_str()))
            .collect();
        assert_eq!(shape, vec![(1, "Pump"), (2, "Pump > Valve")]);
    }

    #[test]
    fn failures_explain_themselves() {
        let image = run("a.png", b"\x89PNG\r\n\x1a\n").unwrap_err().to_string();
        // Images are read by OCR since issue 17; without it the reason says how to turn it on.
        assert!(
            image.starts_with("the PNG image has no text layer and OCR is not enabled")
                && image.contains("ocr.enabled"),
            "{image}"
        );
        assert!(matches!(
            run("a.txt", b" \n\n \t"),
            Err(ProcessingError::Parse(ParseError::Empty))
        ));
        assert!(matches!(
            run("a.txt", b""),
            Err(ProcessingError::Parse(ParseError::Empty))
        ));
    }
}
