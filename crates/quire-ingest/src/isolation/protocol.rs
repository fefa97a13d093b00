//! What the server and a parse worker say to each other. The request is a [`WorkerRequest`]
//! (a [`ParseJob`] and its [`Budgets`]) as JSON on the worker's stdin; the answer is a
//! [`WorkerResponse`] as JSON on its stdout (one line each for a pooled worker); while it parses,
//! the worker reports pages on its stderr in lines starting with [`PAGE_LINE`].

use std::path::PathBuf;

use quire_parse::{OcrSettings, ParseLimits};
use serde::{Deserialize, Serialize};

use crate::chunker::ChunkingParams;
use crate::pipeline::{OutputLimits, Processed};

/// The document's error when parsing crashed; the details go to the log only.
pub(super) const CRASHED: &str = "internal error: processing this file crashed; see the server log";
pub(super) const MIB: u64 = 1024 * 1024;

/// One document to parse and chunk.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParseJob {
    /// The stored original.
    pub path: PathBuf,
    /// The document's file name (format detection uses its extension).
    pub name: String,
    /// The document's media type.
    pub content_type: String,
    /// How to cut it into chunks.
    pub chunking: ChunkingParams,
    /// Bounds on parsing it.
    #[serde(with = "LimitsOnTheWire")]
    pub limits: ParseLimits,
    /// How to OCR scanned pages and images; `None` when OCR is off. The worker has no
    /// environment, so the program, the languages and the data directory all travel here.
    /// A request without the field means OCR off, as before OCR existed.
    #[serde(default, with = "optional_ocr")]
    pub ocr: Option<OcrSettings>,
    /// Bounds on the text and chunks it may become.
    pub output: OutputLimits,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WorkerRequest {
    pub(super) job: ParseJob,
    pub(super) budgets: Budgets,
}

/// What the worker may use for its document; 0 for no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Budgets {
    /// Address space on top of the worker's size at start.
    pub(super) memory_bytes: u64,
    /// CPU time, a backstop for a worker whose server died: the server kills it long before.
    pub(super) cpu_seconds: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum WorkerResponse {
    Processed(Processed),
    /// An allocation that reports failure (reading the file) failed; allocations that cannot
    /// report it abort the worker instead, which the parent reads from its stderr.
    OutOfMemory,
    /// `message` becomes the document's error; `log` is for the server log only.
    Failed {
        message: String,
        log: Option<String>,
    },
}

/// `ParseLimits` lives in `quire-parse`, which knows nothing of serde; serde's remote derive
/// carries it. Deserializing builds the struct from every field named here, so a new limit does
/// not compile until it is carried too.
#[derive(Serialize, Deserialize)]
#[serde(remote = "ParseLimits", deny_unknown_fields)]
struct LimitsOnTheWire {
    max_pages: u32,
    max_unpacked_bytes: u64,
    max_archive_entries: usize,
    max_attachment_depth: u32,
}

/// `OcrSettings` lives in `quire-parse` too; the same kind of remote derive carries it.
#[derive(Serialize, Deserialize)]
#[serde(remote = "OcrSettings", deny_unknown_fields)]
struct OcrOnTheWire {
    program: std::path::PathBuf,
    languages: Vec<String>,
    tessdata_dir: Option<std::path::PathBuf>,
    max_pages: u32,
    page_timeout_seconds: u64,
    dpi: u32,
    document_timeout_seconds: u64,
}

/// `Option<OcrSettings>` through [`OcrOnTheWire`] (a remote derive covers the type itself only).
mod optional_ocr {
    use quire_parse::OcrSettings;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    struct Borrowed<'a>(&'a OcrSettings);

    impl Serialize for Borrowed<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            super::OcrOnTheWire::serialize(self.0, serializer)
        }
    }

    #[derive(Deserialize)]
    struct Owned(#[serde(with = "super::OcrOnTheWire")] OcrSettings);

    pub(super) fn serialize<S: Serializer>(
        ocr: &Option<OcrSettings>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        ocr.as_ref().map(Borrowed).serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<OcrSettings>, D::Error> {
        Ok(Option::<Owned>::deserialize(deserializer)?.map(|Owned(settings)| settings))
    }
}

/// How a worker process reports a page read: a line on its stderr starting with this, then
/// `done/total`. Stderr, because stdout carries the one JSON answer.
pub(super) const PAGE_LINE: &str = "quire-parse-pages ";

/// `(done, total)` from a worker's page line (`quire-parse-pages 3/12`), `None` for any other
/// line.
pub(super) fn page_report(line: &[u8]) -> Option<(u32, u32)> {
    let text = std::str::from_utf8(line).ok()?.trim_end();
    let (done, total) = text.strip_prefix(PAGE_LINE)?.split_once('/')?;
    Some((done.parse().ok()?, total.parse().ok()?))
}

impl WorkerResponse {
    /// The document's result: what the worker parsed, or the error the document is failed with.
    pub(super) fn into_result(self, memory_limit_bytes: u64) -> Result<Processed, String> {
        match self {
            WorkerResponse::Processed(processed) => Ok(processed),
            WorkerResponse::OutOfMemory => Err(out_of_memory(memory_limit_bytes)),
            WorkerResponse::Failed { message, log } => {
                if let Some(log) = log {
                    tracing::error!(error = %log, "document processing failed");
                }
                Err(message)
            }
        }
    }
}

/// The document's error when parsing needed more memory than it had; `limit_bytes` is 0 when
/// there was no limit but the machine's.
pub(super) fn out_of_memory(limit_bytes: u64) -> String {
    if limit_bytes == 0 {
        "processing this file needed more memory than the server had available".into()
    } else {
        format!(
            "processing this file needed more than the {} MiB memory limit",
            limit_bytes.div_ceil(MIB)
        )
    }
}
