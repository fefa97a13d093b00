//! The Tantivy query for a search: the query's analysed terms (with their expansions, see
//! [`expand`]) over body and headings, the names of any financial statement it names as
//! phrases (see [`statement_names`]), and the caller's scope as a filter inside the query.

use quire_core::SourceScope;
use tantivy::Term;
use tantivy::query::{
    BooleanQuery, BoostQuery, ConstScoreQuery, Occur, PhraseQuery, Query, TermQuery,
};
use tantivy::schema::IndexRecordOption;

use super::{ANALYZER, KeywordIndex, analyzer, expand, statement_names};

/// Heading matches count for less than body matches: a heading is shared by many chunks.
const SECTION_BOOST: f32 = 0.5;

impl KeywordIndex {
    /// The query for `query` among the sources in `scope`: the scope decides which chunks may
    /// match, never how they rank, so the top-k is taken among visible chunks only. `None` when
    /// the query has no searchable term. (A restriction to documents is applied as the hits are
    /// collected, see [`super::within`].)
    pub(super) fn scoped_query(&self, query: &str, scope: &SourceScope) -> Option<Box<dyn Query>> {
        let text_query = self.text_query(query)?;
        let query: Box<dyn Query> = match scope.source_ids() {
            None => text_query,
            Some(ids) => {
                let sources: Vec<(Occur, Box<dyn Query>)> = ids
                    .iter()
                    .map(|id| {
                        let term = Term::from_field_text(self.fields.source_id, &id.to_string());
                        let q: Box<dyn Query> =
                            Box::new(TermQuery::new(term, IndexRecordOption::Basic));
                        (Occur::Should, q)
                    })
                    .collect();
                // A zero constant score: the filter decides membership, never ranking.
                let filter = ConstScoreQuery::new(Box::new(BooleanQuery::new(sources)), 0.0);
                Box::new(BooleanQuery::new(vec![
                    (Occur::Must, text_query),
                    (Occur::Must, Box::new(filter)),
                ]))
            }
        };
        Some(query)
    }

    /// An OR of the query's analysed terms over body and headings, or `None` when the query has
    /// no searchable term (only punctuation, say).
    fn text_query(&self, query: &str) -> Option<Box<dyn Query>> {
        let mut analyzer = self
            .index
            .tokenizers()
            .get(ANALYZER)
            .unwrap_or_else(analyzer);
        let tokens = expand::query_terms(&mut analyzer, query);
        if tokens.is_empty() {
            return None;
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::with_capacity(tokens.len() * 2);
        for token in &tokens {
            let body = Term::from_field_text(self.fields.content, token);
            clauses.push((
                Occur::Should,
                Box::new(TermQuery::new(body, IndexRecordOption::WithFreqs)),
            ));
            let heading = Term::from_field_text(self.fields.section, token);
            clauses.push((
                Occur::Should,
                Box::new(BoostQuery::new(
                    Box::new(TermQuery::new(heading, IndexRecordOption::WithFreqs)),
                    SECTION_BOOST,
                )),
            ));
        }
        for phrase in statement_names::statement_phrases(&tokens, &self.statements) {
            if phrase.len() < 2 {
                continue;
            }
            for (field, boost) in [
                (self.fields.content, 1.0),
                (self.fields.section, SECTION_BOOST),
            ] {
                let terms = phrase
                    .iter()
                    .map(|word| Term::from_field_text(field, word))
                    .collect();
                clauses.push((
                    Occur::Should,
                    Box::new(BoostQuery::new(Box::new(PhraseQuery::new(terms)), boost)),
                ));
            }
        }
        Some(Box::new(BooleanQuery::new(clauses)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use quire_core::{DocumentId, SourceScope};

    use crate::keyword::tests::{chunk, empty_index, fixture};

    #[test]
    fn a_statement_is_found_under_any_of_its_names() {
        let (_dir, index, doc, source) = empty_index();
        index
            .replace_document(
                doc,
                source,
                &[
                    chunk(
                        0,
                        51,
                        "Consolidated Statements of Financial Position",
                        "Total assets 117,359 112,362",
                    ),
                    chunk(
                        1,
                        52,
                        "",
                        "A sheet of figures: the balance of the loan and its position.",
                    ),
                ],
            )
            .unwrap();
        let hits = index
            .search("total assets on the balance sheet", &SourceScope::All, 10)
            .unwrap();
        assert_eq!(hits[0].page, 51, "{hits:?}");
        // Without the statement's name the loose words win.
        let hits = index
            .search("balance position sheet", &SourceScope::All, 10)
            .unwrap();
        assert_eq!(hits[0].page, 52, "{hits:?}");
    }

    #[test]
    fn scope_is_applied_before_the_top_k() {
        let (_dir, index, sources, docs) = fixture();
        let hits = index
            .search("pump", &SourceScope::only([sources[1]]), 1)
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].document_id, docs[1]);
        assert!(
            index
                .search("pump", &SourceScope::only([]), 10)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_document_restriction_is_applied_before_the_top_k_and_keeps_the_ranking() {
        let (_dir, index, _sources, docs) = fixture();
        let everything = index.search("pump", &SourceScope::All, 10).unwrap();
        assert!(everything.len() >= 2, "{everything:?}");
        // Restricted to the document that ranks second, a limit of one still finds it.
        let second = everything[1].document_id;
        let only = HashSet::from([second]);
        let hits = index
            .search_within("pump", &SourceScope::All, Some(&only), 1)
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].document_id, second);
        assert!(
            (hits[0].score - everything[1].score).abs() < 1e-6,
            "same score"
        );
        // Both documents: the unrestricted ranking; none: nothing.
        let both = HashSet::from(docs);
        let hits = index
            .search_within("pump", &SourceScope::All, Some(&both), 10)
            .unwrap();
        assert_eq!(
            hits.iter()
                .map(|h| (h.document_id, h.ordinal))
                .collect::<Vec<_>>(),
            everything
                .iter()
                .map(|h| (h.document_id, h.ordinal))
                .collect::<Vec<_>>()
        );
        let none = HashSet::<DocumentId>::new();
        assert!(
            index
                .search_within("pump", &SourceScope::All, Some(&none), 10)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn punctuation_only_queries_find_nothing() {
        let (_dir, index, _sources, _docs) = fixture();
        assert!(
            index
                .search("?!", &SourceScope::All, 10)
                .unwrap()
                .is_empty()
        );
    }
}
