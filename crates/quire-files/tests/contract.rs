//! The `OriginalStore` contract: one list of stories, run against every backend. S3 runs
//! against the server `scripts/s3-server start` provides (`QUIRE_TEST_S3_*` variables); when
//! those are missing the S3 tests fail rather than skip, so a green run means both backends
//! were checked.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quire_core::DocumentId;
use quire_files::{FilesError, FilesLocation, LocalFiles, OriginalStore, S3Settings};
use sha2::{Digest, Sha256};
use tempfile::{TempDir, TempPath};

/// A store under test with its scratch directory (staging and fetched copies).
struct Backend {
    store: Arc<dyn OriginalStore>,
    scratch: TempDir,
}

impl Backend {
    /// A staged file holding `bytes`, as the upload path leaves one.
    fn stage(&self, bytes: &[u8]) -> TempPath {
        let mut file = tempfile::NamedTempFile::new_in(self.scratch.path()).unwrap();
        file.write_all(bytes).unwrap();
        file.into_temp_path()
    }
}

fn local() -> Backend {
    let scratch = tempfile::tempdir().unwrap();
    let store = LocalFiles::open(&scratch.path().join("files")).unwrap();
    Backend {
        store: Arc::new(store),
        scratch,
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: the S3 tests need a server; run `eval \"$(scripts/s3-server \
             start)\"` first (scripts/test does)"
        )
    })
}

fn s3_settings() -> S3Settings {
    S3Settings {
        endpoint: Some(env("QUIRE_TEST_S3_ENDPOINT")),
        region: Some("us-east-1".into()),
        access_key_id: Some(env("QUIRE_TEST_S3_ACCESS_KEY_ID")),
        secret_access_key: Some(env("QUIRE_TEST_S3_SECRET_ACCESS_KEY")),
        allow_http: true,
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(30),
        max_retries: 1,
    }
}

/// Each test gets its own prefix in the shared bucket, so tests never see each other's keys.
fn s3_url() -> String {
    format!(
        "s3://{}/contract-{}",
        env("QUIRE_TEST_S3_BUCKET"),
        uuid::Uuid::new_v4().simple()
    )
}

fn s3_with(settings: &S3Settings) -> Arc<dyn OriginalStore> {
    let location = FilesLocation::parse(&s3_url()).unwrap();
    quire_files::open(&location, settings).unwrap()
}

fn s3() -> Backend {
    Backend {
        store: s3_with(&s3_settings()),
        scratch: tempfile::tempdir().unwrap(),
    }
}

/// Runs every story against each backend; a story is one `async fn(Backend)`.
macro_rules! contract {
    ($($story:ident),+ $(,)?) => {
        mod local_files {
            $( #[tokio::test] async fn $story() { super::$story(super::local()).await } )+
        }
        mod s3_files {
            $( #[tokio::test] async fn $story() { super::$story(super::s3()).await } )+
        }
    };
}

contract!(
    a_multi_mib_file_round_trips,
    a_small_file_round_trips,
    put_replaces_an_earlier_original,
    remove_is_idempotent,
    a_missing_original_is_not_found,
    originals_are_listed_by_id,
);

/// Deterministic bytes that are not one repeated block, so misplaced parts would show.
fn content(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut x: u32 = 0x9E37_79B9;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn sha256_of(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

async fn round_trip(backend: Backend, len: usize) {
    let bytes = content(len);
    let id = DocumentId::new();
    let staged = backend.stage(&bytes);
    let staged_path = staged.to_path_buf();
    backend.store.put(id, staged).await.unwrap();
    assert!(!staged_path.exists(), "the staged file is consumed");
    let dest = backend.scratch.path().join("fetched");
    backend.store.fetch_to(id, &dest).await.unwrap();
    assert_eq!(std::fs::metadata(&dest).unwrap().len(), len as u64);
    assert_eq!(sha256_of(&dest), hex::encode(Sha256::digest(&bytes)));
    if let Some(path) = backend.store.local_path(id) {
        assert_eq!(sha256_of(&path), hex::encode(Sha256::digest(&bytes)));
    }
}

/// Past one 8 MiB part, so S3 streams it as a multipart upload of three parts.
async fn a_multi_mib_file_round_trips(backend: Backend) {
    round_trip(backend, 19 * 1024 * 1024 + 12_345).await;
}

async fn a_small_file_round_trips(backend: Backend) {
    round_trip(backend, 11).await;
}

async fn put_replaces_an_earlier_original(backend: Backend) {
    let id = DocumentId::new();
    backend
        .store
        .put(id, backend.stage(b"first"))
        .await
        .unwrap();
    backend
        .store
        .put(id, backend.stage(b"second"))
        .await
        .unwrap();
    let dest = backend.scratch.path().join("fetched");
    backend.store.fetch_to(id, &dest).await.unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), b"second");
}

async fn remove_is_idempotent(backend: Backend) {
    let id = DocumentId::new();
    backend
        .store
        .put(id, backend.stage(b"bytes"))
        .await
        .unwrap();
    backend.store.remove(id).await.unwrap();
    backend.store.remove(id).await.unwrap();
    backend.store.remove(DocumentId::new()).await.unwrap();
    let dest = backend.scratch.path().join("fetched");
    let gone = backend.store.fetch_to(id, &dest).await;
    assert!(matches!(gone, Err(FilesError::NotFound(_))), "{gone:?}");
}

async fn originals_are_listed_by_id(backend: Backend) {
    assert!(backend.store.list().await.unwrap().is_empty());
    let (first, second) = (DocumentId::new(), DocumentId::new());
    for id in [first, second] {
        backend
            .store
            .put(id, backend.stage(b"bytes"))
            .await
            .unwrap();
    }
    let mut listed = backend.store.list().await.unwrap();
    listed.sort_by_key(ToString::to_string);
    let mut expected = vec![first, second];
    expected.sort_by_key(ToString::to_string);
    assert_eq!(listed, expected);
    backend.store.remove(first).await.unwrap();
    assert_eq!(backend.store.list().await.unwrap(), vec![second]);
}

async fn a_missing_original_is_not_found(backend: Backend) {
    let dest = backend.scratch.path().join("fetched");
    let missing = backend.store.fetch_to(DocumentId::new(), &dest).await;
    assert!(
        matches!(missing, Err(FilesError::NotFound(_))),
        "{missing:?}"
    );
    assert!(!dest.exists(), "no partial file is left at the destination");
}

// --- S3 only: what a remote store can do that a directory cannot ---

/// A closed port: reported as unavailable (worth retrying later), and quickly.
#[tokio::test]
async fn an_unreachable_endpoint_is_unavailable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let settings = S3Settings {
        endpoint: Some(format!("http://127.0.0.1:{port}")),
        access_key_id: Some("quire".into()),
        secret_access_key: Some("not-a-secret".into()),
        allow_http: true,
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(2),
        max_retries: 1,
        ..S3Settings::default()
    };
    let location = FilesLocation::parse("s3://quire-test/unreachable").unwrap();
    let store = quire_files::open(&location, &settings).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut staged = tempfile::NamedTempFile::new_in(scratch.path()).unwrap();
    staged.write_all(b"bytes").unwrap();
    let put = store.put(DocumentId::new(), staged.into_temp_path()).await;
    assert!(matches!(put, Err(FilesError::Unavailable(_))), "{put:?}");
    let fetched = store
        .fetch_to(DocumentId::new(), &scratch.path().join("x"))
        .await;
    assert!(
        matches!(fetched, Err(FilesError::Unavailable(_))),
        "{fetched:?}"
    );
    let removed = store.remove(DocumentId::new()).await;
    assert!(
        matches!(removed, Err(FilesError::Unavailable(_))),
        "{removed:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

/// The test server checks request signatures, so a wrong secret is refused as such, and the
/// secret appears in no error message.
#[tokio::test]
async fn a_wrong_secret_is_refused() {
    let secret = "wrong-secret-7f3a9c";
    let settings = S3Settings {
        secret_access_key: Some(secret.into()),
        ..s3_settings()
    };
    let store = s3_with(&settings);
    let scratch = tempfile::tempdir().unwrap();
    let mut staged = tempfile::NamedTempFile::new_in(scratch.path()).unwrap();
    staged.write_all(b"bytes").unwrap();
    let put = store.put(DocumentId::new(), staged.into_temp_path()).await;
    assert!(matches!(put, Err(FilesError::Denied(_))), "{put:?}");
    let message = put.unwrap_err().to_string();
    assert!(!message.contains(secret), "{message}");
    assert!(!format!("{store:?}").contains(secret));
}
