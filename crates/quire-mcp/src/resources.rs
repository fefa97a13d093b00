//! Documents as MCP resources: `quire://sources/{sourceId}/documents/{documentId}`, read as
//! plain text (the first pages, with a pointer to `get_document` for the rest).

use quire_app::documents::{MAX_PAGES_PER_READ, read_pages};
use quire_app::{AppError, Services};
use quire_core::{ApiKeyRecord, DocumentId, DocumentStatus, Permission, SourceId};
use rmcp::model::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate};

const SCHEME: &str = "quire://sources/";

/// The URI of a document.
pub(crate) fn uri(source: SourceId, document: DocumentId) -> String {
    format!("{SCHEME}{source}/documents/{document}")
}

/// The template every document's URI follows.
pub(crate) fn template() -> ResourceTemplate {
    ResourceTemplate::new(
        "quire://sources/{sourceId}/documents/{documentId}",
        "document",
    )
    .with_title("A document's text")
    .with_description(
        "The text of a ready document, page by page (the first 50 pages; the get_document tool \
         reads further).",
    )
    .with_mime_type("text/plain")
}

/// The ready documents of every source the key may read.
pub(crate) async fn list(
    services: &Services,
    key: &ApiKeyRecord,
) -> Result<Vec<Resource>, AppError> {
    quire_app::auth::require(key, Permission::Read)?;
    let ready = quire_app::documents::ready_in_scope(services, &key.scope).await?;
    Ok(ready
        .into_iter()
        .map(|(source, d)| {
            Resource::new(uri(source.id, d.id), d.name.clone())
                .with_description(format!(
                    "{} ({} pages) in data source {}",
                    d.name, d.page_count, source.name
                ))
                .with_mime_type("text/plain")
        })
        .collect())
}

/// Reads the document `uri` names, within the key's scope.
pub(crate) async fn read(
    services: &Services,
    key: &ApiKeyRecord,
    uri: &str,
) -> Result<ReadResourceResult, AppError> {
    quire_app::auth::require(key, Permission::Read)?;
    let (source, document) = parse(uri)?;
    let read = read_pages(
        services,
        &key.scope,
        source,
        document,
        1,
        MAX_PAGES_PER_READ,
    )
    .await?;
    if read.document.status != DocumentStatus::Ready {
        return Err(AppError::Conflict(format!(
            "document {document} is {} and has no text yet",
            read.document.status
        )));
    }
    let mut text = String::new();
    for page in &read.pages {
        text.push_str(&format!("--- page {} ---\n{}\n\n", page.page, page.text));
    }
    if let Some(next) = read.next_page {
        text.push_str(&format!(
            "[the document goes on: call get_document with page {next} to read further]\n"
        ));
    }
    Ok(ReadResourceResult::new(vec![ResourceContents::text(
        text, uri,
    )]))
}

/// The source and document ids in a document URI.
fn parse(uri: &str) -> Result<(SourceId, DocumentId), AppError> {
    let invalid = || {
        AppError::NotFound(format!(
            "no such resource {uri:?}; document URIs look like \
             quire://sources/{{sourceId}}/documents/{{documentId}}"
        ))
    };
    let rest = uri.strip_prefix(SCHEME).ok_or_else(invalid)?;
    let (source, document) = rest.split_once("/documents/").ok_or_else(invalid)?;
    Ok((
        source.parse().map_err(|_| invalid())?,
        document.parse().map_err(|_| invalid())?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip() {
        let (source, document) = (SourceId::new(), DocumentId::new());
        assert_eq!(parse(&uri(source, document)), Ok((source, document)));
    }

    #[test]
    fn malformed_uris_say_what_a_uri_looks_like() {
        for bad in [
            "quire://sources/x/documents/y",
            "file:///etc/passwd",
            "quire://sources/",
        ] {
            let Err(AppError::NotFound(message)) = parse(bad) else {
                panic!("{bad} parsed");
            };
            assert!(message.contains("quire://sources/{sourceId}"), "{message}");
        }
    }
}
