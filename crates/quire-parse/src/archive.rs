//! Reading ZIP containers (DOCX, XLSX, PPTX, OpenDocument, EPUB) without trusting them: the
//! number of entries and every byte unpacked count against the limits, so a zip bomb fails fast
//! instead of filling memory.

use std::io::{Cursor, Read};

use zip::ZipArchive;
use zip::result::ZipError;

use crate::{ParseError, ParseLimits};

/// An opened ZIP container with an unpacking budget.
pub(crate) struct Archive<'a> {
    zip: ZipArchive<Cursor<&'a [u8]>>,
    what: &'static str,
    budget: u64,
}

impl<'a> Archive<'a> {
    /// Opens `bytes` as the container of a `what` (named in errors).
    pub(crate) fn open(
        bytes: &'a [u8],
        what: &'static str,
        limits: &ParseLimits,
    ) -> Result<Self, ParseError> {
        let zip = ZipArchive::new(Cursor::new(bytes)).map_err(|e| malformed(what, &e))?;
        if zip.len() > limits.max_archive_entries {
            return Err(ParseError::LimitExceeded(format!(
                "the {what} holds {} files, more than the limit of {}",
                zip.len(),
                limits.max_archive_entries
            )));
        }
        if let Some(declared) = zip.decompressed_size()
            && declared > u128::from(limits.max_unpacked_bytes)
        {
            return Err(too_big(what, limits.max_unpacked_bytes));
        }
        Ok(Self {
            zip,
            what,
            budget: limits.max_unpacked_bytes,
        })
    }

    /// Names of the entries, in archive order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.zip
            .file_names()
            .filter_map(Result::ok)
            .map(|n| n.into_owned())
            .collect()
    }

    /// The bytes of entry `name`, or `None` when there is none.
    pub(crate) fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, ParseError> {
        let what = self.what;
        let entry = match self.zip.by_name(name) {
            Ok(entry) => entry,
            Err(ZipError::FileNotFound) => return Ok(None),
            Err(ZipError::UnsupportedArchive(m)) if m.contains("assword") => {
                return Err(ParseError::Encrypted(what.to_owned()));
            }
            Err(e) => return Err(malformed(what, &e)),
        };
        if entry.encrypted() {
            return Err(ParseError::Encrypted(what.to_owned()));
        }
        let mut bytes = Vec::new();
        // Read one byte past the budget to tell "exactly at" from "over".
        entry
            .take(self.budget + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| ParseError::Malformed {
                format: what.to_owned(),
                detail: e.to_string(),
            })?;
        let read = bytes.len() as u64;
        if read > self.budget {
            return Err(too_big(what, self.budget));
        }
        self.budget -= read;
        Ok(Some(bytes))
    }

    /// Entry `name` as text (XML parts are UTF-8).
    pub(crate) fn read_text(&mut self, name: &str) -> Result<Option<String>, ParseError> {
        Ok(self
            .read(name)?
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// Entry `name`, which the format requires.
    pub(crate) fn require_text(&mut self, name: &str) -> Result<String, ParseError> {
        self.read_text(name)?.ok_or_else(|| ParseError::Malformed {
            format: self.what.to_owned(),
            detail: format!("the part {name} is missing"),
        })
    }
}

fn malformed(what: &str, e: &ZipError) -> ParseError {
    ParseError::Malformed {
        format: what.to_owned(),
        detail: format!("not a readable ZIP container ({e})"),
    }
}

fn too_big(what: &str, limit: u64) -> ParseError {
    ParseError::LimitExceeded(format!(
        "the {what} unpacks to more than {} MiB (the limit; it may be a zip bomb)",
        limit / (1024 * 1024)
    ))
}
