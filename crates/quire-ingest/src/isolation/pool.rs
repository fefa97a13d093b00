//! Parse worker processes that live across documents
//! ([`Isolation::Pooled`](super::Isolation::Pooled)).
//!
//! Starting the `quire` binary for each document costs more CPU than parsing a short text
//! (loading and relocating a large program, its page faults, its exit: `docs/performance.md`,
//! "Parse workers that live across documents"). A pooled worker parses up to
//! `documents_per_worker` documents one after another (`quire parse-worker --serve`: a request
//! per line on stdin, an answer per line on stdout) and every guarantee of a process per
//! document holds per document:
//! - the time budget: a worker past it is killed, and the next document gets a new one;
//! - the memory budget: the worker sets its address-space limit again before each document,
//!   its size at that moment plus the budget;
//! - a crash (a signal, an abort, a failed allocation, an answer that is not the protocol's)
//!   fails that document, read from the exit status and stderr as before, and ends the
//!   process; so does any answer other than a parsed document or a document's own failure
//!   (out of memory, a caught panic), so a worker whose state is in doubt parses nothing more.
//!
//! What a process per document gave and this does not: a document's parser runs in a process
//! that has parsed others before it. The worker holds nothing of theirs on purpose (each
//! answer is written and dropped), and it can read what the server's user can read either
//! way, so a parser taken over by a hostile file gains no access it did not have; the process
//! is still replaced after `documents_per_worker` documents.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::parent::{
    Capped, PagesRead, WorkerCommand, WorkerEnd, answer_past_the_cap, interpret, over_time,
    request_bytes, response_cap, spawn_worker,
};
use super::protocol::{CRASHED, ParseJob, WorkerResponse};
use super::stderr::{STDERR_TAIL_BYTES, StderrTail, stderr_lines};
use crate::pipeline::Processed;

/// How long a worker that stopped answering gets to exit, and its stderr to end, before it is
/// killed: it has closed its stdout, so it is on its way out.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Parse worker processes kept between documents: an idle one takes the next document, or a
/// new one starts. Cloning shares the pool.
#[derive(Clone)]
pub struct WorkerPool(Arc<Shared>);

struct Shared {
    command: WorkerCommand,
    documents_per_worker: u32,
    idle: Mutex<Vec<Worker>>,
}

impl WorkerPool {
    /// Workers started by `command` (whose arguments start the serving worker, normally
    /// `parse-worker --serve`), each parsing at most `documents_per_worker` documents.
    pub fn new(command: WorkerCommand, documents_per_worker: u32) -> Self {
        Self(Arc::new(Shared {
            command,
            documents_per_worker: documents_per_worker.max(1),
            idle: Mutex::new(Vec::new()),
        }))
    }

    /// How the workers are started.
    pub fn command(&self) -> &WorkerCommand {
        &self.0.command
    }

    /// Documents one worker parses before it is replaced.
    pub fn documents_per_worker(&self) -> u32 {
        self.0.documents_per_worker
    }

    /// Parses and chunks `job` in a worker within `budget`, telling `pages` how far it has come.
    /// The error is the document's `error`, as for a process per document.
    pub(crate) async fn parse(
        &self,
        job: ParseJob,
        budget: Duration,
        pages: PagesRead,
    ) -> Result<Processed, String> {
        let output = job.output;
        let memory_limit = self.0.command.memory_limit_bytes;
        let mut request = request_bytes(&self.0.command, job, budget)?;
        request.push(b'\n');
        let mut worker = match self.take_idle() {
            Some(worker) => worker,
            None => Worker::start(&self.0.command)?,
        };
        worker.watch(Some(pages));
        let exchange = async {
            worker.stdin.write_all(&request).await?;
            worker.stdin.flush().await?;
            read_line_capped(&mut worker.stdout, response_cap(output)).await
        };
        let line = match tokio::time::timeout(budget, exchange).await {
            Err(_) => {
                worker.kill().await;
                return Err(over_time(budget));
            }
            Ok(line) => line,
        };
        match line {
            Ok(Capped::Whole(bytes)) if bytes.ends_with(b"\n") => {
                let Ok(response) = serde_json::from_slice::<WorkerResponse>(&bytes) else {
                    // Not the protocol's answer: the worker is stopped and the document fails
                    // as a crash, as for a process per document.
                    let _ = worker.child.start_kill();
                    return worker.end(&bytes, memory_limit).await;
                };
                worker.served += 1;
                let (result, end) = response.answered(memory_limit);
                worker.watch(None);
                if end == WorkerEnd::Answered && worker.served < self.0.documents_per_worker {
                    self.give_back(worker);
                }
                // Otherwise dropped: its stdin closes, and it is killed if it has not exited.
                result
            }
            Ok(Capped::TooLong) => {
                worker.kill().await;
                Err(answer_past_the_cap(output))
            }
            // Its stdout ended before a whole answer, or a pipe broke: the worker died, and its
            // exit status and stderr say how.
            Ok(Capped::Whole(partial)) => worker.end(&partial, memory_limit).await,
            Err(e) => {
                tracing::debug!(error = %e, "the parse worker's pipes closed");
                worker.end(&[], memory_limit).await
            }
        }
    }

    /// An idle worker that is still running, if there is one; those that exited while idle are
    /// dropped.
    fn take_idle(&self) -> Option<Worker> {
        let mut idle = self.0.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(mut worker) = idle.pop() {
            if matches!(worker.child.try_wait(), Ok(None)) {
                return Some(worker);
            }
        }
        None
    }

    fn give_back(&self, worker: Worker) {
        self.0
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(worker);
    }
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("command", &self.0.command)
            .field("documents_per_worker", &self.0.documents_per_worker)
            .finish_non_exhaustive()
    }
}

/// Two pools are the same when they share their workers.
impl PartialEq for WorkerPool {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for WorkerPool {}

/// One serving worker process.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Shared with the task that reads its stderr for as long as it runs.
    stderr: Arc<Mutex<StderrState>>,
    stderr_task: tokio::task::JoinHandle<()>,
    /// Documents answered.
    served: u32,
}

/// Where a worker's stderr goes: page lines to the document it is parsing, the rest to a tail
/// kept for the log.
struct StderrState {
    pages: Option<PagesRead>,
    tail: StderrTail,
}

impl Worker {
    fn start(command: &WorkerCommand) -> Result<Self, String> {
        let mut child = spawn_worker(command).map_err(|_| CRASHED.to_owned())?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            tracing::error!("the parse worker started without its pipes");
            return Err(CRASHED.into());
        };
        let state = Arc::new(Mutex::new(StderrState {
            pages: None,
            tail: StderrTail::new(STDERR_TAIL_BYTES),
        }));
        let shared = Arc::clone(&state);
        let stderr_task = tokio::spawn(async move {
            stderr_lines(stderr, |line| {
                let state = &mut *shared.lock().unwrap_or_else(PoisonError::into_inner);
                state.tail.route(line, state.pages.as_ref());
            })
            .await;
        });
        Ok(Self {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            stderr: state,
            stderr_task,
            served: 0,
        })
    }

    /// Sends the worker's page lines to `pages` from now on, and starts its log tail afresh.
    fn watch(&self, pages: Option<PagesRead>) {
        let mut state = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        state.pages = pages;
        state.tail = StderrTail::new(STDERR_TAIL_BYTES);
    }

    /// Kills and reaps the worker now, so a hang holds neither memory nor a process slot.
    async fn kill(mut self) {
        if let Err(e) = self.child.kill().await {
            tracing::error!(error = %e, "could not kill the parse worker");
        }
        self.stderr_task.abort();
    }

    /// The document's result from a worker that stopped answering (`stdout` is what it wrote
    /// of its answer): waits for it to exit, killing it after a grace period, and reads its
    /// exit status and the end of its stderr as for a process per document.
    async fn end(mut self, stdout: &[u8], memory_limit: u64) -> Result<Processed, String> {
        let status = match tokio::time::timeout(EXIT_GRACE, self.child.wait()).await {
            Ok(status) => status,
            // Alive but silent on stdout: the answer was not the protocol's.
            Err(_) => {
                let _ = self.child.start_kill();
                self.child.wait().await
            }
        };
        let status = status.map_err(|e| {
            tracing::error!(error = %e, "could not wait for the parse worker");
            CRASHED.to_owned()
        })?;
        // Its stderr ends with it, unless a program it started still holds it open.
        if tokio::time::timeout(EXIT_GRACE, &mut self.stderr_task)
            .await
            .is_err()
        {
            self.stderr_task.abort();
        }
        let tail = {
            let mut state = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
            std::mem::replace(&mut state.tail, StderrTail::new(0)).into_bytes()
        };
        let stderr = String::from_utf8_lossy(&tail).trim().to_owned();
        interpret(memory_limit, status, stdout, &stderr).0
    }
}

/// Reads one line from `stream`, unless it runs past `cap` bytes first: an answer is held in
/// memory whole, so its size must be bounded before it is read, not after. A line without its
/// newline is what the stream held before it ended.
async fn read_line_capped(
    stream: &mut BufReader<ChildStdout>,
    cap: u64,
) -> std::io::Result<Capped> {
    let mut bytes = Vec::new();
    let mut limited = (&mut *stream).take(cap.saturating_add(1));
    limited.read_until(b'\n', &mut bytes).await?;
    if bytes.len() as u64 > cap {
        return Ok(Capped::TooLong);
    }
    Ok(Capped::Whole(bytes))
}

#[cfg(all(test, unix))]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::pipeline::process_file;

    const MIB: u64 = 1024 * 1024;

    /// A job for a short text file `name` written in `dir`.
    fn job(dir: &Path, name: &str) -> ParseJob {
        let path = dir.join(name);
        std::fs::write(&path, "Plain words.").unwrap();
        crate::isolation::fixtures::job(&path, name)
    }

    /// The answer a real worker gives for `job`, on one line.
    fn answer(job: &ParseJob) -> String {
        let processed = process_file(
            &job.path,
            &job.name,
            "",
            job.chunking,
            &job.limits,
            None,
            job.output,
        )
        .unwrap();
        serde_json::to_string(&WorkerResponse::Processed(processed)).unwrap()
    }

    /// A stand-in serving worker, `sh -c BODY sh STARTS ANSWER`: it appends its process id to
    /// the file STARTS when it starts, then runs BODY for each request line (in `$line`);
    /// `$2` is a well-formed answer. Bodies tell documents apart by names starting `zz-`,
    /// which no other part of a request holds.
    fn pool(dir: &Path, body: &str, per_worker: u32) -> (WorkerPool, PathBuf) {
        let starts = dir.join("starts");
        let script = format!("echo $$ >> \"$1\"; while IFS= read -r line; do {body}; done");
        let sample = job(dir, "sample.txt");
        let command = WorkerCommand {
            program: "/bin/sh".into(),
            args: vec![
                "-c".into(),
                script,
                "sh".into(),
                starts.display().to_string(),
                answer(&sample),
            ],
            memory_limit_bytes: 16 * MIB,
        };
        (WorkerPool::new(command, per_worker), starts)
    }

    fn started(starts: &Path) -> usize {
        std::fs::read_to_string(starts)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    fn unwatched() -> PagesRead {
        tokio::sync::watch::channel(None).0
    }

    async fn parse(pool: &WorkerPool, job: ParseJob, seconds: u64) -> Result<Processed, String> {
        pool.parse(job, Duration::from_secs(seconds), unwatched())
            .await
    }

    #[tokio::test]
    async fn a_worker_parses_documents_one_after_another_up_to_its_count() {
        let dir = tempfile::tempdir().unwrap();
        let (pool, starts) = pool(dir.path(), "printf '%s\\n' \"$2\"", 3);
        for n in 0..7 {
            let processed = parse(&pool, job(dir.path(), &format!("{n}.txt")), 10)
                .await
                .unwrap();
            assert_eq!(processed.chunks[0].content, "Plain words.");
        }
        assert_eq!(started(&starts), 3, "3 + 3 + 1 documents");
    }

    #[tokio::test]
    async fn a_crash_fails_its_document_and_the_next_one_gets_a_new_worker() {
        let dir = tempfile::tempdir().unwrap();
        let body = "case \"$line\" in *zz-crash*) kill -SEGV $$;; *) printf '%s\\n' \"$2\";; esac";
        let (pool, starts) = pool(dir.path(), body, 100);
        parse(&pool, job(dir.path(), "a.txt"), 10).await.unwrap();
        let error = parse(&pool, job(dir.path(), "zz-crash.txt"), 10)
            .await
            .unwrap_err();
        assert_eq!(error, CRASHED);
        parse(&pool, job(dir.path(), "b.txt"), 10).await.unwrap();
        assert_eq!(started(&starts), 2);
    }

    #[tokio::test]
    async fn a_hung_worker_is_killed_at_the_budget_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let body = "case \"$line\" in *zz-hang*) sleep 30;; *) printf '%s\\n' \"$2\";; esac";
        let (pool, starts) = pool(dir.path(), body, 100);
        let began = std::time::Instant::now();
        let error = parse(&pool, job(dir.path(), "zz-hang.txt"), 1)
            .await
            .unwrap_err();
        assert!(error.contains("longer than the 1-second limit"), "{error}");
        assert!(began.elapsed() < Duration::from_secs(10));
        parse(&pool, job(dir.path(), "a.txt"), 10).await.unwrap();
        assert_eq!(started(&starts), 2);
    }

    /// Out of memory, a caught panic or an answer that is not the protocol's: the document
    /// fails as with a process per document, and the worker parses nothing more.
    #[tokio::test]
    async fn a_worker_in_doubt_is_not_used_again() {
        let dir = tempfile::tempdir().unwrap();
        let panicked = serde_json::to_string(&WorkerResponse::Failed {
            message: CRASHED.into(),
            log: Some("a parser panicked".into()),
        })
        .unwrap();
        let body = format!(
            "case \"$line\" in *zz-oom*) echo '\"out_of_memory\"';; *zz-panic*) echo '{panicked}';; \
             *zz-nonsense*) echo 'not json';; *) printf '%s\\n' \"$2\";; esac"
        );
        let (pool, starts) = pool(dir.path(), &body, 100);
        let error = parse(&pool, job(dir.path(), "zz-oom.txt"), 10)
            .await
            .unwrap_err();
        assert!(error.contains("16 MiB memory limit"), "{error}");
        parse(&pool, job(dir.path(), "a.txt"), 10).await.unwrap();
        assert_eq!(
            parse(&pool, job(dir.path(), "zz-panic.txt"), 10).await,
            Err(CRASHED.into())
        );
        parse(&pool, job(dir.path(), "b.txt"), 10).await.unwrap();
        assert_eq!(
            parse(&pool, job(dir.path(), "zz-nonsense.txt"), 10).await,
            Err(CRASHED.into())
        );
        parse(&pool, job(dir.path(), "c.txt"), 10).await.unwrap();
        assert_eq!(started(&starts), 4, "a new worker after each of the three");
    }

    /// A failed allocation aborts the worker; its stderr says so, as for a process per
    /// document.
    #[tokio::test]
    async fn an_abort_on_a_failed_allocation_is_the_memory_limit() {
        let dir = tempfile::tempdir().unwrap();
        let body = "echo 'memory allocation of 123456 bytes failed' >&2; kill -ABRT $$";
        let (pool, _) = pool(dir.path(), body, 100);
        let error = parse(&pool, job(dir.path(), "a.txt"), 10)
            .await
            .unwrap_err();
        assert!(error.contains("16 MiB memory limit"), "{error}");
    }

    /// The worker's page lines reach the document it is parsing.
    #[tokio::test]
    async fn page_reports_reach_the_document_being_parsed() {
        let dir = tempfile::tempdir().unwrap();
        // The pause lets the page line be read before the answer ends the document.
        let body = "echo 'quire-parse-pages 2/7' >&2; sleep 0.5; printf '%s\\n' \"$2\"";
        let (pool, _) = pool(dir.path(), body, 100);
        let (pages, read) = tokio::sync::watch::channel(None);
        pool.parse(job(dir.path(), "a.txt"), Duration::from_secs(10), pages)
            .await
            .unwrap();
        assert_eq!(*read.borrow(), Some((2, 7)));
    }

    /// An idle worker that died is not handed a document.
    #[tokio::test]
    async fn an_idle_worker_that_died_is_replaced_before_it_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let (pool, starts) = pool(dir.path(), "printf '%s\\n' \"$2\"", 100);
        parse(&pool, job(dir.path(), "a.txt"), 10).await.unwrap();
        let first: i32 = std::fs::read_to_string(&starts)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(first).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        parse(&pool, job(dir.path(), "b.txt"), 10).await.unwrap();
        assert_eq!(started(&starts), 2);
    }
}
