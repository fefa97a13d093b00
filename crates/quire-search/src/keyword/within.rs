//! A search restricted to the chunks of a set of documents: the top `limit` among those chunks,
//! found at the cost of the query's own postings, whatever the size of the set.
//!
//! Each chunk carries its document's id in two fast columns (the UUID's halves), and the
//! collector asks, for each chunk the query's scorer offers, whether its document is in the
//! caller's set. The scorer is run with pruning (Tantivy's block-max WAND for a union of
//! terms), and only chunks of the set raise the threshold, so the result is exactly the top
//! `limit` among the set's chunks. Resolving the set to chunks instead (a term per document,
//! as a `TermSetQuery` did) cost time in proportion to the set for every query. Figures:
//! `docs/performance.md`, "Filters without the filter trap".

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashSet};

use quire_core::DocumentId;
use tantivy::collector::{Collector, TopDocs};
use tantivy::query::Weight;
use tantivy::{DocAddress, DocId, Score, SegmentReader};

use super::{DOCUMENT_HIGH, DOCUMENT_LOW};

/// Collects the best `limit` chunks, by score, of the documents in `documents`.
pub(super) struct WithinDocuments<'a> {
    limit: usize,
    /// Merges the segments' lists as an unrestricted search does (ties by address).
    top: TopDocs,
    documents: &'a HashSet<DocumentId>,
}

impl<'a> WithinDocuments<'a> {
    pub(super) fn new(limit: usize, documents: &'a HashSet<DocumentId>) -> Self {
        Self {
            limit,
            top: TopDocs::with_limit(limit.max(1)),
            documents,
        }
    }
}

impl Collector for WithinDocuments<'_> {
    type Fruit = Vec<(Score, DocAddress)>;
    type Child = <TopDocs as Collector>::Child;

    fn for_segment(&self, segment: u32, reader: &SegmentReader) -> tantivy::Result<Self::Child> {
        // Only reached through the default `collect_segment`, which is replaced below.
        self.top.for_segment(segment, reader)
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, fruits: Vec<Self::Fruit>) -> tantivy::Result<Self::Fruit> {
        self.top.merge_fruits(fruits)
    }

    fn collect_segment(
        &self,
        weight: &dyn Weight,
        segment: u32,
        reader: &SegmentReader,
    ) -> tantivy::Result<Self::Fruit> {
        let fast = reader.fast_fields();
        let high = fast.column_first_or_default::<u64>(DOCUMENT_HIGH)?;
        let low = fast.column_first_or_default::<u64>(DOCUMENT_LOW)?;
        let alive = reader.alive_bitset();
        let mut best = Best::new(self.limit);
        weight.for_each_pruning(Score::MIN, reader, &mut |doc, score| {
            let member = alive.is_none_or(|alive| alive.is_alive(doc)) && {
                let id = uuid::Uuid::from_u64_pair(high.get_val(doc), low.get_val(doc));
                self.documents.contains(&DocumentId(id))
            };
            if member {
                best.push(score, doc);
            }
            best.threshold()
        })?;
        Ok(best
            .into_sorted()
            .into_iter()
            .map(|(score, doc_id)| {
                (
                    score,
                    DocAddress {
                        segment_ord: segment,
                        doc_id,
                    },
                )
            })
            .collect())
    }
}

/// A chunk in a segment's running top list: ordered so the worst (lowest score, then highest
/// address, as Tantivy's `TopDocs` breaks ties) is the greatest, which a min-heap keeps on top.
#[derive(Debug, Clone, Copy)]
struct Ranked {
    score: Score,
    doc: DocId,
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.doc.cmp(&self.doc))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

/// The best `limit` chunks of a segment seen so far. Tantivy's `TopNComputer` keeps its
/// threshold to itself, and pruning needs it: once the list is full, only a better score counts.
struct Best {
    limit: usize,
    heap: BinaryHeap<Reverse<Ranked>>,
}

impl Best {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            heap: BinaryHeap::with_capacity(limit + 1),
        }
    }

    fn push(&mut self, score: Score, doc: DocId) {
        let ranked = Ranked { score, doc };
        if self.heap.len() < self.limit {
            self.heap.push(Reverse(ranked));
        } else if let Some(mut worst) = self.heap.peek_mut()
            && ranked > worst.0
        {
            *worst = Reverse(ranked);
        }
    }

    /// The score a chunk must beat to enter the list.
    fn threshold(&self) -> Score {
        if self.heap.len() < self.limit {
            Score::MIN
        } else {
            self.heap.peek().map_or(Score::MIN, |worst| worst.0.score)
        }
    }

    /// Best first.
    fn into_sorted(self) -> Vec<(Score, DocId)> {
        let mut ranked: Vec<Ranked> = self.heap.into_iter().map(|r| r.0).collect();
        ranked.sort_by(|a, b| b.cmp(a));
        ranked.into_iter().map(|r| (r.score, r.doc)).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use quire_core::{SourceId, SourceScope};

    use super::*;
    use crate::keyword::tests::{chunk, empty_index};
    use crate::keyword::{Committed, KeywordIndex};

    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Chunks of a few words from a small vocabulary, the low ones common, so that postings
    /// span several blocks (what block-max WAND skips) and lengths vary.
    fn random_chunks(state: &mut u64, count: u64) -> Vec<crate::keyword::IndexedChunk> {
        (0..count)
            .map(|ordinal| {
                let words = 3 + splitmix(state) % 20;
                let text: Vec<String> = (0..words)
                    .map(|_| {
                        let draw = splitmix(state) % 1000;
                        format!("w{}", draw * draw / 40_000)
                    })
                    .collect();
                chunk(ordinal as u32, 1, "", &text.join(" "))
            })
            .collect()
    }

    /// The filtered search returns what ranking every matching chunk and keeping those of the
    /// set returns: over several segments, with documents replaced and deleted (their old
    /// chunks are still in the postings), for small and large sets and small and large limits.
    #[test]
    fn a_restricted_search_equals_a_brute_force_ranking_among_the_set() {
        // Each burst of changes below is committed together once no other comes within the
        // linger, so there are at most seven segments, fewer than Tantivy merges at a time:
        // they stay apart.
        let dir = tempfile::tempdir().unwrap();
        let spacing = crate::keyword::writer::Spacing {
            between: Duration::from_secs(60),
            linger: Duration::from_millis(200),
        };
        let index = KeywordIndex::open_spaced(dir.path(), spacing).unwrap();
        let source = SourceId::new();
        let mut state = 7;
        let documents: Vec<DocumentId> = (0..120).map(|_| DocumentId::new()).collect();
        let burst = |changes: Vec<Committed>| {
            for committed in changes {
                committed.wait_blocking().unwrap();
            }
        };
        for batch in documents.chunks(30) {
            burst(
                batch
                    .iter()
                    .map(|&document| {
                        let count = 1 + splitmix(&mut state) % 8;
                        index.submit_replace(document, source, random_chunks(&mut state, count))
                    })
                    .collect(),
            );
        }
        // Replaced documents keep deleted chunks in older segments; deleted ones only those.
        burst(
            documents
                .iter()
                .step_by(7)
                .map(|&document| {
                    let count = 1 + splitmix(&mut state) % 8;
                    index.submit_replace(document, source, random_chunks(&mut state, count))
                })
                .collect(),
        );
        burst(
            documents
                .iter()
                .skip(3)
                .step_by(11)
                .map(|&document| index.submit_delete(document))
                .collect(),
        );
        let searcher = index.reader.searcher();
        let segments = searcher.segment_readers();
        assert!(segments.len() > 1, "{} segments", segments.len());
        assert!(segments.iter().any(SegmentReader::has_deletes));

        let mut checked = 0;
        for round in 0..40 {
            let keep = [2, 10, 60, 120][round % 4];
            let set: HashSet<DocumentId> = documents
                .iter()
                .filter(|_| splitmix(&mut state) % 120 < keep)
                .copied()
                .collect();
            let query = format!(
                "w{} w{}",
                splitmix(&mut state) % 25,
                splitmix(&mut state) % 5
            );
            let limit = [1, 3, 10, 50][round % 4];
            let every = index.search(&query, &SourceScope::All, 100_000).unwrap();
            let expected: Vec<_> = every
                .iter()
                .filter(|hit| set.contains(&hit.document_id))
                .take(limit)
                .collect();
            let found = index
                .search_within(&query, &SourceScope::All, Some(&set), limit)
                .unwrap();
            let key = |hit: &crate::keyword::KeywordHit| {
                (hit.document_id, hit.ordinal, hit.score.to_bits())
            };
            assert_eq!(
                found.iter().map(key).collect::<Vec<_>>(),
                expected.iter().map(|hit| key(hit)).collect::<Vec<_>>(),
                "{query:?} among {} documents, limit {limit}",
                set.len()
            );
            checked += found.len();
        }
        assert!(checked > 100, "only {checked} hits compared");
    }

    /// A scope and a set together: only chunks that are in both.
    #[test]
    fn a_restriction_and_a_scope_both_apply() {
        let (_dir, index, document, source) = empty_index();
        let (other_document, other_source) = (DocumentId::new(), SourceId::new());
        index
            .replace_document(document, source, &[chunk(0, 1, "", "pump")])
            .unwrap();
        index
            .replace_document(other_document, other_source, &[chunk(0, 1, "", "pump")])
            .unwrap();
        let both = HashSet::from([document, other_document]);
        let only_other = SourceScope::only([other_source]);
        let hits =
            KeywordIndex::search_within(&index, "pump", &only_other, Some(&both), 10).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].document_id, other_document);
        let first = HashSet::from([document]);
        assert!(
            index
                .search_within("pump", &only_other, Some(&first), 10)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn the_running_list_keeps_the_best_and_breaks_ties_by_address() {
        let mut best = Best::new(3);
        assert_eq!(best.threshold(), Score::MIN);
        for (score, doc) in [(1.0, 0), (5.0, 1), (3.0, 2), (3.0, 3), (4.0, 4), (0.5, 5)] {
            best.push(score, doc);
        }
        assert_eq!(best.threshold(), 3.0);
        assert_eq!(best.into_sorted(), vec![(5.0, 1), (4.0, 4), (3.0, 2)]);
    }
}
