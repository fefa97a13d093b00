//! A real server on `127.0.0.1:0` per test, built by the same `build` and `serve` as `main`,
//! with its own data directory and a manual clock.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use quire::Config;
use quire_app::keys::KeySpec;
use quire_app::{Actor, Ledger};
use quire_core::{ManualClock, Permission, SourceId, SourceScope};
use quire_store::Store;
use reqwest::multipart::{Form, Part};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use sha2::Digest as _;
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub mod fake_embeddings;
pub mod fake_llm;
pub mod sse;
pub mod webhook_receiver;

/// The instant every test clock starts at.
pub fn start_time() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-02T10:00:05Z")
        .unwrap()
        .with_timezone(&Utc)
}

/// Sends the in-process servers' warnings and errors to the test's captured output, so a
/// failing test shows why its server answered as it did (a 500's cause is only logged).
fn log_warnings_to_the_test() {
    // The first test to start a server installs it; later calls find it there.
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
        .try_init();
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    pub clock: Arc<ManualClock>,
    /// A second handle on the server's database, as the CLI would open it.
    pub store: Arc<dyn Store>,
    /// The use cases' ledger on that second handle (with the test clock), as the CLI builds
    /// it: how tests act as the operator (make keys, set the admin password).
    pub ledger: Ledger,
    pub data_dir: Arc<TempDir>,
    /// Where the metrics listener listens, when `metrics.bind` is set (port 0 picks one).
    pub metrics_addr: Option<SocketAddr>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

/// Names the backend the suite runs on: unset or `sqlite` (the embedded default), or
/// `postgres` (the server in `QUIRE_TEST_POSTGRES_URL`); `scripts/test` runs the suite on both.
const STORE_VARIABLE: &str = "QUIRE_TEST_API_STORE";

/// In the PostgreSQL run, the store URL of the server whose data directory is `data_dir`: a
/// schema of its own, named after the directory, so a restarted server (and the CLI run on its
/// directory) finds the same data. `None` in the SQLite run.
pub fn store_url_for(data_dir: &Path) -> Option<String> {
    match std::env::var(STORE_VARIABLE).as_deref() {
        Err(_) | Ok("" | "sqlite") => return None,
        Ok("postgres") => {}
        Ok(other) => panic!("{STORE_VARIABLE}={other:?}: expected sqlite or postgres"),
    }
    let digest = sha2::Sha256::digest(data_dir.as_os_str().as_encoded_bytes());
    Some(postgres_schema_url(&format!(
        "quire_api_{}",
        &hex::encode(digest)[..24]
    )))
}

/// The URL of `schema` (made if missing) in the PostgreSQL server `QUIRE_TEST_POSTGRES_URL`
/// names: a database of its own for one test's server, or for all nodes of one test cluster.
pub fn postgres_schema_url(schema: &str) -> String {
    let server = std::env::var("QUIRE_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "QUIRE_TEST_POSTGRES_URL is not set: run `scripts/postgres start` and export the \
             URL it prints (scripts/test does both)"
        )
    });
    let schema = schema.to_owned();
    let url = quire_store::schema_url(&server, &schema);
    // Every configuration and CLI run of a server asks again: make each schema once.
    static MADE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut made = MADE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if made.contains(&schema) {
        return url;
    }
    // Test configurations are built outside async code too: make the schema on a thread of
    // its own with its own runtime.
    let (admin_url, name) = (server.clone(), schema.clone());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime
            .block_on(quire_store::create_schema(&admin_url, &name))
            .unwrap();
    })
    .join()
    .unwrap();
    made.push(schema);
    url
}

/// The environment a `quire` command run on `data_dir` needs to open the same store as the
/// server under test.
pub fn store_env(data_dir: &Path) -> Vec<(&'static str, String)> {
    store_url_for(data_dir)
        .map(|url| ("QUIRE_STORE_URL", url))
        .into_iter()
        .collect()
}

pub fn test_config(data_dir: &Path) -> Config {
    let mut config = Config {
        data_dir: data_dir.to_path_buf(),
        ..Config::default()
    };
    config.store.url = store_url_for(data_dir).map(quire_core::Secret::new);
    config.workers.poll_interval_ms = 50;
    // Tests say which model they use; the developer's model cache must not change the results.
    config.embedding.use_cached_model = false;
    // Here the running program is the test harness: parse in the real binary's workers.
    config.parsing.worker_program = Some(PathBuf::from(env!("CARGO_BIN_EXE_quire")));
    // Whether Tesseract happens to be installed must not change the results either: the OCR
    // tests turn it on with the program scripts/test names (`ocr_config`).
    config.ocr.enabled = quire::config::OcrMode::Off;
    config
}

/// OCR on, with the `tesseract` named by `QUIRE_TEST_TESSERACT` (scripts/test sets it from
/// scripts/ocr-deps); unset, the test fails rather than passing without reading anything.
pub fn ocr_config(config: &mut Config) {
    let program = std::env::var("QUIRE_TEST_TESSERACT")
        .ok()
        .filter(|p| !p.is_empty())
        .expect("QUIRE_TEST_TESSERACT must name the tesseract program (run scripts/ocr-deps)");
    config.ocr.enabled = quire::config::OcrMode::On;
    config.ocr.program = Some(PathBuf::from(program));
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(adjust: impl FnOnce(&mut Config)) -> Self {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        Self::start_in(dir, Arc::new(ManualClock::new(start_time())), adjust).await
    }

    /// Starts a server on an existing data directory (a restart).
    pub async fn start_in(
        data_dir: Arc<TempDir>,
        clock: Arc<ManualClock>,
        adjust: impl FnOnce(&mut Config),
    ) -> Self {
        log_warnings_to_the_test();
        let mut config = test_config(data_dir.path());
        adjust(&mut config);
        let mut app = quire::build(&config, clock.clone()).await.unwrap();
        let metrics_addr = app.bind_metrics().await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(app.serve(listener, async {
            let _ = rx.await;
        }));
        let store = quire::open_store(&config).await.unwrap();
        let (location, s3) = config.files.store_settings(&config.data_dir).unwrap();
        let ledger = Ledger::offline(
            Arc::clone(&store),
            clock.clone(),
            quire_files::open(&location, &s3).unwrap(),
            quire_ingest::Review::new(Default::default()),
        );
        Self {
            addr,
            client: reqwest::Client::new(),
            clock,
            store,
            ledger,
            data_dir,
            metrics_addr,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// Stops the server gracefully and returns its data directory and clock for a restart.
    pub async fn stop(mut self) -> (Arc<TempDir>, Arc<ManualClock>) {
        self.shutdown.take().unwrap().send(()).unwrap();
        self.task.take().unwrap().await.unwrap().unwrap();
        self.store.close().await;
        (Arc::clone(&self.data_dir), Arc::clone(&self.clock))
    }

    pub async fn store_keys(&self) -> Vec<quire_core::KeyId> {
        self.store
            .list_keys()
            .await
            .unwrap()
            .into_iter()
            .map(|k| k.id)
            .collect()
    }

    pub fn clock_now(&self) -> DateTime<Utc> {
        quire_core::Clock::now(self.clock.as_ref())
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub async fn key_with(
        &self,
        permission: Permission,
        scope: SourceScope,
        rate_limit: Option<u32>,
    ) -> String {
        let spec = KeySpec {
            name: format!("{permission} key"),
            permission,
            scope,
            rate_limit,
        };
        let (_, secret) = quire_app::keys::create(&self.ledger, &Actor::Operator, spec)
            .await
            .unwrap();
        secret.expose().clone()
    }

    pub async fn key(&self, permission: Permission) -> String {
        self.key_with(permission, SourceScope::All, None).await
    }

    pub async fn get(&self, key: &str, path: &str) -> Response {
        self.client
            .get(self.url(path))
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
    }

    pub async fn delete(&self, key: &str, path: &str) -> Response {
        self.client
            .delete(self.url(path))
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
    }

    pub async fn post_json(&self, key: &str, path: &str, body: &Value) -> Response {
        self.client
            .post(self.url(path))
            .bearer_auth(key)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn patch_json(&self, key: &str, path: &str, body: &Value) -> Response {
        self.client
            .patch(self.url(path))
            .bearer_auth(key)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn create_source(&self, key: &str, name: &str) -> String {
        let response = self
            .post_json(
                key,
                "/api/v1/sources",
                &json!({"name": name, "description": "test"}),
            )
            .await;
        assert_eq!(response.status(), StatusCode::CREATED);
        body(response).await["id"].as_str().unwrap().to_owned()
    }

    pub async fn upload(&self, key: &str, source: &str, name: &str, bytes: &[u8]) -> Response {
        let form = Form::new().part(
            "file",
            Part::bytes(bytes.to_vec()).file_name(name.to_owned()),
        );
        self.client
            .post(self.url(&format!("/api/v1/sources/{source}/documents/upload")))
            .bearer_auth(key)
            .multipart(form)
            .send()
            .await
            .unwrap()
    }

    pub async fn upload_bulk(&self, key: &str, source: &str, form: Form) -> Response {
        self.client
            .post(self.url(&format!("/api/v1/sources/{source}/documents/upload-bulk")))
            .bearer_auth(key)
            .multipart(form)
            .send()
            .await
            .unwrap()
    }

    /// The documents of a source, as listed by the API.
    pub async fn documents(&self, key: &str, source: &str) -> Value {
        body(
            self.get(key, &format!("/api/v1/sources/{source}/documents"))
                .await,
        )
        .await
    }

    /// Uploads and returns the new document's id.
    pub async fn upload_ok(&self, key: &str, source: &str, name: &str, bytes: &[u8]) -> String {
        let response = self.upload(key, source, name, bytes).await;
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        body(response).await["id"].as_str().unwrap().to_owned()
    }

    /// Polls the document until it reaches `status` (or fails the test after 20 s).
    pub async fn wait_for_status(&self, key: &str, source: &str, doc: &str, status: &str) -> Value {
        self.wait_for_status_within(key, source, doc, status, Duration::from_secs(20))
            .await
    }

    /// Polls the document until it reaches `status` (or fails the test after `limit`).
    pub async fn wait_for_status_within(
        &self,
        key: &str,
        source: &str,
        doc: &str,
        status: &str,
        limit: Duration,
    ) -> Value {
        let path = format!("/api/v1/sources/{source}/documents/{doc}");
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let current = body(self.get(key, &path).await).await;
            if current["status"] == status {
                return current;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "document never became {status}: {current}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the server has nothing left to do: no job queued or running, and every
    /// webhook event delivered or given up. What a test awaits before asserting that nothing
    /// else happens, instead of sleeping a while (fails the test after 20 s, saying what was
    /// left). Whatever the test awaited before (an answered request, a status it polled for) has
    /// already written its jobs and events, so none can appear after this returns.
    pub async fn drain(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            // Jobs first: a job's events are written in the transaction that ends it.
            let jobs = self.store.pending_job_count().await.unwrap();
            // A year ahead every claim has run out, so this counts events being delivered too.
            let later = self.clock_now().max(Utc::now()) + chrono::Duration::days(365);
            let events = self.store.pending_deliveries_count(later).await.unwrap();
            if jobs == 0 && events == 0 {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server never became idle: {jobs} jobs queued or running, {events} webhook \
                 events not yet delivered"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn search(&self, key: &str, body_json: Value) -> Response {
        self.post_json(key, "/api/v1/search", &body_json).await
    }

    /// Files left in the upload staging area and the originals store.
    pub fn stored_files(&self) -> (usize, usize) {
        let count =
            |sub: &str| std::fs::read_dir(self.data_dir.path().join(sub)).map_or(0, |d| d.count());
        (count("tmp"), count("files"))
    }
}

pub async fn body(response: Response) -> Value {
    let text = response.text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text:?}"))
}

/// Asserts the status and the error envelope (`error`, `message` and the `requestId` that the
/// `X-Request-Id` header also carries), and returns the envelope.
pub async fn assert_error(response: Response, status: StatusCode, error: &str) -> Value {
    assert_eq!(response.status(), status, "unexpected status");
    assert_eq!(
        response.headers().get("content-type").unwrap(),
        "application/json"
    );
    let request_id = response
        .headers()
        .get("x-request-id")
        .expect("every response has X-Request-Id")
        .to_str()
        .unwrap()
        .to_owned();
    let value = body(response).await;
    assert_eq!(value["error"], error, "{value}");
    assert!(
        value["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{value}"
    );
    assert_eq!(value["requestId"], request_id.as_str(), "{value}");
    assert_eq!(value.as_object().unwrap().len(), 3, "{value}");
    value
}

pub fn source_id(s: &str) -> SourceId {
    s.parse().unwrap()
}

/// Runs `command` and returns its standard output; fails the test, showing both outputs,
/// unless it succeeded.
pub async fn successful_stdout(command: &mut tokio::process::Command) -> String {
    let output = command.output().await.unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Polls `check` every 20 ms until it yields a value, which it returns; fails the test after
/// `limit`, saying `what` never happened. The one loop the tests wait for a state with.
pub async fn poll<T, F: std::future::Future<Output = Option<T>>>(
    limit: Duration,
    what: &str,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
