//! Chunk vectors for semantic search: every vector in memory, an exact scan filtered by the
//! caller's scope (so a small scope never loses recall to a graph that was built for the whole
//! corpus), and an append-only log on disk that is replayed at start.
//!
//! The log begins with a header naming the model and the dimensions; an index made by one model
//! is never searched with another's queries ([`VectorError::ModelMismatch`] tells the caller to
//! rebuild). Each record replaces or deletes one document's vectors and is synced before the
//! call returns; a record cut short by a crash is dropped at the next start.

use std::collections::{BinaryHeap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

use quire_core::{DocumentId, SourceId, SourceScope};
use uuid::Uuid;

const MAGIC: &[u8; 8] = b"QVEC0001";
const REPLACE: u8 = 1;
const DELETE: u8 = 2;

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

#[derive(Debug, Default)]
struct Vectors {
    /// One row per chunk: document, source, ordinal. Deleted rows stay until compaction.
    rows: Vec<(DocumentId, SourceId, u32)>,
    alive: Vec<bool>,
    /// Row-major, `rows.len() × dims`.
    values: Vec<f32>,
    by_document: HashMap<DocumentId, Vec<usize>>,
}

impl Vectors {
    fn replace(&mut self, document: DocumentId, source: SourceId, chunks: &[(u32, Vec<f32>)]) {
        self.delete(document);
        let mut rows = Vec::with_capacity(chunks.len());
        for (ordinal, vector) in chunks {
            rows.push(self.rows.len());
            self.rows.push((document, source, *ordinal));
            self.alive.push(true);
            self.values.extend_from_slice(vector);
        }
        self.by_document.insert(document, rows);
    }

    fn delete(&mut self, document: DocumentId) {
        for row in self.by_document.remove(&document).unwrap_or_default() {
            self.alive[row] = false;
        }
    }
}

/// The vector index of one data directory, for one model.
#[derive(Debug)]
pub struct VectorIndex {
    vectors: RwLock<Vectors>,
    log: Mutex<File>,
    path: PathBuf,
    dims: usize,
}

impl VectorIndex {
    /// Opens (or creates) the index in `dir` for vectors of `dims` dimensions made by `model`.
    pub fn open(dir: &Path, model: &str, dims: usize) -> Result<Self, VectorError> {
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
        let header = header(model, dims);
        let size = file.metadata().map_err(io)?.len();
        let mut vectors = Vectors::default();
        if size == 0 {
            file.write_all(&header).map_err(io)?;
            file.sync_data().map_err(io)?;
        } else {
            let valid = replay(&mut file, &path, &header, dims, &mut vectors)?;
            if valid < size {
                // The last record was cut short by a crash: drop it.
                file.set_len(valid).map_err(io)?;
            }
        }
        Ok(Self {
            vectors: RwLock::new(vectors),
            log: Mutex::new(file),
            path,
            dims,
        })
    }

    /// Vector length.
    pub fn dimensions(&self) -> usize {
        self.dims
    }

    /// Live chunks.
    pub fn len(&self) -> usize {
        let vectors = self.vectors.read().expect("vector index lock");
        vectors.alive.iter().filter(|a| **a).count()
    }

    /// True when no chunk has a vector.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets the vectors of `document` (one per chunk ordinal), replacing any it had.
    pub fn replace_document(
        &self,
        document: DocumentId,
        source: SourceId,
        chunks: &[(u32, Vec<f32>)],
    ) -> Result<(), VectorError> {
        if let Some((_, bad)) = chunks.iter().find(|(_, v)| v.len() != self.dims) {
            return Err(VectorError::Dimensions {
                expected: self.dims,
                got: bad.len(),
            });
        }
        let mut record = vec![REPLACE];
        record.extend_from_slice(document.as_uuid().as_bytes());
        record.extend_from_slice(source.as_uuid().as_bytes());
        record.extend_from_slice(&(chunks.len() as u32).to_le_bytes());
        for (ordinal, vector) in chunks {
            record.extend_from_slice(&ordinal.to_le_bytes());
            for x in vector {
                record.extend_from_slice(&x.to_le_bytes());
            }
        }
        self.append(&record)?;
        self.vectors
            .write()
            .expect("vector index lock")
            .replace(document, source, chunks);
        Ok(())
    }

    /// Removes the vectors of `document`; searches stop finding them at once.
    pub fn delete_document(&self, document: DocumentId) -> Result<(), VectorError> {
        let mut record = vec![DELETE];
        record.extend_from_slice(document.as_uuid().as_bytes());
        self.append(&record)?;
        self.vectors
            .write()
            .expect("vector index lock")
            .delete(document);
        Ok(())
    }

    /// The `limit` chunks most similar to `query` among the sources `scope` allows, best
    /// first, by an exact scan.
    pub fn search(
        &self,
        query: &[f32],
        scope: &SourceScope,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        if query.len() != self.dims {
            return Err(VectorError::Dimensions {
                expected: self.dims,
                got: query.len(),
            });
        }
        if limit == 0 {
            return Ok(Vec::new());
        }
        let vectors = self.vectors.read().expect("vector index lock");
        // A min-heap of the best `limit` so far (scores negated through `Reverse`).
        let mut best: BinaryHeap<std::cmp::Reverse<(OrderedScore, usize)>> =
            BinaryHeap::with_capacity(limit + 1);
        for (row, (_, source, _)) in vectors.rows.iter().enumerate() {
            if !vectors.alive[row] || !scope.allows(*source) {
                continue;
            }
            let values = &vectors.values[row * self.dims..(row + 1) * self.dims];
            let score = dot(query, values);
            if best.len() < limit {
                best.push(std::cmp::Reverse((OrderedScore(score), row)));
            } else if best
                .peek()
                .is_some_and(|worst| OrderedScore(score) > worst.0.0)
            {
                best.pop();
                best.push(std::cmp::Reverse((OrderedScore(score), row)));
            }
        }
        let mut hits: Vec<VectorHit> = best
            .into_iter()
            .map(|std::cmp::Reverse((score, row))| {
                let (document_id, source_id, ordinal) = vectors.rows[row];
                VectorHit {
                    document_id,
                    source_id,
                    ordinal,
                    score: score.0,
                }
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(hits)
    }

    fn append(&self, record: &[u8]) -> Result<(), VectorError> {
        let io = |source| VectorError::Io {
            path: self.path.clone(),
            source,
        };
        let mut file = self.log.lock().expect("vector log lock");
        file.write_all(record).map_err(io)?;
        file.sync_data().map_err(io)
    }
}

fn header(model: &str, dims: usize) -> Vec<u8> {
    let name = format!("{model} ({dims} dimensions)");
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&(dims as u32).to_le_bytes());
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out
}

/// Reads the log into `vectors` and returns the length of its intact prefix.
fn replay(
    file: &mut File,
    path: &Path,
    expected_header: &[u8],
    dims: usize,
    vectors: &mut Vectors,
) -> Result<u64, VectorError> {
    let io = |source| VectorError::Io {
        path: path.to_path_buf(),
        source,
    };
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut bytes = Vec::new();
    BufReader::new(&mut *file)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(VectorError::NotAnIndex(path.to_path_buf()));
    }
    let name_len = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
    let header_len = 16 + name_len;
    if bytes.len() < header_len || bytes[..header_len] != *expected_header {
        let found = String::from_utf8_lossy(bytes.get(16..header_len).unwrap_or_default());
        let wanted = String::from_utf8_lossy(&expected_header[16..]);
        return Err(VectorError::ModelMismatch {
            found: found.into_owned(),
            wanted: wanted.into_owned(),
        });
    }
    let mut reader = Cursor {
        bytes: &bytes,
        at: header_len,
    };
    let mut valid = header_len;
    while reader.at < bytes.len() {
        match read_record(&mut reader, dims) {
            Some(Record::Replace(document, source, chunks)) => {
                vectors.replace(document, source, &chunks)
            }
            Some(Record::Delete(document)) => vectors.delete(document),
            None => break,
        }
        valid = reader.at;
    }
    Ok(valid as u64)
}

enum Record {
    Replace(DocumentId, SourceId, Vec<(u32, Vec<f32>)>),
    Delete(DocumentId),
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let slice = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(slice)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn uuid(&mut self) -> Option<Uuid> {
        Some(Uuid::from_bytes(self.take(16)?.try_into().ok()?))
    }
}

/// One record, or `None` when the rest of the log is cut short or unreadable.
fn read_record(reader: &mut Cursor<'_>, dims: usize) -> Option<Record> {
    let tag = reader.take(1)?[0];
    let document = DocumentId::from(reader.uuid()?);
    match tag {
        DELETE => Some(Record::Delete(document)),
        REPLACE => {
            let source = SourceId::from(reader.uuid()?);
            let count = reader.u32()? as usize;
            let mut chunks = Vec::with_capacity(count.min(1 << 16));
            for _ in 0..count {
                let ordinal = reader.u32()?;
                let raw = reader.take(dims * 4)?;
                let vector = raw
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                    .collect();
                chunks.push((ordinal, vector));
            }
            Some(Record::Replace(document, source, chunks))
        }
        _ => None,
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent sums so the compiler can keep them in vector registers.
    let mut sums = [0f32; 8];
    let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
    let (a_rest, b_rest) = (a_chunks.remainder(), b_chunks.remainder());
    for (x, y) in a_chunks.zip(b_chunks) {
        for i in 0..8 {
            sums[i] += x[i] * y[i];
        }
    }
    let tail: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    sums.iter().sum::<f32>() + tail
}

/// `f32` ordered by `total_cmp`, for the heap.
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrderedScore(f32);

impl Eq for OrderedScore {}

impl PartialOrd for OrderedScore {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrderedScore {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[cfg(test)]
mod tests {
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

    fn corpus(index: &VectorIndex, rng: &mut Rng, sources: &[SourceId], documents: usize) {
        for d in 0..documents {
            let chunks: Vec<(u32, Vec<f32>)> = (0..1 + d % 3)
                .map(|o| (o as u32, rng.unit_vector(DIMS)))
                .collect();
            let source = sources[d % sources.len()];
            index
                .replace_document(DocumentId::new(), source, &chunks)
                .unwrap();
        }
    }

    /// Every live chunk's score, by brute force, best first.
    fn brute_force(index: &VectorIndex, query: &[f32], scope: &SourceScope) -> Vec<f32> {
        let v = index.vectors.read().unwrap();
        let mut scores: Vec<f32> = (0..v.rows.len())
            .filter(|&r| v.alive[r] && scope.allows(v.rows[r].1))
            .map(|r| {
                query
                    .iter()
                    .zip(&v.values[r * DIMS..(r + 1) * DIMS])
                    .map(|(a, b)| a * b)
                    .sum()
            })
            .collect();
        scores.sort_by(|a, b| b.total_cmp(a));
        scores
    }

    #[test]
    fn search_matches_brute_force_and_never_leaves_the_scope() {
        for seed in 1..=20u64 {
            let dir = tempfile::tempdir().unwrap();
            let index = VectorIndex::open(dir.path(), "m", DIMS).unwrap();
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let sources: Vec<SourceId> = (0..4).map(|_| SourceId::new()).collect();
            corpus(&index, &mut rng, &sources, 30 + (seed as usize % 20));
            let scopes = [
                SourceScope::All,
                SourceScope::only([sources[0]]),
                SourceScope::only([sources[1], sources[3]]),
                SourceScope::only([SourceId::new()]),
            ];
            for scope in &scopes {
                let query = rng.unit_vector(DIMS);
                let limit = 1 + (rng.next() % 15) as usize;
                let hits = index.search(&query, scope, limit).unwrap();
                let expected = brute_force(&index, &query, scope);
                assert_eq!(hits.len(), limit.min(expected.len()));
                for (hit, want) in hits.iter().zip(&expected) {
                    assert!(scope.allows(hit.source_id));
                    assert!((hit.score - want).abs() < 1e-5, "{} vs {want}", hit.score);
                }
            }
        }
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
}
