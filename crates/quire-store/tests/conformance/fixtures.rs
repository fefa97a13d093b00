//! What the stories share: a fixed instant, and sources, documents, chunks and keys made
//! through the store itself.

use chrono::{DateTime, Utc};
use quire_core::{
    ChunkDraft, DocumentId, KeyId, NewApiKey, NewDocument, NewSource, Permission,
    SourceDescription, SourceId, SourceName, SourceScope, SourceType,
};
use quire_store::{ProcessedDocument, Store};

pub(crate) fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-05-01T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

pub(crate) async fn source(store: &dyn Store, name: &str) -> SourceId {
    store
        .create_source(NewSource {
            id: SourceId::new(),
            name: SourceName::parse(name).unwrap(),
            description: SourceDescription::default(),
            source_type: SourceType::Network,
            created_at: t0(),
        })
        .await
        .unwrap()
        .id
}

pub(crate) async fn document(store: &dyn Store, source: SourceId, name: &str) -> DocumentId {
    let id = DocumentId::new();
    store
        .create_document(NewDocument {
            id,
            source_id: source,
            name: name.into(),
            content_type: "text/plain".into(),
            size: 3,
            // Distinct contents: equal hashes in one source are one document.
            sha256: id.as_uuid().simple().to_string().repeat(2),
            metadata: Default::default(),
            external_id: None,
            created_at: t0(),
        })
        .await
        .unwrap()
        .document()
        .id
}

pub(crate) fn chunks(n: u32) -> ProcessedDocument {
    ProcessedDocument {
        chunks: (0..n)
            .map(|i| ChunkDraft {
                ordinal: i,
                page: 1,
                section: String::new(),
                content: format!("chunk {i}"),
            })
            .collect(),
        page_count: 1,
        vectors: None,
    }
}

pub(crate) async fn key(store: &dyn Store, hash: &str) -> KeyId {
    store
        .create_key(NewApiKey {
            id: KeyId::new(),
            name: hash.into(),
            permission: Permission::Read,
            scope: SourceScope::All,
            rate_limit: None,
            key_hash: hash.into(),
            created_at: t0(),
        })
        .await
        .unwrap()
        .id
}
