//! Path quality of a [`LayeredRouting`] (seed 003 §6.1–6.3): path lengths against the minimal
//! distance, per-pair path diversity (distinct and link-disjoint paths over the layers), and the
//! all-to-all link load when each pair spreads its traffic evenly over its layers.

use fabric_topology::{Fabric, SwitchId};

use super::{LayeredRouting, NONE};

/// Statistics of [`layer_stats`], over the ordered pairs of distinct live switches that layer 0
/// routes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LayerStats {
    /// Ordered switch pairs counted.
    pub pairs: u64,
    /// Mean number of distinct paths per pair over the layers.
    pub mean_distinct: f64,
    /// Mean number of pairwise link-disjoint paths per pair (greedy, in layer order).
    pub mean_disjoint: f64,
    /// Share of pairs with at least 3 link-disjoint paths (the paper's target, §4.2).
    pub share_3_disjoint: f64,
    /// Share of the (pair, layer) paths that are minimal.
    pub share_minimal: f64,
    /// Share of the (pair, layer) paths exactly one hop longer than minimal ("almost minimal").
    pub share_almost_minimal: f64,
    /// Longest path over all layers (hops between switches).
    pub max_hops: u32,
    /// Mean path length over all (pair, layer) paths.
    pub mean_hops: f64,
    /// All-to-all of the end ports on layer 0 alone: most end-port pairs crossing one directed
    /// switch-to-switch link.
    pub a2a_layer0: u64,
    /// All-to-all with each end-port pair's traffic split evenly over the `k` layers: the most
    /// load (in pairs) on one directed switch-to-switch link.
    pub a2a_multipath: f64,
}

/// The statistics of `lr` on `fabric` (sequential; deterministic).
pub fn layer_stats(fabric: &Fabric, lr: &LayeredRouting) -> LayerStats {
    let n = lr.n;
    let live: Vec<usize> = fabric
        .switch_ids()
        .filter(|&s| fabric.switch(s).up)
        .map(SwitchId::idx)
        .collect();
    let eps: Vec<u64> = fabric
        .switch_ids()
        .map(|s| fabric.attached_end_ports(s).len() as u64)
        .collect();
    // Directed links as (switch × n + switch) → dense ids through a map per switch.
    let link = |a: usize, b: usize| a * n + b;
    let mut load0: std::collections::HashMap<usize, u64> = std::collections::HashMap::new();
    let mut loadk: std::collections::HashMap<usize, u64> = std::collections::HashMap::new();
    let mut st = LayerStats::default();
    let (mut distinct, mut disjoint, mut three, mut minimal, mut almost, mut hops, mut paths) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut ps: Vec<Vec<usize>> = Vec::new();
    let mut used: Vec<usize> = Vec::new();
    for &s in &live {
        let dist = bfs(fabric, s);
        for &d in &live {
            if s == d || lr.next[0][s * n + d] == NONE {
                continue;
            }
            st.pairs += 1;
            ps.clear();
            for l in 0..lr.k {
                let mut p = Vec::new();
                let mut x = s;
                while x != d {
                    let y = lr.next[l][x * n + d];
                    if y == NONE || p.len() > n {
                        p.clear();
                        break;
                    }
                    p.push(link(x, y as usize));
                    x = y as usize;
                }
                if p.is_empty() {
                    continue;
                }
                let w = eps[s] * eps[d];
                for &e in &p {
                    if l == 0 {
                        *load0.entry(e).or_default() += w;
                    }
                    *loadk.entry(e).or_default() += w;
                }
                ps.push(p);
            }
            let dmin = dist[d] as usize;
            for p in &ps {
                paths += 1;
                hops += p.len() as u64;
                st.max_hops = st.max_hops.max(p.len() as u32);
                if p.len() == dmin {
                    minimal += 1;
                } else if p.len() == dmin + 1 {
                    almost += 1;
                }
            }
            let mut sorted = ps.clone();
            sorted.sort();
            sorted.dedup();
            distinct += sorted.len() as u64;
            used.clear();
            let mut dj = 0;
            for p in &ps {
                if p.iter().all(|e| !used.contains(e)) {
                    dj += 1;
                    used.extend(p.iter().copied());
                }
            }
            disjoint += dj;
            three += u64::from(dj >= 3);
        }
    }
    let pairs = st.pairs.max(1) as f64;
    st.mean_distinct = distinct as f64 / pairs;
    st.mean_disjoint = disjoint as f64 / pairs;
    st.share_3_disjoint = three as f64 / pairs;
    let pathsf = paths.max(1) as f64;
    st.share_minimal = minimal as f64 / pathsf;
    st.share_almost_minimal = almost as f64 / pathsf;
    st.mean_hops = hops as f64 / pathsf;
    st.a2a_layer0 = load0.values().copied().max().unwrap_or(0);
    st.a2a_multipath = loadk.values().copied().max().unwrap_or(0) as f64 / lr.k as f64;
    st
}

/// Minimal hops from live switch `s` to every switch (BFS; `u32::MAX` when disconnected).
fn bfs(fabric: &Fabric, s: usize) -> Vec<u32> {
    let mut dist = vec![u32::MAX; fabric.num_switches()];
    dist[s] = 0;
    let mut q = std::collections::VecDeque::from([s]);
    while let Some(x) = q.pop_front() {
        for g in fabric.port_groups(SwitchId(x as u32)) {
            let y = g.remote.idx();
            if dist[y] == u32::MAX && fabric.switch(g.remote).up {
                dist[y] = dist[x] + 1;
                q.push_back(y);
            }
        }
    }
    dist
}
