//! The job runner: a few workers that claim jobs from the store, process them, and sleep until
//! an upload wakes them or the poll interval passes (jobs can also become runnable when a lease
//! expires, which nothing announces).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::Ingest;

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
        let handles = (0..settings.workers)
            .map(|n| {
                let worker = format!("{}:{}-{n}", settings.node, &run_id[..8]);
                let settings = settings.clone();
                tokio::spawn(work(worker, Arc::clone(&ingest), settings, cancel.clone()))
            })
            .collect();
        Self { cancel, handles }
    }

    /// Asks the workers to stop after their current job and waits up to `grace` for them. A job
    /// still running then keeps its lease and is resumed at the next start.
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

async fn work(
    worker: String,
    ingest: Arc<Ingest>,
    settings: WorkerSettings,
    cancel: CancellationToken,
) {
    tracing::debug!(%worker, "worker started");
    while !cancel.is_cancelled() {
        // Panics after parsing fail their document inside `process_next`; this catches any
        // other, so the worker lives on (the job is taken up again when its lease runs out).
        let next = AssertUnwindSafe(ingest.process_next(&worker)).catch_unwind();
        let found = match next.await {
            Ok(Ok(found)) => found,
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
            () = ingest.wait_for_work() => {}
            // A shared store announces jobs queued on other nodes at once; SQLite just sleeps.
            () = ingest.wait_for_jobs(settings.poll_interval) => {}
        }
    }
    tracing::debug!(%worker, "worker stopped");
}
