//! Whether the index holds entries under one id: what a search asks before it shows a
//! document's previous version (see `quire_app::search`).

use quire_core::DocumentId;
use tantivy::Term;
use tantivy::query::TermQuery;
use tantivy::schema::IndexRecordOption;

use super::KeywordIndex;
use crate::SearchError;

impl KeywordIndex {
    /// Whether a committed chunk is indexed under `document` (a version's index id).
    pub fn contains_document(&self, document: DocumentId) -> Result<bool, SearchError> {
        let term = Term::from_field_text(self.fields.document_id, &document.to_string());
        let query = TermQuery::new(term, IndexRecordOption::Basic);
        Ok(self
            .reader
            .searcher()
            .search(&query, &tantivy::collector::Count)?
            > 0)
    }
}

#[cfg(test)]
mod tests {
    use quire_core::SourceId;

    use super::*;
    use crate::IndexedChunk;

    #[test]
    fn an_index_knows_which_ids_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let index = KeywordIndex::open(dir.path()).unwrap();
        let (held, other) = (DocumentId::new(), DocumentId::new());
        let chunk = IndexedChunk {
            title: "t".into(),
            ordinal: 0,
            page: 1,
            section: String::new(),
            content: "pump".into(),
        };
        index
            .submit_replace(held, SourceId::new(), vec![chunk])
            .wait_blocking()
            .unwrap();
        assert!(index.contains_document(held).unwrap());
        assert!(!index.contains_document(other).unwrap());
        index.submit_delete(held).wait_blocking().unwrap();
        assert!(!index.contains_document(held).unwrap());
    }
}
