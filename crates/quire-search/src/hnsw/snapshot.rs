//! The graph as bytes, for the snapshot file beside the vector log. Everything is
//! little-endian: `m`, `m0`, nodes, upper-list words, the entry node and its level, then each
//! node's level, the bottom-layer lists and the upper-layer lists. Reading validates every id,
//! so a damaged file is refused (and the graph rebuilt), never trusted.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU32, Ordering};

use super::links::Links;
use super::{Entry, Hnsw, HnswParams};

/// Entry node of an empty graph.
const NO_ENTRY: u32 = u32::MAX;

impl Hnsw {
    /// Writes the graph; the caller makes sure no insertion runs meanwhile.
    pub fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        let (levels, base, upper) = self.links.words();
        let entry = *self.entry.lock().expect("graph entry lock");
        out.write_all(&(self.links.m() as u32).to_le_bytes())?;
        out.write_all(&(self.links.m0() as u32).to_le_bytes())?;
        out.write_all(&(levels.len() as u64).to_le_bytes())?;
        out.write_all(&(upper.len() as u64).to_le_bytes())?;
        out.write_all(&entry.map_or(NO_ENTRY, |e| e.node).to_le_bytes())?;
        out.write_all(&[entry.map_or(0, |e| e.level)])?;
        out.write_all(levels)?;
        write_words(out, base)?;
        write_words(out, upper)
    }

    /// Reads a graph of `nodes` nodes written by [`Hnsw::write_to`]; `Ok(None)` when it has
    /// another size, was made with another `m` or does not hold together.
    pub fn read_from(
        params: HnswParams,
        nodes: usize,
        input: &mut impl Read,
    ) -> io::Result<Option<Self>> {
        let fresh = Self::new(params);
        let (m, m0) = (fresh.links.m(), fresh.links.m0());
        let mut head = [0u8; 29];
        input.read_exact(&mut head)?;
        let word = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().expect("4 bytes"));
        let long = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().expect("8 bytes"));
        if word(0) as usize != m || word(4) as usize != m0 {
            return Ok(None);
        }
        let upper_words = usize::try_from(long(16)).unwrap_or(usize::MAX);
        let (entry_node, entry_level) = (word(24), head[28]);
        // Sizes are checked before anything is allocated, so a damaged length cannot ask for
        // an enormous buffer.
        let most_upper = nodes.saturating_mul(m + 1) * usize::from(super::MAX_LEVEL);
        if long(8) != nodes as u64 || upper_words > most_upper {
            return Ok(None);
        }
        let mut levels = vec![0u8; nodes];
        input.read_exact(&mut levels)?;
        let base = read_words(input, nodes * (m0 + 1))?;
        let upper = read_words(input, upper_words)?;
        let entry = match entry_node {
            NO_ENTRY => None,
            node if (node as usize) < nodes && levels[node as usize] == entry_level => {
                Some(Entry {
                    node,
                    level: entry_level,
                })
            }
            _ => return Ok(None),
        };
        Ok(Links::from_parts(m, m0, levels, base, upper)
            .map(|links| Self::with_links(fresh.params, links, entry)))
    }
}

fn write_words(out: &mut impl Write, words: &[AtomicU32]) -> io::Result<()> {
    let mut buffer = Vec::with_capacity(64 * 1024);
    for chunk in words.chunks(16 * 1024) {
        buffer.clear();
        for word in chunk {
            buffer.extend_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        out.write_all(&buffer)?;
    }
    Ok(())
}

fn read_words(input: &mut impl Read, count: usize) -> io::Result<Vec<u32>> {
    let mut words = Vec::with_capacity(count);
    let mut buffer = vec![0u8; 64 * 1024];
    while words.len() < count {
        let take = (count - words.len()).min(buffer.len() / 4);
        input.read_exact(&mut buffer[..take * 4])?;
        words.extend(
            buffer[..take * 4]
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))),
        );
    }
    Ok(words)
}
