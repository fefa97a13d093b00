//! The server's side of parsing: where a document is parsed ([`Isolation`]), and for a
//! process per document, starting `quire parse-worker`, sending it the request, reading its
//! answer and its stderr, killing it at the time budget, and turning how it ended into the
//! document's result. [`WorkerPool`] keeps workers across documents with the same pieces; a
//! worker's stderr is read in [`stderr`](super::stderr).

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use super::child::parse_job;
use super::pool::WorkerPool;
use super::protocol::{
    Budgets, CRASHED, MIB, ParseJob, WorkerRequest, WorkerResponse, out_of_memory,
};
use super::stderr::{STDERR_TAIL_BYTES, read_stderr};
use crate::pipeline::{OutputLimits, Processed, ProcessingError};

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

/// Where the parse reports `(pages read, pages in all)` while it runs (PDF and TIFF pages).
pub(crate) type PagesRead = tokio::sync::watch::Sender<Option<(u32, u32)>>;

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

pub(super) fn over_time(budget: Duration) -> String {
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
pub(super) fn spawn_worker(command: &WorkerCommand) -> std::io::Result<Child> {
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
pub(super) fn answer_past_the_cap(output: OutputLimits) -> String {
    // The worker checks the text itself; an answer this long means it did not.
    tracing::warn!("the parse worker's answer passed the cap; it was stopped");
    ProcessingError::TextTooLarge {
        limit: output.max_text_bytes,
    }
    .to_string()
}

pub(super) fn request_bytes(
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
pub(super) fn interpret(
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
pub(super) fn response_cap(output: OutputLimits) -> u64 {
    output
        .max_text_bytes
        .saturating_mul(2)
        .saturating_add(u64::from(output.max_chunks).saturating_mul(512))
        .saturating_add(MIB)
}

/// A worker's answer, or word that it ran past the cap.
pub(super) enum Capped {
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

impl WorkerResponse {
    /// The document's result, and how the worker ended: [`WorkerEnd::Answered`] only for a
    /// parsed document or the document's own failure, which leave the worker sound.
    pub(super) fn answered(
        self,
        memory_limit_bytes: u64,
    ) -> (Result<Processed, String>, WorkerEnd) {
        let end = match &self {
            WorkerResponse::Failed { message, .. } if message == CRASHED => WorkerEnd::Panicked,
            WorkerResponse::OutOfMemory => WorkerEnd::OutOfMemory,
            WorkerResponse::Processed(_) | WorkerResponse::Failed { .. } => WorkerEnd::Answered,
        };
        (self.into_result(memory_limit_bytes), end)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::isolation::fixtures::{job, serve_here};

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
