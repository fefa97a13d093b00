//! The ingestion service over a store of originals that is remote (fetched for parsing) or
//! down: uploads are refused without leaving a document, and jobs wait for the storage.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use quire_core::{
    DocumentId, DocumentStatus, NewDocument, NewSource, SourceDescription, SourceId, SourceName,
    SourceScope, SourceType, SystemClock,
};
use quire_files::{FilesError, FilesLocation, LocalFiles, OriginalStore, S3Settings};
use quire_ingest::{
    ChunkingParams, Ingest, IngestError, IngestSettings, Isolation, ParseLimits, Staging, Upload,
};
use quire_search::KeywordIndex;
use quire_store::{Store, StoreLocation};
use tempfile::{TempDir, TempPath};

/// Local files that can pretend to be remote (no in-place path, so every parse fetches a
/// copy) and refuse originals of one size, as a store of originals does that fails one request
/// among others.
#[derive(Debug)]
struct TestFiles {
    files: LocalFiles,
    remote: bool,
    refused_size: Option<u64>,
}

/// The size of original that [`refusing`] files refuse.
const REFUSED_SIZE: u64 = 7;

#[async_trait]
impl OriginalStore for TestFiles {
    async fn put(&self, id: DocumentId, staged: TempPath) -> Result<(), FilesError> {
        if Some(std::fs::metadata(&staged)?.len()) == self.refused_size {
            return Err(FilesError::Unavailable("refused for the test".into()));
        }
        self.files.put(id, staged).await
    }
    async fn fetch_to(&self, id: DocumentId, dest: &Path) -> Result<(), FilesError> {
        self.files.fetch_to(id, dest).await
    }
    async fn remove(&self, id: DocumentId) -> Result<(), FilesError> {
        self.files.remove(id).await
    }
    async fn list(&self) -> Result<Vec<DocumentId>, FilesError> {
        self.files.list().await
    }
    fn local_path(&self, id: DocumentId) -> Option<PathBuf> {
        (!self.remote).then(|| self.files.local_path(id)).flatten()
    }
}

/// Local files that refuse every original of [`REFUSED_SIZE`] bytes.
fn refusing(data: &Path) -> Arc<dyn OriginalStore> {
    Arc::new(TestFiles {
        files: LocalFiles::in_data_dir(data).unwrap(),
        remote: false,
        refused_size: Some(REFUSED_SIZE),
    })
}

/// S3 at a port nothing listens on.
fn unreachable() -> Arc<dyn OriginalStore> {
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
        max_retries: 0,
        ..S3Settings::default()
    };
    let location = FilesLocation::parse("s3://quire-test/down").unwrap();
    quire_files::open(&location, &settings).unwrap()
}

struct Fixture {
    ingest: Ingest,
    store: Arc<dyn Store>,
    source: SourceId,
    dir: TempDir,
}

const LEASE_SECONDS: i64 = 60;

async fn fixture(files: impl FnOnce(&Path) -> Arc<dyn OriginalStore>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = quire_store::open(&StoreLocation::Sqlite(dir.path().join("quire.db")))
        .await
        .unwrap();
    let index = Arc::new(KeywordIndex::open(&dir.path().join("index")).unwrap());
    let source = store
        .create_source(NewSource {
            id: SourceId::new(),
            name: SourceName::parse("Manuals").unwrap(),
            description: SourceDescription::parse("").unwrap(),
            source_type: SourceType::Network,
            created_at: chrono::Utc::now(),
        })
        .await
        .unwrap()
        .id;
    let ingest = Ingest::new(
        Arc::clone(&store),
        index,
        Staging::open(dir.path()).unwrap(),
        files(dir.path()),
        Arc::new(SystemClock),
        IngestSettings {
            max_upload_bytes: 1 << 20,
            chunking: ChunkingParams::default(),
            parse_limits: ParseLimits::default(),
            output_limits: quire_ingest::OutputLimits::default(),
            time_budget: Duration::from_secs(30),
            index_time_budget: Duration::from_secs(30),
            isolation: Isolation::InProcess,
            lease: chrono::Duration::seconds(LEASE_SECONDS),
            max_attempts: 3,
        },
    );
    Fixture {
        ingest,
        store,
        source,
        dir,
    }
}

impl Fixture {
    async fn upload(&self, text: &str) -> Result<quire_store::Created, IngestError> {
        let mut staged = self.ingest.stage().await.unwrap();
        staged.write(text.as_bytes()).await.unwrap();
        let upload = Upload {
            name: "notes.txt".into(),
            content_type: Some("text/plain".into()),
            staged: staged.finish().await.unwrap(),
            metadata: None,
            external_id: None,
        };
        self.ingest
            .accept(&SourceScope::All, self.source, upload)
            .await
    }

    async fn staged(&self, text: &str) -> Upload {
        let mut staged = self.ingest.stage().await.unwrap();
        staged.write(text.as_bytes()).await.unwrap();
        Upload {
            name: format!("{}.txt", text.len()),
            content_type: Some("text/plain".into()),
            staged: staged.finish().await.unwrap(),
            metadata: None,
            external_id: None,
        }
    }

    async fn documents(&self) -> Vec<quire_core::DocumentRecord> {
        self.store
            .list_documents(&SourceScope::All, self.source)
            .await
            .unwrap()
            .unwrap()
    }

    fn staging_files(&self) -> usize {
        std::fs::read_dir(self.dir.path().join("tmp"))
            .unwrap()
            .count()
    }
}

fn remote(data: &Path) -> Arc<dyn OriginalStore> {
    Arc::new(TestFiles {
        files: LocalFiles::in_data_dir(data).unwrap(),
        remote: true,
        refused_size: None,
    })
}

#[tokio::test]
async fn remote_originals_are_fetched_for_parsing_and_the_copy_removed() {
    let f = fixture(remote).await;
    f.upload("Quire keeps originals in object storage.")
        .await
        .unwrap();
    assert!(f.ingest.process_next("w").await.unwrap());
    let docs = f.documents().await;
    assert_eq!(docs[0].status, DocumentStatus::Ready, "{:?}", docs[0].error);
    assert!(docs[0].chunk_count > 0);
    assert_eq!(
        f.staging_files(),
        0,
        "the fetched copy is removed after parsing"
    );
}

#[tokio::test]
async fn a_missing_original_fails_its_document() {
    let f = fixture(remote).await;
    f.upload("soon gone").await.unwrap();
    let id = f.documents().await[0].id;
    std::fs::remove_file(f.dir.path().join("files").join(id.to_string())).unwrap();
    assert!(f.ingest.process_next("w").await.unwrap());
    let doc = &f.documents().await[0];
    assert_eq!(doc.status, DocumentStatus::Failed);
    assert_eq!(doc.error.as_deref(), Some("the original file is missing"));
}

#[tokio::test]
async fn an_upload_to_unavailable_storage_fails_and_leaves_no_document() {
    let f = fixture(|_| unreachable()).await;
    let refused = f.upload("hello").await;
    assert!(
        matches!(refused, Err(IngestError::FilesUnavailable(_))),
        "{refused:?}"
    );
    assert!(f.documents().await.is_empty());
    assert_eq!(f.staging_files(), 0, "the staged upload is removed");
}

#[tokio::test]
async fn a_job_whose_original_cannot_be_fetched_waits_for_its_retry_delay() {
    let f = fixture(|_| unreachable()).await;
    let now = chrono::Utc::now();
    f.store
        .create_document(NewDocument {
            id: DocumentId::new(),
            source_id: f.source,
            name: "notes.txt".into(),
            content_type: "text/plain".into(),
            size: 5,
            sha256: "0".repeat(64),
            metadata: Default::default(),
            external_id: None,
            created_at: now,
        })
        .await
        .unwrap();
    let attempt = f.ingest.process_next("w").await;
    assert!(
        matches!(attempt, Err(IngestError::FilesUnavailable(_))),
        "{attempt:?}"
    );
    // Not failed: still leased to the worker that tried, and nobody else may take it yet, nor
    // once a lease has passed: an outage must not use up its attempts within a few leases.
    assert_eq!(f.documents().await[0].status, DocumentStatus::Processing);
    let lease = chrono::Duration::seconds(LEASE_SECONDS);
    let later = chrono::Utc::now() + lease + chrono::Duration::seconds(1);
    assert!(
        f.store
            .claim_job("other", later, later + lease)
            .await
            .unwrap()
            .is_none()
    );
    // After the retry delay (ten minutes), the job is runnable again as its second attempt.
    let after = chrono::Utc::now() + chrono::Duration::minutes(10) + chrono::Duration::seconds(1);
    let retried = f
        .store
        .claim_job("other", after, after + lease)
        .await
        .unwrap()
        .expect("the job is runnable again");
    assert_eq!(retried.attempts, 2);
}

/// A bulk of uploads is stored in order, its documents in one go: the same bytes twice are one
/// document (the second original is not kept), and an upload whose original the storage
/// refuses fails alone.
#[tokio::test]
async fn a_bulk_is_stored_in_order_and_a_refused_original_fails_alone() {
    let f = fixture(refusing).await;
    let texts = ["the pump", "refused", "the valve", "the pump"];
    assert_eq!(texts[1].len() as u64, REFUSED_SIZE);
    let mut uploads = Vec::new();
    for text in texts {
        uploads.push(f.staged(text).await);
    }
    let outcomes = f
        .ingest
        .accept_all(&SourceScope::All, f.source, uploads)
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 4);
    let first = match &outcomes[0] {
        Ok(quire_store::Created::New(doc)) => doc.clone(),
        other => panic!("{other:?}"),
    };
    assert!(
        matches!(&outcomes[1], Err(IngestError::FilesUnavailable(_))),
        "{:?}",
        outcomes[1]
    );
    assert!(
        matches!(&outcomes[2], Ok(quire_store::Created::New(doc)) if doc.name == "9.txt"),
        "{:?}",
        outcomes[2]
    );
    assert!(
        matches!(&outcomes[3], Ok(quire_store::Created::Existing(doc)) if doc.id == first.id),
        "{:?}",
        outcomes[3]
    );
    assert_eq!(f.documents().await.len(), 2);
    let originals = std::fs::read_dir(f.dir.path().join("files"))
        .unwrap()
        .count();
    assert_eq!(
        originals, 2,
        "one original per document, none for the refused or the copy"
    );
    assert_eq!(f.staging_files(), 0, "nothing is left in staging");

    // Out of scope: nothing is stored, whatever the uploads.
    let other = SourceScope::only([SourceId::new()]);
    let upload = f.staged("elsewhere").await;
    let refused = f.ingest.accept_all(&other, f.source, vec![upload]).await;
    assert!(
        matches!(refused, Err(IngestError::SourceNotFound)),
        "{refused:?}"
    );
    assert_eq!(f.documents().await.len(), 2);
}
