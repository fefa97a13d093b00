//! Chunk vectors for semantic search: every vector in memory, an HNSW graph over them for
//! large scopes, an exact scan for small ones, and an append-only log on disk that is the
//! source of truth.
//!
//! **Searching.** A search counts the live chunks its scope allows (per-source counts make
//! that free). Below [`VectorOptions::exact_below`] chunks, or below
//! [`VectorOptions::exact_fraction`] of the corpus, it scans exactly those chunks (through a
//! per-source row list, so a small scope never touches the rest): exact, and cheaper than a
//! graph walk that would have to look past many chunks it may not return. Otherwise it walks
//! the graph ([`crate::hnsw`]) with a filter that keeps dead and out-of-scope rows out of the
//! results while still walking through them (with an `ef` scaled to the scope's share of the
//! corpus, since a filtered walk already looks further); if the walk returns fewer hits than
//! asked for, it falls back to the exact scan. Either way no row outside the scope can be returned, and
//! scores are exact `f32` cosines.
//!
//! **Precision** ([`Precision`]). `F32` keeps the `f32` vectors in memory and the graph
//! computes with them. `Int8` adds an int8 copy (a quarter more memory) that the graph walk
//! computes with, touching a quarter of the bytes per step; its candidates are re-ranked in
//! `f32`. Scores returned are exact `f32` cosines in both modes. `docs/retrieval.md` has the
//! measured recall, speed and memory of each (and of an int8-only mode, measured and removed).
//!
//! **Durability.** The log begins with a header naming the model and the dimensions; an index
//! made by one model is never searched with another's queries ([`VectorError::ModelMismatch`]
//! tells the caller to rebuild). Each record replaces or deletes one document's vectors and is
//! synced before the call returns; a record cut short by a crash is dropped at the next start.
//! A deletion takes effect at once: the rows are marked dead and every search path skips them.
//!
//! **The graph on disk.** The graph is persisted as a snapshot (`vectors.hnsw`, see
//! [`snapshot`]) that names the log prefix it covers, rather than rebuilt at every start:
//! linking a million rows takes minutes, replaying the log seconds. At open the log is
//! replayed, the snapshot loaded if it matches the log, and only rows after it are linked; a
//! missing or stale snapshot means a full rebuild (on every core), never a wrong answer. A new
//! snapshot is written at open after linking many rows, by writes once the rows not covered
//! grow past an eighth of the index, and by [`VectorIndex::checkpoint`] (for a clean shutdown).
//! Dead rows stay in memory and in the graph until a compaction, which is not implemented yet.

mod kernels;
mod log;
mod rows;
mod snapshot;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

use quire_core::{DocumentId, SourceId, SourceScope};

use crate::hnsw::{HnswParams, Scored};
use log::LogHash;
use rows::Vectors;

/// The smallest `ef` a filtered graph search uses (see [`VectorIndex::scoped_ef`]).
const FILTERED_EF_MIN: usize = 64;
/// From this share of the index's documents on, a restricted search walks unrestricted and
/// keeps the set's candidates (`ef_search` of them hold about this share of allowed rows,
/// many times `limit`); below it, the walk itself is restricted (or the rows scanned).
const POST_FILTER_SHARE: f64 = 0.3;
/// Writes and opens take a new snapshot once this many rows are not covered by the last one
/// (and at least an eighth of the index): below it, linking at open is quick anyway.
const SNAPSHOT_MIN_ROWS: usize = 10_000;

/// Why the vector index failed.
#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    /// Reading or writing the log failed.
    #[error("vector index file {path}: {source}")]
    Io {
        /// The log file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The log was written for another model or width.
    #[error("the vector index was built by {found} and must be rebuilt for {wanted}")]
    ModelMismatch {
        /// Model (and dimensions) in the log.
        found: String,
        /// Model (and dimensions) asked for.
        wanted: String,
    },
    /// A vector of the wrong length was given.
    #[error("a vector has {got} dimensions, the index {expected}")]
    Dimensions {
        /// The index's width.
        expected: usize,
        /// The vector's.
        got: usize,
    },
    /// The log is not a vector index.
    #[error("{0} is not a Quire vector index")]
    NotAnIndex(PathBuf),
}

/// A chunk found by vector search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorHit {
    /// The chunk's document.
    pub document_id: DocumentId,
    /// The document's source.
    pub source_id: SourceId,
    /// The chunk's position in the document.
    pub ordinal: u32,
    /// Cosine similarity to the query (vectors are unit length, so the dot product).
    pub score: f32,
}

/// The precision the graph computes similarities in; results are always scored in `f32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// The `f32` vectors themselves.
    #[default]
    F32,
    /// An int8 copy (one byte per dimension plus a scale per vector, a quarter more memory),
    /// with the candidates re-ranked in `f32`.
    Int8,
}

/// How a vector index stores vectors and chooses between the graph and an exact scan.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorOptions {
    /// Precision of the graph's similarity computations.
    pub precision: Precision,
    /// Shape of the graph.
    pub graph: HnswParams,
    /// Candidates a graph search over the whole corpus keeps (at least the number of results
    /// asked for); more is slower and closer to exact. A search over a part of the corpus
    /// keeps that part of this, but at least 64.
    pub ef_search: usize,
    /// Scopes allowing fewer live chunks than this are scanned exactly.
    pub exact_below: usize,
    /// Scopes allowing less than this fraction of the live chunks are scanned exactly: the
    /// graph walk would have to look past too many chunks it may not return.
    pub exact_fraction: f64,
    /// Threads linking rows when many are added at once (bulk writes, rebuilds at open).
    pub build_threads: usize,
}

impl Default for VectorOptions {
    fn default() -> Self {
        Self {
            precision: Precision::default(),
            graph: HnswParams::default(),
            ef_search: 256,
            exact_below: 20_000,
            exact_fraction: 0.02,
            build_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// The vectors of one document, for [`VectorIndex::replace_documents`].
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentVectors {
    /// The document.
    pub document: DocumentId,
    /// Its source.
    pub source: SourceId,
    /// One vector per chunk ordinal.
    pub chunks: Vec<(u32, Vec<f32>)>,
}

/// Sizes of an index, for operators and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VectorIndexStats {
    /// Rows in memory, deleted ones included.
    pub rows: usize,
    /// Live chunks.
    pub live: usize,
    /// Bytes of `f32` vectors.
    pub vector_bytes: usize,
    /// Bytes of int8 codes and their scales.
    pub code_bytes: usize,
    /// Bytes of the graph's neighbour lists.
    pub graph_bytes: usize,
}

/// The log file and what the index knows about its contents.
#[derive(Debug)]
struct Log {
    file: File,
    /// Hash of the whole log; its length is the log's length.
    hash: LogHash,
    /// Rows the last snapshot covers.
    snapshot_rows: usize,
}

/// The vector index of one data directory, for one model.
#[derive(Debug)]
pub struct VectorIndex {
    vectors: RwLock<Vectors>,
    /// Held by every write from the log append to the end of linking, so writes apply in log
    /// order and a snapshot always sees a graph that matches the log.
    log: Mutex<Log>,
    dir: PathBuf,
    path: PathBuf,
    dims: usize,
    options: VectorOptions,
}

impl VectorIndex {
    /// Opens (or creates) the index in `dir` for vectors of `dims` dimensions made by `model`.
    pub fn open(dir: &Path, model: &str, dims: usize) -> Result<Self, VectorError> {
        Self::open_with(dir, model, dims, VectorOptions::default())
    }

    /// [`VectorIndex::open`] with explicit options.
    pub fn open_with(
        dir: &Path,
        model: &str,
        dims: usize,
        options: VectorOptions,
    ) -> Result<Self, VectorError> {
        let path = dir.join("vectors.log");
        let io = |source| VectorError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io)?;
        let header = log::header(model, dims);
        let size = file.metadata().map_err(io)?.len();
        let mut vectors = Vectors::new(dims, &options);
        let mut hash = LogHash::default();
        if size == 0 {
            file.write_all(&header).map_err(io)?;
            file.sync_data().map_err(io)?;
            hash.update(&header);
        } else {
            let snapshot = snapshot::open(dir);
            let mark = snapshot.as_ref().map(|s| s.covers.log_len);
            let replayed = log::replay(&mut file, &path, &header, mark, &mut vectors)?;
            hash = replayed.hash;
            if hash.len() < size {
                // The last record was cut short by a crash: drop it.
                file.set_len(hash.len()).map_err(io)?;
            }
            if let Some(snapshot) = snapshot {
                let covers = snapshot.covers;
                if replayed.at_mark != Some((covers.log_hash, covers.rows)) {
                    tracing::info!("vector graph snapshot does not match the log; rebuilding");
                } else if let Some(graph) = snapshot.read_graph(options.graph) {
                    vectors.graph = graph;
                } else {
                    tracing::warn!("vector graph snapshot damaged; rebuilding");
                }
            }
        }
        let covered = vectors.graph.len();
        let linked = link_new_rows(&mut vectors, covered, options.build_threads);
        let index = Self {
            vectors: RwLock::new(vectors),
            log: Mutex::new(Log {
                file,
                hash,
                snapshot_rows: covered,
            }),
            dir: dir.to_path_buf(),
            path,
            dims,
            options,
        };
        if linked >= SNAPSHOT_MIN_ROWS {
            let mut log = index.log.lock().expect("vector log lock");
            if let Err(e) = index.write_snapshot(&mut log) {
                tracing::warn!(error = %e, "could not write the vector graph snapshot");
            }
        }
        Ok(index)
    }

    /// Vector length.
    pub fn dimensions(&self) -> usize {
        self.dims
    }

    /// Live chunks.
    pub fn len(&self) -> usize {
        self.vectors.read().expect("vector index lock").live()
    }

    /// True when no chunk has a vector.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every document the index holds vectors for (possibly none, for a document without
    /// chunks), in no particular order.
    pub fn document_ids(&self) -> Vec<DocumentId> {
        self.vectors.read().expect("vector index lock").documents()
    }

    /// True when `document` has been given its vectors and not deleted since.
    pub fn has_document(&self, document: DocumentId) -> bool {
        self.vectors
            .read()
            .expect("vector index lock")
            .has_document(document)
    }

    /// Sizes of the index.
    pub fn stats(&self) -> VectorIndexStats {
        let vectors = self.vectors.read().expect("vector index lock");
        let (vector_bytes, code_bytes, graph_bytes) = vectors.memory_bytes();
        VectorIndexStats {
            rows: vectors.rows(),
            live: vectors.live(),
            vector_bytes,
            code_bytes,
            graph_bytes,
        }
    }

    /// Sets the vectors of `document` (one per chunk ordinal), replacing any it had.
    pub fn replace_document(
        &self,
        document: DocumentId,
        source: SourceId,
        chunks: &[(u32, Vec<f32>)],
    ) -> Result<(), VectorError> {
        self.check_dimensions(chunks)?;
        let mut record = Vec::new();
        log::encode_replace(&mut record, document, source, chunks);
        self.write(&record, |vectors| vectors.replace(document, source, chunks))
    }

    /// Sets the vectors of several documents with one synced write, and links their rows on
    /// several threads: the way to load many documents. Each document is replaced atomically;
    /// after a crash mid-call, a prefix of them is.
    pub fn replace_documents(&self, documents: &[DocumentVectors]) -> Result<(), VectorError> {
        for document in documents {
            self.check_dimensions(&document.chunks)?;
        }
        let mut record = Vec::new();
        for d in documents {
            log::encode_replace(&mut record, d.document, d.source, &d.chunks);
        }
        self.write(&record, |vectors| {
            for d in documents {
                vectors.replace(d.document, d.source, &d.chunks);
            }
        })
    }

    /// Removes the vectors of `document`; searches stop finding them at once.
    pub fn delete_document(&self, document: DocumentId) -> Result<(), VectorError> {
        let mut record = Vec::new();
        log::encode_delete(&mut record, document);
        self.write(&record, |vectors| vectors.delete(document))
    }

    /// The `limit` chunks most similar to `query` among the sources `scope` allows, best
    /// first: exact for small scopes, from the graph for large ones (see the module doc).
    pub fn search(
        &self,
        query: &[f32],
        scope: &SourceScope,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        self.search_within(query, scope, None, limit)
    }

    /// [`VectorIndex::search`] restricted to the chunks of `documents` when given: the
    /// restriction applies before the top `limit` is taken (a small set is scanned exactly, a
    /// large one filters the graph walk), so it never leaves fewer hits than it allows.
    pub fn search_within(
        &self,
        query: &[f32],
        scope: &SourceScope,
        documents: Option<&std::collections::HashSet<DocumentId>>,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        self.check_query(query)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let vectors = self.vectors.read().expect("vector index lock");
        // A restriction to most documents: walk as if unrestricted and keep the set's rows of
        // the candidates (about half of them at 50 %), rather than pay for a mask over every
        // row and a walk that passes over as many rows as it keeps. Too few left: see below.
        if let Some(set) = documents {
            let share = set.len() as f64 / vectors.document_count().max(1) as f64;
            if share >= POST_FILTER_SHARE {
                let hits = vectors.approximate_then_restrict(
                    query,
                    &vectors.filter(scope),
                    set,
                    limit,
                    self.options.ef_search,
                );
                if hits.len() >= limit {
                    return Ok(to_hits(&vectors, &hits));
                }
            }
        }
        let filter = vectors.filter_within(scope, documents);
        let wanted = limit.min(filter.allowed);
        let fraction = filter.allowed as f64 / vectors.live().max(1) as f64;
        let mut hits = Vec::new();
        if filter.allowed >= self.options.exact_below && fraction >= self.options.exact_fraction {
            hits = vectors.approximate(query, &filter, limit, self.scoped_ef(fraction));
        }
        if hits.len() < wanted {
            hits = vectors.exact(query, &filter, limit);
        }
        Ok(to_hits(&vectors, &hits))
    }

    /// [`VectorIndex::search`] by an exact scan whatever the scope's size: the reference the
    /// graph is measured against.
    pub fn search_exact(
        &self,
        query: &[f32],
        scope: &SourceScope,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        self.check_query(query)?;
        let vectors = self.vectors.read().expect("vector index lock");
        let hits = vectors.exact(query, &vectors.filter(scope), limit);
        Ok(to_hits(&vectors, &hits))
    }

    /// [`VectorIndex::search`] through the graph whatever the scope's size, keeping `ef`
    /// candidates and never falling back to a scan (so it may return fewer than `limit`
    /// hits): for benchmarks and tuning.
    pub fn search_graph(
        &self,
        query: &[f32],
        scope: &SourceScope,
        limit: usize,
        ef: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        self.check_query(query)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let vectors = self.vectors.read().expect("vector index lock");
        let hits = vectors.approximate(query, &vectors.filter(scope), limit, ef);
        Ok(to_hits(&vectors, &hits))
    }

    /// Writes a graph snapshot covering the whole log, so the next open links nothing; for a
    /// clean shutdown or after a bulk load.
    pub fn checkpoint(&self) -> Result<(), VectorError> {
        let mut log = self.log.lock().expect("vector log lock");
        self.write_snapshot(&mut log)
            .map_err(|source| VectorError::Io {
                path: self.dir.join(snapshot::FILE),
                source,
            })
    }

    /// The `ef` for a graph search whose scope allows `fraction` of the live chunks. A filtered
    /// walk looks at about `1 / fraction` chunks per one it may keep, so it already examines
    /// more of the graph than an unfiltered walk with the same `ef`: it needs a proportionally
    /// smaller one (measured on the synthetic million: a 10% scope at `ef` 64 finds more of the
    /// exact top 10 than the whole corpus at 256), down to a floor.
    fn scoped_ef(&self, fraction: f64) -> usize {
        let ef = self.options.ef_search;
        let scaled = (ef as f64 * fraction).ceil() as usize;
        scaled.clamp(ef.min(FILTERED_EF_MIN), ef)
    }

    fn check_dimensions(&self, chunks: &[(u32, Vec<f32>)]) -> Result<(), VectorError> {
        match chunks.iter().find(|(_, v)| v.len() != self.dims) {
            Some((_, bad)) => Err(VectorError::Dimensions {
                expected: self.dims,
                got: bad.len(),
            }),
            None => Ok(()),
        }
    }

    fn check_query(&self, query: &[f32]) -> Result<(), VectorError> {
        if query.len() != self.dims {
            return Err(VectorError::Dimensions {
                expected: self.dims,
                got: query.len(),
            });
        }
        Ok(())
    }

    /// Appends `record` to the log, applies `change` in memory, links the new rows and takes
    /// a snapshot when enough rows are not covered by the last one.
    fn write(&self, record: &[u8], change: impl FnOnce(&mut Vectors)) -> Result<(), VectorError> {
        let mut log = self.log.lock().expect("vector log lock");
        let appended = log
            .file
            .write_all(record)
            .and_then(|()| log.file.sync_data());
        if let Err(source) = appended {
            // Cut a partial record off, so the next append does not land after garbage.
            let _ = log.file.set_len(log.hash.len());
            return Err(VectorError::Io {
                path: self.path.clone(),
                source,
            });
        }
        log.hash.update(record);
        let (before, after) = {
            let mut vectors = self.vectors.write().expect("vector index lock");
            let before = vectors.rows();
            change(&mut vectors);
            let after = vectors.rows();
            vectors.graph.grow(after);
            (before, after)
        };
        if after == before {
            return Ok(());
        }
        {
            // Linking needs only shared access (the lists are atomics), so searches go on
            // meanwhile; the new rows just are not reachable through the graph until linked.
            let vectors = self.vectors.read().expect("vector index lock");
            let pending: Vec<u32> = (before as u32..after as u32)
                .filter(|row| vectors.alive[*row as usize])
                .collect();
            vectors
                .graph
                .insert_many(&pending, &*vectors, self.options.build_threads);
        }
        let uncovered = after - log.snapshot_rows;
        if uncovered >= SNAPSHOT_MIN_ROWS.max(after / 8)
            && let Err(e) = self.write_snapshot(&mut log)
        {
            tracing::warn!(error = %e, "could not write the vector graph snapshot");
        }
        Ok(())
    }

    /// Writes the snapshot; the caller holds the log lock, so no write runs meanwhile.
    fn write_snapshot(&self, log: &mut Log) -> std::io::Result<()> {
        let vectors = self.vectors.read().expect("vector index lock");
        let covers = snapshot::Covers {
            log_len: log.hash.len(),
            log_hash: log.hash.finish(),
            rows: vectors.rows(),
        };
        snapshot::write(&self.dir, covers, &vectors.graph)?;
        log.snapshot_rows = covers.rows;
        Ok(())
    }
}

/// Adds graph nodes for rows from `from` on and links the live ones; returns how many.
fn link_new_rows(vectors: &mut Vectors, from: usize, threads: usize) -> usize {
    vectors.graph.grow(vectors.rows());
    let pending: Vec<u32> = (from as u32..vectors.rows() as u32)
        .filter(|row| vectors.alive[*row as usize])
        .collect();
    vectors.graph.insert_many(&pending, &*vectors, threads);
    pending.len()
}

fn to_hits(vectors: &Vectors, found: &[Scored]) -> Vec<VectorHit> {
    found
        .iter()
        .map(|hit| {
            let row = vectors.rows[hit.node as usize];
            VectorHit {
                document_id: row.document,
                source_id: vectors.source_id(hit.node),
                ordinal: row.ordinal,
                score: hit.sim,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
