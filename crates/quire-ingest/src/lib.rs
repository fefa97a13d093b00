//! Quire's ingestion: storing originals, parsing them (with `quire-parse`), chunking, and the background job runner that turns an upload into searchable
//! chunks. The HTTP layer calls [`Ingest`]; the workers run in [`JobRunner`].

mod chunker;
mod context;
mod finish;
mod follow;
mod isolation;
mod lease;
mod originals;
pub mod pii;
mod pipeline;
mod progress;
mod query_batch;
mod review;
mod semantic;
mod service;
#[cfg(test)]
mod test_store;
mod worker;

pub use chunker::{
    ChunkingParams, TokenCounting, WHOLE_SECTIONS, chunk_blocks, cut_to_window, estimate_tokens,
};
pub use context::document_title;
pub use finish::Finishing;
pub use follow::{FEED_POSITION, FeedFollower};
pub use isolation::{
    Isolation, ParseJob, WorkerCommand, WorkerEnd, WorkerError, WorkerPool, WorkerRun,
    run_parse_worker, run_worker, serve_parse_requests,
};
pub use originals::{StageError, StagedFile, StagedUpload, Staging, StagingLimits};
pub use pipeline::{OutputLimits, Processed, ProcessingError, process_file};
pub use progress::{CHUNKS_EMBEDDED, REPORT_EVERY, STAGE_SECONDS};
pub use query_batch::QUERIES_PER_EMBEDDING_CALL;
pub use quire_files::{FilesError, OriginalStore};
pub use quire_parse::{Block, CELL_SEPARATOR, OcrSettings, ParseLimits, probe as probe_ocr};
pub use review::{Review, reduce_findings};
pub use semantic::{BackfillReport, Semantic, SemanticError, embedding_text};
pub use service::{Ingest, IngestError, IngestSettings, Next, Upload, clean_file_name};
pub use worker::{JobRunner, WorkerSettings};
