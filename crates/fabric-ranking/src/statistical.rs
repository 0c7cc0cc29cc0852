//! The resilient statistical top-switch criterion (thesis Annex 2, Alg. 14).
//!
//! 1. compute each switch's distance from every compute node;
//! 2. find each switch's *smallest most frequent* distance from nodes, `D̄_s` (the mode of its
//!    distance histogram, ties going to the smaller distance);
//! 3. select all switches with `D̄_s = min_s' D̄_s'` as top switches.
//!
//! The distance is the real shortest-path distance (not up-down: levels are not known yet).
//! A node is one hop from its leaf, so its distance to switch `s` is `1 + d(leaf, s)`; the
//! constant hop is left out, which shifts every histogram by one and changes neither the modes'
//! order nor the selection. Instead of one search per node, one search per *leaf* is weighted by
//! the number of compute nodes on that leaf (same histograms), and the searches are bit-parallel:
//! 64 leaves per pass, each switch holding a 64-bit frontier word; passes run in parallel (rayon).
//! Cost: `⌈#L/64⌉ · diameter · #E` word operations plus one histogram update per (switch, leaf).
//!
//! Compute nodes are live end ports of type [`NodeType::Compute`]; when a component has none
//! (a fabric described without node types), every live end port counts.

use rayon::prelude::*;

use fabric_topology::{Fabric, NodeType, SwitchId};

use crate::graph::{bfs, components, Adjacency, Component, UNREACHED};

/// Outcome of Alg. 14 on one connected component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Criterion {
    /// `D̄_s` for each member of the component (same order as the members).
    pub smallest_most_frequent: Vec<u32>,
    /// Local indices of the members with the smallest `D̄_s`, ascending.
    pub tops: Vec<u32>,
}

/// Per-pass scratch and the histogram it accumulates (`hist[v * stride + d]`).
struct Scratch {
    visited: Vec<u64>,
    frontier: Vec<u64>,
    next: Vec<u64>,
    hist: Vec<u64>,
}

impl Scratch {
    fn new(k: usize, stride: usize) -> Self {
        Scratch {
            visited: vec![0; k],
            frontier: vec![0; k],
            next: vec![0; k],
            hist: vec![0; k * stride],
        }
    }

    /// One bit-parallel BFS from up to 64 weighted sources (local vertex, weight).
    fn run(&mut self, adj: &Adjacency, chunk: &[(u32, u64)], stride: usize) {
        let k = adj.len();
        self.visited.fill(0);
        self.frontier.fill(0);
        let full: u64 = if chunk.len() == 64 {
            u64::MAX
        } else {
            (1u64 << chunk.len()) - 1
        };
        for (j, &(s, w)) in chunk.iter().enumerate() {
            let s = s as usize;
            self.frontier[s] |= 1 << j;
            self.visited[s] |= 1 << j;
            self.hist[s * stride] += w;
        }
        for d in 1..stride {
            let mut any = false;
            for v in 0..k {
                let seen = self.visited[v];
                if seen == full {
                    self.next[v] = 0;
                    continue;
                }
                let mut acc = 0u64;
                for &r in adj.neighbours(v) {
                    acc |= self.frontier[r as usize];
                }
                let mut new = acc & !seen;
                self.next[v] = new;
                if new != 0 {
                    any = true;
                    self.visited[v] = seen | new;
                    let row = v * stride + d;
                    while new != 0 {
                        let j = new.trailing_zeros() as usize;
                        self.hist[row] += chunk[j].1;
                        new &= new - 1;
                    }
                }
            }
            if !any {
                break;
            }
            std::mem::swap(&mut self.frontier, &mut self.next);
        }
    }
}

/// Index of the largest count, the smallest index among equal counts (`None` if all are zero).
pub(crate) fn smallest_most_frequent(hist: &[u64]) -> Option<u32> {
    let mut best: Option<(usize, u64)> = None;
    for (d, &c) in hist.iter().enumerate() {
        let better = match best {
            None => c > 0,
            Some((_, bc)) => c > bc,
        };
        if better {
            best = Some((d, c));
        }
    }
    best.map(|(d, _)| d as u32)
}

/// Runs Alg. 14 on one connected component. Returns `None` when the component holds no live end
/// port.
pub(crate) fn criterion(fabric: &Fabric, comp: &Component) -> Option<Criterion> {
    let members = &comp.members;
    let local = &comp.adj;
    let k = members.len();
    let count = |compute_only: bool| -> Vec<(u32, u64)> {
        members
            .iter()
            .enumerate()
            .filter_map(|(i, &s)| {
                let eps = fabric.attached_end_ports(SwitchId(s));
                let w = eps
                    .iter()
                    .filter(|&&e| !compute_only || fabric.end_port(e).node_type == NodeType::Compute)
                    .count();
                (w > 0).then_some((i as u32, w as u64))
            })
            .collect()
    };
    let mut sources = count(true);
    if sources.is_empty() {
        sources = count(false);
    }
    if sources.is_empty() {
        return None;
    }
    // Every distance is at most the diameter, itself at most twice the eccentricity of any vertex.
    let mut dist = vec![UNREACHED; k];
    let ecc = bfs(local, &[0], &mut dist) as usize;
    let stride = 2 * ecc + 1;
    let hist = sources
        .par_chunks(64)
        .fold(
            || Scratch::new(k, stride),
            |mut sc, chunk| {
                sc.run(local, chunk, stride);
                sc
            },
        )
        .map(|sc| sc.hist)
        .reduce(
            || vec![0; k * stride],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        );
    let dbar: Vec<u32> = (0..k)
        .map(|v| smallest_most_frequent(&hist[v * stride..(v + 1) * stride]).unwrap_or(u32::MAX))
        .collect();
    let min = dbar.iter().copied().min().unwrap_or(u32::MAX);
    let tops = (0..k as u32).filter(|&v| dbar[v as usize] == min).collect();
    Some(Criterion {
        smallest_most_frequent: dbar,
        tops,
    })
}

/// Top switches by the resilient statistical criterion (thesis Annex 2, Alg. 14), applied to
/// each connected component of the live fabric that holds end nodes; ascending switch ids.
///
/// [`crate::rank`] uses it only when upward ranking finds leaves at different heights; it is
/// exposed for diagnostics and tools.
pub fn statistical_top_switches(fabric: &Fabric) -> Vec<SwitchId> {
    let adj = Adjacency::new(fabric);
    let mut out: Vec<SwitchId> = components(fabric, &adj)
        .into_iter()
        .filter_map(|c| {
            criterion(fabric, &c).map(|r| {
                r.tops
                    .iter()
                    .map(|&v| SwitchId(c.members[v as usize]))
                    .collect::<Vec<_>>()
            })
        })
        .flatten()
        .collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_prefers_the_smaller_distance_on_ties() {
        assert_eq!(smallest_most_frequent(&[0, 16, 0, 16]), Some(1));
        assert_eq!(smallest_most_frequent(&[4, 12, 3, 48]), Some(3));
        assert_eq!(smallest_most_frequent(&[5, 0, 7, 7]), Some(2));
        assert_eq!(smallest_most_frequent(&[0, 0]), None);
        assert_eq!(smallest_most_frequent(&[]), None);
    }
}
