//! The parse worker's side (`quire parse-worker`): reading a request, holding the process to
//! the request's memory and CPU budgets, parsing the document with every failure (a panic
//! included) turned into an answer, reporting pages on stderr, and writing the answer.

use std::io::{BufRead, BufWriter, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use super::protocol::{Budgets, CRASHED, PAGE_LINE, ParseJob, WorkerRequest, WorkerResponse};
use crate::pipeline::{ProcessingError, process_file};

/// Largest request the worker reads (a request is a path, two names and a few numbers).
const MAX_REQUEST_BYTES: u64 = 1024 * 1024;

/// Shortest time between two page reports from a worker process: a thousand small pages do
/// not need a thousand lines.
const PAGE_REPORT_EVERY: Duration = Duration::from_millis(250);

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

/// Parses and chunks one document, turning every failure, a panic included, into an answer.
pub(super) fn parse_job(job: &ParseJob) -> WorkerResponse {
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

/// The child side of [`Isolation::ChildProcess`](super::Isolation::ChildProcess)
/// (`quire parse-worker`): reads one request from `input`, holds this process's address space
/// to its present size plus the request's memory budget, parses and chunks the file, and
/// writes the answer to `output`. Run it in a process of its own, with nothing else started:
/// the limits apply to the whole process.
pub fn run_parse_worker(input: impl Read, output: impl Write) -> Result<(), WorkerError> {
    serve_request(input, output, limit_resources)
}

/// The child side of [`Isolation::Pooled`](super::Isolation::Pooled)
/// (`quire parse-worker --serve`): answers requests, one JSON line each on `input`, with one
/// JSON line each on `output`, until `input` ends. The limits are set again before each
/// document from the process's size and CPU time at that moment, so every document has its
/// whole budget, whatever the ones before it left behind.
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

pub(super) fn serve_request(
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
    use std::process::ExitStatus;

    use super::*;
    use crate::chunker::ChunkingParams;
    use crate::isolation::fixtures::{job, serve_here};
    use crate::isolation::parent::{WorkerCommand, interpret, request_bytes};
    use crate::isolation::protocol::MIB;
    use crate::pipeline::OutputLimits;
    use quire_parse::ParseLimits;

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
}
