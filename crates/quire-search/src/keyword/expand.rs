//! What a query's words also stand for in the documents searched: a term the query is
//! analysed into brings along the terms filings print for the same thing. Named statements,
//! which expand to phrases rather than terms, are in [`statement_names`](super::statement_names).

use tantivy::tokenizer::TextAnalyzer;

/// The terms `analyzer` makes of `query`, each followed by what it also stands for.
pub(super) fn query_terms(analyzer: &mut TextAnalyzer, query: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    analyzer.token_stream(query).process(&mut |token| {
        tokens.push(token.text.clone());
        // Analysts write "FY2018" where filings write "fiscal 2018" or a column "2018".
        if let Some(year) = fiscal_year(&token.text) {
            tokens.push(year);
        }
    });
    tokens
}

/// The year a fiscal-year token names: `fy2018` → `2018`, `fy18` → `2018`; `None` for any
/// other token.
fn fiscal_year(token: &str) -> Option<String> {
    let digits = token.strip_prefix("fy")?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    match digits.len() {
        4 => Some(digits.to_owned()),
        2 => Some(format!("20{digits}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use quire_core::SourceScope;

    use super::*;
    use crate::keyword::tests::{chunk, empty_index};

    #[test]
    fn fiscal_years_match_the_years_filings_print() {
        assert_eq!(fiscal_year("fy2018").as_deref(), Some("2018"));
        assert_eq!(fiscal_year("fy18").as_deref(), Some("2018"));
        assert_eq!(fiscal_year("fy"), None);
        assert_eq!(fiscal_year("fy201"), None);
        assert_eq!(fiscal_year("fyi"), None);
        assert_eq!(fiscal_year("2018"), None);
        let (_dir, index, doc, source) = empty_index();
        index
            .replace_document(
                doc,
                source,
                &[chunk(
                    0,
                    3,
                    "",
                    "Revenue for fiscal 2018 grew by nine percent.",
                )],
            )
            .unwrap();
        for query in ["FY2018 revenue growth", "FY18", "fy2018"] {
            let hits = index.search(query, &SourceScope::All, 10).unwrap();
            assert_eq!(hits.len(), 1, "{query}");
        }
        assert!(
            index
                .search("FY2019", &SourceScope::All, 10)
                .unwrap()
                .is_empty()
        );
    }
}
