//! What the tools return, as JSON: the same field names as the REST API's bodies
//! (`docs/api.md`), so an agent that knows one knows the other.

use quire_app::records::SyncRun;
use quire_app::syncs::SyncView;
use quire_core::{DocumentRecord, SourceRecord, wire_timestamp};
use serde::Serialize;

/// A data source.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SourceOut {
    id: String,
    name: String,
    description: String,
    #[serde(rename = "type")]
    source_type: String,
    document_count: u64,
    /// A syncing source's last run and next one (absent for a network source).
    #[serde(skip_serializing_if = "Option::is_none")]
    sync: Option<SyncOut>,
}

impl SourceOut {
    /// The record with its sync, when it has one.
    pub(crate) fn with_sync(mut self, sync: Option<&SyncView>) -> Self {
        self.sync = sync.map(|v| SyncOut {
            last_run: v.last_run.as_ref().map(SyncRunOut::from),
            next_run_at: v.next_run_at.map(wire_timestamp),
        });
        self
    }
}

impl From<&SourceRecord> for SourceOut {
    fn from(s: &SourceRecord) -> Self {
        Self {
            id: s.id.to_string(),
            name: s.name.clone(),
            description: s.description.clone(),
            source_type: s.source_type.clone(),
            document_count: s.document_count,
            sync: None,
        }
    }
}

/// When a syncing source last synced and next will (its settings are the REST API's, for
/// administrators).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SyncOut {
    last_run: Option<SyncRunOut>,
    next_run_at: Option<String>,
}

/// One sync run, as `GET /api/v1/sources/{id}/syncs` shows it (without the failed items'
/// reasons).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SyncRunOut {
    status: String,
    added: u64,
    updated: u64,
    deleted: u64,
    unchanged: u64,
    failed: u64,
    error: Option<String>,
    started_at: String,
    finished_at: Option<String>,
}

impl From<&SyncRun> for SyncRunOut {
    fn from(r: &SyncRun) -> Self {
        Self {
            status: r.status.clone(),
            added: r.counts.added,
            updated: r.counts.updated,
            deleted: r.counts.deleted,
            unchanged: r.counts.unchanged,
            failed: r.counts.failed,
            error: r.error.clone(),
            started_at: wire_timestamp(r.started_at),
            finished_at: r.finished_at.map(wire_timestamp),
        }
    }
}

/// A document.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DocumentOut {
    id: String,
    name: String,
    data_source_id: String,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    page_count: u64,
    chunk_count: u64,
    size: u64,
    content_type: String,
    #[serde(skip_serializing_if = "quire_core::Metadata::is_empty")]
    metadata: quire_core::Metadata,
    #[serde(skip_serializing_if = "Option::is_none")]
    external_id: Option<String>,
    version: u32,
    /// A newer version not live yet (processing, waiting for review, or failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    next_version: Option<serde_json::Value>,
    created_at: String,
    uri: String,
}

impl From<&DocumentRecord> for DocumentOut {
    fn from(d: &DocumentRecord) -> Self {
        Self {
            id: d.id.to_string(),
            name: d.name.clone(),
            data_source_id: d.source_id.to_string(),
            status: d.status.as_str(),
            error: d.error.clone(),
            page_count: d.page_count,
            chunk_count: d.chunk_count,
            size: d.size,
            content_type: d.content_type.clone(),
            metadata: d.metadata.clone(),
            external_id: d.external_id.as_ref().map(|e| e.as_str().to_owned()),
            version: d.version,
            next_version: d.next_version.as_ref().map(|n| {
                serde_json::json!({
                    "version": n.version,
                    "status": n.status.as_str(),
                    "error": n.error,
                })
            }),
            created_at: d.created_at.to_rfc3339(),
            uri: crate::resources::uri(d.source_id, d.id),
        }
    }
}
