//! The Prometheus endpoint: a small router of its own, served on `metrics.bind`, and the
//! middleware that counts the API's requests.
//!
//! The crates record through the `metrics` facade (a no-op until a recorder is installed);
//! this module installs `metrics-exporter-prometheus`'s recorder once per process and renders
//! its text format at `/metrics`. Gauges that describe state rather than events (documents per
//! status, the generation queue, the database pool) are read at scrape time, so they are never
//! staler than the scrape itself. Every metric is listed in `docs/operations.md`.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use anyhow::Context;
use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use quire_app::Services;

use crate::app::Parts;

/// Counter of HTTP requests, labelled `method`, `route` (the matched route, such as
/// `/api/v1/sources/{source_id}`, never the raw path) and `status`.
pub const HTTP_REQUESTS: &str = "quire_http_requests_total";
/// Histogram of HTTP request durations (to the response's head), labelled like
/// [`HTTP_REQUESTS`] but without `status`.
pub const HTTP_DURATION: &str = "quire_http_request_duration_seconds";

/// Bucket bounds, in seconds, of every histogram: from a quick API call (5 ms) to a long
/// document's stage (10 min).
const BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// The process's Prometheus recorder, installed at the first call. The `metrics` facade has
/// one global recorder, so several services in one process (the API tests) share it.
pub fn recorder() -> anyhow::Result<PrometheusHandle> {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    if let Some(handle) = HANDLE.get() {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets(BUCKETS)
        .context("invalid histogram buckets")?
        .install_recorder()
        .context("could not install the metrics recorder")?;
    describe();
    Ok(HANDLE.get_or_init(|| handle).clone())
}

/// The `/metrics` router: refreshes the state gauges from the store and the services, then
/// renders.
pub fn router(handle: PrometheusHandle, parts: Parts, services: Services) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(Arc::new((handle, parts, services)))
}

async fn scrape(State(state): State<Arc<(PrometheusHandle, Parts, Services)>>) -> Response {
    let (handle, parts, services) = &*state;
    refresh(parts, services).await;
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        handle.render(),
    )
        .into_response()
}

/// Sets the gauges that describe the service's state right now.
async fn refresh(parts: &Parts, services: &Services) {
    match parts.store.document_status_counts().await {
        Ok(counts) => {
            // Every status gets a value, so a status that empties drops to 0 rather than
            // keeping its last count.
            for status in [
                quire_core::DocumentStatus::Queued,
                quire_core::DocumentStatus::Processing,
                quire_core::DocumentStatus::PendingReview,
                quire_core::DocumentStatus::Ready,
                quire_core::DocumentStatus::Failed,
            ] {
                let n = counts
                    .iter()
                    .find(|(s, _)| *s == status)
                    .map_or(0, |(_, n)| *n);
                metrics::gauge!("quire_documents", "status" => status.as_str()).set(n as f64);
            }
        }
        Err(e) => tracing::warn!(error = %e, "metrics: could not count documents"),
    }
    let queue = &services.generation().queue;
    let (running, waiting) = queue.current_load().await;
    metrics::gauge!("quire_generation_queue_length").set(waiting as f64);
    metrics::gauge!("quire_generation_running").set(running as f64);
    metrics::gauge!("quire_generation_slots").set(queue.slots() as f64);
    let pool = parts.store.pool_stats();
    metrics::gauge!("quire_db_pool_connections", "state" => "idle").set(f64::from(pool.idle));
    metrics::gauge!("quire_db_pool_connections", "state" => "in_use")
        .set(f64::from(pool.size.saturating_sub(pool.idle)));
    metrics::gauge!("quire_db_pool_max_connections").set(f64::from(pool.max));
}

/// Middleware (a route layer, so the matched route is known) that counts each request and
/// times it by route and status.
pub async fn track(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::histogram!(HTTP_DURATION, "method" => method.clone(), "route" => route.clone())
        .record(started.elapsed().as_secs_f64());
    metrics::counter!(HTTP_REQUESTS, "method" => method, "route" => route, "status" => status)
        .increment(1);
    response
}

/// Help texts and units, shown as `# HELP` lines.
fn describe() {
    describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests answered, by method, matched route and status"
    );
    describe_histogram!(
        HTTP_DURATION,
        Unit::Seconds,
        "Time to answer an HTTP request (to the response head; streams go on after it)"
    );
    describe_counter!(
        "quire_rate_limit_rejections_total",
        "Requests refused by a key's rate limit, by bucket (search, generate)"
    );
    describe_gauge!(
        "quire_generation_queue_length",
        "Questions waiting for a generation slot"
    );
    describe_gauge!("quire_generation_running", "Answers being generated now");
    describe_gauge!(
        "quire_generation_slots",
        "Answers that may be generated at once"
    );
    describe_histogram!(
        quire_app::answers::queue::WAIT_SECONDS,
        Unit::Seconds,
        "Time a question waited for a generation slot"
    );
    describe_gauge!(
        "quire_documents",
        "Documents, by status (read from the store at each scrape)"
    );
    describe_histogram!(
        quire_ingest::STAGE_SECONDS,
        Unit::Seconds,
        "Time a document spent in each processing stage (parse, screen, embed, index, store)"
    );
    describe_counter!(
        quire_ingest::CHUNKS_EMBEDDED,
        "Chunks embedded for semantic search (rate() gives chunks per second)"
    );
    describe_histogram!(
        quire_ingest::QUERIES_PER_EMBEDDING_CALL,
        "Search queries embedded in one call to the embedder (concurrent searches share calls)"
    );
    describe_gauge!(
        quire_ingest::FEED_POSITION,
        "Cluster mode: the index-feed position this node's indexes have applied"
    );
    describe_counter!(
        quire_app::search::RERANK_REQUESTS,
        "Rerank requests, by outcome (ok; error: refused, unreachable or garbage; timeout); \
         every outcome but ok left the fused order"
    );
    describe_histogram!(
        quire_app::search::RERANK_SECONDS,
        Unit::Seconds,
        "Time of a rerank request, whatever its outcome"
    );
    describe_counter!(
        quire_app::syncs::SYNC_RUNS,
        "Sync runs of folder and S3 sources that ended, by status (succeeded, failed)"
    );
    describe_counter!(
        quire_app::syncs::SYNC_ITEMS,
        "Items sync runs handled, by outcome (added, updated, deleted, unchanged, failed)"
    );
    describe_counter!(
        quire_app::syncs::SYNC_BYTES,
        Unit::Bytes,
        "Bytes sync runs fetched from their origins"
    );
    describe_counter!(
        "quire_webhook_deliveries_total",
        "Webhook delivery attempts, by outcome (success, rejected, unreachable)"
    );
    describe_histogram!(
        "quire_webhook_delivery_duration_seconds",
        Unit::Seconds,
        "Time of a webhook delivery attempt"
    );
    describe_gauge!(
        "quire_db_pool_connections",
        "Database pool connections, by state (idle, in_use)"
    );
    describe_gauge!(
        "quire_db_pool_max_connections",
        "Most connections the database pool opens"
    );
}
