//! The job runner: a few workers that claim jobs from the store, process them, and sleep until
//! an upload wakes them or the poll interval passes (jobs can also become runnable when a lease
//! expires, which nothing announces).
//!
//! A worker does not wait for its document's keyword-index commit: it runs the rest of the
//! document ([`Finishing`]) as a task of its own and claims the next job, so one commit covers
//! the documents of every worker meanwhile. The documents waiting for a commit are bounded by
//! the chunks they hold ([`MAX_CHUNKS_AWAITING_COMMIT`]); a worker over it waits before taking
//! another job.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::{Finishing, Ingest, IngestError, Next};

/// Most chunks held in memory by documents of one node that wait for their commit. In
/// `quire bench ingest` on SciFact (96 documents/s, each waiting about 0.1 s for its commit)
/// some ten documents, 15 chunks, waited at a time; the bound is for commits that stall (a
/// slow disk), not for normal work.
pub const MAX_CHUNKS_AWAITING_COMMIT: usize = 20_000;

/// How many workers run, under which node's name, and how often idle ones look for work.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// This node's stable name: every worker's name (the lease owner of its jobs) starts with
    /// `"{node}:"`, so a restarted node can take back exactly its own interrupted jobs.
    pub node: String,
    /// Number of concurrent workers.
    pub workers: usize,
    /// How often an idle worker checks for runnable jobs.
    pub poll_interval: Duration,
}

/// Running workers; stop them with [`JobRunner::shutdown`].
#[derive(Debug)]
pub struct JobRunner {
    cancel: CancellationToken,
    handles: Vec<JoinHandle<()>>,
}

impl JobRunner {
    /// Starts `settings.workers` workers.
    pub fn start(ingest: Arc<Ingest>, settings: WorkerSettings) -> Self {
        let cancel = CancellationToken::new();
        let run_id = uuid::Uuid::new_v4().simple().to_string();
        let awaiting_commit = Arc::new(Semaphore::new(MAX_CHUNKS_AWAITING_COMMIT));
        let handles = (0..settings.workers)
            .map(|n| {
                let worker = Worker {
                    name: format!("{}:{}-{n}", settings.node, &run_id[..8]),
                    ingest: Arc::clone(&ingest),
                    settings: settings.clone(),
                    awaiting_commit: Arc::clone(&awaiting_commit),
                };
                tokio::spawn(worker.work(cancel.clone()))
            })
            .collect();
        Self { cancel, handles }
    }

    /// Asks the workers to stop after their current job and waits up to `grace` for them and the
    /// documents they are finishing. A job still running then keeps its lease and is resumed at
    /// the next start.
    pub async fn shutdown(self, grace: Duration) {
        self.cancel.cancel();
        let all = futures_join(self.handles);
        if tokio::time::timeout(grace, all).await.is_err() {
            tracing::warn!("workers still busy at shutdown; their jobs resume at the next start");
        }
    }
}

async fn futures_join(handles: Vec<JoinHandle<()>>) {
    for handle in handles {
        let _ = handle.await;
    }
}

/// One worker and what it shares with the others.
struct Worker {
    name: String,
    ingest: Arc<Ingest>,
    settings: WorkerSettings,
    awaiting_commit: Arc<Semaphore>,
}

impl Worker {
    async fn work(self, cancel: CancellationToken) {
        let worker = self.name.as_str();
        tracing::debug!(%worker, "worker started");
        let mut finishing = JoinSet::new();
        while !cancel.is_cancelled() {
            reap(worker, &mut finishing);
            // Panics after parsing fail their document inside `start_next`; this catches any
            // other, so the worker lives on (the job is taken up again when its lease runs out).
            let next = AssertUnwindSafe(self.ingest.start_next(worker)).catch_unwind();
            let found = match next.await {
                Ok(Ok(Next::Idle)) => false,
                Ok(Ok(Next::Done)) => true,
                Ok(Ok(Next::Finishing(document))) => {
                    self.finish_apart(document, &mut finishing).await;
                    true
                }
                Ok(Err(e)) => {
                    tracing::error!(%worker, error = %e, "job processing failed");
                    false
                }
                Err(panic) => {
                    let message = crate::service::panic_message(&*panic);
                    tracing::error!(%worker, panic = %message, "job processing panicked");
                    false
                }
            };
            if found {
                continue;
            }
            tokio::select! {
                () = cancel.cancelled() => break,
                () = self.ingest.wait_for_work() => {}
                // A shared store announces jobs queued on other nodes at once; SQLite just sleeps.
                () = self.ingest.wait_for_jobs(self.settings.poll_interval) => {}
            }
        }
        while let Some(result) = finishing.join_next().await {
            log_finished(worker, result);
        }
        tracing::debug!(%worker, "worker stopped");
    }

    /// Runs `document`'s last step as a task of this worker, once the documents waiting for
    /// their commit leave room for its chunks.
    async fn finish_apart(
        &self,
        document: Finishing,
        finishing: &mut JoinSet<Result<(), IngestError>>,
    ) {
        finish_in_room(&self.awaiting_commit, document, finishing).await;
    }
}

/// Spawns `document`'s last step into `finishing` once `room` (permits for
/// [`MAX_CHUNKS_AWAITING_COMMIT`] chunks) has room for its chunks; the room is given back when
/// the step ends.
async fn finish_in_room(
    room: &Arc<Semaphore>,
    document: Finishing,
    finishing: &mut JoinSet<Result<(), IngestError>>,
) {
    let wanted = document.chunks().clamp(1, MAX_CHUNKS_AWAITING_COMMIT);
    let permits = u32::try_from(wanted).unwrap_or(u32::MAX);
    // The semaphore is never closed, so this waits for room and then has it.
    let room = Arc::clone(room).acquire_many_owned(permits).await.ok();
    finishing.spawn(async move {
        let _room = room;
        document.run().await
    });
}

impl Ingest {
    /// Processes every runnable job as `worker`, in this task, until none is left, calling
    /// `done` after each document. As the workers do, it goes on with the next job while a
    /// document waits for its keyword-index commit (the index spaces its commits, so waiting
    /// for each would wait out the spacing every time), within the same bound on the chunks
    /// waiting. For benches and evaluations that ingest a corpus in-process.
    pub async fn process_queued(
        &self,
        worker: &str,
        mut done: impl FnMut(),
    ) -> Result<(), IngestError> {
        let room = Arc::new(Semaphore::new(MAX_CHUNKS_AWAITING_COMMIT));
        let mut finishing = JoinSet::new();
        loop {
            while let Some(finished) = finishing.try_join_next() {
                finished.map_err(|e| IngestError::Task(e.to_string()))??;
                done();
            }
            match self.start_next(worker).await? {
                Next::Idle => break,
                Next::Done => done(),
                Next::Finishing(document) => {
                    finish_in_room(&room, document, &mut finishing).await;
                }
            }
        }
        while let Some(finished) = finishing.join_next().await {
            finished.map_err(|e| IngestError::Task(e.to_string()))??;
            done();
        }
        Ok(())
    }
}

/// Logs the documents whose last step has ended, and forgets them.
fn reap(worker: &str, finishing: &mut JoinSet<Result<(), IngestError>>) {
    while let Some(result) = finishing.try_join_next() {
        log_finished(worker, result);
    }
}

fn log_finished(worker: &str, result: Result<Result<(), IngestError>, tokio::task::JoinError>) {
    match result {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(%worker, error = %e, "finishing a document failed"),
        Err(e) => tracing::error!(%worker, error = %e, "finishing a document panicked"),
    }
}
