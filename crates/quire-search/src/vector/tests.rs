use std::fs::OpenOptions;

use super::*;

/// Deterministic pseudo-random numbers (xorshift) for generated corpora.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn unit_vector(&mut self, dims: usize) -> Vec<f32> {
        let v: Vec<f32> = (0..dims)
            .map(|_| (self.next() % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
        v.into_iter().map(|x| x / norm).collect()
    }
}

const DIMS: usize = 12;

/// Options that send every search through the graph (a small one, single-threaded so it is
/// reproducible), to test that path on corpora small enough for debug builds.
fn graph_options(precision: Precision) -> VectorOptions {
    VectorOptions {
        precision,
        graph: HnswParams {
            m: 4,
            ef_construction: 16,
            ..HnswParams::default()
        },
        ef_search: 16,
        exact_below: 0,
        exact_fraction: 0.0,
        build_threads: 1,
    }
}

/// Adds `documents` documents of one to three chunks, spread over `sources`, and returns them.
fn corpus(
    index: &VectorIndex,
    rng: &mut Rng,
    sources: &[SourceId],
    documents: usize,
) -> Vec<DocumentId> {
    (0..documents)
        .map(|d| {
            let chunks: Vec<(u32, Vec<f32>)> = (0..1 + d % 3)
                .map(|o| (o as u32, rng.unit_vector(DIMS)))
                .collect();
            let document = DocumentId::new();
            index
                .replace_document(document, sources[d % sources.len()], &chunks)
                .unwrap();
            document
        })
        .collect()
}

/// Every live chunk the scope allows, with its score, best first: the reference.
fn brute_force(
    index: &VectorIndex,
    query: &[f32],
    scope: &SourceScope,
) -> Vec<(DocumentId, u32, f32)> {
    let v = index.vectors.read().unwrap();
    let mut scored: Vec<(DocumentId, u32, f32)> = (0..v.rows() as u32)
        .filter(|r| v.alive[*r as usize] && scope.allows(v.source_id(*r)))
        .map(|r| {
            let row = v.rows[r as usize];
            let score = query.iter().zip(v.vector(r)).map(|(a, b)| a * b).sum();
            (row.document, row.ordinal, score)
        })
        .collect();
    scored.sort_by(|a, b| b.2.total_cmp(&a.2));
    scored
}

fn scopes(sources: &[SourceId]) -> [SourceScope; 4] {
    [
        SourceScope::All,
        SourceScope::only([sources[0]]),
        SourceScope::only([sources[1], sources[3]]),
        SourceScope::only([SourceId::new()]),
    ]
}

#[test]
fn search_matches_brute_force_and_never_leaves_the_scope() {
    // The exact scan is in f32 whatever the precision: an int8 copy must not change it.
    for seed in 1..=20u64 {
        let precision = if seed % 2 == 0 {
            Precision::F32
        } else {
            Precision::Int8
        };
        let options = VectorOptions {
            precision,
            ..VectorOptions::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let index = VectorIndex::open_with(dir.path(), "m", DIMS, options).unwrap();
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let sources: Vec<SourceId> = (0..4).map(|_| SourceId::new()).collect();
        corpus(&index, &mut rng, &sources, 30 + (seed as usize % 20));
        for scope in &scopes(&sources) {
            let query = rng.unit_vector(DIMS);
            let limit = 1 + (rng.next() % 15) as usize;
            let hits = index.search(&query, scope, limit).unwrap();
            let expected = brute_force(&index, &query, scope);
            assert_eq!(hits.len(), limit.min(expected.len()));
            for (hit, want) in hits.iter().zip(&expected) {
                assert!(scope.allows(hit.source_id));
                assert!(
                    (hit.score - want.2).abs() < 1e-5,
                    "{} vs {want:?}",
                    hit.score
                );
            }
        }
    }
}

#[test]
fn a_document_restriction_matches_brute_force_at_every_selectivity() {
    // Large and small sets alike: the top hits are the exact best among the documents' rows.
    for seed in 1..=10u64 {
        let dir = tempfile::tempdir().unwrap();
        let index =
            VectorIndex::open_with(dir.path(), "m", DIMS, VectorOptions::default()).unwrap();
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let sources: Vec<SourceId> = (0..4).map(|_| SourceId::new()).collect();
        let documents = corpus(&index, &mut rng, &sources, 60);
        for keep_one_in in [1usize, 2, 10, 60] {
            let chosen: std::collections::HashSet<DocumentId> = documents
                .iter()
                .enumerate()
                .filter(|(i, _)| i % keep_one_in == 0)
                .map(|(_, d)| *d)
                .collect();
            let query = rng.unit_vector(DIMS);
            let hits = index
                .search_within(&query, &SourceScope::All, Some(&chosen), 10)
                .unwrap();
            let expected: Vec<_> = brute_force(&index, &query, &SourceScope::All)
                .into_iter()
                .filter(|(d, _, _)| chosen.contains(d))
                .collect();
            assert_eq!(hits.len(), 10.min(expected.len()), "1 in {keep_one_in}");
            for (hit, want) in hits.iter().zip(&expected) {
                assert!(chosen.contains(&hit.document_id));
                assert!(
                    (hit.score - want.2).abs() < 1e-5,
                    "{} vs {want:?}",
                    hit.score
                );
            }
        }
    }
}

/// The graph path (every search through it, both precisions, with deletions and
/// replacements leaving dead rows in the graph) returns only live rows of the scope, with
/// their true scores, best first, as many as asked for, and nearly always the exact ones.
#[test]
fn graph_search_never_leaves_the_scope_or_returns_deleted_rows() {
    for precision in [Precision::F32, Precision::Int8] {
        let (mut found, mut wanted) = (0usize, 0usize);
        for seed in 1..=12u64 {
            let dir = tempfile::tempdir().unwrap();
            let index =
                VectorIndex::open_with(dir.path(), "m", DIMS, graph_options(precision)).unwrap();
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let sources: Vec<SourceId> = (0..4).map(|_| SourceId::new()).collect();
            let documents = corpus(&index, &mut rng, &sources, 60 + seed as usize * 5);
            for (i, document) in documents.iter().enumerate() {
                match i % 5 {
                    0 => index.delete_document(*document).unwrap(),
                    1 => {
                        let chunks = [(7, rng.unit_vector(DIMS))];
                        let source = sources[i % sources.len()];
                        index.replace_document(*document, source, &chunks).unwrap();
                    }
                    _ => {}
                }
            }
            for scope in &scopes(&sources) {
                let query = rng.unit_vector(DIMS);
                let limit = 1 + (rng.next() % 12) as usize;
                let hits = index.search(&query, scope, limit).unwrap();
                let expected = brute_force(&index, &query, scope);
                assert_eq!(hits.len(), limit.min(expected.len()));
                for pair in hits.windows(2) {
                    assert!(pair[0].score >= pair[1].score);
                }
                for hit in &hits {
                    assert!(scope.allows(hit.source_id), "out of scope: {hit:?}");
                    let live = expected
                        .iter()
                        .find(|(d, o, _)| *d == hit.document_id && *o == hit.ordinal);
                    let (_, _, score) = live.unwrap_or_else(|| panic!("dead row {hit:?}"));
                    assert!((hit.score - score).abs() < 1e-5);
                }
                let graph = index.search_graph(&query, scope, limit, 16).unwrap();
                assert!(graph.iter().all(|h| scope.allows(h.source_id)));
                wanted += hits.len();
                found += expected
                    .iter()
                    .take(limit)
                    .filter(|(d, o, _)| hits.iter().any(|h| h.document_id == *d && h.ordinal == *o))
                    .count();
            }
        }
        let recall = found as f64 / wanted as f64;
        assert!(recall >= 0.9, "{precision:?}: recall {recall}");
    }
}

/// The graph's neighbour lists, as the snapshot would store them.
fn graph_bytes(index: &VectorIndex) -> Vec<u8> {
    let mut bytes = Vec::new();
    let vectors = index.vectors.read().unwrap();
    vectors.graph.write_to(&mut bytes).unwrap();
    bytes
}

fn results(index: &VectorIndex, queries: &[Vec<f32>], scope: &SourceScope) -> Vec<VectorHit> {
    queries
        .iter()
        .flat_map(|q| index.search(q, scope, 7).unwrap())
        .collect()
}

#[test]
fn reopening_restores_the_same_graph_and_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(31);
    let sources: Vec<SourceId> = (0..4).map(|_| SourceId::new()).collect();
    let queries: Vec<Vec<f32>> = (0..10).map(|_| rng.unit_vector(DIMS)).collect();
    let options = graph_options(Precision::Int8);
    let (graph, before) = {
        let index = VectorIndex::open_with(dir.path(), "m", DIMS, options.clone()).unwrap();
        let documents = corpus(&index, &mut rng, &sources, 80);
        index.delete_document(documents[3]).unwrap();
        index.checkpoint().unwrap();
        // Rows after the snapshot are linked again at open, in the same order.
        corpus(&index, &mut rng, &sources, 20);
        let before: Vec<Vec<VectorHit>> = scopes(&sources)
            .iter()
            .map(|s| results(&index, &queries, s))
            .collect();
        (graph_bytes(&index), before)
    };
    let index = VectorIndex::open_with(dir.path(), "m", DIMS, options).unwrap();
    assert_eq!(graph_bytes(&index), graph);
    let after: Vec<Vec<VectorHit>> = scopes(&sources)
        .iter()
        .map(|s| results(&index, &queries, s))
        .collect();
    assert_eq!(after, before);
}

#[test]
fn a_damaged_or_foreign_snapshot_is_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(41);
    let sources: Vec<SourceId> = (0..4).map(|_| SourceId::new()).collect();
    let options = graph_options(Precision::F32);
    {
        let index = VectorIndex::open_with(dir.path(), "m", DIMS, options.clone()).unwrap();
        corpus(&index, &mut rng, &sources, 50);
        index.checkpoint().unwrap();
    }
    let snapshot_path = dir.path().join(snapshot::FILE);
    let mut bytes = std::fs::read(&snapshot_path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&snapshot_path, &bytes).unwrap();
    let check = |index: &VectorIndex, rng: &mut Rng| {
        for scope in &scopes(&sources) {
            let query = rng.unit_vector(DIMS);
            let hits = index.search(&query, scope, 5).unwrap();
            let expected = brute_force(index, &query, scope);
            assert_eq!(hits.len(), 5.min(expected.len()));
            assert!(hits.iter().all(|h| scope.allows(h.source_id)));
        }
    };
    {
        let index = VectorIndex::open_with(dir.path(), "m", DIMS, options.clone()).unwrap();
        assert_eq!(
            index.log.lock().unwrap().snapshot_rows,
            0,
            "the snapshot was used"
        );
        assert_eq!(
            index.vectors.read().unwrap().graph.len(),
            index.stats().rows
        );
        check(&index, &mut rng);
        index.checkpoint().unwrap();
    }
    // Another index's log beside this snapshot: same model, other contents.
    let other = tempfile::tempdir().unwrap();
    {
        let index = VectorIndex::open_with(other.path(), "m", DIMS, options.clone()).unwrap();
        corpus(&index, &mut rng, &sources, 70);
    }
    std::fs::copy(
        other.path().join("vectors.log"),
        dir.path().join("vectors.log"),
    )
    .unwrap();
    let index = VectorIndex::open_with(dir.path(), "m", DIMS, options).unwrap();
    assert_eq!(
        index.log.lock().unwrap().snapshot_rows,
        0,
        "the snapshot was used"
    );
    assert_eq!(
        index.vectors.read().unwrap().graph.len(),
        index.stats().rows
    );
    assert_eq!(
        index.stats().rows,
        (0..70).map(|d| 1 + d % 3).sum::<usize>()
    );
    check(&index, &mut rng);
}

#[test]
fn deletes_and_replacements_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let source = SourceId::new();
    let (kept, deleted, replaced) = (DocumentId::new(), DocumentId::new(), DocumentId::new());
    let mut rng = Rng(7);
    let query = rng.unit_vector(DIMS);
    {
        let index = VectorIndex::open(dir.path(), "m", DIMS).unwrap();
        index
            .replace_document(kept, source, &[(0, rng.unit_vector(DIMS))])
            .unwrap();
        index
            .replace_document(deleted, source, &[(0, query.clone())])
            .unwrap();
        index
            .replace_document(replaced, source, &[(0, query.clone()), (1, query.clone())])
            .unwrap();
        index.delete_document(deleted).unwrap();
        index
            .replace_document(replaced, source, &[(5, rng.unit_vector(DIMS))])
            .unwrap();
        assert!(
            index
                .search(&query, &SourceScope::All, 10)
                .unwrap()
                .iter()
                .all(|h| h.document_id != deleted)
        );
    }
    let before = {
        let index = VectorIndex::open(dir.path(), "m", DIMS).unwrap();
        assert_eq!(index.len(), 2);
        assert!(index.has_document(kept) && !index.has_document(deleted));
        let mut held = index.document_ids();
        held.sort();
        let mut expected = vec![kept, replaced];
        expected.sort();
        assert_eq!(held, expected);
        index.search(&query, &SourceScope::All, 10).unwrap()
    };
    let documents: Vec<(DocumentId, u32)> =
        before.iter().map(|h| (h.document_id, h.ordinal)).collect();
    assert!(documents.contains(&(kept, 0)) && documents.contains(&(replaced, 5)));
    assert_eq!(documents.len(), 2);
}

#[test]
fn a_record_cut_short_by_a_crash_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let source = SourceId::new();
    let mut rng = Rng(11);
    {
        let index = VectorIndex::open(dir.path(), "m", DIMS).unwrap();
        index
            .replace_document(DocumentId::new(), source, &[(0, rng.unit_vector(DIMS))])
            .unwrap();
        index
            .replace_document(DocumentId::new(), source, &[(0, rng.unit_vector(DIMS))])
            .unwrap();
    }
    let log = dir.path().join("vectors.log");
    let full = std::fs::metadata(&log).unwrap().len();
    let file = OpenOptions::new().write(true).open(&log).unwrap();
    file.set_len(full - 10).unwrap();
    let index = VectorIndex::open(dir.path(), "m", DIMS).unwrap();
    assert_eq!(index.len(), 1);
    // The index goes on appending after the intact prefix.
    index
        .replace_document(DocumentId::new(), source, &[(0, rng.unit_vector(DIMS))])
        .unwrap();
    drop(index);
    assert_eq!(VectorIndex::open(dir.path(), "m", DIMS).unwrap().len(), 2);
}

/// A torn record after the snapshot keeps the snapshot; a log cut back past what the
/// snapshot covers (restored from an older copy, say) throws it away.
#[test]
fn a_torn_log_after_a_snapshot_is_handled_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(51);
    let sources: Vec<SourceId> = (0..4).map(|_| SourceId::new()).collect();
    let options = graph_options(Precision::Int8);
    let log = dir.path().join("vectors.log");
    let covered_len = {
        let index = VectorIndex::open_with(dir.path(), "m", DIMS, options.clone()).unwrap();
        corpus(&index, &mut rng, &sources, 40);
        index.checkpoint().unwrap();
        corpus(&index, &mut rng, &sources, 3);
        index.log.lock().unwrap().hash.len() - 6 * (4 + 4 * DIMS as u64) - 3 * 37
    };
    let full = std::fs::metadata(&log).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(full - 5)
        .unwrap();
    let rows_covered = (0..40).map(|d| 1 + d % 3).sum::<usize>();
    {
        let index = VectorIndex::open_with(dir.path(), "m", DIMS, options.clone()).unwrap();
        // Two of the three later documents survive; the graph starts from the snapshot.
        assert_eq!(index.stats().rows, rows_covered + 1 + 2);
        assert_eq!(index.log.lock().unwrap().snapshot_rows, rows_covered);
        assert!(std::fs::metadata(&log).unwrap().len() < full - 5);
    }
    OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(covered_len - 3)
        .unwrap();
    let index = VectorIndex::open_with(dir.path(), "m", DIMS, options).unwrap();
    let rows = index.stats().rows;
    // The last of the 40 documents (number 39, one chunk) is cut off.
    assert_eq!(rows, rows_covered - 1);
    assert_eq!(
        index.log.lock().unwrap().snapshot_rows,
        0,
        "the snapshot was used"
    );
    assert_eq!(index.vectors.read().unwrap().graph.len(), rows);
    let query = rng.unit_vector(DIMS);
    let hits = index.search(&query, &SourceScope::All, 5).unwrap();
    let expected = brute_force(&index, &query, &SourceScope::All);
    assert_eq!(hits.len(), 5);
    assert!((hits[0].score - expected[0].2).abs() < 1e-5);
}

#[test]
fn a_batch_of_documents_is_one_write_and_searchable_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(61);
    let source = SourceId::new();
    let batch: Vec<DocumentVectors> = (0..300)
        .map(|_| DocumentVectors {
            document: DocumentId::new(),
            source,
            chunks: vec![(0, rng.unit_vector(DIMS)), (1, rng.unit_vector(DIMS))],
        })
        .collect();
    let options = VectorOptions {
        build_threads: 1,
        ..graph_options(Precision::Int8)
    };
    let index = VectorIndex::open_with(dir.path(), "m", DIMS, options.clone()).unwrap();
    index.replace_documents(&batch).unwrap();
    assert_eq!(index.len(), 600);
    let query = batch[17].chunks[1].1.clone();
    let hits = index.search(&query, &SourceScope::All, 3).unwrap();
    assert_eq!(hits[0].document_id, batch[17].document);
    assert!((hits[0].score - 1.0).abs() < 1e-5);
    drop(index);
    let index = VectorIndex::open_with(dir.path(), "m", DIMS, options).unwrap();
    assert_eq!(index.len(), 600);
    for probe in [0, 150, 299] {
        let (ordinal, vector) = &batch[probe].chunks[0];
        let hits = index.search(vector, &SourceScope::All, 1).unwrap();
        assert_eq!(
            (hits[0].document_id, hits[0].ordinal),
            (batch[probe].document, *ordinal)
        );
        assert!((hits[0].score - 1.0).abs() < 1e-5);
    }
    let stats = index.stats();
    assert_eq!(stats.vector_bytes, 600 * DIMS * 4);
    assert_eq!(stats.code_bytes, 600 * (DIMS + 4));
    assert!(stats.graph_bytes > 600 * 9 * 4);
}

#[test]
fn another_model_or_width_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    VectorIndex::open(dir.path(), "model-a", DIMS).unwrap();
    let err = VectorIndex::open(dir.path(), "model-b", DIMS).unwrap_err();
    assert!(matches!(err, VectorError::ModelMismatch { .. }), "{err}");
    assert!(err.to_string().contains("model-a"), "{err}");
    let err = VectorIndex::open(dir.path(), "model-a", 8).unwrap_err();
    assert!(matches!(err, VectorError::ModelMismatch { .. }), "{err}");

    let index = VectorIndex::open(dir.path(), "model-a", DIMS).unwrap();
    let err = index
        .replace_document(DocumentId::new(), SourceId::new(), &[(0, vec![1.0; 3])])
        .unwrap_err();
    assert!(matches!(
        err,
        VectorError::Dimensions {
            expected: 12,
            got: 3
        }
    ));
    std::fs::write(dir.path().join("vectors.log"), b"garbage!garbage!").unwrap();
    assert!(matches!(
        VectorIndex::open(dir.path(), "model-a", DIMS),
        Err(VectorError::NotAnIndex(_))
    ));
}
