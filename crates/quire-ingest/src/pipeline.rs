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
    /// The text extracted is more than one document may hold.
    #[error(
        "the document's text is larger than the {} MiB limit (parsing.max_text_mb); split it \
         into smaller files",
        .limit.div_ceil(1024 * 1024)
    )]
    TextTooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The text makes more chunks than one document may have.
    #[error(
        "the document makes more than {limit} chunks (parsing.max_chunks); split it into \
         smaller files"
    )]
    TooManyChunks {
        /// The limit.
        limit: u32,
    },
}

/// Bounds on what one document may become: its text and its chunks are held in memory while
/// they are screened, embedded and stored, so they are capped rather than left to the size of
/// the upload (an archive or a text file can unpack to hundreds of MiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputLimits {
    /// Most bytes of text extracted from one document.
    pub max_text_bytes: u64,
    /// Most chunks of one document.
    pub max_chunks: u32,
}

impl Default for OutputLimits {
    fn default() -> Self {
        Self {
            max_text_bytes: 64 * 1024 * 1024,
            max_chunks: 100_000,
        }
    }
}

/// What processing made of a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Processed {
    /// Chunks in reading order.
    pub chunks: Vec<ChunkDraft>,
    /// Number of pages.
    pub page_count: u32,
}

/// Reads the original at `path` and cuts it into chunks, within `output`'s bounds; scanned
/// pages and images are read by OCR when `ocr` is given.
pub fn process_file(
    path: &Path,
    name: &str,
    content_type: &str,
    chunking: ChunkingParams,
    limits: &ParseLimits,
    ocr: Option<&OcrSettings>,
    output: OutputLimits,
) -> Result<Processed, ProcessingError> {
    let bytes = std::fs::read(path)?;
    let ocr = ocr.map(|settings| Ocr::new(settings.clone()));
    let parsed = parse_with_ocr(&bytes, name, content_type, limits, ocr.as_ref())?;
    drop(bytes);
    let text_bytes: u64 = parsed.blocks.iter().map(|b| b.text.len() as u64).sum();
    if text_bytes > output.max_text_bytes {
        return Err(ProcessingError::TextTooLarge {
            limit: output.max_text_bytes,
        });
    }
    let chunks = chunk_blocks(&parsed.blocks, chunking);
    if chunks.is_empty() {
        return Err(ParseError::Empty.into());
    }
    if chunks.len() > output.max_chunks as usize {
        return Err(ProcessingError::TooManyChunks {
            limit: output.max_chunks,
        });
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
            OutputLimits::default(),
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

    #[test]
    fn text_and_chunks_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let text = "word ".repeat(20_000);
        std::fs::write(&path, &text).unwrap();
        let with = |output| {
            process_file(
                &path,
                "big.txt",
                "",
                ChunkingParams::default(),
                &ParseLimits::default(),
                None,
                output,
            )
        };
        let fine = with(OutputLimits::default()).unwrap();
        assert!(fine.chunks.len() > 2);
        let error = with(OutputLimits {
            max_text_bytes: 1024,
            ..OutputLimits::default()
        })
        .unwrap_err();
        assert!(error.to_string().contains("parsing.max_text_mb"), "{error}");
        let error = with(OutputLimits {
            max_chunks: 2,
            ..OutputLimits::default()
        })
        .unwrap_err();
        assert!(error.to_string().contains("more than 2 chunks"), "{error}");
    }
}
