//! The graph snapshot, `vectors.hnsw` beside the log, so opening a large index does not
//! relink every row. It names the log prefix it was built from (length, hash and row count);
//! at open the log is replayed as always and the snapshot is used only if that prefix is
//! still there, byte for byte; rows after it are linked then. A snapshot that is missing,
//! stale, damaged or from another log is ignored and the graph rebuilt from the log, which
//! stays the only source of truth. It is written to a temporary file, synced and renamed over
//! the old one, so a crash mid-write leaves the previous snapshot intact.
//!
//! Layout: `QHNSW001`, the log length, log hash and row count (`u64` each, little-endian), the
//! graph, then a hash of everything before it.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

use super::log::{Hashing, LogHash};
use crate::hnsw::{Hnsw, HnswParams};

const MAGIC: &[u8; 8] = b"QHNSW001";
/// The snapshot's file name in the index directory.
pub(super) const FILE: &str = "vectors.hnsw";

/// The log prefix a snapshot was built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Covers {
    pub log_len: u64,
    pub log_hash: u64,
    pub rows: usize,
}

/// A snapshot whose header has been read, its graph not yet.
#[derive(Debug)]
pub(super) struct Pending {
    pub covers: Covers,
    reader: Hashing<BufReader<File>>,
}

/// Opens the snapshot in `dir`, if there is one with a readable header.
pub(super) fn open(dir: &Path) -> Option<Pending> {
    let file = match File::open(dir.join(FILE)) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(error = %e, "vector graph snapshot unreadable; rebuilding the graph");
            return None;
        }
    };
    let mut reader = Hashing {
        inner: BufReader::with_capacity(1 << 20, file),
        hash: LogHash::default(),
    };
    let mut head = [0u8; 32];
    reader.read_exact(&mut head).ok()?;
    if &head[..8] != MAGIC {
        return None;
    }
    let long = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().expect("8 bytes"));
    Some(Pending {
        covers: Covers {
            log_len: long(8),
            log_hash: long(16),
            rows: usize::try_from(long(24)).ok()?,
        },
        reader,
    })
}

impl Pending {
    /// The graph, if the rest of the file is intact.
    pub fn read_graph(mut self, params: HnswParams) -> Option<Hnsw> {
        let graph = Hnsw::read_from(params, self.covers.rows, &mut self.reader)
            .ok()
            .flatten()?;
        let expected = self.reader.hash.finish();
        let mut checksum = [0u8; 8];
        self.reader.inner.read_exact(&mut checksum).ok()?;
        (u64::from_le_bytes(checksum) == expected).then_some(graph)
    }
}

/// Writes `graph`, built from the log prefix `covers`, as the snapshot in `dir`.
pub(super) fn write(dir: &Path, covers: Covers, graph: &Hnsw) -> io::Result<()> {
    let temporary = dir.join(format!("{FILE}.tmp"));
    let file = File::create(&temporary)?;
    let mut out = Hashing {
        inner: BufWriter::with_capacity(1 << 20, file),
        hash: LogHash::default(),
    };
    out.write_all(MAGIC)?;
    out.write_all(&covers.log_len.to_le_bytes())?;
    out.write_all(&covers.log_hash.to_le_bytes())?;
    out.write_all(&(covers.rows as u64).to_le_bytes())?;
    graph.write_to(&mut out)?;
    let checksum = out.hash.finish();
    out.inner.write_all(&checksum.to_le_bytes())?;
    let file = out.inner.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    std::fs::rename(&temporary, dir.join(FILE))?;
    // The rename itself must reach the disk before the snapshot is relied on.
    File::open(dir)?.sync_all()
}
