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

mod pool;

pub use pool::WorkerPool;

use std::io::{BufRead, BufWriter, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use quire_parse::{OcrSettings, ParseLimits};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use crate::chunker::ChunkingParams;
use crate::pipeline::{OutputLimits, Processed, ProcessingError, process_file};

/// The document's error when parsing crashed; the details go to the log only.
const CRASHED: &str = "internal error: processing this file crashed; see the server log";
/// How much of the end of the worker's stderr is kept: an abort's reason is printed last.
const STDERR_TAIL_BYTES: usize = 16 * 1024;
/// Largest request the worker reads (a request is a path, two names and a few numbers).
const MAX_REQUEST_BYTES: u64 = 1024 * 1024;
const MIB: u64 = 1024 * 1024;

/// Where documents are parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// On the server's blocking thread pool: a hang is abandoned at the time budget but keeps
    /// its thread, there is no memory budget, and a native crash takes the server down. For
    /// unit tests and as an opt-out.
    InProcess,
    /// In a child process per document, killed at the time budget and held to a memory budget.
    ChildProcess(WorkerCommand),
    /// In child processes that each parse up to a number of documents one after another, with
    /// the same time and memory budget per document and the same handling of a crash, which
    /// also ends the process (see [`WorkerPool`]).
    Pooled(WorkerPool),
}

/// How to start the parse worker, and how much memory it may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    /// The program, normally the running `quire` binary.
    pub program: PathBuf,
    /// Its arguments, normally `["parse-worker"]`.
    pub args: Vec<String>,
    /// Address space the worker may add to its size at start for one document; 0 for no limit.
    pub memory_limit_bytes: u64,
}

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
struct WorkerRequest {
    job: ParseJob,
    budgets: Budgets,
}

/// What the worker may use for its document; 0 for no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Budgets {
    /// Address space on top of the worker's size at start.
    memory_bytes: u64,
    /// CPU time, a backstop for a worker whose server died: the server kills it long before.
    cpu_seconds: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum WorkerResponse {
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

/// Where the parse reports `(pages read, pages in all)` while it runs (PDF and TIFF pages).
pub(crate) type PagesRead = tokio::sync::watch::Sender<Option<(u32, u32)>>;

/// How a worker process reports a page read: a line on its stderr starting with this, then
/// `done/total`. Stderr, because stdout carries the one JSON answer.
const PAGE_LINE: &str = "quire-parse-pages ";

/// Shortest time between two page reports from a worker process: a thousand small pages do
/// not need a thousand lines.
const PAGE_REPORT_EVERY: Duration = Duration::from_millis(250);

/// Parses and chunks `job` where `isolation` says, within `budget`, telling `pages` how far
/// it has come. The error is the document's `error`, written for the person who uploaded the
/// file.
pub(crate) async fn parse_isolated(
    isolation: &Isolation,
    job: ParseJob,
    budget: Duration,
    pages: PagesRead,
) -> Result<Processed, String> {
    match isolation {
        Isolation::InProcess => in_process(job, budget, pages).await,
        Isolation::ChildProcess(command) => in_child(command, job, budget, pages).await,
        Isolation::Pooled(pool) => pool.parse(job, budget, pages).await,
    }
}

fn over_time(budget: Duration) -> String {
    format!(
        "processing took longer than the {}-second limit",
        budget.as_secs()
    )
}

async fn in_process(
    job: ParseJob,
    budget: Duration,
    pages: PagesRead,
) -> Result<Processed, String> {
    let task = tokio::task::spawn_blocking(move || {
        let report = move |done, total| {
            pages.send_replace(Some((done, total)));
        };
        quire_parse::progress::observe(report, || parse_job(&job))
    });
    match tokio::time::timeout(budget, task).await {
        Err(_) => Err(over_time(budget)),
        Ok(Err(join)) => {
            tracing::error!(error = %join, "document processing crashed");
            Err(CRASHED.into())
        }
        Ok(Ok(response)) => response.into_result(0),
    }
}

async fn in_child(
    command: &WorkerCommand,
    job: ParseJob,
    budget: Duration,
    pages: PagesRead,
) -> Result<Processed, String> {
    run_child(command, job, budget, pages).await.result
}

/// How a parse worker's run ended, told apart more finely than the document's error does: to
/// the server each of these is a ready or failed document, but `quire bench fuzz` counts a
/// crash or a panic as a parser bug and a timeout or the memory budget as a limit at work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerEnd {
    /// The worker answered: the document parsed, or failed with a reason.
    Answered,
    /// A parser panicked; the worker caught it and answered the crash message.
    Panicked,
    /// The worker ran past the time budget and was killed.
    TimedOut,
    /// The worker ran out of its memory budget.
    OutOfMemory,
    /// The worker died without a usable answer (a signal, an abort, an exit before answering,
    /// an answer that is not the protocol's, or none at all); `how` says what was seen.
    Crashed {
        /// The exit status, or what else went wrong.
        how: String,
    },
}

/// One document through a parse worker process, as [`run_worker`] reports it.
#[derive(Debug)]
pub struct WorkerRun {
    /// The document's result exactly as the server records it.
    pub result: Result<Processed, String>,
    /// How the worker ended.
    pub end: WorkerEnd,
    /// The end of the worker's stderr (a panic's or an abort's message is printed last).
    pub stderr: String,
}

impl WorkerRun {
    fn without_worker(result: Result<Processed, String>, end: WorkerEnd) -> Self {
        Self {
            result,
            end,
            stderr: String::new(),
        }
    }
}

/// Parses and chunks `job` in a parse worker process started by `command`, exactly as the
/// server does, and says how the worker ended as well as the document's result.
pub async fn run_worker(command: &WorkerCommand, job: ParseJob, budget: Duration) -> WorkerRun {
    // Nobody watches the pages of a run outside the server.
    let pages = tokio::sync::watch::channel(None).0;
    run_child(command, job, budget, pages).await
}

async fn run_child(
    command: &WorkerCommand,
    job: ParseJob,
    budget: Duration,
    pages: PagesRead,
) -> WorkerRun {
    let output = job.output;
    let request = match request_bytes(command, job, budget) {
        Ok(request) => request,
        Err(e) => {
            let how = "the request could not be encoded".to_owned();
            return WorkerRun::without_worker(Err(e), WorkerEnd::Crashed { how });
        }
    };
    let mut child = match spawn_worker(command) {
        Ok(child) => child,
        Err(e) => {
            let how = format!("could not start the parse worker: {e}");
            return WorkerRun::without_worker(Err(CRASHED.into()), WorkerEnd::Crashed { how });
        }
    };
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let exchange = async {
        let send = async move {
            if let Some(mut stdin) = stdin {
                // A worker that dies before reading its request shows in its exit status; the
                // pipe closes when `stdin` drops, which ends the request.
                let _ = stdin.write_all(&request).await;
            }
        };
        let ((), response, stderr_tail) = tokio::join!(
            send,
            read_capped(stdout, response_cap(output)),
            read_stderr(stderr, STDERR_TAIL_BYTES, &pages)
        );
        (response, stderr_tail, child.wait().await)
    };
    let Ok((response, stderr_tail, status)) = tokio::time::timeout(budget, exchange).await else {
        // Kill and reap now, so a hang holds neither memory nor a process slot.
        if let Err(e) = child.kill().await {
            tracing::error!(error = %e, "could not kill the parse worker");
        }
        return WorkerRun::without_worker(Err(over_time(budget)), WorkerEnd::TimedOut);
    };
    let stderr = String::from_utf8_lossy(&stderr_tail).trim().to_owned();
    let status = match status {
        Ok(status) => status,
        Err(e) => {
            tracing::error!(error = %e, "could not wait for the parse worker");
            let how = format!("could not wait for the parse worker: {e}");
            return WorkerRun {
                result: Err(CRASHED.into()),
                end: WorkerEnd::Crashed { how },
                stderr,
            };
        }
    };
    let response = match response {
        Ok(Capped::Whole(bytes)) => bytes,
        Ok(Capped::TooLong) => {
            let _ = child.kill().await;
            return WorkerRun {
                result: Err(answer_past_the_cap(output)),
                end: WorkerEnd::Crashed {
                    how: "its answer passed the cap".into(),
                },
                stderr,
            };
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not read the parse worker's response");
            Vec::new()
        }
    };
    let (result, end) = interpret(command.memory_limit_bytes, status, &response, &stderr);
    WorkerRun {
        result,
        end,
        stderr,
    }
}

/// Starts a worker process by `command`, its stdin, stdout and stderr piped to this one, killed
/// if its handle is dropped; a failure to start is logged.
fn spawn_worker(command: &WorkerCommand) -> std::io::Result<Child> {
    Command::new(&command.program)
        .args(&command.args)
        // The worker reads hostile files: it gets none of the server's environment (the admin
        // password, model and S3 keys, the database URL). It needs none: its request comes on
        // stdin and names the one file it may open.
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .inspect_err(|e| {
            tracing::error!(
                program = %command.program.display(), error = %e,
                "could not start the parse worker"
            );
        })
}

/// The document's error when a worker's answer ran past its cap ([`response_cap`]).
fn answer_past_the_cap(output: OutputLimits) -> String {
    // The worker checks the text itself; an answer this long means it did not.
    tracing::warn!("the parse worker's answer passed the cap; it was stopped");
    ProcessingError::TextTooLarge {
        limit: output.max_text_bytes,
    }
    .to_string()
}

fn request_bytes(
    command: &WorkerCommand,
    job: ParseJob,
    time_budget: Duration,
) -> Result<Vec<u8>, String> {
    let request = WorkerRequest {
        job,
        budgets: Budgets {
            memory_bytes: command.memory_limit_bytes,
            // The worker is one thread, so its CPU time never outruns the wall clock the server
            // kills it by; twice that only ever stops a worker nobody is watching.
            cpu_seconds: time_budget.as_secs().saturating_mul(2).saturating_add(1),
        },
    };
    serde_json::to_vec(&request).map_err(|e| {
        tracing::error!(error = %e, "could not encode the parse request");
        CRASHED.to_owned()
    })
}

/// Turns what the worker left behind (`stderr` already trimmed) into the document's result,
/// and says how the worker ended.
fn interpret(
    memory_limit_bytes: u64,
    status: ExitStatus,
    stdout: &[u8],
    stderr: &str,
) -> (Result<Processed, String>, WorkerEnd) {
    match serde_json::from_slice::<WorkerResponse>(stdout) {
        Ok(response) => {
            if !status.success() {
                tracing::warn!(%status, stderr, "the parse worker answered, then exited abnormally");
            }
            response.answered(memory_limit_bytes)
        }
        Err(_) if !status.success() && allocation_failed(stderr) => {
            tracing::debug!(%status, stderr, "the parse worker ran out of memory");
            (
                Err(out_of_memory(memory_limit_bytes)),
                WorkerEnd::OutOfMemory,
            )
        }
        Err(e) => {
            tracing::error!(
                %status, stderr, response_error = %e,
                "the parse worker crashed or answered nonsense"
            );
            let how = if status.success() {
                format!("exited without a valid answer ({e})")
            } else {
                status.to_string()
            };
            (Err(CRASHED.into()), WorkerEnd::Crashed { how })
        }
    }
}

/// The document's error when parsing needed more memory than it had; `limit_bytes` is 0 when
/// there was no limit but the machine's.
fn out_of_memory(limit_bytes: u64) -> String {
    if limit_bytes == 0 {
        "processing this file needed more memory than the server had available".into()
    } else {
        format!(
            "processing this file needed more than the {} MiB memory limit",
            limit_bytes.div_ceil(MIB)
        )
    }
}

/// Whether the worker's stderr ends with what Rust prints before aborting on a failed
/// allocation: "memory allocation of N bytes failed".
fn allocation_failed(stderr: &str) -> bool {
    stderr.lines().any(|line| {
        line.find("memory allocation of")
            .is_some_and(|at| line[at..].contains("failed"))
    })
}

/// The longest answer read from a worker for a document within `output`: its text twice
/// (chunks overlap, and JSON escapes some characters) plus room for each chunk's metadata.
fn response_cap(output: OutputLimits) -> u64 {
    output
        .max_text_bytes
        .saturating_mul(2)
        .saturating_add(u64::from(output.max_chunks).saturating_mul(512))
        .saturating_add(MIB)
}

/// A worker's answer, or word that it ran past the cap.
enum Capped {
    Whole(Vec<u8>),
    TooLong,
}

/// Reads `stream` to its end unless it runs past `cap` bytes: a worker's answer is held in
/// memory whole, so its size must be bounded before it is read, not after.
async fn read_capped(stream: Option<impl AsyncRead + Unpin>, cap: u64) -> std::io::Result<Capped> {
    let mut bytes = Vec::new();
    if let Some(stream) = stream {
        let mut limited = stream.take(cap.saturating_add(1));
        limited.read_to_end(&mut bytes).await?;
        if bytes.len() as u64 > cap {
            return Ok(Capped::TooLong);
        }
    }
    Ok(Capped::Whole(bytes))
}

/// Reads `stream` to its end, keeping only the last `keep` bytes; page lines go to `pages`.
async fn read_stderr(
    stream: Option<impl AsyncRead + Unpin>,
    keep: usize,
    pages: &PagesRead,
) -> Vec<u8> {
    let mut tail = StderrTail::new(keep);
    if let Some(stream) = stream {
        stderr_lines(stream, |line| tail.route(line, Some(pages))).await;
    }
    tail.into_bytes()
}

/// Reads `stream` to its end, handing each line to `line_read` (a line longer than any page
/// line in pieces: page lines are short, anything longer is log text).
async fn stderr_lines(mut stream: impl AsyncRead + Unpin, mut line_read: impl FnMut(&[u8])) {
    let mut buffer = [0_u8; 8192];
    let mut line = Vec::new();
    while let Ok(n @ 1..) = stream.read(&mut buffer).await {
        for &byte in &buffer[..n] {
            line.push(byte);
            if byte == b'\n' || line.len() > 4 * PAGE_LINE.len() {
                line_read(&line);
                line.clear();
            }
        }
    }
    if !line.is_empty() {
        line_read(&line);
    }
}

/// The last bytes of a worker's log lines.
#[derive(Debug)]
struct StderrTail {
    bytes: Vec<u8>,
    keep: usize,
}

impl StderrTail {
    fn new(keep: usize) -> Self {
        Self {
            bytes: Vec::new(),
            keep,
        }
    }

    /// Sends a page line to `pages` (dropped when nobody watches), and keeps any other line.
    fn route(&mut self, line: &[u8], pages: Option<&PagesRead>) {
        match page_report(line) {
            Some(report) => {
                if let Some(pages) = pages {
                    pages.send_replace(Some(report));
                }
            }
            None => self.push(line),
        }
    }

    fn push(&mut self, line: &[u8]) {
        self.bytes.extend_from_slice(line);
        // Trimmed in steps, not at every line.
        if self.bytes.len() > 2 * self.keep {
            self.bytes.drain(..self.bytes.len() - self.keep);
        }
    }

    fn into_bytes(mut self) -> Vec<u8> {
        if self.bytes.len() > self.keep {
            self.bytes.drain(..self.bytes.len() - self.keep);
        }
        self.bytes
    }
}

/// `(done, total)` from a worker's page line (`quire-parse-pages 3/12`), `None` for any other
/// line.
fn page_report(line: &[u8]) -> Option<(u32, u32)> {
    let text = std::str::from_utf8(line).ok()?.trim_end();
    let (done, total) = text.strip_prefix(PAGE_LINE)?.split_once('/')?;
    Some((done.parse().ok()?, total.parse().ok()?))
}

/// Writes page lines to this worker process's stderr, at most one per [`PAGE_REPORT_EVERY`]
/// but always the last page.
fn report_pages_on_stderr() -> impl FnMut(u32, u32) {
    let mut last: Option<std::time::Instant> = None;
    move |done, total| {
        if done == total || last.is_none_or(|at| at.elapsed() >= PAGE_REPORT_EVERY) {
            last = Some(std::time::Instant::now());
            // A report that cannot be written is only a missing progress update.
            let _ = writeln!(std::io::stderr(), "{PAGE_LINE}{done}/{total}");
        }
    }
}

impl WorkerResponse {
    /// The document's result, and how the worker ended: [`WorkerEnd::Answered`] only for a
    /// parsed document or the document's own failure, which leave the worker sound.
    fn answered(self, memory_limit_bytes: u64) -> (Result<Processed, String>, WorkerEnd) {
        let end = match &self {
            WorkerResponse::Failed { message, .. } if message == CRASHED => WorkerEnd::Panicked,
            WorkerResponse::OutOfMemory => WorkerEnd::OutOfMemory,
            WorkerResponse::Processed(_) | WorkerResponse::Failed { .. } => WorkerEnd::Answered,
        };
        (self.into_result(memory_limit_bytes), end)
    }

    fn into_result(self, memory_limit_bytes: u64) -> Result<Processed, String> {
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

/// Parses and chunks one document, turning every failure, a panic included, into an answer.
fn parse_job(job: &ParseJob) -> WorkerResponse {
    let run = || {
        process_file(
            &job.path,
            &job.name,
            &job.content_type,
            job.chunking,
            &job.limits,
            job.ocr.as_ref(),
            job.output,
        )
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(Ok(processed)) => WorkerResponse::Processed(processed),
        Ok(Err(ProcessingError::Io(e))) if e.kind() == std::io::ErrorKind::OutOfMemory => {
            WorkerResponse::OutOfMemory
        }
        Ok(Err(ProcessingError::Io(e))) => WorkerResponse::Failed {
            message: "the stored original file could not be read".into(),
            log: Some(format!("could not read the original: {e}")),
        },
        Ok(Err(e)) => WorkerResponse::Failed {
            message: e.to_string(),
            log: None,
        },
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            WorkerResponse::Failed {
                message: CRASHED.into(),
                log: Some(format!("a parser panicked: {what}")),
            }
        }
    }
}

/// Why the parse worker could not play its part of the protocol. A document's own failures are
/// not errors here: they are answered.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The request on stdin was missing or malformed.
    #[error("could not read the request: {0}")]
    Request(serde_json::Error),
    /// The memory or CPU budget could not be applied.
    #[error("could not apply the resource limits: {0}")]
    Limit(std::io::Error),
    /// The response could not be written.
    #[error("could not write the response: {0}")]
    Response(std::io::Error),
}

/// The child side of [`Isolation::ChildProcess`] (`quire parse-worker`): reads one request from
/// `input`, holds this process's address space to its present size plus the request's memory
/// budget, parses and chunks the file, and writes the answer to `output`. Run it in a process
/// of its own, with nothing else started: the limits apply to the whole process.
pub fn run_parse_worker(input: impl Read, output: impl Write) -> Result<(), WorkerError> {
    serve_request(input, output, limit_resources)
}

/// The child side of [`Isolation::Pooled`] (`quire parse-worker --serve`): answers requests,
/// one JSON line each on `input`, with one JSON line each on `output`, until `input` ends. The
/// limits are set again before each document from the process's size and CPU time at that
/// moment, so every document has its whole budget, whatever the ones before it left behind.
pub fn serve_parse_requests(input: impl BufRead, output: impl Write) -> Result<(), WorkerError> {
    serve_lines(input, output, limit_resources)
}

fn serve_lines(
    mut input: impl BufRead,
    output: impl Write,
    mut limit: impl FnMut(Budgets) -> Result<(), WorkerError>,
) -> Result<(), WorkerError> {
    let mut output = BufWriter::new(output);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut input)
            .take(MAX_REQUEST_BYTES)
            .read_until(b'\n', &mut line)
            .map_err(|e| WorkerError::Request(serde_json::Error::io(e)))?;
        if read == 0 {
            return Ok(());
        }
        let request: WorkerRequest = serde_json::from_slice(&line).map_err(WorkerError::Request)?;
        answer_request(request, &mut limit, &mut output)?;
        output
            .write_all(b"\n")
            .and_then(|()| output.flush())
            .map_err(WorkerError::Response)?;
    }
}

fn serve_request(
    input: impl Read,
    output: impl Write,
    limit: impl FnOnce(Budgets) -> Result<(), WorkerError>,
) -> Result<(), WorkerError> {
    let request: WorkerRequest =
        serde_json::from_reader(input.take(MAX_REQUEST_BYTES)).map_err(WorkerError::Request)?;
    let mut output = BufWriter::new(output);
    answer_request(request, limit, &mut output)?;
    output.flush().map_err(WorkerError::Response)
}

/// Sets the limits `request` asks for, parses its document, reporting pages on stderr, and
/// writes the answer to `output`.
fn answer_request(
    request: WorkerRequest,
    limit: impl FnOnce(Budgets) -> Result<(), WorkerError>,
    output: &mut impl Write,
) -> Result<(), WorkerError> {
    limit(request.budgets)?;
    let response =
        quire_parse::progress::observe(report_pages_on_stderr(), || parse_job(&request.job));
    serde_json::to_writer(output, &response).map_err(|e| WorkerError::Response(e.into()))
}

/// Sets RLIMIT_AS to the present virtual size plus the memory budget, so the budget means
/// memory for this document whatever the size of the binary and its libraries (and, in a
/// worker that lives across documents, whatever the documents before it left), and RLIMIT_CPU
/// to the CPU time used so far plus the CPU budget. Only the soft limits are changed, never
/// past the hard ones.
#[cfg(unix)]
fn limit_resources(budgets: Budgets) -> Result<(), WorkerError> {
    use rlimit::Resource;
    let set_soft = |resource: Resource, soft: u64| {
        let (_, hard) = resource.get()?;
        resource.set(soft.min(hard), hard)
    };
    if budgets.memory_bytes > 0 {
        let status = std::fs::read_to_string("/proc/self/status").map_err(WorkerError::Limit)?;
        let current = virtual_size(&status).ok_or_else(|| {
            WorkerError::Limit(std::io::Error::other("no VmSize in /proc/self/status"))
        })?;
        set_soft(Resource::AS, current.saturating_add(budgets.memory_bytes))
            .map_err(WorkerError::Limit)?;
    }
    if budgets.cpu_seconds > 0 {
        let used = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
        let used = u64::try_from(used.tv_sec).unwrap_or(0).saturating_add(1);
        set_soft(Resource::CPU, used.saturating_add(budgets.cpu_seconds))
            .map_err(WorkerError::Limit)?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn limit_resources(_budgets: Budgets) -> Result<(), WorkerError> {
    Err(WorkerError::Limit(std::io::Error::other(
        "the parse worker's resource limits need a Unix system; set parsing.isolate = false",
    )))
}

/// The `VmSize` of a `/proc/PID/status` text, in bytes.
#[cfg_attr(not(unix), expect(dead_code, reason = "only Unix reads /proc"))]
fn virtual_size(status: &str) -> Option<u64> {
    let value = status.lines().find_map(|l| l.strip_prefix("VmSize:"))?;
    let kib: u64 = value.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(all(test, unix))]
mod tests {
    use std::path::Path;
    use std::time::Instant;

    use super::*;

    /// A job for the file at `path`, named `name`, with the default settings.
    pub(super) fn job(path: &Path, name: &str) -> ParseJob {
        ParseJob {
            path: path.to_path_buf(),
            name: name.into(),
            content_type: String::new(),
            chunking: ChunkingParams::default(),
            limits: ParseLimits::default(),
            ocr: None,
            output: OutputLimits::default(),
        }
    }

    /// A stand-in worker: `sh -c SCRIPT sh ARGS…`, with a 16 MiB budget.
    fn script(script: &str, args: &[&str]) -> Isolation {
        let mut all = vec!["-c".to_owned(), script.to_owned(), "sh".to_owned()];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        Isolation::ChildProcess(WorkerCommand {
            program: "/bin/sh".into(),
            args: all,
            memory_limit_bytes: 16 * MIB,
        })
    }

    async fn run(isolation: &Isolation, budget: Duration) -> Result<Processed, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guide.md");
        std::fs::write(&path, "# Pump\n\nPrime it.").unwrap();
        parse_isolated(isolation, job(&path, "guide.md"), budget, unwatched()).await
    }

    /// A page channel nobody reads.
    fn unwatched() -> PagesRead {
        tokio::sync::watch::channel(None).0
    }

    #[tokio::test]
    async fn page_lines_on_the_workers_stderr_are_progress_and_the_rest_is_its_log() {
        let stderr = b"quire-parse-pages 1/5\nstarting\nquire-parse-pages 2/5\nquire-parse-pages x/5\nthread panicked: boom";
        let (pages, read) = tokio::sync::watch::channel(None);
        let tail = read_stderr(Some(&stderr[..]), 1024, &pages).await;
        assert_eq!(*read.borrow(), Some((2, 5)));
        assert_eq!(
            String::from_utf8(tail).unwrap(),
            "starting\nquire-parse-pages x/5\nthread panicked: boom"
        );
        assert_eq!(page_report(b"quire-parse-pages 12/600\n"), Some((12, 600)));
        assert_eq!(page_report(b"quire-parse-pages 12\n"), None);
        assert_eq!(page_report(b"other 1/2\n"), None);
    }

    #[tokio::test]
    async fn a_worker_process_reports_the_pages_it_has_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.pdf");
        let pdf = quire_parse::fixtures::pdf(&[("one", None), ("two", None), ("three", None)]);
        std::fs::write(&path, pdf).unwrap();
        // The worker side, run here: its page lines go to this process's stderr, so the
        // in-process path is what can be observed; both install the same observer.
        let (pages, read) = tokio::sync::watch::channel(None);
        let processed = parse_isolated(
            &Isolation::InProcess,
            job(&path, "report.pdf"),
            Duration::from_secs(60),
            pages,
        )
        .await
        .unwrap();
        assert_eq!(processed.page_count, 3);
        assert_eq!(*read.borrow(), Some((3, 3)));
        // A stand-in worker process that reports pages, then fails: the report still arrives.
        let worker = script("echo 'quire-parse-pages 2/7' >&2; exit 3", &[]);
        let (pages, read) = tokio::sync::watch::channel(None);
        let failed = parse_isolated(
            &worker,
            job(&path, "report.pdf"),
            Duration::from_secs(20),
            pages,
        )
        .await;
        assert!(failed.is_err());
        assert_eq!(*read.borrow(), Some((2, 7)));
    }

    /// Runs the worker side in this process (without the memory limit, which would bind the
    /// whole test run) on the request the parent would send.
    fn serve_here(job: ParseJob) -> Vec<u8> {
        let command = WorkerCommand {
            program: "quire".into(),
            args: Vec::new(),
            memory_limit_bytes: 16 * MIB,
        };
        let request = request_bytes(&command, job, Duration::from_secs(300)).unwrap();
        let mut limited = None;
        let mut out = Vec::new();
        serve_request(request.as_slice(), &mut out, |budgets| {
            limited = Some(budgets);
            Ok(())
        })
        .unwrap();
        let expected = Budgets {
            memory_bytes: 16 * MIB,
            cpu_seconds: 601,
        };
        assert_eq!(limited, Some(expected), "the budgets reach the worker");
        out
    }

    /// A worker that answers more than a document within its limits could is stopped once it
    /// passes the cap; the server never reads the rest.
    #[tokio::test]
    async fn an_answer_past_the_cap_is_cut_off_and_fails_the_document() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guide.md");
        std::fs::write(&path, "# Pump").unwrap();
        let mut small = job(&path, "guide.md");
        small.output = OutputLimits {
            max_text_bytes: 1024,
            max_chunks: 1,
        };
        // Far past the cap (about 1 MiB here), and endless: only the cap ends the read.
        let flood = script("cat /dev/zero", &[]);
        let started = std::time::Instant::now();
        let error = parse_isolated(&flood, small, Duration::from_secs(20), unwatched())
            .await
            .unwrap_err();
        assert!(error.contains("parsing.max_text_mb"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    fn exited_ok() -> ExitStatus {
        std::os::unix::process::ExitStatusExt::from_raw(0)
    }

    #[test]
    fn the_workers_answers_match_in_process_parsing() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good");
        std::fs::write(&good, "# Pump\n\nPrime it.\n\x0c## Valve\n\nClose it.").unwrap();
        let expected = process_file(
            &good,
            "a.md",
            "",
            ChunkingParams::default(),
            &ParseLimits::default(),
            None,
            OutputLimits::default(),
        )
        .unwrap();
        let answer = serve_here(job(&good, "a.md"));
        assert_eq!(
            interpret(16 * MIB, exited_ok(), &answer, "").0,
            Ok(expected)
        );

        let image = dir.path().join("gif");
        std::fs::write(&image, b"GIF89a rest").unwrap();
        let answer = serve_here(job(&image, "a.gif"));
        let error = interpret(16 * MIB, exited_ok(), &answer, "").0.unwrap_err();
        assert!(error.contains("GIF image is not supported"), "{error}");

        let answer = serve_here(job(&dir.path().join("missing"), "a.md"));
        assert_eq!(
            interpret(16 * MIB, exited_ok(), &answer, "").0,
            Err("the stored original file could not be read".into())
        );
    }

    /// The serving worker answers each request on a line of its own, as the one-shot worker
    /// would, sets its limits again before each, and stops when its input ends.
    #[test]
    fn the_serving_worker_answers_one_line_per_request_until_its_input_ends() {
        let dir = tempfile::tempdir().unwrap();
        let (good, image) = (dir.path().join("good"), dir.path().join("gif"));
        std::fs::write(&good, "# Pump\n\nPrime it.").unwrap();
        std::fs::write(&image, b"GIF89a rest").unwrap();
        let command = WorkerCommand {
            program: "quire".into(),
            args: Vec::new(),
            memory_limit_bytes: 16 * MIB,
        };
        let jobs = [job(&good, "a.md"), job(&image, "a.gif"), job(&good, "b.md")];
        let mut input = Vec::new();
        for job in jobs.clone() {
            input.extend(request_bytes(&command, job, Duration::from_secs(300)).unwrap());
            input.push(b'\n');
        }
        let (mut limited, mut out) = (0, Vec::new());
        serve_lines(input.as_slice(), &mut out, |_| {
            limited += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(limited, 3, "the limits are set before every document");
        let answers: Vec<&[u8]> = out.split_inclusive(|&b| b == b'\n').collect();
        assert_eq!(answers.len(), 3);
        for (job, answer) in jobs.iter().zip(answers) {
            assert!(answer.ends_with(b"\n"));
            assert_eq!(
                interpret(16 * MIB, exited_ok(), answer, "").0,
                interpret(16 * MIB, exited_ok(), &serve_here(job.clone()), "").0,
            );
        }
        // A request that is not one fails the worker, after the answers before it.
        let mut out = Vec::new();
        let mut input = request_bytes(&command, jobs[0].clone(), Duration::from_secs(9)).unwrap();
        input.extend_from_slice(b"\n{\"job\": 1}\n");
        let result = serve_lines(input.as_slice(), &mut out, |_| Ok(()));
        assert!(matches!(result, Err(WorkerError::Request(_))), "{result:?}");
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
    }

    #[test]
    fn a_request_the_worker_cannot_read_is_an_error_not_an_answer() {
        let mut out = Vec::new();
        let result = serve_request(&b"{\"job\": 1}"[..], &mut out, |_| Ok(()));
        assert!(matches!(result, Err(WorkerError::Request(_))), "{result:?}");
        assert!(out.is_empty());
    }

    #[test]
    fn the_virtual_size_is_read_from_proc_status() {
        let status = "Name:\tquire\nVmPeak:\t  99999 kB\nVmSize:\t   12345 kB\nVmLck:\t 0 kB\n";
        assert_eq!(virtual_size(status), Some(12345 * 1024));
        assert_eq!(virtual_size("Name:\tquire\n"), None);
        let own = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(virtual_size(&own).unwrap() > MIB);
    }

    #[test]
    fn only_the_stderr_tail_is_kept() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let long: Vec<u8> = (0..100_000_u32).map(|i| (i % 251) as u8).collect();
        let pages = tokio::sync::watch::channel(None).0;
        let tail = runtime.block_on(read_stderr(Some(long.as_slice()), 1000, &pages));
        assert_eq!(tail, &long[long.len() - 1000..]);
    }

    #[tokio::test]
    async fn a_well_formed_answer_is_the_documents_result() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good");
        std::fs::write(&good, "Plain words.").unwrap();
        let answer = String::from_utf8(serve_here(job(&good, "a.txt"))).unwrap();
        let isolation = script("cat >/dev/null; printf '%s' \"$1\"", &[&answer]);
        let processed = run(&isolation, Duration::from_secs(10)).await.unwrap();
        assert_eq!(processed.chunks[0].content, "Plain words.");
    }

    #[tokio::test]
    async fn a_hung_worker_is_killed_and_reaped_at_the_time_budget() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let isolation = script(
            "echo $$ > \"$1\"; exec sleep 60",
            &[pid_file.to_str().unwrap()],
        );
        let started = Instant::now();
        let error = run(&isolation, Duration::from_secs(1)).await.unwrap_err();
        assert_eq!(error, "processing took longer than the 1-second limit");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let proc_entry = PathBuf::from(format!("/proc/{}", pid.trim()));
        assert!(
            !proc_entry.exists(),
            "the worker {} is still there",
            pid.trim()
        );
    }

    /// Runs each stand-in worker script and expects the crash message from all of them.
    async fn assert_crashes(bodies: &[&str]) {
        for body in bodies {
            let error = run(&script(body, &[]), Duration::from_secs(10))
                .await
                .unwrap_err();
            assert_eq!(error, CRASHED, "{body}");
        }
    }

    #[tokio::test]
    async fn a_worker_that_dies_without_answering_is_a_crash() {
        assert_crashes(&[
            "kill -SEGV $$",
            "echo 'thread panicked' >&2; exit 3",
            "cat >/dev/null",
        ])
        .await;
    }

    #[tokio::test]
    async fn a_malformed_answer_is_a_crash() {
        assert_crashes(&[
            "cat >/dev/null; echo garbage",
            "cat >/dev/null; printf '{\"processed\": {\"chunks\": ['",
            "cat >/dev/null; echo '{\"failed\": {\"message\": 1}}'",
        ])
        .await;
    }

    #[tokio::test]
    async fn a_failed_allocation_is_reported_as_the_memory_limit() {
        let body = "ulimit -c 0; cat >/dev/null; \
                    echo 'memory allocation of 1000 bytes failed' >&2; kill -ABRT $$";
        let error = run(&script(body, &[]), Duration::from_secs(10))
            .await
            .unwrap_err();
        assert_eq!(
            error,
            "processing this file needed more than the 16 MiB memory limit"
        );

        // A failure the worker saw coming (reading the file) is answered instead.
        let body = "cat >/dev/null; echo '\"out_of_memory\"'";
        let error = run(&script(body, &[]), Duration::from_secs(10))
            .await
            .unwrap_err();
        assert_eq!(
            error,
            "processing this file needed more than the 16 MiB memory limit"
        );
    }

    /// What `quire bench fuzz` tells apart: each stand-in worker's end, and the document's
    /// error the server would record for it.
    #[tokio::test]
    async fn a_worker_run_says_how_the_worker_ended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guide.md");
        std::fs::write(&path, "# Pump").unwrap();
        let panicked = serde_json::to_string(&WorkerResponse::Failed {
            message: CRASHED.into(),
            log: Some("a parser panicked: boom".into()),
        })
        .unwrap();
        let failed = r#"{"failed": {"message": "the PDF is damaged", "log": null}}"#;
        let oom = "ulimit -c 0; cat >/dev/null; \
                   echo 'memory allocation of 9 bytes failed' >&2; kill -ABRT $$";
        let cases: [(&str, Duration, WorkerEnd); 5] = [
            (
                "cat >/dev/null; kill -SEGV $$",
                Duration::from_secs(10),
                WorkerEnd::Crashed {
                    how: "signal: 11 (SIGSEGV)".into(),
                },
            ),
            ("exec sleep 60", Duration::from_secs(1), WorkerEnd::TimedOut),
            (oom, Duration::from_secs(10), WorkerEnd::OutOfMemory),
            (
                &format!("cat >/dev/null; echo 'panicked at x.rs' >&2; printf '%s' '{panicked}'"),
                Duration::from_secs(10),
                WorkerEnd::Panicked,
            ),
            (
                &format!("cat >/dev/null; printf '%s' '{failed}'"),
                Duration::from_secs(10),
                WorkerEnd::Answered,
            ),
        ];
        for (body, budget, expected) in cases {
            let Isolation::ChildProcess(command) = script(body, &[]) else {
                unreachable!("a script is a child process");
            };
            let run = run_worker(&command, job(&path, "guide.md"), budget).await;
            assert_eq!(run.end, expected, "{body}");
            let error = run.result.unwrap_err();
            assert!(!error.is_empty(), "{body}");
            if expected == WorkerEnd::Panicked {
                assert_eq!(error, CRASHED);
                assert!(run.stderr.ends_with("panicked at x.rs"), "{}", run.stderr);
            }
        }
    }

    #[tokio::test]
    async fn a_missing_worker_program_is_a_crash() {
        let isolation = Isolation::ChildProcess(WorkerCommand {
            program: "/nonexistent/quire".into(),
            args: vec!["parse-worker".into()],
            memory_limit_bytes: 0,
        });
        let error = run(&isolation, Duration::from_secs(10)).await.unwrap_err();
        assert_eq!(error, CRASHED);
    }

    #[tokio::test]
    async fn in_process_parsing_still_works() {
        let processed = run(&Isolation::InProcess, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(processed.chunks[0].section, "Pump");
    }
}
