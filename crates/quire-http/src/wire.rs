//! The JSON shapes of the Agent API: camelCase fields, ISO 8601 UTC timestamps with
//! milliseconds, UUID strings.

use quire_app::search::SearchResult;
use quire_core::wire_timestamp as iso;
use quire_core::{DocumentRecord, SourceRecord};
use quire_store::DocumentProgress;
use serde::Serialize;

use crate::error::ErrorBody;

/// A data source.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceJson {
    id: String,
    name: String,
    description: String,
    #[serde(rename = "type")]
    source_type: String,
    document_count: u64,
    created_at: String,
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
        }
    }
}

/// A data source with its documents.
#[derive(Debug, Serialize)]
pub struct SourceDetailJson {
    #[serde(flatten)]
    source: SourceJson,
    documents: Vec<DocumentJson>,
}

impl SourceDetailJson {
    /// Combines a source and its documents.
    pub fn new(source: &SourceRecord, documents: &[DocumentRecord]) -> Self {
        Self {
            source: source.into(),
            documents: documents.iter().map(DocumentJson::from).collect(),
        }
    }
}

/// A document (the same record in lists and in detail).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentJson {
    id: String,
    name: String,
    data_source_id: String,
    status: &'static str,
    error: Option<String>,
    chunk_count: u64,
    page_count: u64,
    size: u64,
    content_type: String,
    sha256: String,
    created_at: String,
    updated_at: String,
    /// How far processing has come, while the document is `processing` (detail only).
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<ProgressJson>,
}

impl DocumentJson {
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
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressJson {
    stage: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    done: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total: Option<u64>,
    updated_at: String,
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
            created_at: iso(d.created_at),
            updated_at: iso(d.updated_at),
            progress: None,
        }
    }
}

/// One file part of a bulk upload and what became of it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BulkEntryJson {
    /// Position of the part among the request's `file` parts, from 0.
    pub index: usize,
    /// File name from the part.
    pub name: String,
    /// `accepted`, `duplicate` (the source already holds these bytes) or `rejected`.
    pub status: &'static str,
    /// The new (or, for a duplicate, the existing) document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<DocumentJson>,
    /// Why the part was rejected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

/// The answer to a bulk upload.
#[derive(Debug, Serialize)]
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
#[derive(Debug, Serialize)]
pub struct SearchResponseJson {
    /// Results, best first.
    pub results: Vec<SearchResult>,
}
