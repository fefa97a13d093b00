//! Linking new nodes (the paper's algorithms 1 and 4): find the closest nodes on each layer the
//! node lives on, keep a diverse few as its links, and link them back, pruning their lists
//! with the same heuristic when they are full.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::search::Scratch;
use super::{Entry, Hnsw, Scored, Space};

/// Below this many nodes a batch is linked on the calling thread: spawning costs more.
const PARALLEL_MIN: usize = 256;
/// Nodes a thread takes at a time in a parallel build.
const BLOCK: usize = 64;

impl Hnsw {
    /// Links `nodes` (added by [`Hnsw::grow`] and not linked yet) into the graph, using up to
    /// `threads` threads. Nodes are linked in the order given when `threads` is 1, so a
    /// single-threaded build is reproducible.
    pub fn insert_many(&self, nodes: &[u32], space: &impl Space, threads: usize) {
        if threads <= 1 || nodes.len() < PARALLEL_MIN {
            let mut scratch = self.checkout();
            for &node in nodes {
                self.insert(node, space, &mut scratch);
            }
            self.checkin(scratch);
            return;
        }
        // Threads take the next block of nodes from a shared counter, so none waits for a
        // slow one. Blocks rather than single nodes: rows next to each other are usually
        // chunks of one document, near-duplicates, and two of them linked at the same time
        // cannot see each other; the group's last one can then be left with no link pointing
        // to it. One thread links a block in order, as a single-threaded build would.
        let next = AtomicUsize::new(0);
        std::thread::scope(|threads_scope| {
            for _ in 0..threads {
                threads_scope.spawn(|| {
                    let mut scratch = self.checkout();
                    loop {
                        let start = next.fetch_add(BLOCK, Ordering::Relaxed);
                        let Some(block) = nodes.get(start..nodes.len().min(start + BLOCK)) else {
                            break;
                        };
                        for &node in block {
                            self.insert(node, space, &mut scratch);
                        }
                    }
                    self.checkin(scratch);
                });
            }
        });
    }

    fn insert(&self, node: u32, space: &impl Space, scratch: &mut Scratch) {
        let level = self.links.level(node);
        let entry = {
            let mut entry = self.entry.lock().expect("graph entry lock");
            match *entry {
                None => {
                    self.mark_linked(node);
                    *entry = Some(Entry { node, level });
                    return;
                }
                Some(entry) => entry,
            }
        };
        if entry.node == node {
            return;
        }
        let score = |other: u32| space.between(node, other);
        let mut current = Scored {
            sim: score(entry.node),
            node: entry.node,
        };
        for layer in (level + 1..=entry.level).rev() {
            current = self.greedy(scratch, &score, current, layer);
        }
        let linkable = |other: u32| other != node && space.linkable(other);
        for layer in (0..=level.min(entry.level)).rev() {
            let found = self.search_layer(
                scratch,
                &score,
                current,
                self.params.ef_construction,
                layer,
                &linkable,
            );
            let chosen: Vec<u32> = select(space, &found, self.params.m)
                .iter()
                .map(|s| s.node)
                .collect();
            {
                let _guard = self.lock(node);
                self.links.write(node, layer, &chosen);
            }
            for &neighbour in &chosen {
                self.connect(space, neighbour, node, layer, scratch);
            }
            if let Some(best) = found.first() {
                current = *best;
            }
        }
        self.mark_linked(node);
        if level > entry.level {
            let mut entry = self.entry.lock().expect("graph entry lock");
            if entry.is_none_or(|e| e.level < level) {
                *entry = Some(Entry { node, level });
            }
        }
    }

    /// Adds `to` to the links of `from` on `layer`, pruning `from`'s list when it is full
    /// (dead nodes are dropped first: nothing should be led to them any more).
    fn connect(&self, space: &impl Space, from: u32, to: u32, layer: u8, scratch: &mut Scratch) {
        let capacity = self.links.capacity(layer);
        let _guard = self.lock(from);
        let mut links = std::mem::take(&mut scratch.spare);
        self.links.read(from, layer, &mut links);
        if !links.contains(&to) {
            if links.len() < capacity {
                links.push(to);
                self.links.write(from, layer, &links);
            } else {
                let mut candidates: Vec<Scored> = links
                    .iter()
                    .copied()
                    .chain([to])
                    .filter(|n| space.linkable(*n))
                    .map(|n| Scored {
                        sim: space.between(from, n),
                        node: n,
                    })
                    .collect();
                candidates.sort_unstable_by(|a, b| b.cmp(a));
                links.clear();
                links.extend(select(space, &candidates, capacity).iter().map(|s| s.node));
                self.links.write(from, layer, &links);
            }
        }
        scratch.spare = links;
    }
}

/// The paper's neighbour-selection heuristic: candidates (best first) are taken unless one is
/// closer to a neighbour already taken than to the base point, so links spread in several
/// directions instead of piling into the nearest cluster, which keeps clustered data
/// navigable.
fn select(space: &impl Space, candidates: &[Scored], max: usize) -> Vec<Scored> {
    if candidates.len() <= max {
        return candidates.to_vec();
    }
    let mut chosen: Vec<Scored> = Vec::with_capacity(max);
    for candidate in candidates {
        if chosen.len() >= max {
            break;
        }
        if chosen
            .iter()
            .all(|taken| space.between(candidate.node, taken.node) < candidate.sim)
        {
            chosen.push(*candidate);
        }
    }
    chosen
}
