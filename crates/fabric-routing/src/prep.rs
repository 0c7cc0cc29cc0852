//! Dmodc preprocessing (thesis §4.2.1), shared by Dmodc and the Up*/Down* engines: link
//! orientation, costs and downcosts (Alg. 5 / Alg. 6), dividers (Alg. 5), topological NIDs
//! (Alg. 7).
//!
//! An [`Oriented`] fabric gives every usable switch a level; a link is *up* from the lower to
//! the higher level, links between equal levels are not used. Dmodc takes the levels from the
//! ranking, Up*/Down* from a BFS spanning tree (Alg. 10). The orientation is acyclic by
//! construction, so the "repeat until nothing changes" loops of Alg. 6 reduce to one pass in
//! level order (ascending for downcosts and dividers, descending for costs), which is Alg. 5.
//!
//! Matrices are flat `Vec<u8>` with one row per oriented switch in *level order* (so that one
//! level is a contiguous block of rows, written in parallel while the rows of the other levels
//! are read) and one column per leaf; 255 means ∞.

use rayon::prelude::*;

use fabric_topology::{Fabric, SwitchId};

mod incremental_costs;
pub(crate) use incremental_costs::costs_from;

/// Cost value meaning "no up-down path".
pub(crate) const INF: u8 = u8::MAX;
/// Marks "not oriented" / "not a leaf" / "no topological NID" in index vectors.
pub(crate) const NONE: u32 = u32::MAX;

/// One neighbour of a switch: the index of the port group in `Fabric::port_groups(s)` and the
/// remote switch's row position.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Nbr {
    pub group: u16,
    pub pos: u32,
}

/// A fabric with a level per usable switch, neighbours split into up and down (each in port
/// group order, i.e. by remote GUID), and dense leaf indices.
pub(crate) struct Oriented {
    /// Oriented switches in level order (ascending level, then ascending id): row position →
    /// switch.
    pub order: Vec<SwitchId>,
    /// Switch → row position (or [`NONE`]).
    pub pos: Vec<u32>,
    /// Row ranges of the distinct levels, ascending.
    pub level_ranges: Vec<std::ops::Range<usize>>,
    /// CSR neighbours per position: `nbr[start[p]..split[p]]` up, `nbr[split[p]..start[p+1]]` down.
    pub start: Vec<u32>,
    pub split: Vec<u32>,
    pub nbr: Vec<Nbr>,
    /// Dense leaf index → position. Leaves are oriented switches with live end ports, in level
    /// order.
    pub leaves: Vec<u32>,
    /// Position → leaf index (or [`NONE`]).
    pub leaf_idx: Vec<u32>,
}

impl Oriented {
    /// Orients the live switch graph by `level` (`None` = not used).
    pub fn new(fabric: &Fabric, level: &[Option<u32>]) -> Self {
        let n = fabric.num_switches();
        let mut order: Vec<SwitchId> = fabric
            .switch_ids()
            .filter(|&s| fabric.switch(s).up && level.get(s.idx()).copied().flatten().is_some())
            .collect();
        let lv = |s: SwitchId| level[s.idx()].unwrap_or(0);
        order.sort_by_key(|&s| (lv(s), s));
        let mut pos = vec![NONE; n];
        for (p, &s) in order.iter().enumerate() {
            pos[s.idx()] = p as u32;
        }
        let levels: Vec<u32> = order.iter().map(|&s| lv(s)).collect();
        let mut level_ranges = Vec::new();
        let mut a = 0;
        while a < levels.len() {
            let mut b = a;
            while b < levels.len() && levels[b] == levels[a] {
                b += 1;
            }
            level_ranges.push(a..b);
            a = b;
        }
        let mut start = Vec::with_capacity(order.len() + 1);
        let mut split = Vec::with_capacity(order.len());
        let mut nbr = Vec::new();
        for (p, &s) in order.iter().enumerate() {
            start.push(nbr.len() as u32);
            let groups = fabric.port_groups(s);
            let mut downs = Vec::new();
            for (gi, g) in groups.iter().enumerate() {
                let rp = pos[g.remote.idx()];
                if rp == NONE || gi > u16::MAX as usize {
                    continue;
                }
                let rl = levels[rp as usize];
                if rl > levels[p] {
                    nbr.push(Nbr {
                        group: gi as u16,
                        pos: rp,
                    });
                } else if rl < levels[p] {
                    downs.push(Nbr {
                        group: gi as u16,
                        pos: rp,
                    });
                }
            }
            split.push(nbr.len() as u32);
            nbr.extend(downs);
        }
        start.push(nbr.len() as u32);
        let mut leaves = Vec::new();
        let mut leaf_idx = vec![NONE; order.len()];
        for (p, &s) in order.iter().enumerate() {
            if fabric.is_leaf(s) {
                leaf_idx[p] = leaves.len() as u32;
                leaves.push(p as u32);
            }
        }
        Oriented {
            order,
            pos,
            level_ranges,
            start,
            split,
            nbr,
            leaves,
            leaf_idx,
        }
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }
    pub fn num_leaves(&self) -> usize {
        self.leaves.len()
    }
    pub fn ups(&self, p: usize) -> &[Nbr] {
        &self.nbr[self.start[p] as usize..self.split[p] as usize]
    }
    pub fn downs(&self, p: usize) -> &[Nbr] {
        &self.nbr[self.split[p] as usize..self.start[p + 1] as usize]
    }
}

/// Costs of every oriented switch to every leaf: `down` = c' (downward paths only, the upward
/// pass of Alg. 5 / downcosts of Alg. 6) and `full` = c (up-down paths, after the downward pass).
pub(crate) struct Costs {
    pub nleaves: usize,
    pub down: Vec<u8>,
    pub full: Vec<u8>,
}

impl Costs {
    #[inline]
    pub fn down_row(&self, p: usize) -> &[u8] {
        &self.down[p * self.nleaves..(p + 1) * self.nleaves]
    }
    #[inline]
    pub fn full_row(&self, p: usize) -> &[u8] {
        &self.full[p * self.nleaves..(p + 1) * self.nleaves]
    }
}

/// Alg. 5 lines 1–11 and 14–17 (costs), keeping the downcosts of Alg. 6 on the side. Each level
/// is computed in parallel from the levels already done ("one barrier per level").
pub(crate) fn costs(o: &Oriented) -> Costs {
    let nl = o.num_leaves();
    let np = o.len();
    let mut down = vec![INF; np * nl];
    if nl == 0 {
        return Costs {
            nleaves: 0,
            down: Vec::new(),
            full: Vec::new(),
        };
    }
    // Upward pass (ascending levels): c'[u] = min over down-neighbours s of c'[s] + 1; c'[l][l] = 0.
    for r in &o.level_ranges {
        let (lower, rest) = down.split_at_mut(r.start * nl);
        let lower: &[u8] = lower;
        let block = &mut rest[..r.len() * nl];
        block.par_chunks_mut(nl).enumerate().for_each(|(i, row)| {
            let p = r.start + i;
            for nb in o.downs(p) {
                let src = &lower[nb.pos as usize * nl..(nb.pos as usize + 1) * nl];
                relax(row, src);
            }
            let li = o.leaf_idx[p];
            if li != NONE {
                row[li as usize] = 0;
            }
        });
    }
    // Downward pass (descending levels): c[s] = min(c'[s], min over up-neighbours u of c[u] + 1).
    let mut full = down.clone();
    for r in o.level_ranges.iter().rev() {
        let (head, upper) = full.split_at_mut(r.end * nl);
        let upper: &[u8] = upper;
        let block = &mut head[r.start * nl..];
        block.par_chunks_mut(nl).enumerate().for_each(|(i, row)| {
            let p = r.start + i;
            for nb in o.ups(p) {
                let off = (nb.pos as usize - r.end) * nl;
                relax(row, &upper[off..off + nl]);
            }
        });
    }
    Costs {
        nleaves: nl,
        down,
        full,
    }
}

/// `row[i] = min(row[i], src[i] + 1)` with 255 = ∞ (saturating, so ∞ + 1 = ∞).
#[inline]
pub(crate) fn relax(row: &mut [u8], src: &[u8]) {
    for (a, &b) in row.iter_mut().zip(src) {
        *a = (*a).min(b.saturating_add(1));
    }
}

/// Alg. 5 lines 4, 8, 12–13: `Π_u = max(1, max over down-neighbours s of Π_s × #up(s))`, where
/// `#up(s)` counts the switches above `s` (port groups, not ports). Indexed by position.
pub(crate) fn dividers(o: &Oriented) -> Vec<u64> {
    let mut div = vec![1u64; o.len()];
    for r in &o.level_ranges {
        for p in r.clone() {
            let mut m = 1u64;
            for nb in o.downs(p) {
                let s = nb.pos as usize;
                m = m.max(div[s].saturating_mul(o.ups(s).len() as u64));
            }
            div[p] = m;
        }
    }
    div
}

/// Topological NIDs (Alg. 7, in the recursive form of eqs. 4.1–4.4).
pub(crate) struct TopoNids {
    /// Per end port id: its topological NID ([`NONE`] when not on an oriented leaf).
    pub of_end_port: Vec<u32>,
    /// Per leaf index: the NID of its first end port (the others follow in port order).
    pub leaf_start: Vec<u32>,
}

/// Alg. 7: the leaf with the smallest GUID comes first, then the leaves grouped by increasing
/// cost from it (the "μ" shells), GUID order inside a shell; the end ports of a leaf are
/// numbered in port order.
///
/// Alg. 7 as printed takes only the nearest shell around `X_0` and restarts from the smallest
/// remaining GUID; the thesis notes that its implementation splits `X` recursively by
/// decreasing inter-leaf cost, and eqs. (4.1)–(4.4) define that recursive order: every shell
/// is ordered the same way before the next one. Both coincide when GUIDs follow the topology
/// (as with generated fabrics); the recursive form also keeps the larger subtrees contiguous
/// when they do not, which is what the divider arithmetic needs.
pub(crate) fn topological_nids(fabric: &Fabric, o: &Oriented, c: &Costs) -> TopoNids {
    let nl = o.num_leaves();
    let guid = |li: u32| fabric.switch(o.order[o.leaves[li as usize] as usize]).guid;
    let mut x: Vec<u32> = (0..nl as u32).collect();
    x.sort_by_key(|&li| guid(li));
    let mut out: Vec<u32> = Vec::with_capacity(nl);
    // Explicit stack of ranges of `x`, each sorted by GUID; popped in preorder.
    let mut stack: Vec<(usize, usize)> = vec![(0, nl)];
    while let Some((a, b)) = stack.pop() {
        if b - a <= 2 {
            out.extend_from_slice(&x[a..b]);
            continue;
        }
        let l = x[a];
        let row = c.full_row(o.leaves[l as usize] as usize);
        // Stable: equal costs keep GUID order.
        x[a + 1..b].sort_by_key(|&li| row[li as usize]);
        out.push(l);
        let mut shells = Vec::new();
        let mut i = a + 1;
        while i < b {
            let mut j = i;
            while j < b && row[x[j] as usize] == row[x[i] as usize] {
                j += 1;
            }
            shells.push((i, j));
            i = j;
        }
        stack.extend(shells.into_iter().rev());
    }
    let mut of_end_port = vec![NONE; fabric.num_end_ports()];
    let mut leaf_start = vec![NONE; nl];
    let mut t = 0u32;
    for &li in &out {
        leaf_start[li as usize] = t;
        let sw = o.order[o.leaves[li as usize] as usize];
        for &ep in fabric.attached_end_ports(sw) {
            of_end_port[ep.idx()] = t;
            t += 1;
        }
    }
    TopoNids {
        of_end_port,
        leaf_start,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn costs_and_dividers_on_a_complete_pgft() {
        // PGFT(3;2,2,3;1,2,2;1,2,1): 12 nodes, 6 leaves, 6 level-1, 4 top.
        let t = pgft(&[2, 2, 3], &[1, 2, 2], &[1, 2, 1]);
        let r = bfs_rank(&t.fabric);
        let o = Oriented::new(&t.fabric, &r);
        assert_eq!(o.num_leaves(), 6);
        let c = costs(&o);
        // Leaf-to-leaf costs: 0 to itself, 2 inside a level-1 group, 4 across.
        for (i, &pa) in o.leaves.iter().enumerate() {
            for (j, &pb) in o.leaves.iter().enumerate() {
                let want = if i == j {
                    0
                } else if t.leaf_group(o.order[pa as usize]) == t.leaf_group(o.order[pb as usize]) {
                    2
                } else {
                    4
                };
                assert_eq!(c.full_row(pa as usize)[j], want, "leaf {i} -> leaf {j}");
            }
        }
        // Top switches reach every leaf downwards in 2 hops.
        for p in 0..o.len() {
            if r[o.order[p].idx()] == Some(2) {
                assert!(c.down_row(p).iter().all(|&v| v == 2));
            }
        }
        let d = dividers(&o);
        for p in 0..o.len() {
            // Π = product of the w's below: 1, w2 = 2, w2·w3 = 4.
            assert_eq!(d[p], [1, 2, 4][r[o.order[p].idx()].unwrap() as usize]);
        }
    }

    #[test]
    fn degraded_costs_follow_up_down_paths_only() {
        // Two leaves under one spine each, the spines joined by a top switch; a same-level link
        // between the spines is ignored, so leaf0 -> leaf1 costs 4, not 3.
        let mut b = fabric_topology::FabricBuilder::new();
        let l0 = b.add_switch(1, "l0", 8).unwrap();
        let l1 = b.add_switch(2, "l1", 8).unwrap();
        let s0 = b.add_switch(3, "s0", 8).unwrap();
        let s1 = b.add_switch(4, "s1", 8).unwrap();
        let top = b.add_switch(5, "top", 8).unwrap();
        b.connect_switches(l0, 8, s0, 1).unwrap();
        b.connect_switches(l1, 8, s1, 1).unwrap();
        b.connect_switches(s0, 8, top, 1).unwrap();
        b.connect_switches(s1, 8, top, 2).unwrap();
        b.connect_switches(s0, 7, s1, 7).unwrap();
        for (i, l) in [l0, l1].into_iter().enumerate() {
            let e = b
                .add_end_port(
                    100 + i as u64,
                    200 + i as u64,
                    "n",
                    1,
                    1,
                    fabric_topology::NodeType::Compute,
                )
                .unwrap();
            b.connect_end_port(e, l, 1).unwrap();
        }
        let f = b.build();
        let o = Oriented::new(&f, &bfs_rank(&f));
        let c = costs(&o);
        let p0 = o.pos[0] as usize;
        assert_eq!(c.full_row(p0)[1], 4);
        assert_eq!(c.down_row(p0)[1], INF);
        assert_eq!(o.ups(o.pos[2] as usize).len(), 1);
        assert_eq!(o.downs(o.pos[2] as usize).len(), 1);
    }

    #[test]
    fn topological_nids_group_subtrees_even_with_shuffled_guids() {
        // GUIDs of leaves shuffled: NIDs must still keep each level-1 group contiguous.
        let t = pgft_with_guids(&[3, 2, 3], &[1, 2, 2], &[1, 1, 1], |kind, idx| match kind {
            0 => 0x9000 - idx as u64 * 7 % 13, // leaves: scrambled
            k => (k as u64) << 20 | idx as u64,
        });
        let r = bfs_rank(&t.fabric);
        let o = Oriented::new(&t.fabric, &r);
        let c = costs(&o);
        let tn = topological_nids(&t.fabric, &o, &c);
        let mut seen = vec![false; t.fabric.num_end_ports()];
        for ep in t.fabric.end_port_ids() {
            let n = tn.of_end_port[ep.idx()];
            assert!(!seen[n as usize]);
            seen[n as usize] = true;
        }
        // NID / (nodes per level-1 group) identifies the group.
        let per_group = 3 * 2;
        for ep in t.fabric.end_port_ids() {
            let leaf = t.fabric.end_port(ep).attach.unwrap().0;
            let g = t.leaf_group(leaf);
            let others: Vec<_> = t
                .fabric
                .end_port_ids()
                .filter(|&e| t.leaf_group(t.fabric.end_port(e).attach.unwrap().0) == g)
                .map(|e| tn.of_end_port[e.idx()] / per_group)
                .collect();
            assert!(others.iter().all(|&x| x == others[0]), "group {g:?} split: {others:?}");
        }
    }
}
