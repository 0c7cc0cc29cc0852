//! Layered multipath routing of the Slim Fly paper (seed 003 §4.2–4.3, Algorithm 1, Appendix
//! B.1; §5.1 for the LID offsets): `k` layers, each a full destination-based routing between
//! switches, layer 0 on minimal paths and layers `1..k` on "almost minimal" paths (one hop longer
//! than minimal), balanced across layers; layer `i` is routed on LID offset `i` of every end port.
//!
//! **Algorithm 1 as built here** ([`build_layers`]):
//! * `W` (the paper's link weight matrix): per directed switch-to-switch link, the number of
//!   routes (sending × receiving end ports, B.1.3) already placed on it, over all layers.
//! * Priorities (B.1.2): per ordered switch pair, the number of almost-minimal paths it has in
//!   any layer. Each layer processes the pairs in increasing priority, randomly (seeded) within a
//!   priority; each pair appears once per direction.
//! * `find_path` (B.1.1): every path of the target length from `s` to `d` that is consistent
//!   with the layer's partial forwarding tree towards `d` (a switch already routed towards `d`
//!   in this layer must be followed) and simple; the one of minimal `Σ W` is taken (first found
//!   on ties; a search budget bounds the enumeration on large-diameter graphs). Target length:
//!   the minimal distance in layer 0, distance + 1 in the others.
//! * Inserting a path fixes the next hop towards `d` of every switch on it (its suffix pairs
//!   become routed, B.1.4), raises `W` along the path by the new routes and the priority of every
//!   newly routed pair whose path is not minimal.
//! * Pairs left without a path (B.1.4: already fixed by another path, or no consistent path of
//!   the target length) are routed along the shortest path consistent with the layer (the
//!   paper's "fallback to a minimal path"), balanced by `W`.
//!
//! The result is `k` tables ([`LayeredRouting::tables`]), one per layer, each filling the base
//! LIDs and switch LIDs of the plan it is given: layer `i`'s table is what the LFTs hold for LID
//! offset `i`. The engine [`Layered`] (`layered:K`, [`crate::route_all`]) writes them into one
//! table over the plan's layer offsets (LMC ≥ 2, [`crate::lid`]: `K ≤ 2^LMC − 1`, the last
//! offset being the escape); its VL layering is [`crate::vl::layer_base`] of that table (every
//! layer offset is a base LID, [`crate::vl::base_lids`]).

mod engine;
#[cfg(test)]
pub(crate) mod graphs;
mod stats;
#[cfg(test)]
mod tests;

pub use engine::{layers_misfit, lmc_for_layers, Layered};
pub use stats::{layer_stats, LayerStats};

use fabric_topology::{Fabric, SwitchId};
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::lft::{Lfts, NO_ROUTE};
use crate::lid::LidPlan;

const NONE: u32 = u32::MAX;
const INF: u16 = u16::MAX;
/// Paths examined per `find_path` at most.
const SEARCH_BUDGET: u32 = 1 << 16;

/// Errors of [`build_layers`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LayeredError {
    #[error("the number of layers must be 1..=128, got {0}")]
    BadLayerCount(usize),
    #[error("the LID plan was made for another fabric")]
    PlanMismatch,
}

/// `k` destination-based layers over the switches: `next[l][s × n + d]` is the switch `s`
/// forwards to towards switch `d` in layer `l`, and their tables.
#[derive(Clone, Debug)]
pub struct LayeredRouting {
    /// Number of layers.
    pub k: usize,
    /// Switches.
    pub n: usize,
    /// Next switch per layer, flat `[s × n + d]` (`u32::MAX`: none / `s == d`).
    pub next: Vec<Vec<u32>>,
    /// Per layer, the tables of the base LIDs and switch LIDs of the plan (offset `i` = table `i`).
    pub tables: Vec<Lfts>,
}

/// Per-layer forwarding state towards every destination switch.
struct Layer {
    next: Vec<u32>,
    /// Hops from `s` to `d` along the layer's route (INF: not routed).
    len: Vec<u16>,
}

/// The state of Algorithm 1.
struct Builder<'a> {
    fabric: &'a Fabric,
    n: usize,
    /// Neighbours of each switch (CSR over live port groups): `adj[astart[s]..astart[s + 1]]`.
    astart: Vec<u32>,
    adj: Vec<u32>,
    /// `W`, per adjacency slot (directed link).
    w: Vec<u64>,
    /// Minimal hops, `[s × n + d]`.
    dist: Vec<u16>,
    /// End ports per switch (at least 1: switches send and receive too).
    eps: Vec<u64>,
    /// Almost-minimal paths per ordered pair, over all layers.
    prio: Vec<u32>,
}

impl<'a> Builder<'a> {
    fn new(fabric: &'a Fabric) -> Self {
        let n = fabric.num_switches();
        let mut astart = vec![0u32];
        let mut adj = Vec::new();
        for s in fabric.switch_ids() {
            if fabric.switch(s).up {
                adj.extend(
                    fabric
                        .port_groups(s)
                        .iter()
                        .filter(|g| fabric.switch(g.remote).up)
                        .map(|g| g.remote.0),
                );
            }
            astart.push(adj.len() as u32);
        }
        let mut dist = vec![INF; n * n];
        let mut queue = Vec::with_capacity(n);
        for s in 0..n {
            if !fabric.switch(SwitchId(s as u32)).up {
                continue;
            }
            let row = &mut dist[s * n..(s + 1) * n];
            row[s] = 0;
            queue.clear();
            queue.push(s as u32);
            let mut h = 0;
            while h < queue.len() {
                let x = queue[h] as usize;
                h += 1;
                for &y in &adj[astart[x] as usize..astart[x + 1] as usize] {
                    if row[y as usize] == INF {
                        row[y as usize] = row[x] + 1;
                        queue.push(y);
                    }
                }
            }
        }
        let eps = fabric
            .switch_ids()
            .map(|s| fabric.attached_end_ports(s).len().max(1) as u64)
            .collect();
        let w = vec![0; adj.len()];
        Builder {
            fabric,
            n,
            astart,
            adj,
            w,
            dist,
            eps,
            prio: vec![0; n * n],
        }
    }

    fn nbrs(&self, x: usize) -> std::ops::Range<usize> {
        self.astart[x] as usize..self.astart[x + 1] as usize
    }

    fn slot(&self, x: usize, y: u32) -> usize {
        self.nbrs(x).find(|&k| self.adj[k] == y).unwrap_or(usize::MAX)
    }

    /// `Σ W` along the layer's fixed route from `y` to `d`.
    fn suffix_cost(&self, lay: &Layer, mut y: usize, d: usize) -> u64 {
        let mut c = 0;
        while y != d {
            let z = lay.next[y * self.n + d];
            c += self.w[self.slot(y, z)];
            y = z as usize;
        }
        c
    }

    /// B.1.1: the consistent simple path of exactly `len` hops from `s` to `d` of minimal `Σ W`
    /// (switches up to the first already-routed one, or `d`).
    fn find_path(&self, lay: &Layer, s: usize, d: usize, len: u16) -> Option<Vec<u32>> {
        let mut best: Option<(u64, Vec<u32>)> = None;
        let mut path = vec![s as u32];
        let mut budget = SEARCH_BUDGET;
        self.search(lay, d, len, 0, &mut path, &mut best, &mut budget);
        best.map(|b| b.1)
    }

    #[allow(clippy::too_many_arguments)]
    fn search(
        &self,
        lay: &Layer,
        d: usize,
        r: u16,
        cost: u64,
        path: &mut Vec<u32>,
        best: &mut Option<(u64, Vec<u32>)>,
        budget: &mut u32,
    ) {
        let x = *path.last().unwrap_or(&0) as usize;
        let n = self.n;
        for k in self.nbrs(x) {
            if *budget == 0 {
                return;
            }
            *budget -= 1;
            let y = self.adj[k] as usize;
            let dy = self.dist[y * n + d];
            if dy == INF || dy > r - 1 || path.contains(&(y as u32)) {
                continue;
            }
            let c = cost + self.w[k];
            let done = if y == d {
                (r == 1).then_some(c)
            } else if lay.next[y * n + d] != NONE {
                (lay.len[y * n + d] == r - 1).then(|| c + self.suffix_cost(lay, y, d))
            } else {
                if r > 1 {
                    path.push(y as u32);
                    self.search(lay, d, r - 1, c, path, best, budget);
                    path.pop();
                }
                None
            };
            if let Some(total) = done {
                if best.as_ref().is_none_or(|b| total < b.0) {
                    let mut p = path.clone();
                    p.push(y as u32);
                    *best = Some((total, p));
                }
            }
        }
    }

    /// Inserts `path` (ending at `d` or at a switch already routed towards `d`) into the layer;
    /// raises `W` by the new routes and the priorities of the new non-minimal pairs.
    fn insert(&mut self, lay: &mut Layer, path: &[u32], d: usize) {
        let n = self.n;
        let m = path.len() - 1;
        let tail = lay.len[path[m] as usize * n + d];
        let tail = if path[m] as usize == d { 0 } else { tail };
        for t in 0..m {
            let x = path[t] as usize;
            lay.next[x * n + d] = path[t + 1];
            let l = (m - t) as u16 + tail;
            lay.len[x * n + d] = l;
            if l > self.dist[x * n + d] {
                self.prio[x * n + d] += 1;
            }
        }
        // Sources upstream of each link: the new switches' end ports, times d's end ports.
        let mut flow = 0u64;
        let mut x = path[0] as usize;
        let mut t = 0;
        while x != d {
            if t < m {
                flow += self.eps[x];
            }
            let y = lay.next[x * n + d];
            let k = self.slot(x, y);
            self.w[k] += flow * self.eps[d];
            x = y as usize;
            t += 1;
        }
    }

    /// B.1.4's fallback: every switch not yet routed towards `d` in the layer takes the shortest
    /// path consistent with the layer (balanced by `W`).
    fn fill(&mut self, lay: &mut Layer, d: usize, cd: &mut [u16], order: &mut Vec<u32>, flow: &mut [u64]) {
        let n = self.n;
        cd.fill(INF);
        order.clear();
        cd[d] = 0;
        order.push(d as u32);
        let mut h = 0;
        while h < order.len() {
            let y = order[h] as usize;
            h += 1;
            for k in self.nbrs(y) {
                let x = self.adj[k] as usize;
                let nx = lay.next[x * n + d];
                if cd[x] == INF && x != d && (nx == NONE || nx as usize == y) {
                    cd[x] = cd[y] + 1;
                    order.push(x as u32);
                }
            }
        }
        flow.fill(0);
        for &x in &order[1..] {
            let x = x as usize;
            if lay.next[x * n + d] != NONE {
                continue;
            }
            let mut pick = (u64::MAX, NONE);
            for k in self.nbrs(x) {
                let y = self.adj[k];
                if cd[y as usize] + 1 == cd[x] && self.w[k] < pick.0 {
                    pick = (self.w[k], y);
                }
            }
            lay.next[x * n + d] = pick.1;
            lay.len[x * n + d] = cd[x];
            if cd[x] > self.dist[x * n + d] {
                self.prio[x * n + d] += 1;
            }
            flow[x] = self.eps[x];
        }
        for &x in order[1..].iter().rev() {
            let x = x as usize;
            if flow[x] > 0 {
                let y = lay.next[x * n + d];
                let k = self.slot(x, y);
                self.w[k] += flow[x] * self.eps[d];
                flow[y as usize] += flow[x];
            }
        }
    }

    /// One layer: the pairs by priority (random within a priority), a path of the target
    /// length for each pair not yet routed, then the fallback.
    fn layer(&mut self, index: usize, rng: &mut rand_chacha::ChaCha8Rng) -> Layer {
        let n = self.n;
        let mut lay = Layer {
            next: vec![NONE; n * n],
            len: vec![INF; n * n],
        };
        let mut pairs: Vec<u32> = (0..(n * n) as u32)
            .filter(|&p| {
                let (s, d) = (p as usize / n, p as usize % n);
                s != d && self.dist[p as usize] != INF
            })
            .collect();
        pairs.shuffle(rng);
        pairs.sort_by_key(|&p| self.prio[p as usize]);
        for p in pairs {
            let (s, d) = (p as usize / n, p as usize % n);
            if lay.next[s * n + d] != NONE {
                continue;
            }
            let len = self.dist[s * n + d] + u16::from(index > 0);
            if let Some(path) = self.find_path(&lay, s, d, len) {
                self.insert(&mut lay, &path, d);
            }
        }
        let (mut cd, mut order, mut flow) = (vec![INF; n], Vec::new(), vec![0u64; n]);
        for d in 0..n {
            if self.fabric.switch(SwitchId(d as u32)).up {
                self.fill(&mut lay, d, &mut cd, &mut order, &mut flow);
            }
        }
        lay
    }
}

/// Algorithm 1 with `k` layers (seeded order within a priority), and each layer's tables over
/// the base LIDs and switch LIDs of `lids` (parallel cables: the end port's (or switch's) index
/// modulo their number).
pub fn build_layers(fabric: &Fabric, lids: &LidPlan, k: usize, seed: u64) -> Result<LayeredRouting, LayeredError> {
    if k == 0 || k > 128 {
        return Err(LayeredError::BadLayerCount(k));
    }
    if lids.check_covers(fabric).is_err() {
        return Err(LayeredError::PlanMismatch);
    }
    let mut b = Builder::new(fabric);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let layers: Vec<Layer> = (0..k).map(|i| b.layer(i, &mut rng)).collect();
    let n = b.n;
    let tables = layers.iter().map(|l| tables_of(fabric, lids, &l.next)).collect();
    Ok(LayeredRouting {
        k,
        n,
        next: layers.into_iter().map(|l| l.next).collect(),
        tables,
    })
}

/// The LFTs of one layer's next-switch matrix.
fn tables_of(fabric: &Fabric, lids: &LidPlan, next: &[u32]) -> Lfts {
    let n = fabric.num_switches();
    let mut lfts = Lfts::new(n, lids.top());
    let port_to = |s: SwitchId, t: u32, spread: usize| -> u8 {
        fabric
            .port_groups(s)
            .iter()
            .find(|g| g.remote.0 == t)
            .map_or(NO_ROUTE, |g| g.ports[spread % g.ports.len()])
    };
    for s in fabric.switch_ids().filter(|&s| fabric.switch(s).up) {
        for e in fabric.end_port_ids().filter(|&e| fabric.end_port_live(e)) {
            let lid = lids.base_lid(e);
            let Some((t, leaf_port)) = fabric.end_port(e).attach else {
                continue;
            };
            if lid == 0 {
                continue;
            }
            let port = if t == s {
                leaf_port
            } else {
                match next[s.idx() * n + t.idx()] {
                    NONE => NO_ROUTE,
                    y => port_to(s, y, e.idx()),
                }
            };
            lfts.set(s, lid, port);
        }
        for t in fabric.switch_ids().filter(|&t| fabric.switch(t).up) {
            let lid = lids.switch_lid(t);
            if lid == 0 {
                continue;
            }
            let port = if t == s {
                0
            } else {
                match next[s.idx() * n + t.idx()] {
                    NONE => NO_ROUTE,
                    y => port_to(s, y, t.idx()),
                }
            };
            lfts.set(s, lid, port);
        }
    }
    lfts
}
