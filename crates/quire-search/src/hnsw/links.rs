//! Neighbour lists, flat: each list is a count followed by its capacity of ids, all atomics so
//! readers need no lock. The bottom layer has a list for every node; the upper layers only for
//! the few nodes drawn into them, found through `upper_start`.

use std::sync::atomic::{AtomicU32, Ordering};

/// `upper_start` of a node that lives on the bottom layer only.
const NO_UPPER: u32 = u32::MAX;

/// Every node's neighbour lists, on every layer it lives on.
#[derive(Debug)]
pub(super) struct Links {
    /// Capacity of an upper-layer list.
    m: usize,
    /// Capacity of a bottom-layer list.
    m0: usize,
    levels: Vec<u8>,
    /// `nodes × (1 + m0)`.
    base: Vec<AtomicU32>,
    /// Per node, the index of its layer-1 list in `upper` (in lists), or [`NO_UPPER`].
    upper_start: Vec<u32>,
    /// `upper lists × (1 + m)`; a node of level `l` owns `l` consecutive lists.
    upper: Vec<AtomicU32>,
}

impl Links {
    /// No nodes; lists of `m` links on the upper layers and `m0` on the bottom one.
    pub fn new(m: usize, m0: usize) -> Self {
        Self {
            m,
            m0,
            levels: Vec::new(),
            base: Vec::new(),
            upper_start: Vec::new(),
            upper: Vec::new(),
        }
    }

    /// Nodes.
    pub fn len(&self) -> usize {
        self.levels.len()
    }

    /// Capacity of an upper-layer list.
    pub fn m(&self) -> usize {
        self.m
    }

    /// Capacity of a bottom-layer list.
    pub fn m0(&self) -> usize {
        self.m0
    }

    /// The most links a node may have on `layer`.
    pub fn capacity(&self, layer: u8) -> usize {
        if layer == 0 { self.m0 } else { self.m }
    }

    /// The highest layer `node` lives on.
    pub fn level(&self, node: u32) -> u8 {
        self.levels[node as usize]
    }

    /// Makes room for `nodes` more nodes (their upper lists are few and grow as needed).
    pub fn reserve(&mut self, nodes: usize) {
        self.levels.reserve(nodes);
        self.base.reserve(nodes * (self.m0 + 1));
        self.upper_start.reserve(nodes);
    }

    /// Appends a node with empty lists up to `level`.
    pub fn push(&mut self, level: u8) {
        self.levels.push(level);
        self.base.extend((0..=self.m0).map(|_| AtomicU32::new(0)));
        if level == 0 {
            self.upper_start.push(NO_UPPER);
        } else {
            let start = self.upper.len() / (self.m + 1);
            self.upper_start
                .push(u32::try_from(start).expect("fewer than 2^32 upper lists"));
            let words = usize::from(level) * (self.m + 1);
            self.upper.extend((0..words).map(|_| AtomicU32::new(0)));
        }
    }

    fn list(&self, node: u32, layer: u8) -> &[AtomicU32] {
        let node = node as usize;
        if layer == 0 {
            &self.base[node * (self.m0 + 1)..(node + 1) * (self.m0 + 1)]
        } else {
            debug_assert!(
                layer <= self.levels[node],
                "node {node} is not on layer {layer}"
            );
            let list = self.upper_start[node] as usize + usize::from(layer) - 1;
            &self.upper[list * (self.m + 1)..(list + 1) * (self.m + 1)]
        }
    }

    /// Replaces `out` with the neighbours of `node` on `layer`.
    pub fn read(&self, node: u32, layer: u8, out: &mut Vec<u32>) {
        out.clear();
        let list = self.list(node, layer);
        // Acquire pairs with the Release in `write`: the ids written before the count are seen.
        let count = (list[0].load(Ordering::Acquire) as usize).min(list.len() - 1);
        out.extend(list[1..=count].iter().map(|id| id.load(Ordering::Relaxed)));
    }

    /// Sets the neighbours of `node` on `layer`; the caller holds the node's lock, so writers
    /// never interleave, and `ids` fits the capacity.
    pub fn write(&self, node: u32, layer: u8, ids: &[u32]) {
        let list = self.list(node, layer);
        debug_assert!(ids.len() < list.len(), "too many links");
        let count = ids.len().min(list.len() - 1);
        for (slot, id) in list[1..].iter().zip(&ids[..count]) {
            slot.store(*id, Ordering::Relaxed);
        }
        list[0].store(count as u32, Ordering::Release);
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.levels.len() + 4 * (self.base.len() + self.upper_start.len() + self.upper.len())
    }

    /// Every layer's list of every node, in node order then layer order: the snapshot layout.
    pub fn words(&self) -> (&[u8], &[AtomicU32], &[AtomicU32]) {
        (&self.levels, &self.base, &self.upper)
    }

    /// Rebuilds the lists from a snapshot's parts; `None` when they do not fit together or an
    /// id or count is out of range, so a damaged snapshot is rebuilt rather than trusted.
    pub fn from_parts(
        m: usize,
        m0: usize,
        levels: Vec<u8>,
        base: Vec<u32>,
        upper: Vec<u32>,
    ) -> Option<Self> {
        let nodes = levels.len();
        if levels.iter().any(|level| *level > super::MAX_LEVEL) {
            return None;
        }
        if base.len() != nodes.checked_mul(m0 + 1)? {
            return None;
        }
        let mut upper_start = Vec::with_capacity(nodes);
        let mut lists = 0usize;
        for level in &levels {
            if *level == 0 {
                upper_start.push(NO_UPPER);
            } else {
                upper_start.push(u32::try_from(lists).ok()?);
                lists += usize::from(*level);
            }
        }
        if upper.len() != lists.checked_mul(m + 1)? {
            return None;
        }
        let valid = |words: &[u32], width: usize| {
            words.chunks_exact(width + 1).all(|list| {
                let count = list[0] as usize;
                count <= width && list[1..=count].iter().all(|id| (*id as usize) < nodes)
            })
        };
        if !valid(&base, m0) || !valid(&upper, m) {
            return None;
        }
        Some(Self {
            m,
            m0,
            levels,
            base: base.into_iter().map(AtomicU32::new).collect(),
            upper_start,
            upper: upper.into_iter().map(AtomicU32::new).collect(),
        })
    }
}
