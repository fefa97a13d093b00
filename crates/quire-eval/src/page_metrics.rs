//! Page-level retrieval metrics for question sets labelled with the pages that answer them
//! (FinanceBench's evidence pages): did the results the search returned, in their order,
//! land on an evidence page, and on the right document.

use std::collections::HashSet;

/// A page of a document: the document's file name and the page number, from 1.
pub type Page = (String, u32);

/// What one question's search returned, in the order it returned it: the document and page
/// of each result.
pub type Returned = [Page];

/// Page recall@k: the share of the question's evidence pages that are the page of one of the
/// first `k` results. A question with one evidence page scores 1 or 0; with several, the share
/// found. No evidence scores 0 (the caller skips such questions).
pub fn page_recall_at(returned: &Returned, evidence: &HashSet<Page>, k: usize) -> f64 {
    if evidence.is_empty() {
        return 0.0;
    }
    let found: HashSet<&Page> = returned
        .iter()
        .take(k)
        .filter(|page| evidence.contains(*page))
        .collect();
    found.len() as f64 / evidence.len() as f64
}

/// Document recall@k: 1 when one of the first `k` results comes from a document that holds
/// evidence, 0 otherwise (FinanceBench's questions each have one evidence document).
pub fn document_hit_at(returned: &Returned, evidence: &HashSet<Page>, k: usize) -> f64 {
    let documents: HashSet<&str> = evidence.iter().map(|(d, _)| d.as_str()).collect();
    let hit = returned
        .iter()
        .take(k)
        .any(|(document, _)| documents.contains(document.as_str()));
    if hit { 1.0 } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages(list: &[(&str, u32)]) -> Vec<Page> {
        list.iter().map(|(d, p)| ((*d).to_owned(), *p)).collect()
    }

    fn evidence(list: &[(&str, u32)]) -> HashSet<Page> {
        pages(list).into_iter().collect()
    }

    #[test]
    fn page_recall_counts_evidence_pages_in_the_first_k_results() {
        let returned = pages(&[("a.pdf", 3), ("b.pdf", 60), ("a.pdf", 60), ("b.pdf", 60)]);
        let one = evidence(&[("b.pdf", 60)]);
        assert_eq!(page_recall_at(&returned, &one, 1), 0.0);
        assert_eq!(page_recall_at(&returned, &one, 2), 1.0);
        // The same page twice is still one page found.
        assert_eq!(page_recall_at(&returned, &one, 10), 1.0);
        // The right page number in another document is no hit.
        let other = evidence(&[("c.pdf", 60)]);
        assert_eq!(page_recall_at(&returned, &other, 10), 0.0);
        let two = evidence(&[("b.pdf", 60), ("b.pdf", 61)]);
        assert_eq!(page_recall_at(&returned, &two, 10), 0.5);
        assert_eq!(page_recall_at(&returned, &HashSet::new(), 10), 0.0);
        assert_eq!(page_recall_at(&[], &one, 10), 0.0);
    }

    #[test]
    fn document_hit_needs_any_page_of_an_evidence_document() {
        let returned = pages(&[("a.pdf", 3), ("b.pdf", 7)]);
        let wanted = evidence(&[("b.pdf", 60)]);
        assert_eq!(document_hit_at(&returned, &wanted, 1), 0.0);
        assert_eq!(document_hit_at(&returned, &wanted, 2), 1.0);
        assert_eq!(
            document_hit_at(&returned, &evidence(&[("z.pdf", 1)]), 10),
            0.0
        );
    }
}
