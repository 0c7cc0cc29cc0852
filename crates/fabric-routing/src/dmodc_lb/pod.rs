//! Pod-coalesced balancing of a degraded three-level fat-tree (load-aware Dmodc, beyond the
//! thesis; issue #16).
//!
//! **Shape.** Three levels: leaves, middle switches, top switches. The leaves' up-link
//! components are the *pods* (a pod's leaves and its `M` middle switches), the middle switches'
//! up-link components the *columns* (the middle switches of one rank `c` in every pod and the
//! `T` top switches above them), as on `PGFT(3; m1, m2, m3; 1, M, T; 1, 1, 1)`. Dmodc's nominal
//! choice for destination `d` is column `i = nominal(pod, d)` at the leaves and row
//! `r = nominal(column, d)` at the middle switches, so on a complete fabric every source pod
//! sends `d` through the one top switch `(i, r)`: its flows *coalesce* (one destination, all
//! the pod's sources) on every up-link they cross.
//!
//! **What the pass does.** Where a cable is missing, the kernel's routing keeps each middle
//! switch's whole inflow on its surviving up-links (a middle switch with 14 of 18 up-links
//! carries 1.2–1.3 expected flows per up-link under a random permutation, where the pod's
//! average is 1.0) — the excess of `P(mu ≥ 7)` over OpenSM's dfsssp (docs/routing.md). The pass
//! re-routes, per source pod `p` and destination `d` of another pod:
//!
//! 1. the pod-level choice `(c, r)` — the column every leaf of `p` sends `d` to and the row the
//!    middle switch `(p, c)` sends it to: the nominal `(i, r)` where the source side `(p, i) →
//!    (i, r)` and the destination side `(i, r) → (q, i) → leaf(d)` are live, else the live pair
//!    that adds the least to the estimated random-permutation tails (Poisson tail at 7 of the
//!    up-link's expected load, of the leaves' up-links, and of the top switch's down-link
//!    towards `d`'s pod), all of `p`'s leaves on one path (still coalesced);
//! 2. the leaves of `p` whose cable to column `c` is missing (*small flows*: one leaf's sources)
//!    to another live column, the middle switch's existing choice for `d` if it has one;
//! 3. same-pod destinations: the nominal column where both cables are live, else the columns
//!    live at both leaves in turn.
//!
//! **Shifts and all-to-all.** The choices of (1) and (2) are made in tiers before the cost: per
//! (source pod, destination leaf) the columns used by the fewest of that leaf's destinations,
//! then per (source pod, destination pod) the up-links used by the fewest of that pod's
//! destinations (counts up to [`TIER_SLACK`] count as equal) — a shift sends one source pod to one or two destination pods and one source
//! leaf to one or two destination leaves, so these counts bound its flows per link — and an
//! up-link never takes more than [`A2A_CAP`] destinations while another can (its all-to-all
//! load). Every route stays up*/down* and minimal (leaf → middle → top → middle → leaf).
//!
//! Sequential and deterministic (pods, destinations and candidates in a fixed order).

use fabric_topology::{Fabric, Lid, PortNum};

use super::plan::Plan;
use crate::fill::{Destinations, Prepared};
use crate::lft::Lfts;
use crate::prep::NONE;

/// Most destinations one middle-switch up-link takes while another candidate has room.
const A2A_CAP: u32 = 56;
/// Counts of the shift tiers at or below this are equal (one destination more per column or
/// up-link than the nominal routing puts there costs `mu_sp` nothing measurable and leaves the
/// cost more room: 0 gave `P(mu ≥ 7)` 0.3–1.7 points higher on the 7 776-node fabric).
const TIER_SLACK: u8 = 1;
/// Threshold of the tails (`P(load ≥ 7)`, the issue's `mu ≥ 7`).
const K: usize = 7;
const UNSET: u8 = u8::MAX;

/// The three-level shape (see the module doc), positions of the oriented fabric.
struct Shape {
    /// Pod of every leaf (dense leaf index), `NONE` for none.
    pod_of_leaf: Vec<u32>,
    /// Leaves of every pod (dense leaf indices, ascending).
    pod_leaves: Vec<Vec<u32>>,
    /// Middle switch `(pod, c)` at `mid[pod * m + c]`.
    mid: Vec<u32>,
    m: usize,
    t: usize,
    /// Column component of rank `c`.
    col: Vec<u32>,
    /// Leaf component of every pod.
    pod_k: Vec<u32>,
}

fn shape(fabric: &Fabric, p: &Prepared, plan: &Plan) -> Option<Shape> {
    let o = &p.o;
    if o.level_ranges.len() != 3 || o.num_leaves() != o.level_ranges[0].len() {
        return None;
    }
    let mut pod_k: Vec<u32> = Vec::new();
    let mut pod_of_leaf = vec![NONE; o.num_leaves()];
    for (li, &x) in o.leaves.iter().enumerate() {
        let k = plan.klow[x as usize];
        if k == NONE {
            return None;
        }
        let pi = match pod_k.iter().position(|&y| y == k) {
            Some(i) => i,
            None => {
                pod_k.push(k);
                pod_k.len() - 1
            }
        };
        pod_of_leaf[li] = pi as u32;
    }
    let np = pod_k.len();
    let m = plan.m(pod_k[0]) as usize;
    if np < 2 || m == 0 || pod_k.iter().any(|&k| plan.m(k) as usize != m) {
        return None;
    }
    let mut mid = vec![NONE; np * m];
    let mut col = vec![NONE; m];
    for (pi, &k) in pod_k.iter().enumerate() {
        for c in 0..m {
            let x = plan.member(k, c as u32);
            if !o.level_ranges[1].contains(&(x as usize)) {
                return None;
            }
            let kc = plan.klow[x as usize];
            if kc == NONE || (col[c] != NONE && col[c] != kc) {
                return None;
            }
            col[c] = kc;
            mid[pi * m + c] = x;
        }
    }
    let t = plan.m(col[0]) as usize;
    for c in 0..m {
        if plan.m(col[c]) as usize != t || col[..c].contains(&col[c]) {
            return None;
        }
        for r in 0..t {
            let x = plan.member(col[c], r as u32) as usize;
            if !o.level_ranges[2].contains(&x) {
                return None;
            }
        }
    }
    if t == 0 || t >= UNSET as usize || m >= UNSET as usize {
        return None;
    }
    // One cable per pair of switches (the tails count one port per up-link).
    let single = |x: usize| {
        o.ups(x)
            .iter()
            .all(|nb| fabric.port_groups(o.order[x])[nb.group as usize].ports.len() == 1)
    };
    if !o.leaves.iter().all(|&x| single(x as usize)) || !mid.iter().all(|&x| single(x as usize)) {
        return None;
    }
    let mut pod_leaves = vec![Vec::new(); np];
    for (li, &pi) in pod_of_leaf.iter().enumerate() {
        pod_leaves[pi as usize].push(li as u32);
    }
    Some(Shape {
        pod_of_leaf,
        pod_leaves,
        mid,
        m,
        t,
        col,
        pod_k,
    })
}

/// `P(X ≥ K)` for `X ~ Poisson(mu)`.
fn ptail(mu: f64) -> f64 {
    if mu <= 0.0 {
        return 0.0;
    }
    let mut term = (-mu).exp();
    let mut below = 0.0;
    for k in 0..K {
        below += term;
        term *= mu / (k + 1) as f64;
    }
    (1.0 - below).max(0.0)
}

/// `P(X ≥ K)` for `X ~ Binomial(n, mu / n)` (0 below `K` trials).
fn btail(n: u32, mu: f64) -> f64 {
    if (n as usize) < K || mu <= 0.0 {
        return 0.0;
    }
    let p = (mu / f64::from(n)).min(1.0);
    if p >= 1.0 {
        return 1.0;
    }
    let q = 1.0 - p;
    let mut term = q.powi(n as i32);
    let mut below = 0.0;
    for k in 0..K {
        below += term;
        term *= (f64::from(n) - k as f64) / (k + 1) as f64 * p / q;
    }
    (1.0 - below).max(0.0)
}

/// One destination end port.
#[derive(Copy, Clone)]
struct Dest {
    lid: Lid,
    nid: u32,
    /// Dense leaf index.
    li: u32,
    pod: u32,
    /// Nominal column and row.
    i: u32,
    r: u32,
}

/// A candidate of a choice: column `c`, row `r`, the sources it moves (`w`), its column's
/// shift count (`t1`), the leaves' added tail (`lc`), and whether it adds a destination to
/// the up-link (all-to-all cap).
struct Cand {
    c: usize,
    r: usize,
    w: u32,
    t1: u8,
    lc: f64,
    new_dest: bool,
}

/// The order of candidates: all-to-all cap, the two shift tiers, cost, then nearest the
/// nominal column and row.
type Key = (u8, u8, u8, f64, usize, usize);
type Best = (Key, usize, usize);

fn better(a: &Key, b: &Key) -> bool {
    (a.0, a.1, a.2)
        .cmp(&(b.0, b.1, b.2))
        .then(a.3.total_cmp(&b.3))
        .then((a.4, a.5).cmp(&(b.4, b.5)))
        .is_lt()
}

/// The pass's loads per middle up-link and top down-link, the middle switches' choices and
/// the per-(source pod, destination pod) shift counts.
struct Loads {
    np: usize,
    m: usize,
    t: usize,
    nd: usize,
    /// `P(X ≥ K)`, `X ~ Poisson(s / nd)`, by sources `s`.
    tab: Vec<f64>,
    /// Sources and destinations per middle up-link `(pod, c, r)`.
    mu: Vec<u32>,
    ndst: Vec<u32>,
    /// Destinations of pod `q` routed by pod `p` through `(c, r)`.
    pqc: Vec<u8>,
    /// Sources and destinations per top down-link `(c, r) → pod q`.
    dmu: Vec<u32>,
    dn: Vec<u32>,
    /// One bit per (destination, top): some pod sends it through that top.
    tops_of: Vec<u64>,
    words: usize,
    /// Row chosen by middle switch `(pod, c)` for destination `j`.
    mid_entry: Vec<u8>,
}

impl Loads {
    fn new(np: usize, m: usize, t: usize, nd: usize) -> Self {
        let n = nd as f64;
        let words = (m * t).div_ceil(64);
        Loads {
            np,
            m,
            t,
            nd,
            tab: (0..8 * nd as u32 + 1).map(|s| ptail(f64::from(s) / n)).collect(),
            mu: vec![0; np * m * t],
            ndst: vec![0; np * m * t],
            pqc: vec![0; np * np * m * t],
            dmu: vec![0; m * t * np],
            dn: vec![0; m * t * np],
            tops_of: vec![0; nd * words],
            words,
            mid_entry: vec![UNSET; np * m * nd],
        }
    }
    fn tail(&self, s: u32) -> f64 {
        self.tab
            .get(s as usize)
            .copied()
            .unwrap_or_else(|| ptail(f64::from(s) / self.nd as f64))
    }
    fn link(&self, pod: u32, c: usize, r: usize) -> usize {
        (pod as usize * self.m + c) * self.t + r
    }
    fn down(&self, c: usize, r: usize, q: u32) -> usize {
        (c * self.t + r) * self.np + q as usize
    }
    fn pq(&self, pod: u32, q: u32, c: usize, r: usize) -> usize {
        (pod as usize * self.np + q as usize) * self.m * self.t + c * self.t + r
    }
    fn mid_entry(&self, pod: u32, c: usize, j: usize) -> u8 {
        self.mid_entry[(pod as usize * self.m + c) * self.nd + j]
    }
    fn top_has(&self, j: usize, c: usize, r: usize) -> bool {
        let b = c * self.t + r;
        self.tops_of[j * self.words + b / 64] >> (b % 64) & 1 != 0
    }

    /// Offers candidate `x` for destination `j` (`d`) from `pod`: kept in `best` when it
    /// comes first in the [`Key`] order.
    fn offer(&self, best: &mut Option<Best>, (pod, j, d): (u32, usize, &Dest), x: Cand) {
        let (m, t, q) = (self.m, self.t, d.pod);
        let e = self.link(pod, x.c, x.r);
        let tier = (
            u8::from(x.new_dest && self.ndst[e] + 1 > A2A_CAP),
            x.t1.saturating_sub(TIER_SLACK),
            self.pqc[self.pq(pod, q, x.c, x.r)].saturating_sub(TIER_SLACK),
        );
        if best.as_ref().is_some_and(|b| tier > (b.0 .0, b.0 .1, b.0 .2)) {
            return;
        }
        // Top down-link towards `q`: binomial tail over its destinations, plus a small
        // quadratic term of its expected load.
        let k = self.down(x.c, x.r, q);
        let n = self.nd as f64;
        let n0 = self.dn[k];
        let n1 = n0 + u32::from(!self.top_has(j, x.c, x.r));
        let (m0, m1) = (f64::from(self.dmu[k]) / n, f64::from(self.dmu[k] + x.w) / n);
        let down = btail(n1, m1) - btail(n0, m0) + 1e-4 * (m1 * m1 - m0 * m0);
        let cost = self.tail(self.mu[e] + x.w) - self.tail(self.mu[e]) + x.lc + down;
        let key: Key = (
            tier.0,
            tier.1,
            tier.2,
            cost,
            (x.c + m - d.i as usize) % m,
            (x.r + t - d.r as usize) % t,
        );
        if best.as_ref().is_none_or(|b| better(&key, &b.0)) {
            *best = Some((key, x.c, x.r));
        }
    }

    /// Routes `w` sources of `pod` towards destination `j` (of pod `q`) through middle
    /// switch `(pod, c)` and top `(c, r)`; the middle switch's choice is set if it was not.
    fn place(&mut self, pod: u32, j: usize, q: u32, (c, r): (usize, usize), w: u32) {
        let e = self.link(pod, c, r);
        let k = self.down(c, r, q);
        let b = c * self.t + r;
        let bit = &mut self.tops_of[j * self.words + b / 64];
        if *bit >> (b % 64) & 1 == 0 {
            *bit |= 1 << (b % 64);
            self.dn[k] += 1;
        }
        let me = (pod as usize * self.m + c) * self.nd + j;
        if self.mid_entry[me] == UNSET {
            self.mid_entry[me] = r as u8;
            self.ndst[e] += 1;
            let pi = self.pq(pod, q, c, r);
            self.pqc[pi] = self.pqc[pi].saturating_add(1);
        }
        self.mu[e] += w;
        self.dmu[k] += w;
    }
}

/// Runs the pass on `lfts` (the kernel's tables); false (nothing changed) when the fabric does
/// not have the three-level shape.
pub(super) fn rebalance(fabric: &Fabric, p: &Prepared, plan: &Plan, dst: &Destinations, lfts: &mut Lfts) -> bool {
    let Some(sh) = shape(fabric, p, plan) else {
        return false;
    };
    let o = &p.o;
    let (m, t) = (sh.m, sh.t);
    let np = sh.pod_k.len();
    let nl = o.num_leaves();

    let mut ds: Vec<Dest> = Vec::new();
    let mut hosts = vec![0u32; nl];
    for span in &dst.spans {
        let li = span.li;
        let x = o.leaves[li as usize] as usize;
        let pod = sh.pod_of_leaf[li as usize];
        for k in 0..span.len {
            let lid = dst.lids[(span.start + k) as usize];
            if lid == 0 {
                continue;
            }
            let nid = span.t0 + k;
            let i = plan.nominal(plan.klow[x], nid).0;
            let r = plan.nominal(sh.col[i as usize], nid).0;
            hosts[li as usize] += 1;
            ds.push(Dest {
                lid,
                nid,
                li,
                pod,
                i,
                r,
            });
        }
    }
    let nd = ds.len();
    if nd < 2 {
        return false;
    }
    let leaf_pos = |li: u32| o.leaves[li as usize] as usize;
    let lm = |li: u32, c: usize| plan.up_of(leaf_pos(li), c as u32) != u8::MAX;
    let midp = |pod: u32, c: usize| sh.mid[pod as usize * m + c] as usize;
    let mt = |pod: u32, c: usize, r: usize| plan.up_of(midp(pod, c), r as u32) != u8::MAX;
    // Sources of pod `p` that reach column `c` directly.
    let mut live_src = vec![0u32; np * m];
    for pod in 0..np {
        for c in 0..m {
            live_src[pod * m + c] = sh.pod_leaves[pod]
                .iter()
                .filter(|&&l| lm(l, c))
                .map(|&l| hosts[l as usize])
                .sum();
        }
    }
    let mut ld = Loads::new(np, m, t, nd);
    let mut lcnt = vec![0u32; nl * m];
    let mut colc = vec![0u8; np * nl * m];
    let mut leaf_choice = vec![UNSET; nl * nd];
    let mut skip = vec![false; np * nd];
    // Every leaf of `pod` with a cable to column `c` sends destination `j` there.
    let pod_leaves_choose = |leaf_choice: &mut [u8], lcnt: &mut [u32], pod: u32, j: usize, c: usize| {
        for &l2 in &sh.pod_leaves[pod as usize] {
            if lm(l2, c) {
                leaf_choice[l2 as usize * nd + j] = c as u8;
                lcnt[l2 as usize * m + c] += 1;
            }
        }
    };

    // 1. Nominal pod-level choices; the others wait.
    let mut pending: Vec<(u32, usize)> = Vec::new();
    for (j, d) in ds.iter().enumerate() {
        let (i, r) = (d.i as usize, d.r as usize);
        let good = lm(d.li, i) && mt(d.pod, i, r);
        for pod in 0..np as u32 {
            if pod == d.pod {
                continue;
            }
            if good && mt(pod, i, r) {
                ld.place(pod, j, d.pod, (i, r), live_src[pod as usize * m + i]);
                let cc = (pod as usize * nl + d.li as usize) * m + i;
                colc[cc] = colc[cc].saturating_add(1);
                pod_leaves_choose(&mut leaf_choice, &mut lcnt, pod, j, i);
            } else {
                pending.push((pod, j));
            }
        }
    }
    pending.sort_unstable();

    // 2. Pod-level choices where the nominal one is not live.
    for &(pod, j) in &pending {
        let d = ds[j];
        let mut best: Option<Best> = None;
        for c in 0..m {
            if !lm(d.li, c) {
                continue;
            }
            let t1 = colc[(pod as usize * nl + d.li as usize) * m + c];
            if best
                .as_ref()
                .is_some_and(|b| (0, t1.saturating_sub(TIER_SLACK)) > (b.0 .0, b.0 .1))
            {
                continue;
            }
            let lc: f64 = sh.pod_leaves[pod as usize]
                .iter()
                .filter(|&&l2| lm(l2, c))
                .map(|&l2| {
                    let h = hosts[l2 as usize];
                    let c0 = lcnt[l2 as usize * m + c];
                    ld.tail(h * (c0 + 1)) - ld.tail(h * c0)
                })
                .sum::<f64>();
            let w = live_src[pod as usize * m + c];
            for r in 0..t {
                if mt(d.pod, c, r) && mt(pod, c, r) {
                    ld.offer(
                        &mut best,
                        (pod, j, &d),
                        Cand {
                            c,
                            r,
                            w,
                            t1,
                            lc,
                            new_dest: true,
                        },
                    );
                }
            }
        }
        let Some((_, c, r)) = best else {
            skip[pod as usize * nd + j] = true;
            continue;
        };
        ld.place(pod, j, d.pod, (c, r), live_src[pod as usize * m + c]);
        let cc = (pod as usize * nl + d.li as usize) * m + c;
        colc[cc] = colc[cc].saturating_add(1);
        pod_leaves_choose(&mut leaf_choice, &mut lcnt, pod, j, c);
    }

    // 3. Small flows: leaves whose cable to the pod-level column is missing.
    let mut smc = vec![0u8; nl * nl * m];
    for pod in 0..np as u32 {
        for &l2 in &sh.pod_leaves[pod as usize] {
            let h = hosts[l2 as usize];
            for (j, d) in ds.iter().enumerate() {
                if d.pod == pod || leaf_choice[l2 as usize * nd + j] != UNSET || skip[pod as usize * nd + j] {
                    continue;
                }
                let mut best: Option<Best> = None;
                for c in 0..m {
                    if !lm(l2, c) || !lm(d.li, c) {
                        continue;
                    }
                    let t1 = colc[(pod as usize * nl + d.li as usize) * m + c]
                        .saturating_add(smc[(l2 as usize * nl + d.li as usize) * m + c]);
                    let c0 = lcnt[l2 as usize * m + c];
                    let lc = ld.tail(h * (c0 + 1)) - ld.tail(h * c0);
                    let set = ld.mid_entry(pod, c, j);
                    for r in 0..t {
                        let ok = if set != UNSET {
                            r == set as usize
                        } else {
                            mt(pod, c, r) && mt(d.pod, c, r)
                        };
                        if ok {
                            let cand = Cand {
                                c,
                                r,
                                w: h,
                                t1,
                                lc,
                                new_dest: set == UNSET,
                            };
                            ld.offer(&mut best, (pod, j, d), cand);
                        }
                    }
                }
                let Some((_, c, r)) = best else {
                    continue;
                };
                ld.place(pod, j, d.pod, (c, r), h);
                let si = (l2 as usize * nl + d.li as usize) * m + c;
                smc[si] = smc[si].saturating_add(1);
                leaf_choice[l2 as usize * nd + j] = c as u8;
                lcnt[l2 as usize * m + c] += 1;
            }
        }
    }

    // 4. Same-pod destinations.
    let mut by_leaf: Vec<Vec<usize>> = vec![Vec::new(); nl];
    for (j, d) in ds.iter().enumerate() {
        by_leaf[d.li as usize].push(j);
    }
    for leaves in &sh.pod_leaves {
        for (a, &l2) in leaves.iter().enumerate() {
            for (b, &l) in leaves.iter().enumerate() {
                if l == l2 {
                    continue;
                }
                let live: Vec<usize> = (0..m).filter(|&c| lm(l2, c) && lm(l, c)).collect();
                if live.is_empty() {
                    continue;
                }
                let rot = (a * 7 + b * 5) % live.len();
                let mut used = vec![0u32; m];
                for &j in &by_leaf[l as usize] {
                    let i = ds[j].i as usize;
                    let c = if live.contains(&i) {
                        i
                    } else {
                        let (_, c) = live
                            .iter()
                            .enumerate()
                            .map(|(x, &c)| {
                                (
                                    (used[c], lcnt[l2 as usize * m + c], (x + live.len() - rot) % live.len()),
                                    c,
                                )
                            })
                            .min()
                            .expect("live is not empty");
                        used[c] += 1;
                        c
                    };
                    leaf_choice[l2 as usize * nd + j] = c as u8;
                    lcnt[l2 as usize * m + c] += 1;
                }
            }
        }
    }

    // 5. Write the leaves' and middle switches' up-entries.
    let port = |x: usize, rank: usize, nid: u32| -> PortNum {
        let ui = plan.up_of(x, rank as u32);
        let nb = o.ups(x)[ui as usize];
        let ports = &fabric.port_groups(o.order[x])[nb.group as usize].ports;
        if ports.len() == 1 {
            return ports[0];
        }
        let q2 = plan.nominal(plan.klow[x], nid).1;
        ports[(q2 % ports.len() as u64) as usize]
    };
    for li in 0..nl {
        let x = leaf_pos(li as u32);
        for (j, d) in ds.iter().enumerate() {
            let c = leaf_choice[li * nd + j];
            if c != UNSET {
                lfts.set(o.order[x], d.lid, port(x, c as usize, d.nid));
            }
        }
    }
    for pod in 0..np as u32 {
        for c in 0..m {
            let x = midp(pod, c);
            for (j, d) in ds.iter().enumerate() {
                let r = ld.mid_entry(pod, c, j);
                if r != UNSET {
                    lfts.set(o.order[x], d.lid, port(x, r as usize, d.nid));
                }
            }
        }
    }
    true
}
