//! Helpers shared by the parsers' unit tests.

use std::io::{Cursor, Write};

use zip::ZipWriter;
use zip::write::SimpleFileOptions;

use crate::Block;

/// A ZIP container with the given `(path, content)` entries, in order.
pub(crate) fn zip_package(entries: &[(&str, &str)]) -> Vec<u8> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    for (path, content) in entries {
        zip.start_file(*path, SimpleFileOptions::default()).unwrap();
        zip.write_all(content.as_bytes()).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// Blocks as `(page, section, text)`, for comparing with what a test expects.
pub(crate) fn shape(blocks: &[Block]) -> Vec<(u32, &str, &str)> {
    blocks
        .iter()
        .map(|b| (b.page, b.section.as_str(), b.text.as_str()))
        .collect()
}
