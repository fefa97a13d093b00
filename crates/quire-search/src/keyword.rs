//! The keyword index: one Tantivy document per chunk, BM25 over the chunk text and its heading
//! path, with the scope applied inside the query so the top-k is taken among visible chunks
//! only (filtering afterwards would starve small scopes of results).
//!
//! The index itself is here (its schema, opening it, the search entry point, reading hits);
//! changes and commits are in [`writer`], the query a search runs in [`query`], with the
//! expansions of its terms in [`expand`] and of the statements it names in
//! [`statement_names`]; a search restricted to a set of documents collects through
//! [`within`], and an index written with an older schema is rebuilt by [`migrate`].

mod expand;
mod migrate;
mod presence;
mod query;
mod statement_names;
mod within;
mod writer;

use std::path::Path;

use quire_core::{DocumentId, SourceId, SourceScope};
use tantivy::collector::TopDocs;
use tantivy::query::TermQuery;
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions, Value,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, TextAnalyzer,
};
use tantivy::{Index, IndexReader, ReloadPolicy, TantivyDocument, Term};

use writer::{Change, Writer};
pub use writer::{Committed, Expected};

/// Name under which the analyzer is registered with Tantivy.
const ANALYZER: &str = "quire_en";
/// Memory the single indexing thread may use before flushing a segment.
const WRITER_HEAP_BYTES: usize = 50_000_000;
/// The fast columns holding the high and low 64 bits of a chunk's document id (Tantivy has no
/// 128-bit column but for IP addresses), read by a search restricted to a set of documents.
const DOCUMENT_HIGH: &str = "document_high";
const DOCUMENT_LOW: &str = "document_low";

/// Why an index operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// Tantivy reported an error.
    #[error("keyword index error: {0}")]
    Index(#[from] tantivy::TantivyError),
    /// The index directory could not be opened.
    #[error("could not open the keyword index: {0}")]
    Open(String),
    /// A batch of changes could not be committed (the message is the cause, shared by every
    /// change of the batch).
    #[error("keyword index commit failed: {0}")]
    Commit(String),
    /// A stored field was missing or malformed.
    #[error("corrupt keyword index entry: {0}")]
    Corrupt(String),
}

/// A chunk as handed to the index.
#[derive(Debug, Clone)]
pub struct IndexedChunk {
    /// Its document's title, searched with the heading path (so a question naming the
    /// company and year reaches every passage of that filing) but never returned.
    pub title: String,
    /// Position in the document.
    pub ordinal: u32,
    /// Page number, from 1.
    pub page: u32,
    /// Heading path.
    pub section: String,
    /// Passage text.
    pub content: String,
}

/// A chunk that matched a query.
#[derive(Debug, Clone, PartialEq)]
pub struct KeywordHit {
    /// The document it belongs to.
    pub document_id: DocumentId,
    /// The document's source.
    pub source_id: SourceId,
    /// Position in the document.
    pub ordinal: u32,
    /// Page number.
    pub page: u32,
    /// Heading path.
    pub section: String,
    /// Passage text.
    pub content: String,
    /// BM25 score.
    pub score: f32,
}

#[derive(Debug, Clone, Copy)]
struct Fields {
    document_id: Field,
    source_id: Field,
    ordinal: Field,
    page: Field,
    section: Field,
    content: Field,
    document_high: Field,
    document_low: Field,
}

/// A persistent BM25 index of chunks. All methods block; call them off the async runtime.
pub struct KeywordIndex {
    index: Index,
    writer: Writer,
    reader: IndexReader,
    fields: Fields,
    /// The financial statements' names, analysed once (see [`statement_names`]).
    statements: Vec<Vec<Vec<String>>>,
}

impl std::fmt::Debug for KeywordIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeywordIndex").finish_non_exhaustive()
    }
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let text = TextOptions::default()
        .set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
        .set_stored();
    let fields = Fields {
        document_id: builder.add_text_field("document_id", STRING | STORED),
        source_id: builder.add_text_field("source_id", STRING | STORED),
        ordinal: builder.add_u64_field("ordinal", STORED),
        page: builder.add_u64_field("page", STORED),
        section: builder.add_text_field("section", text.clone()),
        content: builder.add_text_field("content", text),
        document_high: builder.add_u64_field(DOCUMENT_HIGH, FAST),
        document_low: builder.add_u64_field(DOCUMENT_LOW, FAST),
    };
    (builder.build(), fields)
}

fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(Stemmer::new(Language::English))
        .build()
}

impl KeywordIndex {
    /// Opens the index in `dir`, creating it if needed. Only one process may hold it.
    pub fn open(dir: &Path) -> Result<Self, SearchError> {
        Self::open_spaced(dir, writer::COMMIT_SPACING)
    }

    /// [`Self::open`] with commits spaced as `spacing` says (see [`writer`]).
    fn open_spaced(dir: &Path, spacing: writer::Spacing) -> Result<Self, SearchError> {
        let (schema, fields) = schema();
        let index = migrate::open_current(dir, &schema, fields)?;
        let writer = index.writer_with_num_threads(1, WRITER_HEAP_BYTES)?;
        let reader: IndexReader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let writer = Writer::start(writer, reader.clone(), fields, spacing)?;
        let mut analyzer = analyzer();
        let statements = statement_names::analysed_statements(&mut |text| {
            let mut words = Vec::new();
            analyzer
                .token_stream(text)
                .process(&mut |token| words.push(token.text.clone()));
            words
        });
        Ok(Self {
            index,
            writer,
            reader,
            fields,
            statements,
        })
    }

    /// Queues the replacement of whatever the index holds for `document` with `chunks`; it is
    /// searchable once the returned promise resolves. Replacements submitted together share a
    /// commit (see [`writer`]), so a caller that does not wait for each one in turn (a pipeline
    /// of documents) pays for a commit per burst, not per document.
    pub fn submit_replace(
        &self,
        document: DocumentId,
        source: SourceId,
        chunks: Vec<IndexedChunk>,
    ) -> Committed {
        self.writer.submit(Change::Replace {
            document,
            source,
            chunks,
        })
    }

    /// Says a change to the index is on its way (a document being processed) until the returned
    /// value is dropped: meanwhile a commit waits for the spacing to end rather than starting at
    /// the first pause in the stream of changes, so a stream shares fewer, larger commits.
    pub fn expect_change(&self) -> Expected {
        self.writer.expect()
    }

    /// Queues the removal of every chunk of `document`; done once the promise resolves.
    pub fn submit_delete(&self, document: DocumentId) -> Committed {
        self.writer.submit(Change::Delete(document))
    }

    /// Commits made since the index was opened (each covers one or more changes).
    pub fn commits(&self) -> u64 {
        self.writer.commits()
    }

    /// The documents that have chunks in the index, in no particular order: what a sweep for
    /// entries whose documents are gone walks.
    pub fn document_ids(&self) -> Result<Vec<DocumentId>, SearchError> {
        let searcher = self.reader.searcher();
        let mut names = std::collections::BTreeSet::new();
        for segment in searcher.segment_readers() {
            let terms = segment.inverted_index(self.fields.document_id)?;
            let mut stream = terms
                .terms()
                .stream()
                .map_err(tantivy::TantivyError::from)?;
            while stream.advance() {
                names.insert(String::from_utf8_lossy(stream.key()).into_owned());
            }
        }
        let mut ids = Vec::new();
        // The term dictionary still lists deleted chunks until segments merge: keep only
        // documents with a live chunk.
        for name in names {
            let Ok(id) = name.parse::<DocumentId>() else {
                continue;
            };
            let term = Term::from_field_text(self.fields.document_id, &name);
            let query = TermQuery::new(term, IndexRecordOption::Basic);
            if searcher.search(&query, &tantivy::collector::Count)? > 0 {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    /// Number of chunks in the index.
    pub fn chunk_count(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// The `limit` best chunks for `query` among the sources in `scope`, best first.
    pub fn search(
        &self,
        query: &str,
        scope: &SourceScope,
        limit: usize,
    ) -> Result<Vec<KeywordHit>, SearchError> {
        self.search_within(query, scope, None, limit)
    }

    /// [`KeywordIndex::search`] restricted to the chunks of `documents` when given: the
    /// restriction applies to every chunk the query matches (see `keyword/within.rs`), so the
    /// top `limit` is taken among those chunks only, at a cost that does not grow with the set.
    pub fn search_within(
        &self,
        query: &str,
        scope: &SourceScope,
        documents: Option<&std::collections::HashSet<DocumentId>>,
        limit: usize,
    ) -> Result<Vec<KeywordHit>, SearchError> {
        if limit == 0
            || scope.source_ids().is_some_and(|ids| ids.is_empty())
            || documents.is_some_and(|d| d.is_empty())
        {
            return Ok(Vec::new());
        }
        let Some(query) = self.scoped_query(query, scope) else {
            return Ok(Vec::new());
        };
        let searcher = self.reader.searcher();
        let top = match documents {
            None => searcher.search(&query, &TopDocs::with_limit(limit))?,
            Some(documents) => {
                searcher.search(&query, &within::WithinDocuments::new(limit, documents))?
            }
        };
        top.into_iter()
            .map(|(score, address)| {
                let doc: TantivyDocument = searcher.doc(address)?;
                read_hit(self.fields, &doc, score)
            })
            .collect()
    }
}

/// A stored chunk as a hit, its fields found through `f`.
fn read_hit(f: Fields, doc: &TantivyDocument, score: f32) -> Result<KeywordHit, SearchError> {
    let text = |field: Field, name: &str| {
        doc.get_first(field)
            .and_then(|v| v.as_str())
            .map(str::to_owned)
            .ok_or_else(|| SearchError::Corrupt(format!("missing {name}")))
    };
    let number = |field: Field, name: &str| {
        doc.get_first(field)
            .and_then(|v| v.as_u64())
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| SearchError::Corrupt(format!("missing {name}")))
    };
    let parse_id = |raw: String| {
        raw.parse::<uuid::Uuid>()
            .map_err(|_| SearchError::Corrupt(format!("bad id {raw:?}")))
    };
    Ok(KeywordHit {
        document_id: DocumentId(parse_id(text(f.document_id, "document_id")?)?),
        source_id: SourceId(parse_id(text(f.source_id, "source_id")?)?),
        ordinal: number(f.ordinal, "ordinal")?,
        page: number(f.page, "page")?,
        section: text(f.section, "section")?,
        content: text(f.content, "content")?,
        score,
    })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    /// The tests change the index a document at a time and search at once after each change.
    impl KeywordIndex {
        pub(super) fn replace_document(
            &self,
            document: DocumentId,
            source: SourceId,
            chunks: &[IndexedChunk],
        ) -> Result<(), SearchError> {
            self.submit_replace(document, source, chunks.to_vec())
                .wait_blocking()
        }

        pub(super) fn delete_document(&self, document: DocumentId) -> Result<(), SearchError> {
            self.submit_delete(document).wait_blocking()
        }
    }

    /// A new index in a temporary directory, and ids for one document of one source.
    pub(super) fn empty_index() -> (tempfile::TempDir, KeywordIndex, DocumentId, SourceId) {
        let dir = tempfile::tempdir().unwrap();
        let index = KeywordIndex::open(dir.path()).unwrap();
        (dir, index, DocumentId::new(), SourceId::new())
    }

    pub(super) fn chunk(ordinal: u32, page: u32, section: &str, content: &str) -> IndexedChunk {
        IndexedChunk {
            title: String::new(),
            ordinal,
            page,
            section: section.into(),
            content: content.into(),
        }
    }

    pub(super) fn fixture() -> (
        tempfile::TempDir,
        KeywordIndex,
        [SourceId; 2],
        [DocumentId; 2],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let index = KeywordIndex::open(dir.path()).unwrap();
        let sources = [SourceId::new(), SourceId::new()];
        let docs = [DocumentId::new(), DocumentId::new()];
        index
            .replace_document(
                docs[0],
                sources[0],
                &[
                    chunk(
                        0,
                        1,
                        "Pumps",
                        "The centrifugal pump must be primed before starting.",
                    ),
                    chunk(
                        1,
                        2,
                        "Valves",
                        "Close the isolation valve during maintenance.",
                    ),
                ],
            )
            .unwrap();
        index
            .replace_document(
                docs[1],
                sources[1],
                &[chunk(
                    0,
                    1,
                    "",
                    "Pumping stations need backup power; pumps fail without it.",
                )],
            )
            .unwrap();
        (dir, index, sources, docs)
    }

    #[test]
    fn finds_stemmed_terms_and_ranks_by_bm25() {
        let (_dir, index, _sources, _docs) = fixture();
        let hits = index.search("pumps", &SourceScope::All, 10).unwrap();
        assert_eq!(hits.len(), 2);
        assert!(hits[0].score >= hits[1].score);
        assert!(
            hits.iter()
                .all(|h| h.content.to_lowercase().contains("pump"))
        );
        let valve = index.search("valves", &SourceScope::All, 10).unwrap();
        assert_eq!(valve.len(), 1);
        assert_eq!((valve[0].page, valve[0].section.as_str()), (2, "Valves"));
    }

    #[test]
    fn titles_are_searched_but_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let index = KeywordIndex::open(dir.path()).unwrap();
        let (adobe, other) = (DocumentId::new(), DocumentId::new());
        let titled = |title: &str, section: &str| IndexedChunk {
            title: title.into(),
            ..chunk(
                0,
                7,
                section,
                "Net cash provided by operating activities 1,469,502",
            )
        };
        let source = SourceId::new();
        index
            .replace_document(adobe, source, &[titled("ADOBE 2015 10K", "")])
            .unwrap();
        index
            .replace_document(other, source, &[titled("", "Liquidity")])
            .unwrap();
        let hits = index
            .search("Adobe operating cash", &SourceScope::All, 10)
            .unwrap();
        assert_eq!(hits.len(), 2);
        // Same passage: the title decides.
        assert_eq!(hits[0].document_id, adobe);
        assert!(hits[0].score > hits[1].score);
        assert_eq!((hits[0].section.as_str(), hits[0].page), ("", 7));
        assert_eq!(hits[1].section, "Liquidity");
        let by_title = index.search("adobe", &SourceScope::All, 10).unwrap();
        assert_eq!(by_title.len(), 1);
        assert!(!by_title[0].content.contains("ADOBE"));
    }

    #[test]
    fn deletion_is_visible_at_once_and_survives_reopen() {
        let (dir, index, _sources, docs) = fixture();
        index.delete_document(docs[0]).unwrap();
        assert!(
            index
                .search("valve", &SourceScope::All, 10)
                .unwrap()
                .is_empty()
        );
        drop(index);
        let reopened = KeywordIndex::open(dir.path()).unwrap();
        assert!(
            reopened
                .search("valve", &SourceScope::All, 10)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            reopened
                .search("pump", &SourceScope::All, 10)
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn replacing_a_document_does_not_duplicate_it() {
        let (_dir, index, sources, docs) = fixture();
        index
            .replace_document(docs[1], sources[1], &[chunk(0, 1, "", "pumps again")])
            .unwrap();
        let hits = index
            .search("pump", &SourceScope::only([sources[1]]), 10)
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].content, "pumps again");
    }

    /// A burst of changes submitted without waiting shares commits, and each is searchable
    /// when its promise resolves, in the order submitted (a delete after a replace wins).
    #[test]
    fn changes_submitted_together_share_a_commit() {
        let dir = tempfile::tempdir().unwrap();
        let index = KeywordIndex::open(dir.path()).unwrap();
        let source = SourceId::new();
        let docs: Vec<DocumentId> = (0..200).map(|_| DocumentId::new()).collect();
        let before = index.commits();
        let promises: Vec<Committed> = docs
            .iter()
            .enumerate()
            .map(|(n, &doc)| {
                let text = format!("turbine blade number{n}");
                index.submit_replace(doc, source, vec![chunk(0, 1, "", &text)])
            })
            .collect();
        let deleted = index.submit_delete(docs[7]);
        for promise in promises {
            promise.wait_blocking().unwrap();
        }
        deleted.wait_blocking().unwrap();
        let commits = index.commits() - before;
        assert!(
            (1..=20).contains(&commits),
            "{commits} commits for 201 changes"
        );
        assert_eq!(index.chunk_count(), 199);
        let hits = index.search("number42", &SourceScope::All, 10).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].document_id, docs[42]);
        assert!(
            index
                .search("number7", &SourceScope::All, 10)
                .unwrap()
                .is_empty()
        );
    }

    /// Closing the index commits what is still waiting and releases its lock, so the next
    /// open in the same process finds the changes.
    #[test]
    fn closing_commits_what_waits_and_releases_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let source = SourceId::new();
        let doc = DocumentId::new();
        {
            let index = KeywordIndex::open(dir.path()).unwrap();
            let _ = index.submit_replace(doc, source, vec![chunk(0, 1, "", "late arrival")]);
        }
        let index = KeywordIndex::open(dir.path()).unwrap();
        let hits = index.search("arrival", &SourceScope::All, 10).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].document_id, doc);
    }

    fn spaced(between: Duration, linger: Duration) -> writer::Spacing {
        writer::Spacing { between, linger }
    }

    /// An index with commits spaced `between` (lingering `linger`), one change already
    /// committed so the next commit is spaced from it, and the source it used.
    fn index_after_a_commit(
        between: Duration,
        linger: Duration,
    ) -> (tempfile::TempDir, KeywordIndex, SourceId) {
        let dir = tempfile::tempdir().unwrap();
        let index = KeywordIndex::open_spaced(dir.path(), spaced(between, linger)).unwrap();
        let source = SourceId::new();
        index
            .submit_replace(DocumentId::new(), source, vec![chunk(0, 1, "", "first")])
            .wait_blocking()
            .unwrap();
        (dir, index, source)
    }

    /// A change that arrives within the spacing of the last commit waits while others keep
    /// coming, and shares its commit with them.
    #[test]
    fn changes_within_the_spacing_share_the_next_commit() {
        let dir = tempfile::tempdir().unwrap();
        let spacing = spaced(Duration::from_secs(2), Duration::from_secs(1));
        let index = KeywordIndex::open_spaced(dir.path(), spacing).unwrap();
        let source = SourceId::new();
        let before = index.commits();
        let first = index.submit_replace(DocumentId::new(), source, vec![chunk(0, 1, "", "one")]);
        first.wait_blocking().unwrap();
        let second = index.submit_replace(DocumentId::new(), source, vec![chunk(0, 1, "", "two")]);
        std::thread::sleep(Duration::from_millis(100));
        let third = index.submit_replace(DocumentId::new(), source, vec![chunk(0, 1, "", "three")]);
        second.wait_blocking().unwrap();
        third.wait_blocking().unwrap();
        assert_eq!(
            index.commits() - before,
            2,
            "the second and third share a commit"
        );
        assert_eq!(index.chunk_count(), 3);
    }

    /// The spacing holds back neither a change that finds the index idle, nor one after which
    /// no other comes within the linger, nor the closing of the index: what waits is committed.
    #[test]
    fn the_spacing_holds_back_neither_an_idle_or_lone_change_nor_closing() {
        let dir = tempfile::tempdir().unwrap();
        let source = SourceId::new();
        let late = DocumentId::new();
        let started = Instant::now();
        {
            let spacing = spaced(Duration::from_secs(60), Duration::from_millis(100));
            let index = KeywordIndex::open_spaced(dir.path(), spacing).unwrap();
            for word in ["early", "lone"] {
                index
                    .submit_replace(DocumentId::new(), source, vec![chunk(0, 1, "", word)])
                    .wait_blocking()
                    .unwrap();
            }
            assert_eq!(index.chunk_count(), 2);
        }
        {
            let spacing = spaced(Duration::from_secs(60), Duration::from_secs(60));
            let index = KeywordIndex::open_spaced(dir.path(), spacing).unwrap();
            index
                .submit_replace(DocumentId::new(), source, vec![chunk(0, 1, "", "first")])
                .wait_blocking()
                .unwrap();
            let _ = index.submit_replace(late, source, vec![chunk(0, 1, "", "late arrival")]);
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "waited {:?}",
            started.elapsed()
        );
        let index = KeywordIndex::open(dir.path()).unwrap();
        let hits = index.search("arrival", &SourceScope::All, 10).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].document_id, late);
        assert_eq!(index.chunk_count(), 4);
    }

    /// While a change is expected, a pause in the stream longer than the linger does not start
    /// a commit: the changes on either side of it share the commit at the end of the spacing.
    #[test]
    fn a_commit_waits_across_a_pause_for_an_expected_change() {
        let (_dir, index, source) =
            index_after_a_commit(Duration::from_secs(3), Duration::from_millis(50));
        let coming = index.expect_change();
        let second = index.submit_replace(DocumentId::new(), source, vec![chunk(0, 1, "", "two")]);
        // Six lingers without a change.
        std::thread::sleep(Duration::from_millis(300));
        let third = index.submit_replace(DocumentId::new(), source, vec![chunk(0, 1, "", "three")]);
        drop(coming);
        second.wait_blocking().unwrap();
        third.wait_blocking().unwrap();
        assert_eq!(
            index.commits(),
            2,
            "the second and third share a commit across the pause"
        );
    }

    /// A change that is expected and never comes holds a commit back only until the spacing
    /// ends, and once nothing is expected the linger applies again.
    #[test]
    fn an_expected_change_holds_a_commit_no_longer_than_the_spacing() {
        let dir = tempfile::tempdir().unwrap();
        let spacing = spaced(Duration::from_secs(4), Duration::from_millis(20));
        let index = KeywordIndex::open_spaced(dir.path(), spacing).unwrap();
        let source = SourceId::new();
        let submit = |word: &str| {
            let started = Instant::now();
            index
                .submit_replace(DocumentId::new(), source, vec![chunk(0, 1, "", word)])
                .wait_blocking()
                .unwrap();
            started.elapsed()
        };
        submit("idle");
        let never = index.expect_change();
        let held = submit("held");
        assert!(
            held >= Duration::from_secs(3) && held < Duration::from_secs(30),
            "held {held:?} by a spacing of 4 s"
        );
        drop(never);
        let lone = submit("lone");
        assert!(
            lone < Duration::from_secs(2),
            "nothing expected, yet a lone change waited {lone:?}"
        );
    }

    /// Changes that hold enough chunks are committed without waiting out the spacing, even
    /// while more are expected: a fast stream does not wait behind its own large batches.
    #[test]
    fn enough_chunks_are_committed_before_the_spacing_ends() {
        let (_dir, index, source) =
            index_after_a_commit(Duration::from_secs(60), Duration::from_secs(60));
        let _more = index.expect_change();
        let started = Instant::now();
        let half = writer::ENOUGH_CHUNKS / 2;
        let batch: Vec<Committed> = (0..2)
            .map(|_| {
                let chunks = (0..half)
                    .map(|n| chunk(n as u32, 1, "", &format!("bulk{n}")))
                    .collect();
                index.submit_replace(DocumentId::new(), source, chunks)
            })
            .collect();
        for committed in batch {
            committed.wait_blocking().unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{} chunks waited {:?} for a spacing of a minute",
            2 * half,
            started.elapsed()
        );
        assert_eq!(index.chunk_count(), 1 + 2 * half as u64);
    }

    /// An async caller awaits the commit without blocking its runtime.
    #[test]
    fn a_commit_can_be_awaited() {
        let dir = tempfile::tempdir().unwrap();
        let index = KeywordIndex::open(dir.path()).unwrap();
        let doc = DocumentId::new();
        let promise = index.submit_replace(doc, SourceId::new(), vec![chunk(0, 1, "", "awaited")]);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(promise.wait()).unwrap();
        assert_eq!(
            index.search("awaited", &SourceScope::All, 1).unwrap().len(),
            1
        );
    }
}
