//! A hierarchical navigable small-world graph (Malkov and Yashunin, 2016) over the rows of the
//! vector index, for approximate nearest-neighbour search at the million-chunk scale.
//!
//! The graph stores only neighbour lists; similarities come from a [`Space`] the caller
//! provides, so the same graph serves full-precision and int8 vectors and never copies them.
//! Node ids are the index's row numbers. Rows deleted from the index stay in the graph as
//! tombstones: searches traverse through them (so the graph stays connected) but a filter
//! keeps them out of the results, and new nodes do not link to them. There is no compaction
//! yet: dead rows keep their memory (in the graph and in the index) until one rewrites the
//! log without them and renumbers the rows.
//!
//! Concurrency: neighbour lists are atomics, so searches read them without locks while an
//! insertion (which takes a striped per-node lock to change a list) runs beside them; a
//! reader can see a list half rewritten, which costs at most a detour, never a wrong id,
//! because every id written is a valid node. Searches step only onto nodes whose insertion
//! has finished. That is also what lets [`Hnsw::insert_many`] build with several threads.
//! Growing the graph (adding nodes) needs `&mut self`.

mod insert;
mod links;
mod search;
mod snapshot;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use links::Links;
use search::Scratch;

/// Highest layer a node can be drawn into; with the default `m` of 16 a layer above 8 is
/// expected once in 2^32 nodes, so the cap never matters in practice but bounds the snapshot.
const MAX_LEVEL: u8 = 16;
/// Per-node locks are striped: enough stripes that two threads rarely share one, few enough
/// that the table stays small.
const LOCK_STRIPES: usize = 4096;

/// How the graph is shaped and built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HnswParams {
    /// Links per node on the upper layers (twice this on the bottom layer, as in the paper).
    pub m: usize,
    /// Candidates considered when linking a new node; higher builds slower, finds better links.
    pub ef_construction: usize,
    /// Seeds the draw of each node's layer, so a rebuild gives every row the same layer.
    pub seed: u64,
}

impl Default for HnswParams {
    fn default() -> Self {
        Self {
            m: 16,
            ef_construction: 200,
            seed: 0x5155_4952_4548_4e53,
        }
    }
}

/// Similarities between the points the graph is built over.
pub(crate) trait Space: Sync {
    /// Similarity of two nodes; higher is closer (cosine for unit vectors).
    fn between(&self, a: u32, b: u32) -> f32;
    /// False for nodes that new links must not point to (deleted rows).
    fn linkable(&self, node: u32) -> bool;
}

/// A node with its similarity to the point being searched for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scored {
    /// Similarity to the query; higher is closer.
    pub sim: f32,
    /// The node.
    pub node: u32,
}

impl Eq for Scored {}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.sim
            .total_cmp(&other.sim)
            .then(other.node.cmp(&self.node))
    }
}

/// Where searches start: the node on the highest layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    node: u32,
    level: u8,
}

/// The graph. See the module documentation.
#[derive(Debug)]
pub(crate) struct Hnsw {
    params: HnswParams,
    links: Links,
    /// Per node, true once its insertion has finished. Searches step only onto linked nodes:
    /// a node still being inserted has empty lists on its lower layers, and a thread that
    /// started from it would link its own node to that one node alone, an island once the
    /// first node's insertion overwrites its lists.
    linked: Vec<AtomicBool>,
    entry: Mutex<Option<Entry>>,
    locks: Box<[Mutex<()>]>,
    /// Visited sets and heaps, reused so a search allocates nothing once warm.
    scratch: Mutex<Vec<Scratch>>,
}

impl Hnsw {
    /// An empty graph.
    pub fn new(params: HnswParams) -> Self {
        let params = HnswParams {
            m: params.m.clamp(2, 255),
            ef_construction: params.ef_construction.max(1),
            ..params
        };
        Self::with_links(params, Links::new(params.m, params.m * 2), None)
    }

    /// A graph from stored lists; every node counts as linked (nodes no list points to, such
    /// as rows dead when the graph was built, are simply never reached).
    fn with_links(params: HnswParams, links: Links, entry: Option<Entry>) -> Self {
        Self {
            params,
            linked: (0..links.len()).map(|_| AtomicBool::new(true)).collect(),
            links,
            entry: Mutex::new(entry),
            locks: (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            scratch: Mutex::new(Vec::new()),
        }
    }

    /// Nodes, linked or not.
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// Adds unlinked nodes until there are `nodes`; [`Hnsw::insert_many`] links them.
    pub fn grow(&mut self, nodes: usize) {
        self.links.reserve(nodes.saturating_sub(self.links.len()));
        while self.links.len() < nodes {
            let level = level_for(self.params, self.links.len() as u32);
            self.links.push(level);
            self.linked.push(AtomicBool::new(false));
        }
    }

    /// Bytes of neighbour lists and per-node bookkeeping.
    pub fn memory_bytes(&self) -> usize {
        self.links.memory_bytes() + self.linked.len()
    }

    /// True once `node`'s insertion has finished (and so its lists are complete).
    fn is_linked(&self, node: u32) -> bool {
        // Acquire pairs with the Release in `mark_linked`: the lists written before are seen.
        self.linked[node as usize].load(Ordering::Acquire)
    }

    fn mark_linked(&self, node: u32) {
        self.linked[node as usize].store(true, Ordering::Release);
    }

    fn lock(&self, node: u32) -> std::sync::MutexGuard<'_, ()> {
        self.locks[node as usize % LOCK_STRIPES]
            .lock()
            .expect("graph node lock")
    }

    fn checkout(&self) -> Scratch {
        let reused = self.scratch.lock().expect("graph scratch lock").pop();
        reused.unwrap_or_default()
    }

    fn checkin(&self, scratch: Scratch) {
        self.scratch
            .lock()
            .expect("graph scratch lock")
            .push(scratch);
    }
}

/// The layer `node` lives up to: geometric with ratio `1/m`, drawn from a hash of the node
/// id so it does not depend on insertion order or thread timing.
fn level_for(params: HnswParams, node: u32) -> u8 {
    let bits = splitmix64(params.seed ^ u64::from(node).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    // Uniform in (0, 1]: never 0, so the logarithm is finite.
    let uniform = ((bits >> 11) + 1) as f64 / (1u64 << 53) as f64;
    let level = (-uniform.ln() / (params.m as f64).ln()).floor();
    (level as u8).min(MAX_LEVEL)
}

/// SplitMix64: a small, well-mixed 64-bit hash.
pub(crate) fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests;
