//! `[parsing]`: bounds on parsing one document, and where it is parsed.

use std::path::PathBuf;

use anyhow::{Context, bail};
use quire_ingest::{Isolation, OutputLimits, ParseLimits, WorkerCommand, WorkerPool};
use serde::{Deserialize, Serialize};

/// `[parsing]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ParsingConfig {
    /// Most pages (slides, sheets) in one document.
    pub max_pages: u32,
    /// Most bytes unpacked from a container (DOCX, XLSX, …) or decoded from attachments.
    pub max_unpacked_bytes: u64,
    /// Most entries in a container.
    pub max_archive_entries: usize,
    /// How deep attachments inside attachments are followed (e-mail).
    pub max_attachment_depth: u32,
    /// Most text extracted from one document, in MiB; over it the document fails.
    pub max_text_mb: u64,
    /// Most chunks of one document; over it the document fails.
    pub max_chunks: u32,
    /// Parse each document in a child process, killed at the time budget and held to
    /// `memory_limit_mb`; `false` parses on the server's own threads (no memory limit, and a
    /// hang keeps its thread until the server stops).
    pub isolate: bool,
    /// Memory one document's parsing may use, in MiB, on top of the worker's own size at start
    /// (0: no limit). Only with `isolate`.
    pub memory_limit_mb: u64,
    /// Documents one parse worker process parses, one after another, before it is replaced
    /// (each within its own time and memory budget; a crash, a memory-limit hit or a timeout
    /// ends the process at once). 1 starts a process for every document. Only with `isolate`.
    pub documents_per_worker: u32,
    /// Program run as the parse worker (`PROGRAM parse-worker`, with `--serve` when
    /// `documents_per_worker` is over 1); unset, the running `quire` binary. For packaging and
    /// tests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_program: Option<PathBuf>,
}

impl Default for ParsingConfig {
    fn default() -> Self {
        let limits = ParseLimits::default();
        let output = OutputLimits::default();
        Self {
            max_pages: limits.max_pages,
            max_unpacked_bytes: limits.max_unpacked_bytes,
            max_archive_entries: limits.max_archive_entries,
            max_attachment_depth: limits.max_attachment_depth,
            max_text_mb: output.max_text_bytes / (1024 * 1024),
            max_chunks: output.max_chunks,
            isolate: true,
            memory_limit_mb: 1024,
            documents_per_worker: 100,
            worker_program: None,
        }
    }
}

impl ParsingConfig {
    /// The limits handed to the parsers.
    pub fn limits(&self) -> ParseLimits {
        ParseLimits {
            max_pages: self.max_pages,
            max_unpacked_bytes: self.max_unpacked_bytes,
            max_archive_entries: self.max_archive_entries,
            max_attachment_depth: self.max_attachment_depth,
        }
    }

    /// The bounds on what one document may become.
    pub fn output_limits(&self) -> OutputLimits {
        OutputLimits {
            max_text_bytes: self.max_text_mb.saturating_mul(1024 * 1024),
            max_chunks: self.max_chunks,
        }
    }

    /// Where documents are parsed: `quire parse-worker` child processes unless `isolate` is
    /// off, kept for `documents_per_worker` documents each.
    pub fn isolation(&self) -> anyhow::Result<Isolation> {
        if !self.isolate {
            return Ok(Isolation::InProcess);
        }
        match self.documents_per_worker {
            0 => bail!("parsing.documents_per_worker must be at least 1"),
            1 => Ok(Isolation::ChildProcess(self.worker_command()?)),
            n => {
                let mut command = self.worker_command()?;
                command.args.push("--serve".into());
                Ok(Isolation::Pooled(WorkerPool::new(command, n)))
            }
        }
    }

    /// How to start a parse worker for one document (`quire parse-worker`).
    pub fn worker_command(&self) -> anyhow::Result<WorkerCommand> {
        let program = match &self.worker_program {
            Some(program) => program.clone(),
            None => std::env::current_exe()
                .context("could not find the running program to start parse workers")?,
        };
        Ok(WorkerCommand {
            program,
            args: vec!["parse-worker".into()],
            memory_limit_bytes: self.memory_limit_mb.saturating_mul(1024 * 1024),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::env;
    use crate::config::{Config, Overrides};
    use quire_ingest::Isolation;
    use std::path::PathBuf;

    #[test]
    fn parsing_isolation_follows_the_settings() {
        let c = Config::load(None, env(&[]), &Overrides::default()).unwrap();
        let Isolation::Pooled(pool) = c.parsing.isolation().unwrap() else {
            panic!("parsing is isolated in pooled workers by default");
        };
        assert_eq!(pool.command().program, std::env::current_exe().unwrap());
        assert_eq!(pool.command().args, ["parse-worker", "--serve"]);
        assert_eq!(pool.command().memory_limit_bytes, 1024 * 1024 * 1024);
        assert_eq!(pool.documents_per_worker(), 100);

        let c = Config::load(
            None,
            env(&[
                ("QUIRE_PARSING_WORKER_PROGRAM", "/opt/quire/bin/quire"),
                ("QUIRE_PARSING_MEMORY_LIMIT_MB", "16"),
                ("QUIRE_PARSING_DOCUMENTS_PER_WORKER", "1"),
            ]),
            &Overrides::default(),
        )
        .unwrap();
        let Isolation::ChildProcess(worker) = c.parsing.isolation().unwrap() else {
            panic!("one document per worker is a process per document");
        };
        assert_eq!(worker.program, PathBuf::from("/opt/quire/bin/quire"));
        assert_eq!(worker.args, ["parse-worker"]);
        assert_eq!(worker.memory_limit_bytes, 16 * 1024 * 1024);

        let c = Config::load(
            None,
            env(&[("QUIRE_PARSING_DOCUMENTS_PER_WORKER", "0")]),
            &Overrides::default(),
        )
        .unwrap();
        let error = c.parsing.isolation().unwrap_err().to_string();
        assert!(error.contains("documents_per_worker"), "{error}");

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("q.toml");
        std::fs::write(&file, "[parsing]\nworker_program = \"/from/file\"\n").unwrap();
        let c = Config::load(
            Some(&file),
            env(&[("QUIRE_PARSING_WORKER_PROGRAM", "")]),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(
            c.parsing.worker_program, None,
            "an empty variable unsets it"
        );

        let c = Config::load(
            None,
            env(&[("QUIRE_PARSING_ISOLATE", "false")]),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.parsing.isolation().unwrap(), Isolation::InProcess);
    }
}
