//! `quire bench sync`: how fast syncing sources take a site or a bucket, and what they cost the
//! origin. A fresh keyword-only server (so the ingest workers do not compete for the CPU with
//! an embedder) syncs, one after the other:
//!
//! - **`web-sitemap`**: a local site (axum on 127.0.0.1, in this process) of N pages listed by a
//!   sitemap with `<lastmod>`;
//! - **`web-crawl`**: the same pages reached by a link crawl from an index page;
//! - **`s3`**: N objects under a new prefix of an S3-compatible bucket (what
//!   `scripts/s3-server start` exports), reached through a counting proxy in this process.
//!
//! Each source runs twice: the first sync (every item new), and, once the documents are
//! processed, an unchanged re-sync. The report gives each run's items, its time (the run's own
//! `startedAt` to `finishedAt`), items per second, and the requests the origin received, by
//! kind. The site answers `If-None-Match` with 304; the proxy forwards requests byte for byte
//! (SigV4 signs the host the client saw, which is the proxy's).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use clap::{Args, ValueEnum};
use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use quire_app::keys::KeySpec;
use quire_core::{Permission, SourceScope, SystemClock};
use quire_server::Config;
use serde::Serialize;
use serde_json::{Value, json};

use crate::bench_server::{BenchServer, UNLIMITED, answer};

/// Options of `quire bench sync`.
#[derive(Debug, Args)]
pub struct SyncBenchArgs {
    /// Pages of the site and objects of the bucket.
    #[arg(long, default_value_t = 2_000)]
    items: usize,
    /// Bytes of text in each item (about).
    #[arg(long, default_value_t = 2_000)]
    item_bytes: usize,
    /// The origins to sync, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_values_t = [OriginKind::WebSitemap, OriginKind::WebCrawl, OriginKind::S3]
    )]
    origins: Vec<OriginKind>,
    /// The S3 server's endpoint (`s3` origin).
    #[arg(long, env = "QUIRE_TEST_S3_ENDPOINT")]
    s3_endpoint: Option<String>,
    /// The bucket the objects are put in, under a new prefix removed afterwards.
    #[arg(long, env = "QUIRE_TEST_S3_BUCKET")]
    s3_bucket: Option<String>,
    /// The S3 access key id.
    #[arg(long, env = "QUIRE_TEST_S3_ACCESS_KEY_ID")]
    s3_access_key_id: Option<String>,
    /// The S3 secret access key.
    #[arg(long, env = "QUIRE_TEST_S3_SECRET_ACCESS_KEY", hide_env_values = true)]
    s3_secret_access_key: Option<String>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// An origin the bench syncs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum OriginKind {
    /// A site whose sitemap lists every page with its `<lastmod>`.
    WebSitemap,
    /// The same site crawled by its links from an index page.
    WebCrawl,
    /// Objects under a bucket prefix.
    S3,
}

/// One run of one source.
#[derive(Debug, Serialize)]
struct Row {
    origin: OriginKind,
    /// `first` or `unchanged`.
    run: &'static str,
    /// Items the run saw (added, updated, unchanged and failed).
    items: u64,
    added: u64,
    updated: u64,
    unchanged: u64,
    failed: u64,
    /// The run's own duration, `startedAt` to `finishedAt`.
    seconds: f64,
    items_per_second: f64,
    /// Requests the origin received during the run.
    origin_requests: u64,
    /// The same, by kind (`robots`, `sitemap`, `page 200`, `page 304`, `list`, `get`, …).
    by_kind: BTreeMap<String, u64>,
    /// S3 only: the seconds the S3 server took to answer, summed by kind (requests overlap,
    /// so the sum may pass the run's time).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    origin_seconds: BTreeMap<String, f64>,
}

#[derive(Debug, Serialize)]
struct Report {
    items: usize,
    item_bytes: usize,
    rows: Vec<Row>,
}

/// Runs the benchmark and prints its report.
pub async fn sync(base: &Config, args: SyncBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.items > 0, "--items must be at least 1");
    let scratch = tempfile::tempdir().context("could not create a scratch directory")?;
    let mut config = base.clone();
    config.data_dir = scratch.path().to_path_buf();
    config.embedding.model_dir = None;
    config.embedding.base_url = None;
    config.embedding.use_cached_model = false;
    // The site and the proxy listen on loopback.
    config.connectors.allow_private_targets = true;
    let app = quire_server::build(&config, Arc::new(SystemClock)).await?;
    let server = BenchServer::serve(
        app,
        KeySpec {
            name: "quire bench sync".into(),
            permission: Permission::Admin,
            scope: SourceScope::All,
            rate_limit: Some(UNLIMITED),
        },
    )
    .await?;
    let mut rows = Vec::new();
    let mut documents = 0;
    for origin in &args.origins {
        let measured = match origin {
            OriginKind::WebSitemap | OriginKind::WebCrawl => {
                web(&server, &args, *origin, &mut documents).await
            }
            OriginKind::S3 => s3(&server, &args, &mut documents).await,
        };
        rows.extend(measured.with_context(|| format!("{origin:?}"))?);
    }
    server.stop().await?;
    let report = Report {
        items: args.items,
        item_bytes: args.item_bytes,
        rows,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

/// Item `i`'s text: a heading and sentences up to `bytes`.
fn item_text(i: usize, bytes: usize) -> String {
    let mut text = format!("# Item {i}\n\n");
    let mut n = 0;
    while text.len() < bytes {
        text.push_str(&format!(
            "Sentence {n} of item {i}: the casing is vented and the seals are checked. "
        ));
        n += 1;
    }
    text
}

/// Requests counted by kind, with the time the origin took to answer them where it is known.
#[derive(Default)]
struct Counter(Mutex<Counts>);

#[derive(Default)]
struct Counts {
    requests: BTreeMap<String, u64>,
    seconds: BTreeMap<String, f64>,
}

impl Counter {
    fn count(&self, kind: &str) {
        *self.lock().requests.entry(kind.to_owned()).or_default() += 1;
    }

    fn took(&self, kind: &str, time: Duration) {
        *self.lock().seconds.entry(kind.to_owned()).or_default() += time.as_secs_f64();
    }

    /// The counts since the last call, which start again from zero.
    fn take(&self) -> Counts {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Creates the source, waits for its first run, lets its documents be processed, syncs it
/// again and waits for that run: the two rows.
async fn two_runs(
    server: &BenchServer,
    origin: OriginKind,
    source: Value,
    counter: &Counter,
    documents: &mut usize,
) -> anyhow::Result<Vec<Row>> {
    counter.take();
    let created = server.client.post("/sources").json(&source).send().await?;
    let created = answer(created).await?;
    let id = created["id"]
        .as_str()
        .context("the created source has no id")?
        .to_owned();
    let first = run_end(server, &id, 1).await?;
    let first = row(origin, "first", &first, counter.take())?;
    *documents += usize::try_from(first.added).unwrap_or(usize::MAX);
    server.wait_until_finished(*documents).await?;
    counter.take();
    let started = server
        .client
        .post(&format!("/sources/{id}/sync"))
        .json(&json!({}))
        .send()
        .await?;
    answer(started).await?;
    let again = run_end(server, &id, 2).await?;
    let again = row(origin, "unchanged", &again, counter.take())?;
    Ok(vec![first, again])
}

/// Waits until source `id` has `runs` runs and the newest has ended; returns it.
async fn run_end(server: &BenchServer, id: &str, runs: usize) -> anyhow::Result<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3600);
    loop {
        let listed = answer(
            server
                .client
                .get(&format!("/sources/{id}/syncs"))
                .send()
                .await?,
        )
        .await?;
        if let Some(all) = listed.as_array()
            && all.len() >= runs
            && all[0]["status"] != "running"
        {
            return Ok(all[0].clone());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("the run did not end within an hour");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn row(
    origin: OriginKind,
    run: &'static str,
    ended: &Value,
    counts: Counts,
) -> anyhow::Result<Row> {
    let by_kind = counts.requests;
    if ended["status"] != "succeeded" {
        bail!("the {run} run did not succeed: {ended}");
    }
    let count = |name: &str| ended[name].as_u64().unwrap_or(0);
    let time = |name: &str| -> anyhow::Result<chrono::DateTime<chrono::FixedOffset>> {
        let text = ended[name].as_str().context("a run without its times")?;
        Ok(chrono::DateTime::parse_from_rfc3339(text)?)
    };
    let seconds = (time("finishedAt")? - time("startedAt")?)
        .to_std()
        .unwrap_or_default()
        .as_secs_f64();
    let items = count("added") + count("updated") + count("unchanged") + count("failed");
    #[allow(clippy::cast_precision_loss)]
    let items_per_second = if seconds > 0.0 {
        items as f64 / seconds
    } else {
        f64::INFINITY
    };
    Ok(Row {
        origin,
        run,
        items,
        added: count("added"),
        updated: count("updated"),
        unchanged: count("unchanged"),
        failed: count("failed"),
        seconds,
        items_per_second,
        origin_requests: by_kind.values().sum(),
        by_kind,
        origin_seconds: counts.seconds,
    })
}

/// Serves `router` on a free loopback port.
async fn listen(router: axum::Router) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(addr)
}

/// The local site: its pages by path (content type, body) and the requests it answered.
struct Site {
    pages: Mutex<BTreeMap<String, (&'static str, String)>>,
    counter: Counter,
}

async fn web(
    server: &BenchServer,
    args: &SyncBenchArgs,
    origin: OriginKind,
    documents: &mut usize,
) -> anyhow::Result<Vec<Row>> {
    let mut pages = BTreeMap::new();
    let mut sitemap =
        String::from(r#"<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">"#);
    let mut index = String::from("<html><head><title>Index</title></head><body><main>");
    for i in 0..args.items {
        let path = format!("/docs/page-{i:05}.html");
        let body = format!(
            "<!doctype html><html lang=\"en\"><head><title>Item {i}</title></head><body>\
             <nav><a href=\"/docs/\">Index</a></nav><main><p>{}</p></main></body></html>",
            item_text(i, args.item_bytes)
        );
        pages.insert(path.clone(), ("text/html; charset=utf-8", body));
        sitemap.push_str(&format!(
            "<url><loc>{{site}}{path}</loc><lastmod>2026-12-01</lastmod></url>"
        ));
        index.push_str(&format!("<a href=\"{path}\">Item {i}</a> "));
    }
    sitemap.push_str("</urlset>");
    index.push_str("</main></body></html>");
    pages.insert("/docs/".into(), ("text/html; charset=utf-8", index));
    pages.insert(
        "/robots.txt".into(),
        ("text/plain", "User-agent: *\nDisallow: /private/\n".into()),
    );
    let site = Arc::new(Site {
        pages: Mutex::new(pages),
        counter: Counter::default(),
    });
    let addr = listen(
        axum::Router::new()
            .fallback(serve_site)
            .with_state(Arc::clone(&site)),
    )
    .await?;
    let base = format!("http://{addr}");
    site.pages
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(
            "/sitemap.xml".into(),
            ("application/xml", sitemap.replace("{site}", &base)),
        );
    let sync = match origin {
        OriginKind::WebSitemap => json!({"url": format!("{base}/sitemap.xml"),
            "maxPages": 10_000, "intervalSeconds": 0}),
        _ => json!({"url": format!("{base}/docs/"), "maxPages": 10_000, "maxDepth": 1,
            "include": ["**/page-*.html"], "intervalSeconds": 0}),
    };
    let source = json!({"name": format!("bench {origin:?}"), "type": "web", "sync": sync});
    two_runs(server, origin, source, &site.counter, documents).await
}

async fn serve_site(State(site): State<Arc<Site>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let headers: &HeaderMap = request.headers();
    let page = site
        .pages
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&path)
        .cloned();
    let Some((content_type, body)) = page else {
        site.counter.count("not found");
        return StatusCode::NOT_FOUND.into_response();
    };
    let etag = format!("\"{:016x}\"", fxhash(&body));
    let kind = match path.as_str() {
        "/robots.txt" => "robots",
        "/sitemap.xml" => "sitemap",
        "/docs/" => "index",
        _ => "page",
    };
    if headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes() == etag.as_bytes())
    {
        site.counter.count(&format!("{kind} 304"));
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response();
    }
    site.counter.count(&format!("{kind} 200"));
    (
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (header::ETAG, etag),
            (
                header::LAST_MODIFIED,
                "Tue, 01 Dec 2026 00:00:00 GMT".to_owned(),
            ),
        ],
        body,
    )
        .into_response()
}

/// A 64-bit FNV-1a hash: an ETag needs only to change with the body.
fn fxhash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The counting proxy in front of the S3 server.
struct Proxy {
    upstream: String,
    http: reqwest::Client,
    counter: Arc<Counter>,
}

async fn s3(
    server: &BenchServer,
    args: &SyncBenchArgs,
    documents: &mut usize,
) -> anyhow::Result<Vec<Row>> {
    let need = |value: &Option<String>, name: &str| {
        value.clone().with_context(|| {
            format!(
                "the s3 origin needs --{name} (or what `eval \"$(scripts/s3-server start)\"` \
                 exports)"
            )
        })
    };
    let endpoint = need(&args.s3_endpoint, "s3-endpoint")?;
    let bucket = need(&args.s3_bucket, "s3-bucket")?;
    let key_id = need(&args.s3_access_key_id, "s3-access-key-id")?;
    let secret = need(&args.s3_secret_access_key, "s3-secret-access-key")?;
    let store = AmazonS3Builder::new()
        .with_endpoint(&endpoint)
        .with_bucket_name(&bucket)
        .with_access_key_id(&key_id)
        .with_secret_access_key(&secret)
        .with_region("us-east-1")
        .with_allow_http(true)
        .build()?;
    let prefix = format!("bench-sync-{}", uuid::Uuid::new_v4().simple());
    futures_util::stream::iter(0..args.items)
        .map(|i| {
            let (store, path) = (&store, ObjectPath::from(format!("{prefix}/item-{i:05}.md")));
            let text = item_text(i, args.item_bytes);
            async move { store.put(&path, PutPayload::from(text)).await }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await
        .context("could not put the bench's objects")?;

    let counter = Arc::new(Counter::default());
    let proxy = Arc::new(Proxy {
        upstream: endpoint.trim_end_matches('/').to_owned(),
        http: reqwest::Client::builder().no_proxy().build()?,
        counter: Arc::clone(&counter),
    });
    let addr = listen(axum::Router::new().fallback(forward).with_state(proxy)).await?;
    let source = json!({"name": "bench s3", "type": "s3", "sync": {
        "url": format!("s3://{bucket}/{prefix}/"), "endpoint": format!("http://{addr}"),
        "region": "us-east-1", "accessKeyId": key_id, "secretAccessKey": secret,
        "allowHttp": true, "intervalSeconds": 0}});
    let rows = two_runs(server, OriginKind::S3, source, &counter, documents).await;
    let listed = store.list(Some(&ObjectPath::from(prefix.as_str())));
    store
        .delete_stream(listed.map_ok(|meta| meta.location).boxed())
        .try_collect::<Vec<_>>()
        .await
        .context("could not remove the bench's objects")?;
    rows
}

/// Forwards a request to the S3 server as it came (the host header included, which the
/// client signed), counting it.
async fn forward(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let kind = if parts.uri.query().is_some_and(|q| q.contains("list-type")) {
        "list".to_owned()
    } else {
        parts.method.as_str().to_lowercase()
    };
    proxy.counter.count(&kind);
    let Ok(body) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let target = format!(
        "{}{}",
        proxy.upstream,
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let mut outgoing = proxy.http.request(parts.method, target).body(body);
    for (name, value) in &parts.headers {
        outgoing = outgoing.header(name, value);
    }
    let started = Instant::now();
    let answered = match outgoing.send().await {
        Ok(answered) => answered,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = answered.status();
    let mut headers = answered.headers().clone();
    headers.remove(header::TRANSFER_ENCODING);
    headers.remove(header::CONNECTION);
    let body = answered.bytes().await.unwrap_or_default();
    proxy.counter.took(&kind, started.elapsed());
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

fn print_table(report: &Report) {
    println!(
        "{} items of about {} bytes each; keyword-only server; the run's own time",
        report.items, report.item_bytes
    );
    println!(
        "{:<12} {:<10} {:>6} {:>6} {:>9} {:>8} {:>9} {:>9}  by kind",
        "origin", "run", "items", "added", "unchanged", "seconds", "items/s", "requests"
    );
    for row in &report.rows {
        let kinds: Vec<String> = row
            .by_kind
            .iter()
            .map(|(kind, n)| match row.origin_seconds.get(kind) {
                Some(seconds) => format!("{kind} {n} ({seconds:.2} s)"),
                None => format!("{kind} {n}"),
            })
            .collect();
        println!(
            "{:<12} {:<10} {:>6} {:>6} {:>9} {:>8.2} {:>9.0} {:>9}  {}",
            format!("{:?}", row.origin),
            row.run,
            row.items,
            row.added,
            row.unchanged,
            row.seconds,
            row.items_per_second,
            row.origin_requests,
            kinds.join(", ")
        );
    }
}
