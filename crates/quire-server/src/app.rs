//! Wiring: [`build`] opens the data directory and assembles the service; [`App::serve`] runs
//! the HTTP server and the workers until shutdown. `main` and the integration tests call the
//! same two functions, so the tests exercise the real wiring.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use quire_app::answers::{Generation, GenerationQueue, SharedLine};
use quire_app::rate_limit::RateLimiter;
use quire_app::{Services, UploadSettings, WebhookSettings};
use quire_core::Clock;
use quire_http::{AppState, HttpSettings};
use quire_ingest::{Ingest, IngestSettings, JobRunner, Semantic, Staging, WorkerSettings};
use quire_models::generate::{Extractive, Generator, OpenAiChat, OpenAiChatSettings};
use quire_models::{Embedder, LocalEmbedder, OpenAiEmbedder, OpenAiSettings};
use quire_search::KeywordIndex;
use quire_store::{QueueLimits, Store, StoreLocation};
use tokio::net::TcpListener;

use crate::config::{Config, LlmConfig};

/// How often old rate-limit windows are pruned.
const HOUSEKEEPING_INTERVAL: Duration = Duration::from_secs(300);

/// The assembled service, ready to serve.
#[derive(Debug)]
pub struct App {
    state: AppState,
    config: Config,
    /// True when no other process runs workers on this store (the embedded SQLite default,
    /// whose data directory this process holds the index lock of).
    owns_its_jobs: bool,
    /// This node's stable name (`<data_dir>/node-id`).
    node: String,
    /// The metrics listener, when [`App::bind_metrics`] opened it before [`App::serve`].
    metrics_listener: Option<TcpListener>,
}

/// Opens the configured store (`store.url`; by default SQLite in the data directory), for
/// `serve` and for commands that need nothing else, like `keys`.
pub async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    let location = config.store_location()?;
    quire_store::open(&location)
        .await
        .with_context(|| format!("could not open the store at {location}"))
}

/// Opens the data directory and assembles the service.
pub async fn build(config: &Config, clock: Arc<dyn Clock>) -> anyhow::Result<App> {
    let data_dir = &config.data_dir;
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("could not create data directory {}", data_dir.display()))?;
    let store = open_store(config).await?;
    let index_dir = data_dir.join("index").join("keyword");
    let index = Arc::new(KeywordIndex::open(&index_dir).with_context(|| {
        format!(
            "could not open the keyword index in {} (is another `quire serve` using this data directory?)",
            index_dir.display()
        )
    })?);
    let staging = Staging::open(data_dir)
        .context("could not prepare the upload staging area")?
        .with_limits(config.limits.staging());
    let (files_location, s3) = config.files.store_settings(data_dir)?;
    let files = quire_files::open(&files_location, &s3)
        .with_context(|| format!("could not open the store of originals ({files_location:?})"))?;
    let (semantic, semantic_note) = match open_semantic(config).await {
        Ok(Some(embedder)) => {
            let dir = data_dir.join("index").join("vectors");
            let semantic = Semantic::open(&dir, embedder)
                .with_context(|| format!("could not open the vector index in {}", dir.display()))?;
            let note = format!(
                "semantic search on: {} ({} dimensions, {}), {} chunks embedded",
                semantic.embedder().model_id(),
                semantic.embedder().dimensions(),
                semantic.embedder().engine(),
                semantic.vectors().len()
            );
            (Some(Arc::new(semantic)), note)
        }
        Ok(None) => (
            None,
            "semantic search off: no embedding model is configured (set embedding.model_dir \
             or QUIRE_EMBEDDING_MODEL_DIR); search is keyword only"
                .to_owned(),
        ),
        Err(e) => (
            None,
            format!("semantic search off: {e:#}; search is keyword only"),
        ),
    };
    if semantic.is_some() {
        tracing::info!("{semantic_note}");
    } else {
        tracing::warn!("{semantic_note}");
    }
    let node = node_id(data_dir)?;
    // In cluster mode the generation queue is one line for every node, kept in the store.
    let mut shared_line = None;
    if store.is_shared() {
        join_cluster(&*store, &node, semantic.as_deref(), &*clock).await?;
        let llm = &config.llm;
        let limits = QueueLimits {
            slots: llm.max_concurrent as u64,
            max_waiting: llm.max_queue as u64,
            max_per_key: llm.max_queue_per_key as u64,
        };
        shared_line = Some(SharedLine::start(
            Arc::clone(&store),
            Arc::clone(&clock),
            node.clone(),
            limits,
        ));
    }
    let (ocr, ocr_note) = config.ocr.resolve()?;
    if ocr.is_some() {
        tracing::info!("{ocr_note}");
    } else {
        tracing::warn!("{ocr_note}");
    }
    let dyn_store = Arc::clone(&store);
    let ingest = Arc::new(
        Ingest::new(
            Arc::clone(&dyn_store),
            Arc::clone(&index),
            staging,
            files,
            Arc::clone(&clock),
            IngestSettings {
                max_upload_bytes: config.limits.max_upload_bytes,
                chunking: config.chunking,
                parse_limits: config.parsing.limits(),
                output_limits: config.parsing.output_limits(),
                time_budget: Duration::from_secs(config.workers.time_budget_seconds),
                index_time_budget: Duration::from_secs(config.workers.index_time_budget_seconds),
                isolation: config.parsing.isolation()?,
                lease: chrono::Duration::seconds(
                    i64::try_from(config.workers.lease_seconds).unwrap_or(i64::MAX / 1000),
                ),
                max_attempts: config.workers.max_attempts,
            },
        )
        .with_semantic(semantic)
        .with_ocr(ocr, ocr_note)
        .with_review(if config.pii.enabled {
            Some(quire_ingest::Review::new(config.pii.policy()?))
        } else {
            tracing::warn!("personal-data screening is off (pii.enabled = false)");
            None
        }),
    );
    let limiter = Arc::new(RateLimiter::new(
        Arc::clone(&dyn_store),
        Arc::clone(&clock),
        config.limits.search_per_minute,
        config.limits.generate_per_minute,
    ));
    let services = Services {
        store: dyn_store,
        index,
        ingest,
        limiter,
        clock,
        search: config.search.settings(),
        uploads: UploadSettings {
            max_bulk_files: config.limits.max_bulk_files,
        },
        semantic_note: Arc::from(semantic_note),
        generation: open_generation(&config.llm, shared_line)?,
        webhooks: WebhookSettings {
            allow_private_targets: config.webhooks.allow_private_targets,
        },
    };
    let state = AppState {
        services,
        settings: HttpSettings {
            max_json_bytes: config.limits.max_json_bytes,
        },
    };
    let owns_its_jobs = matches!(config.store_location()?, StoreLocation::Sqlite(_));
    Ok(App {
        state,
        config: config.clone(),
        owns_its_jobs,
        node,
        metrics_listener: None,
    })
}

impl App {
    /// The HTTP application: the Agent API (whose fallback answers every unknown path outside
    /// `/admin` and `/mcp` in the JSON error envelope), the admin web interface under `/admin`
    /// and the MCP server at `/mcp`.
    pub fn router(&self) -> Router {
        let app = quire_http::router(self.state.clone())
            .merge(quire_admin::router(self.state.services.clone()))
            .merge(quire_mcp::router(self.state.services.clone()))
            // A route layer, so the matched route is known (unmatched paths are not counted by
            // route: their label would be whatever a client makes up).
            .route_layer(axum::middleware::from_fn(crate::metrics::track));
        // Over all three, so admin pages and MCP calls carry a request id and log a line too.
        quire_http::request_id::traced(app)
    }

    /// The use cases' services (for in-process tools such as `quire bench`).
    pub fn services(&self) -> &Services {
        &self.state.services
    }

    /// Opens the metrics listener of `metrics.bind` now rather than in [`App::serve`], and
    /// returns its address (`None` when metrics are off). With port 0 the system picks a free
    /// port: tests learn it here instead of guessing one that another process may take first.
    pub async fn bind_metrics(&mut self) -> anyhow::Result<Option<SocketAddr>> {
        if self.metrics_listener.is_none()
            && let Some(address) = self.config.metrics.address()?
        {
            let listener = TcpListener::bind(address).await.with_context(|| {
                format!("could not listen for metrics on {address} (metrics.bind)")
            })?;
            self.metrics_listener = Some(listener);
        }
        self.metrics_listener
            .as_ref()
            .map(TcpListener::local_addr)
            .transpose()
            .context("the metrics listener's address")
    }

    /// Serves HTTP on `listener` and runs the workers until `shutdown` completes; then stops
    /// accepting requests, lets in-flight requests and jobs finish (within the grace period)
    /// and closes the database.
    pub async fn serve(
        mut self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        // First, so a metrics address that cannot be used stops the start before any work.
        let metrics = match self.bind_metrics().await? {
            Some(address) => {
                let handle = crate::metrics::recorder()?;
                let listener = self
                    .metrics_listener
                    .take()
                    .context("the metrics listener was just opened")?;
                tracing::info!(%address, "Prometheus metrics at /metrics");
                let router = crate::metrics::router(handle, self.state.services.clone());
                Some(tokio::spawn(async move {
                    if let Err(e) = axum::serve(listener, router).await {
                        tracing::error!(error = %e, "the metrics listener failed");
                    }
                }))
            }
            None => None,
        };
        // On the embedded store this process owns the data directory (the index lock proves
        // it), so any job still marked running, and any outbox claim, belongs to a process that
        // died: put those jobs back in the queue and release those claims (their events are
        // attempted again, with the same webhook-id). On a shared store only this node's own
        // jobs and claims are taken back (its previous run is gone, the same lock proves it);
        // other nodes' come back only when their leases run out.
        let node = self.node.clone();
        let prefix = format!("{node}:");
        let owner = (!self.owns_its_jobs).then_some(prefix.as_str());
        let requeued = self
            .state
            .store
            .requeue_running_jobs(owner, self.state.clock.now())
            .await?;
        if requeued > 0 {
            tracing::info!(
                jobs = requeued,
                "resuming jobs interrupted by the last shutdown"
            );
        }
        let released = self.state.store.release_delivery_claims(owner).await?;
        if released > 0 {
            tracing::info!(
                deliveries = released,
                "attempting again webhook deliveries the last run claimed but never logged"
            );
        }
        // A deletion interrupted by a crash leaves index entries, vectors and the original of
        // a document that is gone: remove them before the workers start. Originals only when
        // this process owns the store: on a shared one, another node may have just stored an
        // original whose document row is not written yet.
        let (entries, originals) = self.state.ingest.remove_orphans(self.owns_its_jobs).await?;
        if entries + originals > 0 {
            tracing::info!(
                documents = entries,
                originals,
                "removed index entries and originals of deleted documents"
            );
        }
        // Reviews decided before decisions reduced their findings still hold the found text; keep
        // only what a decision keeps (types, counts, masked excerpts).
        let reduced = self
            .state
            .store
            .reduce_decided_findings(quire_ingest::reduce_findings)
            .await?;
        if reduced > 0 {
            tracing::info!(reviews = reduced, "reduced the findings of decided reviews");
        }
        // Vectors of documents deleted while the service ran without a model go first (before
        // the workers start, since a document being processed has vectors before it is
        // ready); then ready documents without vectors are embedded in the background.
        let backfill = match self.state.ingest.semantic() {
            Some(semantic) => {
                let removed = semantic.remove_orphans(&*self.state.store).await?;
                if removed > 0 {
                    tracing::info!(documents = removed, "removed vectors of deleted documents");
                }
                Some(tokio::spawn(backfill(
                    Arc::clone(semantic),
                    Arc::clone(&self.state.store),
                )))
            }
            None => None,
        };
        // On a shared store, documents other nodes make ready (or delete) reach this node's
        // indexes through the store's index feed.
        let follower = if self.state.store.is_shared() {
            let position_file = self.config.data_dir.join("index").join("feed-position");
            let follower = self
                .state
                .ingest
                .feed_follower(position_file)
                .context("could not open this node's place in the index feed")?;
            tracing::info!(
                position = follower.position(),
                "following the shared store's index feed"
            );
            Some(tokio::spawn(Arc::new(follower).follow()))
        } else {
            None
        };
        let workers = self.config.workers.clone();
        let runner = (workers.count > 0).then(|| {
            JobRunner::start(
                Arc::clone(&self.state.ingest),
                WorkerSettings {
                    node: node.clone(),
                    workers: workers.count,
                    poll_interval: Duration::from_millis(workers.poll_interval_ms.max(10)),
                },
            )
        });
        let housekeeping = tokio::spawn(housekeeping(
            Arc::clone(&self.state.store),
            Arc::clone(&self.state.clock),
        ));
        let heartbeat = self.state.store.is_shared().then(|| {
            tokio::spawn(heartbeat(
                Arc::clone(&self.state.store),
                Arc::clone(&self.state.clock),
                node.clone(),
            ))
        });
        let webhooks = &self.config.webhooks;
        let dispatcher = quire_webhooks::Dispatcher::new(
            Arc::clone(&self.state.store),
            Arc::clone(&self.state.clock),
            quire_webhooks::DispatchSettings {
                allow_private_targets: webhooks.allow_private_targets,
                timeout: Duration::from_secs(webhooks.timeout_seconds),
                concurrency: webhooks.concurrency,
                node: node.clone(),
                ..Default::default()
            },
        )
        .start();

        let router = self.router();
        // Without TCP_NODELAY, Nagle's algorithm holds each small SSE event until the client
        // acknowledges the previous one: up to 40 ms per streamed piece (measured with
        // `quire bench generate`).
        let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, "could not set TCP_NODELAY");
            }
        });
        // The peer address feeds the admin sign-in throttle.
        let served = axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .await
        .context("HTTP server failed");
        housekeeping.abort();
        if let Some(metrics) = metrics {
            metrics.abort();
        }
        if let Some(backfill) = backfill {
            backfill.abort();
        }
        if let Some(follower) = follower {
            follower.abort();
        }
        // The dispatcher stops claiming and waits for the deliveries in flight (at most the
        // delivery timeout, then 5 s for logging) while the workers finish their jobs; events
        // those jobs write stay in the outbox for the next start.
        let workers_stopped = async {
            if let Some(runner) = runner {
                runner
                    .shutdown(Duration::from_secs(workers.shutdown_grace_seconds))
                    .await;
            }
        };
        tokio::join!(dispatcher.shutdown(), workers_stopped);
        if let Some(heartbeat) = heartbeat {
            heartbeat.abort();
            // Stopped cleanly: the others need not wait for this node to be taken for gone.
            if let Err(e) = self.state.store.leave_cluster(&node).await {
                tracing::warn!(error = %e, "could not record that this node stopped");
            }
        }
        let store = Arc::clone(&self.state.store);
        drop(self.state);
        store.close().await;
        served
    }
}

/// This node's stable name, kept in `<data_dir>/node-id` (made at the first start): the
/// prefix of its workers' names, so that after a restart it takes back its own interrupted
/// jobs on a shared store.
fn node_id(data_dir: &Path) -> anyhow::Result<String> {
    let path = data_dir.join("node-id");
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => return Ok(id.trim().to_owned()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("could not read {}", path.display())),
    }
    let id = format!("node-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    std::fs::write(&path, &id).with_context(|| format!("could not write {}", path.display()))?;
    Ok(id)
}

/// The embedder configured in `[embedding]`, if any. A configured model that cannot be loaded
/// is an error the caller reports (the service then runs keyword-only rather than not at all).
async fn open_semantic(config: &Config) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    let embedding = &config.embedding;
    let cached = || {
        let dir = quire_models::fetch::model_cache_dir()?.join("all-MiniLM-L6-v2");
        dir.join("model.safetensors").is_file().then_some(dir)
    };
    let model_dir = match (&embedding.model_dir, &embedding.base_url) {
        (Some(dir), _) => Some(dir.clone()),
        (None, None) if embedding.use_cached_model => cached(),
        _ => None,
    };
    if let Some(dir) = &model_dir {
        let dir = expand_home(dir);
        let mut options = embedding.engine_options()?;
        options.onnxruntime_library = options.onnxruntime_library.map(|p| expand_home(&p));
        // A session per worker, so that the workers embed their documents side by side.
        options.sessions = config.workers.count;
        let loaded = tokio::task::spawn_blocking({
            let dir = dir.clone();
            move || LocalEmbedder::load_with(&dir, &options)
        })
        .await?
        .with_context(|| {
            format!(
                "could not load the embedding model in {} (run `quire model fetch` or \
                 scripts/fetch-model)",
                dir.display()
            )
        })?;
        if let Some(reason) = loaded.engine_fallback() {
            tracing::warn!(
                "the embedding model runs on candle, about half as fast: {reason} \
                 (set embedding.engine = \"candle\" to silence this)"
            );
        }
        return Ok(Some(Arc::new(loaded)));
    }
    if let (Some(base_url), Some(model)) = (&embedding.base_url, &embedding.model) {
        let mut settings = OpenAiSettings::new(base_url.clone(), model.clone());
        settings.api_key = embedding.api_key.as_ref().map(|k| k.expose().clone());
        settings.batch_size = embedding.batch_size;
        settings.timeout = Duration::from_secs(embedding.timeout_seconds);
        settings.query_prefix = embedding.query_prefix.clone();
        settings.document_prefix = embedding.document_prefix.clone();
        let remote = OpenAiEmbedder::connect(settings)
            .await
            .with_context(|| format!("the embedding server at {base_url} did not answer"))?;
        return Ok(Some(Arc::new(remote)));
    }
    Ok(None)
}

/// The answer generator `[llm]` configures (the extractive answerer without a server) and its
/// queue. Nothing is contacted here: a server that is down shows as an `error` event on the
/// first question, not as a service that will not start.
fn open_generation(
    llm: &LlmConfig,
    shared_line: Option<Arc<SharedLine>>,
) -> anyhow::Result<Generation> {
    let generator: Arc<dyn Generator> = match (&llm.base_url, &llm.model) {
        (Some(base_url), Some(model)) => {
            let chat = OpenAiChat::new(OpenAiChatSettings {
                base_url: base_url.clone(),
                model: model.clone(),
                api_key: llm.api_key.as_ref().map(|k| k.expose().clone()),
                timeout: Duration::from_secs(llm.timeout_seconds),
                temperature: llm.temperature,
                max_tokens: llm.max_tokens,
            })
            .context("the [llm] settings cannot work")?;
            tracing::info!(generator = %chat.name(), "answers come from a language model");
            Arc::new(chat)
        }
        _ => {
            tracing::info!(
                "answers are extractive: no language model is configured (llm.base_url, \
                 QUIRE_LLM_BASE_URL)"
            );
            Arc::new(Extractive::default())
        }
    };
    Ok(Generation {
        generator,
        queue: match shared_line {
            Some(line) => GenerationQueue::shared(line),
            None => GenerationQueue::new(llm.max_concurrent, llm.max_queue, llm.max_queue_per_key),
        },
        settings: llm.generation_settings(),
    })
}

/// `~/…` in a configured path, as a shell would expand it.
fn expand_home(path: &Path) -> std::path::PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => Path::new(&home).join(rest),
        _ => path.to_path_buf(),
    }
}

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

/// How often a node of a cluster says it still runs.
const NODE_HEARTBEAT: Duration = Duration::from_secs(10);
/// How long a node that stopped saying so still counts as running: three missed heartbeats.
const NODE_ALIVE_SECONDS: i64 = 30;

/// Registers this node among the running nodes of a shared store, refusing to start when a
/// running node searches with another embedding model: their vectors would not compare.
async fn join_cluster(
    store: &dyn Store,
    node: &str,
    semantic: Option<&Semantic>,
    clock: &dyn Clock,
) -> anyhow::Result<()> {
    let model = semantic.map(|s| s.embedder().model_id().to_owned());
    let now = clock.now();
    let alive_since = now - chrono::Duration::seconds(NODE_ALIVE_SECONDS);
    let conflict = store
        .join_cluster(node, model.as_deref(), now, alive_since)
        .await
        .context("could not register this node with the shared store")?;
    if let Some(other) = conflict {
        anyhow::bail!(
            "node {} of this cluster, seen {} s ago, searches with the embedding model {}, and              this node is configured with {}. Nodes sharing a database must use one model (their              vectors do not compare): configure the same model here, or stop every node that              uses the other one first (a stopped node counts as running for {NODE_ALIVE_SECONDS} s              after it was last seen)",
            other.node,
            (now - other.seen_at).num_seconds().max(0),
            other.embedding_model.as_deref().unwrap_or("none"),
            model.as_deref().unwrap_or("none"),
        );
    }
    Ok(())
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
