//! Searching: a greedy walk down the upper layers, then a best-first search of the bottom
//! layer that keeps the `ef` best nodes the filter accepts while walking through all of them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{Hnsw, Scored};

/// Per-search working memory, pooled by the graph.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// `visited[node] == epoch` marks a node seen in the current layer search, so the set is
    /// cleared by bumping the epoch instead of zeroing a million entries.
    visited: Vec<u32>,
    epoch: u32,
    candidates: BinaryHeap<Scored>,
    results: BinaryHeap<Reverse<Scored>>,
    neighbours: Vec<u32>,
    /// For the caller's own neighbour reads (insertion), so it never allocates either.
    pub spare: Vec<u32>,
}

impl Scratch {
    /// Starts a new layer search over a graph of `nodes` nodes.
    fn reset(&mut self, nodes: usize) {
        if self.visited.len() < nodes {
            self.visited.resize(nodes, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.visited.fill(0);
            self.epoch = 1;
        }
        self.candidates.clear();
        self.results.clear();
    }

    /// Marks `node` visited; false when it already was.
    fn visit(&mut self, node: u32) -> bool {
        let slot = &mut self.visited[node as usize];
        let fresh = *slot != self.epoch;
        *slot = self.epoch;
        fresh
    }
}

impl Hnsw {
    /// Up to `ef` nodes among those `allow` accepts, closest to the point `score` measures
    /// against, best first. Nodes `allow` refuses are still walked through, so a filter never
    /// cuts the graph apart; it only makes the search look further.
    pub fn search(
        &self,
        score: impl Fn(u32) -> f32,
        allow: impl Fn(u32) -> bool,
        ef: usize,
    ) -> Vec<Scored> {
        let Some(entry) = *self.entry.lock().expect("graph entry lock") else {
            return Vec::new();
        };
        let mut scratch = self.checkout();
        let mut current = Scored {
            sim: score(entry.node),
            node: entry.node,
        };
        for layer in (1..=entry.level).rev() {
            current = self.greedy(&mut scratch, &score, current, layer);
        }
        let found = self.search_layer(&mut scratch, &score, current, ef.max(1), 0, &allow);
        self.checkin(scratch);
        found
    }

    /// Moves from `current` to a better neighbour on `layer` until none is better.
    pub(super) fn greedy(
        &self,
        scratch: &mut Scratch,
        score: &impl Fn(u32) -> f32,
        mut current: Scored,
        layer: u8,
    ) -> Scored {
        let mut neighbours = std::mem::take(&mut scratch.neighbours);
        loop {
            let mut moved = false;
            self.links.read(current.node, layer, &mut neighbours);
            for &node in &neighbours {
                if !self.is_linked(node) {
                    continue;
                }
                let sim = score(node);
                if sim > current.sim {
                    current = Scored { sim, node };
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        scratch.neighbours = neighbours;
        current
    }

    /// Best-first search of one layer from `start`, keeping the `ef` best nodes `allow`
    /// accepts; returns them best first.
    pub(super) fn search_layer(
        &self,
        scratch: &mut Scratch,
        score: &impl Fn(u32) -> f32,
        start: Scored,
        ef: usize,
        layer: u8,
        allow: &impl Fn(u32) -> bool,
    ) -> Vec<Scored> {
        scratch.reset(self.links.len());
        scratch.visit(start.node);
        scratch.candidates.push(start);
        if allow(start.node) {
            scratch.results.push(Reverse(start));
        }
        let mut neighbours = std::mem::take(&mut scratch.neighbours);
        while let Some(current) = scratch.candidates.pop() {
            let worst = scratch.results.peek().map(|w| w.0.sim);
            if scratch.results.len() >= ef && worst.is_some_and(|w| current.sim < w) {
                // Nothing left to expand can improve a full result set.
                break;
            }
            self.links.read(current.node, layer, &mut neighbours);
            for &node in &neighbours {
                if !self.is_linked(node) || !scratch.visit(node) {
                    continue;
                }
                let sim = score(node);
                let full = scratch.results.len() >= ef;
                if full && scratch.results.peek().is_some_and(|w| sim <= w.0.sim) {
                    continue;
                }
                let scored = Scored { sim, node };
                scratch.candidates.push(scored);
                if allow(node) {
                    scratch.results.push(Reverse(scored));
                    if scratch.results.len() > ef {
                        scratch.results.pop();
                    }
                }
            }
        }
        scratch.neighbours = neighbours;
        let mut found: Vec<Scored> = scratch.results.drain().map(|Reverse(s)| s).collect();
        found.sort_unstable_by(|a, b| b.cmp(a));
        found
    }
}
