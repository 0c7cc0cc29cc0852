//! The shift guard of the repair pass: exact per-shift path counts of the ports a move loads,
//! so that no move raises `mu_sp` (docs/routing.md, "Metrics": the pair `(s, d)` belongs to
//! shift `k = d − s mod N` of the global end-node order, and `mu_sp = max_e max_k count_e(k)`).
//!
//! A port's counts are computed when a move would first add paths to it (*materialised*):
//! for every destination `d` it carries, the sources whose path to `d` crosses its switch are
//! whole leaves (found backwards along the tables, which form a tree towards `d`), each a few
//! runs `[a, b)` of the global order that add one path in the shifts `(d − b, d − a]`. The
//! guard admits a move only when every port of the new path keeps every shift at most at the
//! *limit*: the largest count of any port materialised so far. Ports that were never loaded
//! by a move only lost paths, so every port stays at most at the limit or at its original
//! count, and the limit is a count of the original tables: `mu_sp` never rises. Counts of
//! materialised ports follow every applied move (one add or remove per source run).

use fabric_topology::EndPortId;

use super::State;
use crate::prep::NONE;

/// Per-shift path counts of the materialised ports and the sources of the move at hand.
pub(super) struct Shifts {
    /// Per destination: its index in the global end-node order.
    gpos: Vec<u32>,
    /// Per leaf index: runs `[a, b)` of the global order, `runs[run_at[li]..run_at[li + 1]]`.
    runs: Vec<(u32, u32)>,
    run_at: Vec<u32>,
    /// Per switch position: its leaf index ([`NONE`]: not a leaf).
    leaf_at: Vec<u32>,
    /// Per directed port: its per-shift counts once materialised.
    counts: Vec<Option<Box<[u8]>>>,
    /// Per directed port of an indexed switch: the destinations the tables send through it
    /// (any order), kept with every applied move.
    pdests: Vec<Vec<u32>>,
    /// Per switch position: whether its ports' destinations are in `pdests`.
    indexed: Vec<bool>,
    /// The largest count of a materialised port.
    pub limit: u32,
    /// Ports materialised.
    pub materialised: usize,
    /// Loaded ports admitted by the bound, without counts.
    pub bounded: usize,
    /// Whether the bound is used (else every loaded port is materialised).
    pub bound: bool,
    /// Whether `ivals` hold the sources of the move at hand (some port of it is materialised).
    ivals_ok: bool,
    /// Shift intervals `(first, length)` (cyclic) of the move at hand's sources.
    ivals: Vec<(u32, u32)>,
    diff: Vec<i32>,
    stack: Vec<u32>,
    ival_tmp: Vec<(u32, u32)>,
}

impl Shifts {
    /// `leaf`/`end_port`: per destination; `leaves`: the leaf positions; `np` switches,
    /// `npt` directed ports.
    pub fn new(leaf: &[u32], end_port: &[EndPortId], leaves: &[u32], np: usize, npt: usize) -> Self {
        let n = leaf.len();
        let mut by_order: Vec<u32> = (0..n as u32).collect();
        by_order.sort_by_key(|&i| (end_port[i as usize], i));
        let mut gpos = vec![0u32; n];
        for (g, &i) in by_order.iter().enumerate() {
            gpos[i as usize] = g as u32;
        }
        // Runs per leaf: consecutive global positions of the same leaf.
        let nl = leaves.len();
        let mut per_leaf: Vec<Vec<(u32, u32)>> = vec![Vec::new(); nl];
        for (g, &i) in by_order.iter().enumerate() {
            let li = leaf[i as usize] as usize;
            let g = g as u32;
            match per_leaf[li].last_mut() {
                Some(r) if r.1 == g => r.1 = g + 1,
                _ => per_leaf[li].push((g, g + 1)),
            }
        }
        let mut runs = Vec::new();
        let mut run_at = Vec::with_capacity(nl + 1);
        for r in &per_leaf {
            run_at.push(runs.len() as u32);
            runs.extend_from_slice(r);
        }
        run_at.push(runs.len() as u32);
        let mut leaf_at = vec![NONE; np];
        for (li, &q) in leaves.iter().enumerate() {
            leaf_at[q as usize] = li as u32;
        }
        Shifts {
            gpos,
            runs,
            run_at,
            leaf_at,
            counts: vec![None; npt],
            pdests: vec![Vec::new(); npt],
            indexed: vec![false; np],
            limit: 0,
            materialised: 0,
            bounded: 0,
            bound: true,
            ivals_ok: false,
            ivals: Vec::new(),
            diff: Vec::new(),
            stack: Vec::new(),
            ival_tmp: Vec::new(),
        }
    }

    /// The shift intervals of the sources whose path to `i` crosses `x` into `out`.
    fn collect(&mut self, st: &State<'_>, x: usize, i: usize, tmp: bool) {
        let n = self.gpos.len() as u32;
        let d = self.gpos[i];
        let out = if tmp { &mut self.ival_tmp } else { &mut self.ivals };
        out.clear();
        self.stack.clear();
        // Entries `(position, up)`: `up` when the switch sends `i` upwards, so that only its
        // down-neighbours can send `i` to it (a route never goes up after going down).
        let x_up = {
            let y = st.next(x, i);
            y != NONE && y as usize > x
        };
        self.stack.push((x as u32) << 1 | u32::from(x_up));
        let own = st.leaf[i];
        let o = &st.p.o;
        while let Some(v) = self.stack.pop() {
            let (w, up) = ((v >> 1) as usize, v & 1 == 1);
            let li = self.leaf_at[w];
            if li != NONE && li != own {
                let r = &self.runs[self.run_at[li as usize] as usize..self.run_at[li as usize + 1] as usize];
                for &(a, b) in r {
                    out.push(((d + n + 1 - b) % n, b - a));
                }
            }
            for nb in o.downs(w) {
                if st.next(nb.pos as usize, i) == w as u32 {
                    self.stack.push(nb.pos << 1 | 1);
                }
            }
            if !up {
                for nb in o.ups(w) {
                    if st.next(nb.pos as usize, i) == w as u32 {
                        self.stack.push(nb.pos << 1);
                    }
                }
            }
        }
    }

    /// Indexes the destinations of every port of switch `z` (one scan of the destinations), if
    /// not yet.
    pub fn index(&mut self, st: &State<'_>, z: usize) {
        if self.indexed[z] {
            return;
        }
        self.indexed[z] = true;
        for i in 0..self.gpos.len() {
            let e = st.pidx[z * 256 + usize::from(st.row_port(z, i))];
            if e != NONE {
                self.pdests[e as usize].push(i as u32);
            }
        }
    }

    /// Whether the index of every indexed switch is the set a fresh scan of the tables gives
    /// (the moves keep it so), for the tests.
    #[cfg(test)]
    pub fn index_is_exact(&self, st: &State<'_>) -> bool {
        let mut fresh = Shifts::new(&st.leaf, &st.end_port, &st.p.o.leaves, st.np, st.pq.len());
        (0..st.np).filter(|&z| self.indexed[z]).all(|z| {
            fresh.index(st, z);
            (0..st.pq.len()).filter(|&e| st.pq[e] as usize == z).all(|e| {
                let mut a = self.pdests[e].clone();
                a.sort_unstable();
                a == fresh.pdests[e]
            })
        })
    }

    /// The destinations the tables send through port `e` (its switch indexed).
    pub fn dests(&self, e: usize) -> &[u32] {
        &self.pdests[e]
    }

    /// Computes the counts of port `e` (see the module doc).
    fn materialise(&mut self, st: &State<'_>, e: usize) {
        let n = self.gpos.len();
        let z = st.pq[e] as usize;
        self.index(st, z);
        self.diff.clear();
        self.diff.resize(n + 1, 0);
        let list = std::mem::take(&mut self.pdests[e]);
        for &i in &list {
            let i = i as usize;
            if st.c[st.ci(z, i)] == 0 {
                continue;
            }
            self.collect(st, z, i, true);
            for &(lo, len) in &self.ival_tmp {
                let (lo, len) = (lo as usize, len as usize);
                if lo + len <= n {
                    self.diff[lo] += 1;
                    self.diff[lo + len] -= 1;
                } else {
                    self.diff[lo] += 1;
                    self.diff[0] += 1;
                    self.diff[lo + len - n] -= 1;
                }
            }
        }
        self.pdests[e] = list;
        let mut acc = 0i32;
        let mut cnt = vec![0u8; n].into_boxed_slice();
        for (k, v) in cnt.iter_mut().enumerate() {
            acc += self.diff[k];
            *v = acc.clamp(0, 255) as u8;
            self.limit = self.limit.max(acc as u32);
        }
        self.counts[e] = Some(cnt);
        self.materialised += 1;
    }

    /// Materialises port `e` if it is not yet.
    pub fn ensure(&mut self, st: &State<'_>, e: usize) {
        if self.counts[e].is_none() {
            self.materialise(st, e);
        }
    }

    /// Whether moving `i` at `x` as evaluated into `deltas` keeps every port it loads at most
    /// at the limit; leaves the move's source intervals for [`Shifts::apply`].
    ///
    /// A port not yet materialised whose bound `min(|D_e|, sources below)` after the move is
    /// at most the limit cannot exceed it in any shift (a shift's count is at most both), so
    /// it is admitted without its counts; materialising it could not have raised the limit
    /// either, so the decisions are those of the exact guard.
    pub fn admits(&mut self, st: &State<'_>, x: usize, i: usize, deltas: &[super::Delta]) -> bool {
        let mut check = false;
        for dl in deltas.iter().filter(|dl| dl.dsum > 0) {
            let e = dl.port as usize;
            if self.counts[e].is_none() && self.bound {
                let dests = i64::from(st.cnt[e]) + i64::from(dl.dcnt.max(0));
                if dests.min(i64::from(st.cap[e])) <= i64::from(self.limit) {
                    self.bounded += 1;
                    continue;
                }
            }
            self.ensure(st, e);
            check = true;
        }
        self.ivals_ok = check || deltas.iter().any(|dl| self.counts[dl.port as usize].is_some());
        if !self.ivals_ok {
            return true;
        }
        self.collect(st, x, i, false);
        let n = self.gpos.len();
        for dl in deltas.iter().filter(|dl| dl.dsum > 0) {
            let Some(cnt) = self.counts[dl.port as usize].as_ref() else {
                continue;
            };
            for &(lo, len) in &self.ivals {
                let (lo, len) = (lo as usize, len as usize);
                let over = |s: &[u8]| s.iter().any(|&v| u32::from(v) + 1 > self.limit);
                let bad = if lo + len <= n {
                    over(&cnt[lo..lo + len])
                } else {
                    over(&cnt[lo..]) || over(&cnt[..lo + len - n])
                };
                if bad {
                    return false;
                }
            }
        }
        true
    }

    /// Follows the move of destination `i` last admitted: its sources leave the old ports,
    /// join the new ones; at the moving switch (`deltas[0]`: its old port, `deltas[1]`: its
    /// new one) the index follows.
    pub fn apply(&mut self, deltas: &[super::Delta], i: usize) {
        let n = self.gpos.len();
        let (e_old, e_new) = (deltas[0].port as usize, deltas[1].port as usize);
        let list = &mut self.pdests[e_old];
        if let Some(k) = list.iter().position(|&j| j as usize == i) {
            list.swap_remove(k);
            self.pdests[e_new].push(i as u32);
        }
        if !self.ivals_ok {
            return;
        }
        for dl in deltas {
            let Some(cnt) = self.counts[dl.port as usize].as_mut() else {
                continue;
            };
            let add = dl.dsum > 0;
            for &(lo, len) in &self.ivals {
                let (lo, len) = (lo as usize, len as usize);
                for k in (lo..lo + len).map(|k| if k >= n { k - n } else { k }) {
                    cnt[k] = if add {
                        cnt[k].saturating_add(1)
                    } else {
                        cnt[k].saturating_sub(1)
                    };
                }
            }
        }
    }
}
