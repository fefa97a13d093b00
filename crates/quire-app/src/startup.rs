//! Starting and stopping the service's own work: [`recover`] repairs what the last run left
//! (interrupted jobs, unlogged webhook deliveries, interrupted deletions, decided reviews that
//! still hold found text), and [`Background::start`] runs the workers, the webhook dispatcher,
//! the index-feed follower, the re-embedding of documents without vectors, housekeeping and the
//! cluster heartbeat until [`Background::stop`]. The server's `serve` wires these and waits.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use quire_core::Clock;
use quire_ingest::{JobRunner, Semantic, WorkerSettings};
use quire_store::Store;
use quire_webhooks::{DispatchSettings, Dispatcher, RunningDispatcher};
use tokio::task::JoinHandle;

use crate::{AppError, Services};

/// How often old rate-limit windows and expired admin sessions are pruned.
const HOUSEKEEPING_INTERVAL: Duration = Duration::from_secs(300);
/// How often a node of a cluster says it still runs.
const NODE_HEARTBEAT: Duration = Duration::from_secs(10);

/// Whose leftovers a start takes back.
#[derive(Debug, Clone)]
pub struct Recovery {
    /// True when no other process runs workers on this store (the embedded SQLite default,
    /// whose data directory this process holds the index lock of): then every running job
    /// and every outbox claim belongs to a process that died, and so does every original
    /// without a document.
    pub owns_its_jobs: bool,
    /// This node's stable name, the prefix (`{node}:`) of its workers' and dispatcher's
    /// names: on a shared store only its own jobs and claims are taken back.
    pub node: String,
}

/// What [`recover`] repaired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Interrupted jobs put back in the queue.
    pub requeued_jobs: u64,
    /// Webhook deliveries claimed but never logged, released to be sent again.
    pub released_deliveries: u64,
    /// Deleted documents whose index entries or vectors were removed.
    pub orphan_entries: u64,
    /// Deleted documents whose originals were removed.
    pub orphan_originals: u64,
    /// Decided reviews whose findings were reduced to what a decision keeps.
    pub reduced_reviews: u64,
    /// Deleted documents whose vectors were removed (left by a run without a model).
    pub orphan_vectors: u64,
}

/// Repairs what the last run left, before the workers start and uploads are accepted. Other
/// nodes' jobs on a shared store come back only through their leases.
pub async fn recover(services: &Services, recovery: &Recovery) -> Result<Recovered, AppError> {
    let store = &services.store;
    let prefix = format!("{}:", recovery.node);
    let owner = (!recovery.owns_its_jobs).then_some(prefix.as_str());
    let mut done = Recovered {
        requeued_jobs: store
            .requeue_running_jobs(owner, services.clock.now())
            .await?,
        released_deliveries: store.release_delivery_claims(owner).await?,
        ..Recovered::default()
    };
    if done.requeued_jobs > 0 {
        tracing::info!(
            jobs = done.requeued_jobs,
            "resuming jobs interrupted by the last shutdown"
        );
    }
    if done.released_deliveries > 0 {
        tracing::info!(
            deliveries = done.released_deliveries,
            "attempting again webhook deliveries the last run claimed but never logged"
        );
    }
    // Sync runs are recorded under the node's name itself (without the workers' `:` suffix).
    let sync_owner = (!recovery.owns_its_jobs).then_some(recovery.node.as_str());
    let interrupted = store
        .fail_interrupted_sync_runs(sync_owner, services.clock.now())
        .await?;
    if interrupted > 0 {
        tracing::info!(
            runs = interrupted,
            "sync runs the last shutdown interrupted are recorded as failed; they run again when due"
        );
    }
    // Originals only when this process owns the store: on a shared one, another node may
    // have just stored an original whose document row is not written yet.
    (done.orphan_entries, done.orphan_originals) = services
        .ingest
        .remove_orphans(recovery.owns_its_jobs)
        .await?;
    if done.orphan_entries + done.orphan_originals > 0 {
        tracing::info!(
            documents = done.orphan_entries,
            originals = done.orphan_originals,
            "removed index entries and originals of deleted documents"
        );
    }
    done.reduced_reviews = store
        .reduce_decided_findings(quire_ingest::reduce_findings)
        .await?;
    if done.reduced_reviews > 0 {
        tracing::info!(
            reviews = done.reduced_reviews,
            "reduced the findings of decided reviews"
        );
    }
    // Before the workers start, since a document being processed has vectors before it is
    // ready.
    if let Some(semantic) = services.ingest.semantic() {
        done.orphan_vectors = semantic.remove_orphans(store.as_ref()).await?;
        if done.orphan_vectors > 0 {
            tracing::info!(
                documents = done.orphan_vectors,
                "removed vectors of deleted documents"
            );
        }
    }
    Ok(done)
}

/// How the background work runs.
#[derive(Debug, Clone)]
pub struct BackgroundSettings {
    /// This node's stable name.
    pub node: String,
    /// Ingest workers (0: none in this process).
    pub workers: usize,
    /// How often an idle worker looks for jobs.
    pub poll_interval: Duration,
    /// How long stopping waits for the workers' jobs.
    pub shutdown_grace: Duration,
    /// Where this node records how far it follows the shared store's index feed (`None` on
    /// the embedded store, which has no feed).
    pub feed_position: Option<PathBuf>,
    /// The webhook dispatcher's settings.
    pub dispatch: DispatchSettings,
}

/// The service's background work, running.
pub struct Background {
    store: Arc<dyn Store>,
    node: String,
    shutdown_grace: Duration,
    runner: Option<JobRunner>,
    dispatcher: RunningDispatcher,
    tasks: Vec<JoinHandle<()>>,
    heartbeat: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Background {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Background")
            .field("node", &self.node)
            .field("workers", &self.runner.is_some())
            .field("tasks", &self.tasks.len())
            .finish_non_exhaustive()
    }
}

impl Background {
    /// Starts the workers, the dispatcher and the background tasks.
    pub fn start(services: &Services, settings: BackgroundSettings) -> Result<Self, AppError> {
        let store = Arc::clone(&services.store);
        let clock = Arc::clone(&services.clock);
        let mut tasks = Vec::new();
        if let Some(semantic) = services.ingest.semantic() {
            tasks.push(tokio::spawn(backfill(
                Arc::clone(semantic),
                Arc::clone(&store),
            )));
        }
        // On a shared store, documents other nodes make ready (or delete) reach this node's
        // indexes through the store's index feed.
        if let Some(position_file) = settings.feed_position.filter(|_| store.is_shared()) {
            let follower = services
                .ingest
                .feed_follower(position_file)
                .map_err(AppError::from)?;
            tracing::info!(
                position = follower.position(),
                "following the shared store's index feed"
            );
            tasks.push(tokio::spawn(Arc::new(follower).follow()));
        }
        tasks.push(tokio::spawn(housekeeping(
            Arc::clone(&store),
            Arc::clone(&clock),
        )));
        if services.syncs.is_some() {
            tasks.push(tokio::spawn(sync_scheduler(services.clone())));
        }
        let heartbeat = store.is_shared().then(|| {
            tokio::spawn(heartbeat(
                Arc::clone(&store),
                Arc::clone(&clock),
                settings.node.clone(),
            ))
        });
        let runner = (settings.workers > 0).then(|| {
            JobRunner::start(
                Arc::clone(&services.ingest),
                WorkerSettings {
                    node: settings.node.clone(),
                    workers: settings.workers,
                    poll_interval: settings.poll_interval,
                },
            )
        });
        let dispatcher = Dispatcher::new(
            Arc::clone(&store),
            clock,
            DispatchSettings {
                node: settings.node.clone(),
                ..settings.dispatch
            },
        )
        .start();
        Ok(Self {
            store,
            node: settings.node,
            shutdown_grace: settings.shutdown_grace,
            runner,
            dispatcher,
            tasks,
            heartbeat,
        })
    }

    /// Stops the background work: the dispatcher stops claiming and waits for the deliveries
    /// in flight while the workers finish their jobs (within the grace period; events those
    /// jobs write stay in the outbox for the next start); a node of a cluster says it left.
    pub async fn stop(self) {
        for task in &self.tasks {
            task.abort();
        }
        let grace = self.shutdown_grace;
        let workers_stopped = async {
            if let Some(runner) = self.runner {
                runner.shutdown(grace).await;
            }
        };
        tokio::join!(self.dispatcher.shutdown(), workers_stopped);
        if let Some(heartbeat) = self.heartbeat {
            heartbeat.abort();
            // Stopped cleanly: the others need not wait for this node to be taken for gone.
            if let Err(e) = self.store.leave_cluster(&self.node).await {
                tracing::warn!(error = %e, "could not record that this node stopped");
            }
        }
    }
}

/// Embeds the ready documents that have no vectors.
async fn backfill(semantic: Arc<Semantic>, store: Arc<dyn Store>) {
    match semantic.backfill(&*store).await {
        Ok(report) if report.documents > 0 => tracing::info!(
            documents = report.documents,
            chunks = report.chunks,
            "embedded the documents that had no vectors"
        ),
        Ok(_) => {}
        Err(e) => tracing::error!(
            error = %e,
            "re-embedding stopped; documents without vectors are found by keywords only until the next start"
        ),
    }
}

/// Turns semantic search on once a model fetched after start is ready: documents processed
/// from now on are embedded, and those made ready while the model was fetched are embedded now
/// (a second pass once the jobs under way when it turned on have ended, for documents whose
/// workers read no model yet but finished after the first pass passed them).
pub async fn semantic_ready(services: &Services, semantic: Arc<Semantic>) {
    let note = format!(
        "semantic search on: {} ({} dimensions, {}), fetched at first start",
        semantic.embedder().model_id(),
        semantic.embedder().dimensions(),
        semantic.embedder().engine(),
    );
    if !services.ingest.enable_semantic(Arc::clone(&semantic)) {
        return;
    }
    services.semantic.set(note.clone(), false);
    tracing::info!("{note}");
    let store = Arc::clone(&services.store);
    backfill(Arc::clone(&semantic), Arc::clone(&store)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    while tokio::time::Instant::now() < deadline {
        match store.pending_job_count().await {
            Ok(0) => break,
            Ok(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            Err(e) => {
                tracing::warn!(error = %e, "could not count the pending jobs");
                break;
            }
        }
    }
    backfill(semantic, store).await;
}

/// Says that semantic search stays off because the model could not be prepared, and why.
pub fn semantic_unavailable(services: &Services, note: String) {
    tracing::warn!("{note}");
    services.semantic.set(note, false);
}

/// Says how far the preparation of semantic search has come (fetching, loading).
pub fn semantic_preparing(services: &Services, note: String) {
    tracing::info!("{note}");
    services.semantic.set(note, true);
}

/// How often the scheduler looks for syncing sources that are due.
const SYNC_SCHEDULER_INTERVAL: Duration = Duration::from_secs(2);

/// Starts the sync runs that are due, again and again.
async fn sync_scheduler(services: Services) {
    let mut tick = tokio::time::interval(SYNC_SCHEDULER_INTERVAL);
    loop {
        tick.tick().await;
        if let Err(e) = crate::syncs::run_due(&services).await {
            tracing::warn!(error = %e, "could not start the sync runs that are due");
        }
    }
}

/// Keeps saying that `node` runs, so other nodes' model checks count it.
async fn heartbeat(store: Arc<dyn Store>, clock: Arc<dyn Clock>, node: String) {
    let mut tick = tokio::time::interval(NODE_HEARTBEAT);
    loop {
        tick.tick().await;
        if let Err(e) = store.node_seen(&node, clock.now()).await {
            tracing::warn!(error = %e, "could not record that this node runs");
        }
    }
}

async fn housekeeping(store: Arc<dyn Store>, clock: Arc<dyn Clock>) {
    let mut tick = tokio::time::interval(HOUSEKEEPING_INTERVAL);
    loop {
        tick.tick().await;
        let cutoff = clock.now() - chrono::Duration::hours(1);
        if let Err(e) = store.prune_rate_windows(cutoff).await {
            tracing::warn!(error = %e, "could not prune rate-limit windows");
        }
        if let Err(e) = store.prune_admin_sessions(clock.now()).await {
            tracing::warn!(error = %e, "could not prune expired admin sessions");
        }
    }
}
