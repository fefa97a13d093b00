//! What the tests of the parent, child and pool sides share: a job, and the answer the worker
//! side gives to it.

use std::path::Path;
use std::time::Duration;

use quire_parse::ParseLimits;

use super::child::serve_request;
use super::parent::{WorkerCommand, request_bytes};
use super::protocol::{Budgets, MIB, ParseJob};
use crate::chunker::ChunkingParams;
use crate::pipeline::OutputLimits;

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

/// Runs the worker side in this process (without the memory limit, which would bind the
/// whole test run) on the request the parent would send.
pub(super) fn serve_here(job: ParseJob) -> Vec<u8> {
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
