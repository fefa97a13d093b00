//! The append-only log, the index's source of truth: a header naming the model and the
//! dimensions, then one record per document replaced or deleted.
//!
//! A replace record is tag 1, the document and source UUIDs, a chunk count, then per chunk its
//! ordinal and `dims` little-endian `f32`s; a delete record is tag 2 and the document UUID.
//! Replaying stops at the first record cut short (a crash mid-write) and reports the length of
//! the intact prefix, which the caller truncates to. A running hash of the bytes lets a graph
//! snapshot name exactly which prefix of the log it was built from.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;

use quire_core::{DocumentId, SourceId};
use uuid::Uuid;

use super::VectorError;
use super::rows::Vectors;
use crate::hnsw::splitmix64;

const MAGIC: &[u8; 8] = b"QVEC0001";
const REPLACE: u8 = 1;
const DELETE: u8 = 2;

/// The header for `model` at `dims` dimensions.
pub(super) fn header(model: &str, dims: usize) -> Vec<u8> {
    let name = format!("{model} ({dims} dimensions)");
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&(dims as u32).to_le_bytes());
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out
}

/// Appends a replace record to `out`.
pub(super) fn encode_replace(
    out: &mut Vec<u8>,
    document: DocumentId,
    source: SourceId,
    chunks: &[(u32, Vec<f32>)],
) {
    out.push(REPLACE);
    out.extend_from_slice(document.as_uuid().as_bytes());
    out.extend_from_slice(source.as_uuid().as_bytes());
    out.extend_from_slice(&(chunks.len() as u32).to_le_bytes());
    for (ordinal, vector) in chunks {
        out.extend_from_slice(&ordinal.to_le_bytes());
        for x in vector {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
}

/// Appends a delete record to `out`.
pub(super) fn encode_delete(out: &mut Vec<u8>, document: DocumentId) {
    out.push(DELETE);
    out.extend_from_slice(document.as_uuid().as_bytes());
}

/// A streaming 64-bit hash of a byte sequence; not cryptographic, it only has to tell one
/// log from another. It works on 8-byte words, so hashing a million-chunk log costs a
/// fraction of reading it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct LogHash {
    state: u64,
    pending: [u8; 8],
    pending_len: usize,
    total: u64,
}

impl LogHash {
    /// Adds `bytes` to the hashed sequence.
    pub fn update(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.pending_len > 0 {
            let take = (8 - self.pending_len).min(bytes.len());
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(&bytes[..take]);
            self.pending_len += take;
            bytes = &bytes[take..];
            if self.pending_len < 8 {
                return;
            }
            self.word(u64::from_le_bytes(self.pending));
            self.pending_len = 0;
        }
        let words = bytes.chunks_exact(8);
        let rest = words.remainder();
        for word in words {
            self.word(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        }
        self.pending[..rest.len()].copy_from_slice(rest);
        self.pending_len = rest.len();
    }

    fn word(&mut self, word: u64) {
        self.state = (self.state.rotate_left(23) ^ word).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    /// The hash of everything added so far.
    pub fn finish(&self) -> u64 {
        let mut last = [0u8; 8];
        last[..self.pending_len].copy_from_slice(&self.pending[..self.pending_len]);
        splitmix64(self.state ^ splitmix64(u64::from_le_bytes(last) ^ self.total))
    }

    /// Bytes hashed.
    pub fn len(&self) -> u64 {
        self.total
    }
}

/// What replaying found.
#[derive(Debug)]
pub(super) struct Replayed {
    /// Hash of the intact prefix (its length is `hash.len()`).
    pub hash: LogHash,
    /// At the offset the caller asked about, if a record ended exactly there: the hash of the
    /// prefix up to it and the rows the index had then.
    pub at_mark: Option<(u64, usize)>,
}

/// Reads the log into `vectors`. `mark` is an offset whose prefix hash the caller wants (the
/// offset a graph snapshot covers).
pub(super) fn replay(
    file: &mut File,
    path: &Path,
    expected_header: &[u8],
    mark: Option<u64>,
    vectors: &mut Vectors,
) -> Result<Replayed, VectorError> {
    let io = |source| VectorError::Io {
        path: path.to_path_buf(),
        source,
    };
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut reader = Hashing {
        inner: BufReader::with_capacity(1 << 20, &mut *file),
        hash: LogHash::default(),
    };
    let mut head = [0u8; 16];
    if read_exact_or_eof(&mut reader, &mut head)
        .map_err(io)?
        .is_none()
        || &head[..8] != MAGIC
    {
        return Err(VectorError::NotAnIndex(path.to_path_buf()));
    }
    let name_len = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes")) as usize;
    let mut name = vec![0u8; name_len.min(1 << 16)];
    let complete = name_len <= 1 << 16
        && read_exact_or_eof(&mut reader, &mut name)
            .map_err(io)?
            .is_some();
    if !complete || [&head[..], &name[..]].concat() != expected_header {
        let wanted = String::from_utf8_lossy(&expected_header[16..]);
        return Err(VectorError::ModelMismatch {
            found: String::from_utf8_lossy(&name).into_owned(),
            wanted: wanted.into_owned(),
        });
    }
    let dims = vectors.dims();
    let mut intact = reader.hash;
    let mut at_mark = None;
    loop {
        if mark == Some(intact.len()) {
            at_mark = Some((intact.finish(), vectors.rows()));
        }
        match read_record(&mut reader, dims).map_err(io)? {
            Some(Record::Replace(document, source, chunks)) => {
                vectors.replace(document, source, &chunks)
            }
            Some(Record::Delete(document)) => vectors.delete(document),
            None => break,
        }
        intact = reader.hash;
    }
    Ok(Replayed {
        hash: intact,
        at_mark,
    })
}

/// A reader or writer that hashes what passes through it.
#[derive(Debug)]
pub(super) struct Hashing<T> {
    pub inner: T,
    pub hash: LogHash,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Fills `buf`, or `Ok(None)` when the input ends first.
fn read_exact_or_eof(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<Option<()>> {
    match reader.read_exact(buf) {
        Ok(()) => Ok(Some(())),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

enum Record {
    Replace(DocumentId, SourceId, Vec<(u32, Vec<f32>)>),
    Delete(DocumentId),
}

/// One record, or `None` when the log ends here, is cut short or is unreadable.
fn read_record(reader: &mut impl Read, dims: usize) -> io::Result<Option<Record>> {
    let mut tag = [0u8; 1];
    let mut uuid = [0u8; 16];
    if read_exact_or_eof(reader, &mut tag)?.is_none()
        || read_exact_or_eof(reader, &mut uuid)?.is_none()
    {
        return Ok(None);
    }
    let document = DocumentId::from(Uuid::from_bytes(uuid));
    match tag[0] {
        DELETE => Ok(Some(Record::Delete(document))),
        REPLACE => {
            let mut count = [0u8; 4];
            if read_exact_or_eof(reader, &mut uuid)?.is_none()
                || read_exact_or_eof(reader, &mut count)?.is_none()
            {
                return Ok(None);
            }
            let source = SourceId::from(Uuid::from_bytes(uuid));
            let count = u32::from_le_bytes(count) as usize;
            // The count may be garbage in a torn record: reserve for a plausible document only.
            let mut chunks = Vec::with_capacity(count.min(1 << 12));
            let mut raw = vec![0u8; 4 + dims * 4];
            for _ in 0..count {
                if read_exact_or_eof(reader, &mut raw)?.is_none() {
                    return Ok(None);
                }
                let ordinal = u32::from_le_bytes(raw[..4].try_into().expect("4 bytes"));
                let vector = raw[4..]
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                    .collect();
                chunks.push((ordinal, vector));
            }
            Ok(Some(Record::Replace(document, source, chunks)))
        }
        _ => Ok(None),
    }
}
