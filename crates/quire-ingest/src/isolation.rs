//! Where a document is parsed. By default in a child process (`quire parse-worker`): the server
//! kills it when the time budget runs out, the child holds its own address space to a memory
//! budget, and a crash (a native abort, a failed allocation) fails that document instead of
//! taking the server down. [`Isolation::ChildProcess`] starts a process per document,
//! [`Isolation::Pooled`] (the server's default) keeps each for several documents with the same
//! budgets per document. [`Isolation::InProcess`] parses on the blocking thread pool instead,
//! for unit tests and as an opt-out.
//!
//! The protocol is one JSON request on the child's stdin and one JSON response on its stdout;
//! the end of its stderr is kept for the log. A pooled worker (`quire parse-worker --serve`)
//! takes one request and gives one answer per line; see [`WorkerPool`].
//!
//! - [`protocol`]: the request and the answer, and the page lines on the worker's stderr;
//! - [`parent`]: the server's side: choosing where to parse, starting a worker, talking to it,
//!   killing it at the time budget, and reading how it ended;
//! - [`pool`]: the server's workers kept across documents;
//! - [`stderr`]: a worker's stderr as the server reads it, page lines and the log's tail;
//! - [`child`]: the worker's side: its resource limits, parsing, and answering.

mod child;
#[cfg(all(test, unix))]
mod fixtures;
mod parent;
mod pool;
mod protocol;
mod stderr;

pub use child::{WorkerError, run_parse_worker, serve_parse_requests};
pub use parent::{Isolation, WorkerCommand, WorkerEnd, WorkerRun, run_worker};
pub(crate) use parent::{PagesRead, parse_isolated};
pub use pool::WorkerPool;
pub use protocol::ParseJob;
