//! The JSON shapes of the Agent API: camelCase fields, ISO 8601 UTC timestamps with
//! milliseconds, UUID strings.

use quire_app::records::{DocumentProgress, SyncRun};
use quire_app::search::SearchResult;
use quire_app::syncs::SyncView;
use quire_core::wire_timestamp as iso;
use quire_core::{DocumentRecord, SourceRecord, VersionRecord};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};

use crate::error::ErrorBody;

/// A data source.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Source)]
pub struct SourceJson {
    /// The source's id.
    #[schema(format = Uuid)]
    id: String,
    /// 1 to 200 characters.
    name: String,
    /// At most 2000 characters, may be empty.
    description: String,
    /// `network` (filled by uploads), or `folder`, `s3` or `web` (filled by syncing from an
    /// origin).
    #[serde(rename = "type")]
    #[schema(example = "network")]
    source_type: String,
    /// Documents in the source, whatever their status.
    document_count: u64,
    /// When it was created.
    #[schema(format = DateTime)]
    created_at: String,
    /// How a `folder`, `s3` or `web` source syncs (in the source's detail and the answer that
    /// created it); absent for a network source and in lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    sync: Option<SyncJson>,
}

impl SourceJson {
    /// The record with its sync, when it has one.
    pub fn with_sync(mut self, sync: Option<&SyncView>) -> Self {
        self.sync = sync.map(SyncJson::from);
        self
    }
}

/// A source's sync: its settings (credentials never shown), its last run and its next one.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = SourceSync)]
pub struct SyncJson {
    /// The origin's settings as given (`path`; or `url`, `endpoint`, `region`, `accessKeyId`,
    /// `allowHttp`), with `include`, `exclude` and `intervalSeconds`; `secretAccessKey` is
    /// never returned.
    #[schema(value_type = Object)]
    settings: serde_json::Map<String, serde_json::Value>,
    /// Whether a credential (`secretAccessKey`) is stored.
    has_credentials: bool,
    /// The newest run, if any.
    last_run: Option<SyncRunJson>,
    /// When it next syncs by itself (`null`: on demand only, or while a run runs).
    #[schema(format = DateTime)]
    next_run_at: Option<String>,
}

impl From<&SyncView> for SyncJson {
    fn from(v: &SyncView) -> Self {
        Self {
            settings: v.settings.clone(),
            has_credentials: v.has_secret,
            last_run: v.last_run.as_ref().map(SyncRunJson::from),
            next_run_at: v.next_run_at.map(iso),
        }
    }
}

/// One sync run of a source.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = SyncRun)]
pub struct SyncRunJson {
    /// The run's id.
    #[schema(format = Uuid)]
    id: String,
    /// `running`, `succeeded` (items may still have failed: see `failed`) or `failed` (the
    /// origin could not be listed; see `error`).
    status: String,
    /// New items: new documents.
    added: u64,
    /// Changed items: new versions of their documents.
    updated: u64,
    /// Items gone from the origin: their documents deleted.
    deleted: u64,
    /// Items not fetched again.
    unchanged: u64,
    /// Items that failed; their reasons are in `failures`.
    failed: u64,
    /// `[{"externalId", "reason"}]` of the items that failed.
    #[schema(value_type = Vec<Object>)]
    failures: serde_json::Value,
    /// Why the run failed as a whole.
    error: Option<String>,
    /// When it started.
    #[schema(format = DateTime)]
    started_at: String,
    /// When it ended (`null` while it runs).
    #[schema(format = DateTime)]
    finished_at: Option<String>,
}

impl From<&SyncRun> for SyncRunJson {
    fn from(r: &SyncRun) -> Self {
        Self {
            id: r.id.to_string(),
            status: r.status.clone(),
            added: r.counts.added,
            updated: r.counts.updated,
            deleted: r.counts.deleted,
            unchanged: r.counts.unchanged,
            failed: r.counts.failed,
            failures: serde_json::from_str(&r.failures).unwrap_or_else(|_| serde_json::json!([])),
            error: r.error.clone(),
            started_at: iso(r.started_at),
            finished_at: r.finished_at.map(iso),
        }
    }
}

impl From<&SourceRecord> for SourceJson {
    fn from(s: &SourceRecord) -> Self {
        Self {
            id: s.id.to_string(),
            name: s.name.clone(),
            description: s.description.clone(),
            source_type: s.source_type.clone(),
            document_count: s.document_count,
            created_at: iso(s.created_at),
            sync: None,
        }
    }
}

/// A data source with its documents.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SourceDetail)]
pub struct SourceDetailJson {
    #[serde(flatten)]
    source: SourceJson,
    /// Its documents, newest first.
    documents: Vec<DocumentJson>,
}

impl SourceDetailJson {
    /// Combines a source, its sync and its documents.
    pub fn new(
        source: &SourceRecord,
        sync: Option<&SyncView>,
        documents: &[DocumentRecord],
    ) -> Self {
        Self {
            source: SourceJson::from(source).with_sync(sync),
            documents: documents.iter().map(DocumentJson::from).collect(),
        }
    }
}

/// A document (the same record in lists and in detail).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Document)]
pub struct DocumentJson {
    /// The document's id.
    #[schema(format = Uuid)]
    id: String,
    /// File name.
    name: String,
    /// The source it belongs to.
    #[schema(format = Uuid)]
    data_source_id: String,
    /// Where it is in processing.
    #[schema(schema_with = document_status)]
    status: &'static str,
    /// Why processing failed (`failed` only).
    error: Option<String>,
    /// Searchable passages.
    chunk_count: u64,
    /// Pages (1 for formats without pages).
    page_count: u64,
    /// Size of the original in bytes.
    size: u64,
    /// Media type of the original.
    content_type: String,
    /// SHA-256 of the original, hex.
    sha256: String,
    /// What the uploader says the document is: keys and values (a string, a number, a
    /// boolean or an array of strings); `{}` when none were given.
    #[schema(value_type = Object)]
    metadata: quire_core::Metadata,
    /// The uploader's own key for it (a path, URL or CMS id), unique within its source; `null`
    /// when none was given.
    external_id: Option<String>,
    /// The live version (1, 2, …): the one searched, cited and downloaded.
    version: u32,
    /// A newer version that is not live: being processed, waiting for review, or failed (with
    /// its reason). The live version stays searchable meanwhile. Absent when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_version: Option<NextVersionJson>,
    /// Every version, oldest first (detail only).
    #[serde(skip_serializing_if = "Option::is_none")]
    versions: Option<Vec<VersionJson>>,
    /// When it was uploaded.
    #[schema(format = DateTime)]
    created_at: String,
    /// When its status last changed.
    #[schema(format = DateTime)]
    updated_at: String,
    /// How far processing has come, while the document is `processing` (detail only).
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<ProgressJson>,
}

/// A newer version of a document than the live one.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NextVersionJson {
    /// Its number.
    version: u32,
    /// `queued`, `processing`, `pending_review` or `failed`.
    status: &'static str,
    /// Why it failed (`failed` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// One version of a document.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionJson {
    /// Its number, from 1.
    version: u32,
    /// The file name it was uploaded with.
    name: String,
    /// Size in bytes.
    size: u64,
    /// Media type.
    content_type: String,
    /// SHA-256 of its bytes, hex.
    sha256: String,
    /// `queued`, `processing`, `pending_review`, `ready` (live, or the one before the live
    /// one), `failed` or `superseded` (a newer version took its place).
    status: &'static str,
    /// Why it failed (`failed` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// When it was uploaded.
    #[schema(format = DateTime)]
    created_at: String,
}

impl From<&VersionRecord> for VersionJson {
    fn from(v: &VersionRecord) -> Self {
        Self {
            version: v.version,
            name: v.name.clone(),
            size: v.size,
            content_type: v.content_type.clone(),
            sha256: v.sha256.clone(),
            status: v.status.as_str(),
            error: v.error.clone(),
            created_at: iso(v.created_at),
        }
    }
}

impl DocumentJson {
    /// The record with every version listed.
    pub fn with_versions(mut self, versions: &[VersionRecord]) -> Self {
        self.versions = Some(versions.iter().map(VersionJson::from).collect());
        self
    }

    /// The record with its processing progress, when there is any.
    pub fn with_progress(mut self, progress: Option<&DocumentProgress>) -> Self {
        self.progress = progress.map(|p| ProgressJson {
            stage: p.stage.as_str(),
            done: p.done,
            total: p.total,
            updated_at: iso(p.updated_at),
        });
        self
    }
}

/// `progress` of a document being processed: its stage and, when the stage counts units
/// (chunks embedded), how many of how many.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProgressJson {
    /// `parsing`, `screening`, `embedding` or `indexing`.
    stage: &'static str,
    /// Units of the stage done (chunks embedded), when the stage counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    done: Option<u64>,
    /// Units of the stage in all, when the stage counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    total: Option<u64>,
    /// When the worker last reported.
    #[schema(format = DateTime)]
    updated_at: String,
}

/// The wire names of `quire_core::DocumentStatus`, for the OpenAPI document.
const DOCUMENT_STATUSES: [&str; 5] = ["queued", "processing", "pending_review", "ready", "failed"];

/// The schema of a document's `status`.
fn document_status() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(DOCUMENT_STATUSES))
        .description(Some(
            "`queued` (waiting for a worker), `processing`, `pending_review` (personal data \
             found; waiting for an administrator), `ready` (searchable) or `failed`.",
        ))
        .build()
}

impl From<&DocumentRecord> for DocumentJson {
    fn from(d: &DocumentRecord) -> Self {
        Self {
            id: d.id.to_string(),
            name: d.name.clone(),
            data_source_id: d.source_id.to_string(),
            status: d.status.as_str(),
            error: d.error.clone(),
            chunk_count: d.chunk_count,
            page_count: d.page_count,
            size: d.size,
            content_type: d.content_type.clone(),
            sha256: d.sha256.clone(),
            metadata: d.metadata.clone(),
            external_id: d.external_id.as_ref().map(|e| e.as_str().to_owned()),
            version: d.version,
            next_version: d.next_version.as_ref().map(|n| NextVersionJson {
                version: n.version,
                status: n.status.as_str(),
                error: n.error.clone(),
            }),
            versions: None,
            created_at: iso(d.created_at),
            updated_at: iso(d.updated_at),
            progress: None,
        }
    }
}

/// One file part of a bulk upload and what became of it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = BulkUploadEntry)]
pub struct BulkEntryJson {
    /// Position of the part among the request's `file` parts, from 0.
    pub index: usize,
    /// File name from the part.
    pub name: String,
    /// `accepted`, `duplicate` (the source already holds these bytes) or `rejected`.
    #[schema(schema_with = bulk_status)]
    pub status: &'static str,
    /// The new (or, for a duplicate, the existing) document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<DocumentJson>,
    /// Why the part was rejected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

/// The schema of a bulk upload entry's `status`.
fn bulk_status() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["accepted", "duplicate", "rejected"]))
        .build()
}

/// The answer to a bulk upload.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = BulkUpload)]
pub struct BulkUploadJson {
    /// Number of parts stored as new documents.
    pub accepted: usize,
    /// Number of parts the source already held (their entries carry the existing document).
    pub duplicates: usize,
    /// Number of parts rejected.
    pub rejected: usize,
    /// One entry per `file` part, in request order.
    pub results: Vec<BulkEntryJson>,
}

/// The answer to a search.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SearchResponse)]
pub struct SearchResponseJson {
    /// Results, best first.
    pub results: Vec<SearchResult>,
}

#[cfg(test)]
mod tests {
    use quire_core::DocumentStatus;

    use super::DOCUMENT_STATUSES;

    #[test]
    fn every_document_status_is_documented() {
        let all = [
            DocumentStatus::Queued,
            DocumentStatus::Processing,
            DocumentStatus::PendingReview,
            DocumentStatus::Ready,
            DocumentStatus::Failed,
        ];
        let names: Vec<_> = all.iter().map(|s| s.as_str()).collect();
        assert_eq!(names, DOCUMENT_STATUSES);
    }
}
