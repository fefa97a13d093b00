//! From an original file to chunks: detect the format, extract text by page and section, and
//! chunk it. Pure and blocking; the worker runs it off the async runtime.

use std::io::Read;
use std::path::Path;

use quire_core::ChunkDraft;

use crate::chunker::{ChunkingParams, chunk_blocks};
use crate::extract;
use crate::format::{Format, SNIFF_BYTES, detect_format};

/// Why a document could not be processed. The message is stored as the document's `error` and
/// is written for the person who uploaded the file.
#[derive(Debug, thiserror::Error)]
pub enum ProcessingError {
    /// The format is not one Quire can read.
    #[error(
        "unsupported format: {0} is not supported; supported formats are plain text and Markdown (UTF-8)"
    )]
    Unsupported(String),
    /// The file has no text to index.
    #[error("the document contains no text")]
    Empty,
    /// The text is not valid UTF-8 past the part used to detect the format.
    #[error("the file is not valid UTF-8 text (invalid byte at offset {0})")]
    InvalidUtf8(usize),
    /// The original could not be read.
    #[error("could not read the stored file: {0}")]
    Io(#[from] std::io::Error),
}

/// What processing made of a document.
#[derive(Debug, Clone)]
pub struct Processed {
    /// Chunks in reading order.
    pub chunks: Vec<ChunkDraft>,
    /// Number of pages.
    pub page_count: u32,
}

/// Reads the original at `path` and cuts it into chunks.
pub fn process_file(
    path: &Path,
    name: &str,
    content_type: &str,
    chunking: ChunkingParams,
) -> Result<Processed, ProcessingError> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.read_to_end(&mut bytes)?;
    let head = &bytes[..bytes.len().min(SNIFF_BYTES)];
    let format = detect_format(head, name, content_type);
    let text = match &format {
        Format::Unsupported(kind) => return Err(ProcessingError::Unsupported(kind.clone())),
        Format::Markdown | Format::PlainText => {
            let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
            std::str::from_utf8(body).map_err(|e| ProcessingError::InvalidUtf8(e.valid_up_to()))?
        }
    };
    let extracted = match format {
        Format::Markdown => extract::markdown(text),
        _ => extract::plain_text(text),
    };
    let chunks = chunk_blocks(&extracted.blocks, chunking);
    if chunks.is_empty() {
        return Err(ProcessingError::Empty);
    }
    Ok(Processed {
        chunks,
        page_count: extracted.page_count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, bytes: &[u8]) -> Result<Processed, ProcessingError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, bytes).unwrap();
        process_file(&path, name, "", ChunkingParams::default())
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
        let pdf = run("a.pdf", b"%PDF-1.4 ...").unwrap_err().to_string();
        assert!(pdf.contains("PDF document is not supported"), "{pdf}");
        assert!(matches!(
            run("a.txt", b" \n\n \t"),
            Err(ProcessingError::Empty)
        ));
        let mut late_bad = vec![b'a'; SNIFF_BYTES + 10];
        late_bad.push(0xFF);
        assert!(
            matches!(run("a.txt", &late_bad), Err(ProcessingError::InvalidUtf8(n)) if n == SNIFF_BYTES + 10)
        );
    }
}
