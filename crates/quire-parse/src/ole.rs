//! OLE compound files (the container of `.doc`, `.xls`, `.ppt` and `.msg`), opened with the
//! `cfb` crate and read without trusting them: no stream is read past the size of the file it
//! came from, and all streams read from one document share the unpacking budget of
//! [`ParseLimits`].

use std::io::{Cursor, Read};
use std::panic::{AssertUnwindSafe, catch_unwind};

use cfb::CompoundFile;

use crate::{ParseError, ParseLimits};

/// The signature every compound file starts with.
pub(crate) const SIGNATURE: &[u8] = b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1";

/// What the streams at the root of a compound file say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OleKind {
    /// `WordDocument`: Word 97–2003.
    Doc,
    /// `Workbook` (or `Book`, Excel 5/95): Excel.
    Xls,
    /// `PowerPoint Document`: PowerPoint 97–2003.
    Ppt,
    /// `__substg1.0_…` properties: an Outlook message.
    Msg,
    /// `EncryptedPackage`: a password-protected DOCX, XLSX or PPTX.
    EncryptedOoxml,
}

/// The kind of compound file `bytes` is, or `None` when it cannot be opened or has none of the
/// streams Quire knows.
pub(crate) fn kind(bytes: &[u8]) -> Option<OleKind> {
    let names = guarded(|| {
        let file = CompoundFile::open(Cursor::new(bytes)).ok()?;
        Some(
            file.read_root_storage()
                .map(|entry| entry.name().to_owned())
                .collect::<Vec<_>>(),
        )
    })
    .flatten()?;
    let has = |name: &str| names.iter().any(|n| n == name);
    if has("EncryptedPackage") {
        Some(OleKind::EncryptedOoxml)
    } else if has("WordDocument") {
        Some(OleKind::Doc)
    } else if has("Workbook") || has("Book") {
        Some(OleKind::Xls)
    } else if has("PowerPoint Document") {
        Some(OleKind::Ppt)
    } else if names.iter().any(|n| n.starts_with("__substg1.0_")) {
        Some(OleKind::Msg)
    } else {
        None
    }
}

/// An opened compound file with an unpacking budget.
pub(crate) struct Ole<'a> {
    file: CompoundFile<Cursor<&'a [u8]>>,
    what: &'static str,
    len: u64,
    budget: u64,
}

impl<'a> Ole<'a> {
    /// Opens `bytes` as the compound file of a `what` (named in errors).
    pub(crate) fn open(
        bytes: &'a [u8],
        what: &'static str,
        limits: &ParseLimits,
    ) -> Result<Self, ParseError> {
        let file = guarded(|| CompoundFile::open(Cursor::new(bytes)))
            .ok_or_else(|| malformed(what, "the compound file's structure is corrupt"))?
            .map_err(|e| malformed(what, &e.to_string()))?;
        Ok(Self {
            file,
            what,
            len: bytes.len() as u64,
            budget: limits.max_unpacked_bytes,
        })
    }

    /// True when a stream or storage exists at `path` (such as `/1Table`).
    pub(crate) fn exists(&self, path: &str) -> bool {
        self.file.exists(path)
    }

    /// Names of the entries directly inside the storage at `path`.
    pub(crate) fn children(&self, path: &str) -> Vec<String> {
        match self.file.read_storage(path) {
            Ok(entries) => entries.map(|e| e.name().to_owned()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The bytes of the stream at `path`, or `None` when there is none.
    pub(crate) fn read(&mut self, path: &str) -> Result<Option<Vec<u8>>, ParseError> {
        if !self.file.is_stream(path) {
            return Ok(None);
        }
        let what = self.what;
        let declared = self
            .file
            .entry(path)
            .map_err(|e| malformed(what, &e.to_string()))?
            .len();
        // A stream is stored in the file's own sectors, so it cannot be longer than the file;
        // a header that says otherwise is corrupt and is not believed.
        if declared > self.len {
            return Err(malformed(
                what,
                &format!(
                    "the stream {path} claims {declared} bytes in a file of {}",
                    self.len
                ),
            ));
        }
        if declared > self.budget {
            return Err(ParseError::LimitExceeded(format!(
                "the {what} unpacks to more than the limit of {} bytes",
                self.budget
            )));
        }
        self.budget -= declared;
        let file = &mut self.file;
        let bytes = guarded(|| -> std::io::Result<Vec<u8>> {
            let mut stream = file.open_stream(path)?;
            let mut out = Vec::with_capacity(declared as usize);
            stream.by_ref().take(declared).read_to_end(&mut out)?;
            Ok(out)
        })
        .ok_or_else(|| malformed(what, &format!("the stream {path} is corrupt")))?
        .map_err(|e| malformed(what, &format!("the stream {path}: {e}")))?;
        Ok(Some(bytes))
    }

    /// The bytes of the stream at `path`, failing when it is missing.
    pub(crate) fn require(&mut self, path: &str) -> Result<Vec<u8>, ParseError> {
        self.read(path)?
            .ok_or_else(|| malformed(self.what, &format!("the stream {path} is missing")))
    }
}

/// Runs `f`, turning a panic inside the `cfb` crate (a corrupt file it did not anticipate)
/// into `None`, so a damaged upload fails with a reason instead of taking the worker down.
fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    catch_unwind(AssertUnwindSafe(f)).ok()
}

/// A damaged-file error for a `what`.
pub(crate) fn malformed(what: &str, detail: &str) -> ParseError {
    ParseError::Malformed {
        format: what.into(),
        detail: detail.into(),
    }
}

/// A little-endian `u16` at `at`, or `None` past the end.
pub(crate) fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

/// A little-endian `u32` at `at`, or `None` past the end.
pub(crate) fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// Decodes UTF-16LE, replacing unpaired surrogates.
pub(crate) fn utf16le(bytes: &[u8]) -> String {
    let units: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16_lossy(&units)
}

/// Decodes 8-bit text in Windows-1252, the code page of legacy Office's compressed text.
pub(crate) fn cp1252(bytes: &[u8]) -> String {
    encoding_rs::WINDOWS_1252
        .decode_without_bom_handling(bytes)
        .0
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures as build;

    #[test]
    fn the_kind_comes_from_the_root_streams() {
        let doc = build::compound(&[("/WordDocument", b"x"), ("/1Table", b"y")]);
        assert_eq!(kind(&doc), Some(OleKind::Doc));
        let xls = build::compound(&[("/Workbook", b"x")]);
        assert_eq!(kind(&xls), Some(OleKind::Xls));
        let ppt = build::compound(&[("/PowerPoint Document", b"x")]);
        assert_eq!(kind(&ppt), Some(OleKind::Ppt));
        let msg = build::compound(&[("/__substg1.0_0037001F", b"x")]);
        assert_eq!(kind(&msg), Some(OleKind::Msg));
        let other = build::compound(&[("/Contents", b"x")]);
        assert_eq!(kind(&other), None);
        let mut truncated = doc.clone();
        truncated.truncate(600);
        assert_eq!(kind(&truncated), None);
    }

    #[test]
    fn streams_count_against_the_budget() {
        let file = build::compound(&[("/A", &[1u8; 3000]), ("/B", &[2u8; 3000])]);
        let limits = ParseLimits {
            max_unpacked_bytes: 4000,
            ..ParseLimits::default()
        };
        let mut ole = Ole::open(&file, "test file", &limits).unwrap();
        assert_eq!(ole.read("/A").unwrap().unwrap().len(), 3000);
        assert!(matches!(ole.read("/B"), Err(ParseError::LimitExceeded(_))));
        assert_eq!(ole.read("/C").unwrap(), None);
    }

    #[test]
    fn garbage_after_the_signature_is_damage_not_a_panic() {
        let mut bytes = SIGNATURE.to_vec();
        bytes.extend([0xFFu8; 1000]);
        assert!(matches!(
            Ole::open(&bytes, "test file", &ParseLimits::default()),
            Err(ParseError::Malformed { .. })
        ));
    }
}
