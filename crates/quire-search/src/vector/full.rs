//! The full-precision (`f32`) vectors: in memory, or, with [`Precision::Int8Compact`], only in
//! the log, from which the few candidates a search re-ranks are read back (from the page
//! cache while memory allows, from disk otherwise).
//!
//! [`Precision::Int8Compact`]: super::Precision::Int8Compact

use std::fs::File;
use std::io;

use super::kernels::dot;

/// Where the `f32` vectors live.
#[derive(Debug)]
pub(super) enum Full {
    /// Row-major, `rows × dims`.
    Memory { dims: usize, values: Vec<f32> },
    /// In the log at these offsets, read through `file`.
    Log {
        dims: usize,
        file: File,
        offsets: Vec<u64>,
    },
}

impl Full {
    /// The vector of `row`, when it is in memory.
    pub fn in_memory(&self, row: u32) -> Option<&[f32]> {
        match self {
            Self::Memory { dims, values } => {
                let row = row as usize;
                Some(&values[row * dims..(row + 1) * dims])
            }
            Self::Log { .. } => None,
        }
    }

    /// Adds the next row, whose vector the log holds at `offset`.
    pub fn push(&mut self, vector: &[f32], offset: u64) {
        match self {
            Self::Memory { values, .. } => values.extend_from_slice(vector),
            Self::Log { offsets, .. } => offsets.push(offset),
        }
    }

    /// The exact similarity of `query` and `row`; `buffer` is reused between calls.
    pub fn score(&self, query: &[f32], row: u32, buffer: &mut Vec<f32>) -> io::Result<f32> {
        match self {
            Self::Memory { .. } => Ok(dot(query, self.in_memory(row).unwrap_or_default())),
            Self::Log {
                dims,
                file,
                offsets,
            } => {
                read_vector(file, offsets[row as usize], *dims, buffer)?;
                Ok(dot(query, buffer))
            }
        }
    }

    /// The vector of `row`.
    #[cfg(test)]
    pub fn vector(&self, row: u32) -> io::Result<Vec<f32>> {
        let mut vector = Vec::new();
        match self {
            Self::Memory { .. } => {
                vector.extend_from_slice(self.in_memory(row).unwrap_or_default())
            }
            Self::Log {
                dims,
                file,
                offsets,
            } => read_vector(file, offsets[row as usize], *dims, &mut vector)?,
        }
        Ok(vector)
    }

    /// Bytes held in memory (vectors, or their offsets in the log).
    pub fn memory_bytes(&self) -> usize {
        match self {
            Self::Memory { values, .. } => 4 * values.len(),
            Self::Log { offsets, .. } => 8 * offsets.len(),
        }
    }
}

/// Reads the `dims` little-endian `f32`s at `offset` into `out`.
fn read_vector(file: &File, offset: u64, dims: usize, out: &mut Vec<f32>) -> io::Result<()> {
    let mut bytes = vec![0u8; dims * 4];
    read_at(file, &mut bytes, offset)?;
    out.clear();
    out.extend(
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))),
    );
    Ok(())
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        let n = file.seek_read(buf, offset)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf = &mut buf[n..];
        offset += n as u64;
    }
    Ok(())
}

#[cfg(not(any(unix, windows)))]
fn read_at(_file: &File, _buf: &mut [u8], _offset: u64) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}
