//! Opening the index with the current schema. Tantivy cannot add a field to an existing index,
//! so an index written with another schema (by an older Quire: before the document id's fast
//! columns) is rebuilt from its own stored fields, every one of which is stored, into a sibling
//! directory (`<dir>.next`) that then takes its place. The old index moves aside (`<dir>.old`)
//! only once the new one is committed, so a crash at any step leaves one complete index, and
//! the next open finishes or restarts the work.

use std::path::{Path, PathBuf};

use quire_core::DocumentId;
use tantivy::directory::{Directory, INDEX_WRITER_LOCK, MmapDirectory};
use tantivy::schema::{Field, Schema};
use tantivy::{Index, IndexSettings, TantivyDocument};

use super::{
    ANALYZER, Fields, IndexedChunk, SearchError, WRITER_HEAP_BYTES, analyzer, read_hit, writer,
};

/// Opens the index in `dir` with `schema` (whose fields are `fields`), creating it when there
/// is none and rebuilding it first when it was written with another schema.
pub(super) fn open_current(
    dir: &Path,
    schema: &Schema,
    fields: Fields,
) -> Result<Index, SearchError> {
    let paths = Paths::of(dir)?;
    paths.recover()?;
    let index = open_or_create(dir, schema)?;
    if index.schema() == *schema {
        return Ok(index);
    }
    let chunks = rebuild(index, &paths, schema, fields)?;
    tracing::info!(
        chunks,
        dir = %dir.display(),
        "keyword index rebuilt with the current schema"
    );
    let index = open_or_create(dir, schema)?;
    if index.schema() != *schema {
        return Err(SearchError::Open(format!(
            "{}: the rebuilt index does not have the current schema",
            dir.display()
        )));
    }
    Ok(index)
}

/// The index in `dir` as it is, or a new one with `schema`, its analyzer registered.
fn open_or_create(dir: &Path, schema: &Schema) -> Result<Index, SearchError> {
    std::fs::create_dir_all(dir).map_err(|e| open_error(dir, e))?;
    let directory = MmapDirectory::open(dir).map_err(|e| open_error(dir, e))?;
    let index = if Index::exists(&directory).map_err(|e| open_error(dir, e))? {
        Index::open(directory)?
    } else {
        Index::create(directory, schema.clone(), IndexSettings::default())?
    };
    index.tokenizers().register(ANALYZER, analyzer());
    Ok(index)
}

fn open_error(dir: &Path, e: impl std::fmt::Display) -> SearchError {
    SearchError::Open(format!("{}: {e}", dir.display()))
}

/// The index directory and the two beside it that a rebuild uses.
struct Paths {
    current: PathBuf,
    /// The index being rebuilt; complete once `current` has moved to `old`.
    next: PathBuf,
    /// The index being replaced, kept until `next` has taken its place.
    old: PathBuf,
}

impl Paths {
    fn of(dir: &Path) -> Result<Self, SearchError> {
        let name = dir
            .file_name()
            .ok_or_else(|| SearchError::Open(format!("{}: not a directory name", dir.display())))?
            .to_string_lossy();
        Ok(Self {
            current: dir.to_owned(),
            next: dir.with_file_name(format!("{name}.next")),
            old: dir.with_file_name(format!("{name}.old")),
        })
    }

    /// Finishes a swap a crash interrupted. (A half-built `next` beside the index it was built
    /// from is removed by the rebuild that replaces it, under that index's lock.)
    fn recover(&self) -> Result<(), SearchError> {
        if !self.current.exists() && self.old.exists() {
            // `current` moves aside only once `next` is complete: put `next` in its place, or,
            // if it is gone, the old index back.
            let back = if self.next.exists() {
                &self.next
            } else {
                &self.old
            };
            std::fs::rename(back, &self.current).map_err(|e| open_error(back, e))?;
        }
        if self.old.exists() {
            std::fs::remove_dir_all(&self.old).map_err(|e| open_error(&self.old, e))?;
        }
        Ok(())
    }
}

/// Copies every live chunk of `old` into a new index with `schema` in `paths.next`, then puts
/// it in place of `old`. Returns the chunks copied.
fn rebuild(old: Index, paths: &Paths, schema: &Schema, fields: Fields) -> Result<u64, SearchError> {
    // Held while building, so no other process writes to the old index meanwhile.
    let lock = old
        .directory()
        .acquire_lock(&INDEX_WRITER_LOCK)
        .map_err(|e| open_error(&paths.current, e))?;
    let stored = stored_fields(&old.schema(), fields)?;
    if paths.next.exists() {
        std::fs::remove_dir_all(&paths.next).map_err(|e| open_error(&paths.next, e))?;
    }
    let new = open_or_create(&paths.next, schema)?;
    let mut writer: tantivy::IndexWriter<TantivyDocument> =
        new.writer_with_num_threads(1, WRITER_HEAP_BYTES)?;
    let reader = old.reader()?;
    let searcher = reader.searcher();
    let mut chunks = 0;
    for segment in searcher.segment_readers() {
        let store = segment
            .get_store_reader(1)
            .map_err(|e| open_error(&paths.current, e))?;
        for doc in segment.doc_ids_alive() {
            let entry: TantivyDocument = store.get(doc)?;
            writer.add_document(copied(stored, fields, &entry)?)?;
            chunks += 1;
        }
    }
    writer.commit()?;
    writer.wait_merging_threads()?;
    drop((searcher, reader, new, lock, old));
    std::fs::rename(&paths.current, &paths.old).map_err(|e| open_error(&paths.current, e))?;
    std::fs::rename(&paths.next, &paths.current).map_err(|e| open_error(&paths.next, e))?;
    std::fs::remove_dir_all(&paths.old).map_err(|e| open_error(&paths.old, e))?;
    Ok(chunks)
}

/// The stored fields of an index with `schema`, found by name. (The id columns are never read
/// back, so those of the current schema stand in for them.)
fn stored_fields(schema: &Schema, current: Fields) -> Result<Fields, SearchError> {
    let field = |name: &str| -> Result<Field, SearchError> {
        schema.get_field(name).map_err(|_| {
            SearchError::Corrupt(format!("the index to rebuild has no field {name:?}"))
        })
    };
    Ok(Fields {
        document_id: field("document_id")?,
        source_id: field("source_id")?,
        ordinal: field("ordinal")?,
        page: field("page")?,
        section: field("section")?,
        content: field("content")?,
        ..current
    })
}

/// A chunk stored with the fields `stored`, as an entry with the fields `current`.
fn copied(
    stored: Fields,
    current: Fields,
    entry: &TantivyDocument,
) -> Result<TantivyDocument, SearchError> {
    use tantivy::schema::Value;

    let hit = read_hit(stored, entry, 0.0)?;
    // A title is the heading field's second value (see `writer::entry`).
    let title = entry
        .get_all(stored.section)
        .nth(1)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_owned();
    let chunk = IndexedChunk {
        title,
        ordinal: hit.ordinal,
        page: hit.page,
        section: hit.section,
        content: hit.content,
    };
    let document: DocumentId = hit.document_id;
    Ok(writer::entry(current, document, hit.source_id, &chunk))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use quire_core::{SourceId, SourceScope};
    use tantivy::doc;
    use tantivy::schema::{IndexRecordOption, STORED, STRING, TextFieldIndexing, TextOptions};

    use super::*;
    use crate::keyword::KeywordIndex;

    /// Writes an index with the schema Quire used before the document id's fast columns: two
    /// documents of one source, the first titled, and a third one deleted.
    fn write_old_index(dir: &Path) -> [DocumentId; 3] {
        let mut builder = Schema::builder();
        let text = TextOptions::default()
            .set_indexing_options(
                TextFieldIndexing::default()
                    .set_tokenizer(ANALYZER)
                    .set_index_option(IndexRecordOption::WithFreqsAndPositions),
            )
            .set_stored();
        let document_id = builder.add_text_field("document_id", STRING | STORED);
        let source_id = builder.add_text_field("source_id", STRING | STORED);
        let ordinal = builder.add_u64_field("ordinal", STORED);
        let page = builder.add_u64_field("page", STORED);
        let section = builder.add_text_field("section", text.clone());
        let content = builder.add_text_field("content", text);
        std::fs::create_dir_all(dir).unwrap();
        let index = Index::create_in_dir(dir, builder.build()).unwrap();
        index.tokenizers().register(ANALYZER, analyzer());
        let mut writer: tantivy::IndexWriter =
            index.writer_with_num_threads(1, 15_000_000).unwrap();
        let source = SourceId::new().to_string();
        let documents = [DocumentId::new(), DocumentId::new(), DocumentId::new()];
        let rows = [
            (0, 0, "Pumps", "The centrifugal pump must be primed."),
            (0, 1, "Valves", "Close the isolation valve."),
            (1, 0, "", "Pumping stations need backup power."),
            (2, 0, "", "A pump that is deleted."),
        ];
        for (number, position, heading, body) in rows {
            let mut entry = doc!(
                document_id => documents[number].to_string(),
                source_id => source.clone(),
                ordinal => position as u64,
                page => 3u64,
                section => heading,
                content => body,
            );
            if number == 0 {
                entry.add_text(section, "Maintenance Handbook");
            }
            writer.add_document(entry).unwrap();
        }
        writer.commit().unwrap();
        writer.delete_term(tantivy::Term::from_field_text(
            document_id,
            &documents[2].to_string(),
        ));
        writer.commit().unwrap();
        documents
    }

    /// An index written with the old schema is rebuilt when opened: every live chunk with its
    /// heading and title, none of the deleted ones, and restricted searches work on it.
    #[test]
    fn an_index_with_an_older_schema_is_rebuilt_when_opened() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("keyword");
        let documents = write_old_index(&dir);
        let index = KeywordIndex::open(&dir).unwrap();
        assert_eq!(index.chunk_count(), 3);
        let hits = index.search("pump", &SourceScope::All, 10).unwrap();
        assert_eq!(hits.len(), 2, "{hits:?}");
        let titled = index.search("handbook", &SourceScope::All, 10).unwrap();
        assert_eq!(titled.len(), 2);
        assert!(titled.iter().all(|hit| hit.document_id == documents[0]));
        let valve = index.search("valve", &SourceScope::All, 10).unwrap();
        assert_eq!(
            (valve[0].ordinal, valve[0].page, valve[0].section.as_str()),
            (1, 3, "Valves")
        );
        let second = HashSet::from([documents[1]]);
        let within = index
            .search_within("pump", &SourceScope::All, Some(&second), 10)
            .unwrap();
        assert_eq!(within.len(), 1);
        assert_eq!(within[0].document_id, documents[1]);
        let mut ids = index.document_ids().unwrap();
        ids.sort();
        let mut live = vec![documents[0], documents[1]];
        live.sort();
        assert_eq!(ids, live);
        drop(index);
        assert!(!root.path().join("keyword.next").exists());
        assert!(!root.path().join("keyword.old").exists());
        // Opened again, it is current and kept as it is.
        let index = KeywordIndex::open(&dir).unwrap();
        assert_eq!(index.chunk_count(), 3);
    }

    /// A rebuild a crash interrupted is finished or restarted at the next open.
    #[test]
    fn an_interrupted_rebuild_is_finished_or_restarted() {
        // Cut short while building: the half-built copy is thrown away and the rebuild redone.
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("keyword");
        write_old_index(&dir);
        let next = root.path().join("keyword.next");
        std::fs::create_dir_all(&next).unwrap();
        std::fs::write(next.join("meta.json"), "half written").unwrap();
        let index = KeywordIndex::open(&dir).unwrap();
        assert_eq!(
            index.search("pump", &SourceScope::All, 10).unwrap().len(),
            2
        );
        drop(index);
        assert!(!next.exists());

        // Cut short between the two renames: the complete copy takes the old index's place.
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("keyword");
        let documents = write_old_index(&root.path().join("keyword.old"));
        let rebuilt = KeywordIndex::open(&root.path().join("keyword.next")).unwrap();
        rebuilt
            .submit_replace(
                documents[1],
                SourceId::new(),
                vec![crate::keyword::tests::chunk(0, 1, "", "rebuilt pump")],
            )
            .wait_blocking()
            .unwrap();
        drop(rebuilt);
        let index = KeywordIndex::open(&dir).unwrap();
        let hits = index.search("pump", &SourceScope::All, 10).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].content, "rebuilt pump");
        drop(index);
        assert!(!root.path().join("keyword.old").exists());
        assert!(!root.path().join("keyword.next").exists());
    }
}
