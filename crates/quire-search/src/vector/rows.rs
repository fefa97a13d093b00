//! The in-memory state: one row per chunk (deleted rows stay, marked dead, until compaction),
//! the `f32` vectors, the optional int8 codes, the rows of each source (so a small scope is
//! scanned without touching the rest), and the graph over the rows.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use quire_core::{DocumentId, SourceId, SourceScope};

use super::kernels::{Codes, Quantized, dot};
use super::{Precision, VectorOptions};
use crate::hnsw::{Hnsw, Scored, Space};

/// One chunk.
#[derive(Debug, Clone, Copy)]
pub(super) struct Row {
    pub document: DocumentId,
    /// Index into [`Sources::ids`].
    pub source: u32,
    pub ordinal: u32,
}

/// Sources numbered in order of first appearance, so a row holds 4 bytes instead of a UUID and
/// a scope becomes a mask indexed by that number.
#[derive(Debug, Default)]
struct Sources {
    ids: Vec<SourceId>,
    numbers: HashMap<SourceId, u32>,
    /// Rows of each source, dead ones included.
    rows: Vec<Vec<u32>>,
    live: Vec<usize>,
}

impl Sources {
    fn number(&mut self, source: SourceId) -> u32 {
        *self.numbers.entry(source).or_insert_with(|| {
            self.ids.push(source);
            self.rows.push(Vec::new());
            self.live.push(0);
            (self.ids.len() - 1) as u32
        })
    }
}

/// The rows a search may return: live, in a source the scope allows, and, when the search is
/// restricted to some documents, of one of them.
pub(super) struct Filter<'a> {
    alive: &'a [bool],
    rows: &'a [Row],
    /// Per source number, whether the scope allows it; `None` allows all.
    sources: Option<Vec<bool>>,
    /// The rows of the documents a search is restricted to, in no order; `None` for all.
    documents: Option<Vec<u32>>,
    /// Per row, whether it is one of `documents` (only with `documents`).
    in_documents: Option<Vec<bool>>,
    /// Live rows that pass.
    pub allowed: usize,
}

impl Filter<'_> {
    /// True when `row` may be returned.
    pub fn allows(&self, row: u32) -> bool {
        let row = row as usize;
        self.alive[row]
            && self
                .sources
                .as_ref()
                .is_none_or(|mask| mask[self.rows[row].source as usize])
            && self.in_documents.as_ref().is_none_or(|mask| mask[row])
    }
}

/// Every vector and the graph over them.
#[derive(Debug)]
pub(super) struct Vectors {
    dims: usize,
    pub rows: Vec<Row>,
    pub alive: Vec<bool>,
    /// The `f32` vectors, row-major (`rows × dims`).
    values: Vec<f32>,
    /// Int8 copy the graph computes with, when the precision asks for one.
    codes: Option<Codes>,
    by_document: HashMap<DocumentId, Vec<u32>>,
    sources: Sources,
    live: usize,
    pub graph: Hnsw,
}

impl Vectors {
    /// No rows yet.
    pub fn new(dims: usize, options: &VectorOptions) -> Self {
        Self {
            dims,
            rows: Vec::new(),
            alive: Vec::new(),
            values: Vec::new(),
            codes: match options.precision {
                Precision::F32 => None,
                Precision::Int8 => Some(Codes::new(dims)),
            },
            by_document: HashMap::new(),
            sources: Sources::default(),
            live: 0,
            graph: Hnsw::new(options.graph),
        }
    }

    /// Vector length.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Rows, dead ones included.
    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    /// Live rows.
    pub fn live(&self) -> usize {
        self.live
    }

    /// The `f32` vector of `row`.
    pub fn vector(&self, row: u32) -> &[f32] {
        let row = row as usize;
        &self.values[row * self.dims..(row + 1) * self.dims]
    }

    /// Number of documents with rows.
    pub fn document_count(&self) -> usize {
        self.by_document.len()
    }

    /// Documents with rows (or with none, if given no chunks).
    pub fn documents(&self) -> Vec<DocumentId> {
        self.by_document.keys().copied().collect()
    }

    /// True when `document` was replaced and not deleted since.
    pub fn has_document(&self, document: DocumentId) -> bool {
        self.by_document.contains_key(&document)
    }

    /// The source of `row`.
    pub fn source_id(&self, row: u32) -> SourceId {
        self.sources.ids[self.rows[row as usize].source as usize]
    }

    /// Replaces the rows of `document` by new ones; the graph links them later.
    pub fn replace(&mut self, document: DocumentId, source: SourceId, chunks: &[(u32, Vec<f32>)]) {
        self.delete(document);
        let source_number = self.sources.number(source);
        let mut rows = Vec::with_capacity(chunks.len());
        for (ordinal, vector) in chunks {
            let row = u32::try_from(self.rows.len()).expect("fewer than 2^32 chunk vectors");
            rows.push(row);
            self.rows.push(Row {
                document,
                source: source_number,
                ordinal: *ordinal,
            });
            self.alive.push(true);
            self.values.extend_from_slice(vector);
            if let Some(codes) = &mut self.codes {
                codes.push(vector);
            }
            self.sources.rows[source_number as usize].push(row);
        }
        self.live += rows.len();
        self.sources.live[source_number as usize] += rows.len();
        self.by_document.insert(document, rows);
    }

    /// Marks the rows of `document` dead: searches skip them from now on.
    pub fn delete(&mut self, document: DocumentId) {
        for row in self.by_document.remove(&document).unwrap_or_default() {
            let row = row as usize;
            if std::mem::replace(&mut self.alive[row], false) {
                self.live -= 1;
                self.sources.live[self.rows[row].source as usize] -= 1;
            }
        }
    }

    /// What `scope` lets a search return, restricted to the rows of `documents` when given.
    pub fn filter_within(
        &self,
        scope: &SourceScope,
        documents: Option<&HashSet<DocumentId>>,
    ) -> Filter<'_> {
        let mut filter = self.filter(scope);
        if let Some(documents) = documents {
            // No sort: a scan's ties break by row, whatever order the rows come in.
            let mut rows = Vec::new();
            let mut mask = vec![false; self.rows.len()];
            let mut allowed = 0;
            for row in documents
                .iter()
                .filter_map(|d| self.by_document.get(d))
                .flatten()
            {
                mask[*row as usize] = true;
                rows.push(*row);
                allowed += usize::from(filter.allows(*row));
            }
            filter.in_documents = Some(mask);
            filter.documents = Some(rows);
            filter.allowed = allowed;
        }
        filter
    }

    /// What `scope` lets a search return.
    pub fn filter(&self, scope: &SourceScope) -> Filter<'_> {
        let (sources, allowed) = match scope.source_ids() {
            None => (None, self.live),
            Some(ids) => {
                let mut mask = vec![false; self.sources.ids.len()];
                let mut allowed = 0;
                for id in ids {
                    if let Some(number) = self.sources.numbers.get(id) {
                        mask[*number as usize] = true;
                        allowed += self.sources.live[*number as usize];
                    }
                }
                (Some(mask), allowed)
            }
        };
        Filter {
            alive: &self.alive,
            rows: &self.rows,
            sources,
            documents: None,
            in_documents: None,
            allowed,
        }
    }

    /// The `limit` best rows `filter` allows, by scanning them all in `f32`.
    pub fn exact(&self, query: &[f32], filter: &Filter<'_>, limit: usize) -> Vec<Scored> {
        self.scan(filter, limit, |row| dot(query, self.vector(row)))
    }

    /// The `limit` rows `filter` allows with the highest `score`, best first.
    fn scan(&self, filter: &Filter<'_>, limit: usize, score: impl Fn(u32) -> f32) -> Vec<Scored> {
        let mut best: BinaryHeap<Reverse<Scored>> = BinaryHeap::with_capacity(limit + 1);
        let mut consider = |row: u32| {
            if !filter.allows(row) {
                return;
            }
            let scored = Scored {
                sim: score(row),
                node: row,
            };
            if best.len() < limit {
                best.push(Reverse(scored));
            } else if best.peek().is_some_and(|worst| scored > worst.0) {
                best.pop();
                best.push(Reverse(scored));
            }
        };
        if let Some(rows) = &filter.documents {
            // A restriction to some documents scans only their rows: exact, however few.
            rows.iter().copied().for_each(&mut consider);
        } else {
            self.scan_sources(filter, &mut consider);
        }
        let mut hits: Vec<Scored> = best.into_iter().map(|Reverse(s)| s).collect();
        hits.sort_unstable_by(|a, b| b.cmp(a));
        hits
    }

    /// Offers every row of the sources `filter` allows to `consider`.
    fn scan_sources(&self, filter: &Filter<'_>, consider: &mut impl FnMut(u32)) {
        match &filter.sources {
            None => (0..self.rows.len() as u32).for_each(consider),
            Some(mask) => {
                for (number, rows) in self.sources.rows.iter().enumerate() {
                    if mask[number] {
                        rows.iter().copied().for_each(&mut *consider);
                    }
                }
            }
        }
    }

    /// Up to `limit` good rows `filter` allows, by walking the graph with `ef` candidates;
    /// scores are exact `f32` whatever the graph computed with.
    pub fn approximate(
        &self,
        query: &[f32],
        filter: &Filter<'_>,
        limit: usize,
        ef: usize,
    ) -> Vec<Scored> {
        let ef = ef.max(limit);
        let allow = |row: u32| filter.allows(row);
        match &self.codes {
            None => {
                let score = |row| dot(query, self.vector(row));
                let mut hits = self.graph.search(score, allow, ef);
                hits.truncate(limit);
                hits
            }
            Some(codes) => {
                let quantized = Quantized::new(query);
                let found = self
                    .graph
                    .search(|row| codes.to_query(&quantized, row), allow, ef);
                self.rescore(query, found, limit)
            }
        }
    }

    /// The `limit` best rows of `documents` among the `ef` best that `filter` allows, found by
    /// a walk that `documents` does not restrict: for a restriction to most of the index, where
    /// a restricted walk would pass over as many rows as it keeps.
    pub fn approximate_then_restrict(
        &self,
        query: &[f32],
        filter: &Filter<'_>,
        documents: &HashSet<DocumentId>,
        limit: usize,
        ef: usize,
    ) -> Vec<Scored> {
        let mut hits = self.approximate(query, filter, ef, ef);
        hits.retain(|hit| documents.contains(&self.rows[hit.node as usize].document));
        hits.truncate(limit);
        hits
    }

    /// Re-scores `candidates` in `f32` (the int8 order is close but not exact, and the scores
    /// returned must be the true cosines) and keeps the best `limit`.
    fn rescore(&self, query: &[f32], mut candidates: Vec<Scored>, limit: usize) -> Vec<Scored> {
        for hit in &mut candidates {
            hit.sim = dot(query, self.vector(hit.node));
        }
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        candidates.truncate(limit);
        candidates
    }

    /// Bytes of `f32` vectors, of int8 codes, and of the graph.
    pub fn memory_bytes(&self) -> (usize, usize, usize) {
        (
            4 * self.values.len(),
            self.codes.as_ref().map_or(0, Codes::memory_bytes),
            self.graph.memory_bytes(),
        )
    }
}

impl Space for Vectors {
    fn between(&self, a: u32, b: u32) -> f32 {
        match &self.codes {
            Some(codes) => codes.between(a, b),
            None => dot(self.vector(a), self.vector(b)),
        }
    }

    fn linkable(&self, node: u32) -> bool {
        self.alive[node as usize]
    }
}
