//! Quire's ingestion: storing originals, recognising formats, extracting text with pages and
//! sections, chunking, and the background job runner that turns an upload into searchable
//! chunks. The HTTP layer calls [`Ingest`]; the workers run in [`JobRunner`].

mod chunker;
mod extract;
mod format;
mod originals;
mod pipeline;
mod service;
mod worker;

pub use chunker::{ChunkingParams, chunk_blocks, estimate_tokens};
pub use extract::{Block, Extracted};
pub use format::{Format, detect_format, guess_content_type};
pub use originals::{Originals, StageError, StagedFile, StagedUpload};
pub use pipeline::{Processed, ProcessingError, process_file};
pub use service::{Ingest, IngestError, IngestSettings, Upload, clean_file_name};
pub use worker::{JobRunner, WorkerSettings};
