//! Documents: listed, read (with their progress while processing) and deleted within the
//! caller's scope, and their text read back page by page for adapters that hand documents to
//! an agent (the MCP server's `get_document` tool and its document resources). The text is
//! rebuilt from the stored passages: consecutive passages of one page and section repeat a few
//! words of each other (the chunker's overlap), which are taken out again here.

use quire_core::{
    ChunkDraft, DocumentCursor, DocumentId, DocumentRecord, DocumentStatus, ExternalId, PageSize,
    SourceId, SourceScope, VersionRecord,
};
use quire_store::{DocumentPage, DocumentProgress};

use crate::{Actor, AppError, Ledger, Services, audit};

/// The documents of `source`, newest first; [`AppError::NotFound`] alike for a missing source
/// and one outside `scope`.
pub async fn list(
    ledger: &Ledger,
    scope: &SourceScope,
    source: SourceId,
) -> Result<Vec<DocumentRecord>, AppError> {
    ledger
        .store()
        .list_documents(scope, source)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("data source {source} not found")))
}

/// A page of the documents of `source`, newest first (the order of [`list`]): at most `size`
/// after `after`, with the cursor of the next page when more follow; [`AppError::NotFound`]
/// as for [`list`].
pub async fn list_page(
    ledger: &Ledger,
    scope: &SourceScope,
    source: SourceId,
    after: Option<DocumentCursor>,
    size: PageSize,
) -> Result<DocumentPage, AppError> {
    ledger
        .store()
        .list_documents_page(scope, source, after, size)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("data source {source} not found")))
}

/// A document's original, opened for reading.
#[derive(Debug)]
pub struct Original {
    /// The document (its name and content type describe the bytes).
    pub document: DocumentRecord,
    /// The bytes, as uploaded.
    pub file: tokio::fs::File,
}

/// The original bytes of document `id` of `source` in `scope`, as uploaded;
/// [`AppError::NotFound`] alike for a missing document, one outside `scope`, and one whose
/// original is gone (deleted meanwhile).
pub async fn original(
    services: &Services,
    scope: &SourceScope,
    source: SourceId,
    id: DocumentId,
) -> Result<Original, AppError> {
    let document = services
        .store
        .get_document(scope, source, id)
        .await?
        .ok_or_else(|| not_found(id))?;
    // The live version's bytes, stored under its index id.
    let file = services
        .ingest
        .open_original(document.index_id)
        .await?
        .ok_or_else(|| not_found(id))?;
    Ok(Original { document, file })
}

/// Document `id` of `source` in `scope`, with its progress while it is being processed.
pub async fn get(
    ledger: &Ledger,
    scope: &SourceScope,
    source: SourceId,
    id: DocumentId,
) -> Result<(DocumentRecord, Option<DocumentProgress>), AppError> {
    let document = ledger
        .store()
        .get_document(scope, source, id)
        .await?
        .ok_or_else(|| not_found(id))?;
    let progress = progress_of(ledger, &document).await?;
    Ok((document, progress))
}

/// Document `id` in whatever source (for the administrator, who sees every source), with its
/// progress while it is being processed.
pub async fn find(
    ledger: &Ledger,
    id: DocumentId,
) -> Result<(DocumentRecord, Option<DocumentProgress>), AppError> {
    let document = ledger
        .store()
        .find_document(id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("document {id} not found")))?;
    let progress = progress_of(ledger, &document).await?;
    Ok((document, progress))
}

/// Only a document being processed has progress; the others save the query.
async fn progress_of(
    ledger: &Ledger,
    document: &DocumentRecord,
) -> Result<Option<DocumentProgress>, AppError> {
    Ok(match document.status {
        DocumentStatus::Processing => ledger.store().document_progress(document.id).await?,
        _ => None,
    })
}

/// The stored passages of `document`'s live version, in order (for the administrator's
/// document page).
pub async fn passages(
    ledger: &Ledger,
    document: &DocumentRecord,
) -> Result<Vec<ChunkDraft>, AppError> {
    Ok(ledger.store().document_chunks(document.index_id).await?)
}

/// Every version of document `id` of `source` in `scope`, oldest first; [`AppError::NotFound`]
/// as for [`get`].
pub async fn versions(
    ledger: &Ledger,
    scope: &SourceScope,
    source: SourceId,
    id: DocumentId,
) -> Result<Vec<VersionRecord>, AppError> {
    ledger
        .store()
        .document_versions(scope, source, id)
        .await?
        .ok_or_else(|| not_found(id))
}

/// The document of `source` (in `scope`) with the caller's `external_id`, if there is one;
/// [`AppError::NotFound`] when the source is missing or out of scope.
pub async fn find_by_external_id(
    ledger: &Ledger,
    scope: &SourceScope,
    source: SourceId,
    external_id: &ExternalId,
) -> Result<Option<DocumentRecord>, AppError> {
    if ledger.store().get_source(scope, source).await?.is_none() {
        return Err(AppError::NotFound("data source not found".into()));
    }
    Ok(ledger
        .store()
        .find_document_by_external_id(scope, source, external_id)
        .await?)
}

/// Changes the metadata of document `id` of `source` (in the actor's scope) by `patch`, a JSON
/// merge patch (RFC 7396: `null` removes a key), without processing the document again, and
/// records it in the audit log; the document as it now is. [`AppError::Invalid`] when the
/// patch or the metadata it makes breaks the rules; [`AppError::NotFound`] as for [`get`].
pub async fn patch_metadata(
    ledger: &Ledger,
    actor: &Actor,
    source: SourceId,
    id: DocumentId,
    patch: &serde_json::Value,
) -> Result<DocumentRecord, AppError> {
    let document = ledger
        .store()
        .patch_document_metadata(actor.scope(), source, id, patch)
        .await?
        .ok_or_else(|| not_found(id))?;
    let keys: Vec<&str> = patch
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    audit::record(
        ledger,
        actor,
        "document.metadata_changed",
        format!("{} ({}): {}", document.name, document.id, keys.join(", ")),
    )
    .await?;
    Ok(document)
}

/// Replaces the metadata of document `id` of `source` (in the actor's scope) by `metadata`
/// as a whole (keys it leaves out are removed), as [`patch_metadata`] does a part.
pub async fn replace_metadata(
    ledger: &Ledger,
    actor: &Actor,
    source: SourceId,
    id: DocumentId,
    metadata: &quire_core::Metadata,
) -> Result<DocumentRecord, AppError> {
    let (current, _) = get(ledger, actor.scope(), source, id).await?;
    let patch = current.metadata.patch_to(metadata);
    patch_metadata(ledger, actor, source, id, &patch).await
}

/// Deletes document `id` of `source` (in the actor's scope) with its passages, index entries,
/// vectors and original, and records it in the audit log; returns the document as it was.
pub async fn delete(
    ledger: &Ledger,
    actor: &Actor,
    source: SourceId,
    id: DocumentId,
) -> Result<DocumentRecord, AppError> {
    let document = ledger
        .remove_document(actor.scope(), source, id)
        .await?
        .ok_or_else(|| not_found(id))?;
    audit::record(
        ledger,
        actor,
        "document.deleted",
        format!("{} ({})", document.name, document.id),
    )
    .await?;
    Ok(document)
}

fn not_found(id: DocumentId) -> AppError {
    AppError::NotFound(format!("document {id} not found in this data source"))
}

/// The `ready` documents of every source in `scope`, with their source, source by source
/// (sources oldest first, each one's documents newest first): two queries in all.
pub async fn ready_in_scope(
    ledger: &Ledger,
    scope: &SourceScope,
) -> Result<Vec<(quire_core::SourceRecord, DocumentRecord)>, AppError> {
    let sources = ledger.store().list_sources(scope).await?;
    let mut by_source: std::collections::HashMap<SourceId, Vec<DocumentRecord>> =
        std::collections::HashMap::new();
    for document in ledger.store().ready_documents_in_scope(scope).await? {
        by_source
            .entry(document.source_id)
            .or_default()
            .push(document);
    }
    Ok(sources
        .into_iter()
        .flat_map(|source| {
            let documents = by_source.remove(&source.id).unwrap_or_default();
            documents.into_iter().map(move |d| (source.clone(), d))
        })
        .collect())
}

/// The `ready` documents of every source in `scope`, newest first, in one query.
pub async fn ready_documents(
    ledger: &Ledger,
    scope: &SourceScope,
) -> Result<Vec<DocumentRecord>, AppError> {
    Ok(ledger.store().ready_documents_in_scope(scope).await?)
}

/// Most pages one read returns, so one call cannot pull a 600-page document at once.
pub const MAX_PAGES_PER_READ: u32 = 50;

/// One page's text.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PageText {
    /// Page number, from 1.
    pub page: u32,
    /// The page's text, sections separated by blank lines.
    pub text: String,
}

/// A stretch of a document's pages.
#[derive(Debug, Clone)]
pub struct DocumentPages {
    /// The document.
    pub document: DocumentRecord,
    /// The pages asked for that have text, in order (pages without text are left out).
    pub pages: Vec<PageText>,
    /// The first page after this stretch when the document goes on, for the next read.
    pub next_page: Option<u32>,
}

/// Pages `first ..` (at most `count`, capped at [`MAX_PAGES_PER_READ`]) of document `id` of
/// `source`, which must be in `scope`; [`AppError::NotFound`] alike for a missing document and
/// one outside the scope. A document that is not ready yet has no pages.
pub async fn read_pages(
    ledger: &Ledger,
    scope: &SourceScope,
    source: SourceId,
    id: DocumentId,
    first: u32,
    count: u32,
) -> Result<DocumentPages, AppError> {
    if first == 0 {
        return Err(AppError::Invalid("pages are numbered from 1".into()));
    }
    if count == 0 || count > MAX_PAGES_PER_READ {
        return Err(AppError::Invalid(format!(
            "read 1 to {MAX_PAGES_PER_READ} pages at a time (asked for {count})"
        )));
    }
    let document = ledger
        .store()
        .get_document(scope, source, id)
        .await?
        .ok_or_else(|| {
            AppError::NotFound(format!("document {id} not found in this data source"))
        })?;
    if document.status != DocumentStatus::Ready {
        return Ok(DocumentPages {
            document,
            pages: Vec::new(),
            next_page: None,
        });
    }
    let chunks = ledger.store().document_chunks(document.index_id).await?;
    let last = first.saturating_add(count - 1);
    let pages = page_texts(chunks.iter().filter(|c| (first..=last).contains(&c.page)));
    let next_page = chunks.iter().map(|c| c.page).filter(|p| *p > last).min();
    Ok(DocumentPages {
        document,
        pages,
        next_page,
    })
}

/// Joins passages (in order) into page texts, dropping the words a passage repeats from the
/// one before it in the same page and section.
fn page_texts<'a>(chunks: impl Iterator<Item = &'a ChunkDraft>) -> Vec<PageText> {
    let mut pages: Vec<PageText> = Vec::new();
    let mut previous: Option<&ChunkDraft> = None;
    for chunk in chunks {
        let same_page = pages.last().is_some_and(|p| p.page == chunk.page);
        if !same_page {
            pages.push(PageText {
                page: chunk.page,
                text: String::new(),
            });
        }
        let page = pages.last_mut().expect("a page was just pushed");
        let continues = same_page && previous.is_some_and(|p| p.section == chunk.section);
        let (content, joiner) = match previous {
            Some(p) if continues => match without_repeated_header(&p.content, &chunk.content) {
                Some(rows) => (rows, "\n"),
                None => (without_overlap(&p.content, &chunk.content), " "),
            },
            _ => (chunk.content.as_str(), "\n\n"),
        };
        if !page.text.is_empty() && !content.is_empty() {
            page.text.push_str(joiner);
        }
        page.text.push_str(content.trim());
        previous = Some(chunk);
    }
    pages
}

/// The rows of `next` when it continues the table `previous` holds: the chunker starts each
/// piece of a long table with the table's header row again (and adds no overlap to it).
fn without_repeated_header<'a>(previous: &str, next: &'a str) -> Option<&'a str> {
    let header = previous.lines().next()?;
    let (first, rows) = next.split_once('\n')?;
    (header.contains(quire_ingest::CELL_SEPARATOR) && first == header).then_some(rows)
}

/// `next` without its leading words that repeat the last words of `previous`.
fn without_overlap<'a>(previous: &str, next: &'a str) -> &'a str {
    let before: Vec<&str> = previous.split_whitespace().collect();
    let after: Vec<&str> = next.split_whitespace().collect();
    let longest = before.len().min(after.len());
    let Some(overlap) = (1..=longest)
        .rev()
        .find(|&k| before[before.len() - k..] == after[..k])
    else {
        return next;
    };
    // The byte offset just past the `overlap`-th word of `next`.
    let mut rest = next;
    for _ in 0..overlap {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        rest = &rest[end..];
    }
    rest.trim_start()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(ordinal: u32, page: u32, section: &str, content: &str) -> ChunkDraft {
        ChunkDraft {
            ordinal,
            page,
            section: section.into(),
            content: content.into(),
        }
    }

    #[test]
    fn repeated_words_between_passages_are_dropped() {
        let chunks = [
            chunk(0, 1, "A", "one two three four"),
            chunk(1, 1, "A", "three four five six"),
            chunk(2, 1, "B", "seven eight"),
            chunk(3, 2, "B", "nine ten"),
        ];
        let pages = page_texts(chunks.iter());
        assert_eq!(
            pages,
            vec![
                PageText {
                    page: 1,
                    text: "one two three four five six\n\nseven eight".into()
                },
                PageText {
                    page: 2,
                    text: "nine ten".into()
                },
            ]
        );
    }

    #[test]
    fn a_table_cut_into_pieces_is_one_table_again() {
        let chunks = [
            chunk(0, 2, "Sales", "Region | Units\nNorth | 7\nSouth | 9"),
            chunk(1, 2, "Sales", "Region | Units\nEast | 4"),
        ];
        let pages = page_texts(chunks.iter());
        assert_eq!(
            pages[0].text,
            "Region | Units\nNorth | 7\nSouth | 9\nEast | 4"
        );
    }

    #[test]
    fn passages_without_overlap_are_kept_whole() {
        assert_eq!(without_overlap("a b c", "d e"), "d e");
        assert_eq!(without_overlap("a b c", "b c\nd"), "d");
        assert_eq!(without_overlap("x", "x"), "");
    }
}
