//! The destination side of load-aware Dmodc: for every switch `m` with up-links and every
//! destination `d` below it (a downward path from `m` to `d`'s leaf, or `m` is that leaf), a
//! first and a second upper rank, `T1(m, d)` and `T2(m, d)`, among the live up-links of `m`.
//! An upper neighbour of `m` reached by a live cable has a downward path to `d` through `m`, so
//! both are always valid ways down to `d`.
//!
//! **The target tree.** From `d`'s leaf `λ` upwards, `λ`, `T1(λ, d)`'s switch, its `T1`, … form
//! `d`'s *chain*: the path every source's route to `d` follows when its own cables allow
//! (routes take, at each level, the rank `T1` of their mirror, [`super::plan`]). A destination
//! is *primary* at the switches of its chain, and *natural* while its chain took the nominal
//! rank at every level below.
//!
//! **Budgets** (per switch `m`, so that every surviving down-link carries its fair share of the
//! destinations, beyond the thesis):
//! 1. natural primaries keep the nominal rank `⌊d/Π_K⌋ mod M_K` when it is live and has fewer
//!    than `⌈primaries / live ranks⌉` so far (Dmodc's complete-fabric choice, so complete
//!    fabrics give Dmodc's tables);
//! 2. the other primaries take the live rank with the fewest primaries so far (the nominal one
//!    when it is among them, else the first in cyclic order from `nominal + 1 + (q mod (M-1))`,
//!    `q = ⌊d/(Π_K·M_K)⌋`, which spreads the displaced destinations of different subtrees over
//!    different up-links);
//! 3. the non-primaries (used by sources whose own cables forced them off the chain) keep the
//!    nominal rank when it is live and no displaced primary was put on it, else the rank with
//!    the fewest primaries (weight 8), then non-primaries;
//! 4. `T2` (used by a source whose cable to `T1` is missing): a live rank other than `T1` with
//!    the fewest primaries plus second choices, primaries first, ties as in 2 from `T1`.
//!
//! Levels bottom-up (a switch's primaries come from the level below); the switches of a level
//! in parallel, each sequential, so the result does not depend on the thread count.

use rayon::prelude::*;

use fabric_topology::Fabric;

use super::plan::Plan;
use crate::fastdiv::FastDiv;
use crate::fill::Prepared;
use crate::prep::{INF, NONE};

/// No rank.
pub(super) const NO_RANK: u16 = u16::MAX;

/// `T1` and `T2` of every (switch with up-links, destination below it).
pub(super) struct Targets {
    /// Per position: its entries `below[bstart[q]..bstart[q + 1]]`, one per leaf below in NID
    /// order: (first NID of the leaf, offset of that leaf's first destination in `t1`/`t2`).
    pub bstart: Vec<u32>,
    pub below: Vec<(u32, u32)>,
    pub t1: Vec<u16>,
    pub t2: Vec<u16>,
    /// Whether the destination is primary at the switch (the switch is on its chain).
    pub prim: Vec<bool>,
    /// Per entry of `below`: whether every destination of that leaf has the nominal rank
    /// ([`Plan::nominal`]) as `T1` there (the kernel then fills the span from a table of `d`).
    pub nat: Vec<bool>,
    /// Per entry of `below` with at most 64 destinations: bit `i` set when its `i`-th
    /// destination is primary there (0 for longer entries; the kernel counts those one by one).
    pub pmask: Vec<u64>,
}

/// `T1`, `T2` of one switch's destinations, its chain updates and its per-leaf nominal flags.
type Targets1 = (Vec<u16>, Vec<u16>, Vec<bool>, Vec<(u32, u32, bool)>, Vec<bool>);

/// Bit `i` set when `prim[i]` (at most 64 flags; longer: 0).
fn prim_mask(prim: &[bool]) -> u64 {
    if prim.len() > 64 {
        return 0;
    }
    prim.iter().rev().fold(0, |m, &p| (m << 1) | u64::from(p))
}

/// Scratch counts of one switch.
#[derive(Default)]
struct Counts {
    cp: Vec<u32>,
    cx: Vec<u32>,
    cn: Vec<u32>,
    /// Per destination below the switch (entry order): its NID, whether it is primary there,
    /// and its nominal rank and `⌊d/(Π_K·M_K)⌋` ([`Plan::nominal`]).
    ds: Vec<(u32, bool, u32, u64)>,
    /// Per rank: the key of the second choices.
    key: Vec<u32>,
}

impl Targets {
    /// Computes the targets of every switch with up-links (see the module doc).
    pub fn new(fabric: &Fabric, p: &Prepared, plan: &Plan) -> Targets {
        let o = &p.o;
        let np = o.len();
        let nl = o.num_leaves();
        let nports: Vec<u32> = (0..nl)
            .map(|li| fabric.attached_end_ports(o.order[o.leaves[li] as usize]).len() as u32)
            .collect();
        let mut by_nid: Vec<u32> = (0..nl as u32).filter(|&li| nports[li as usize] > 0).collect();
        by_nid.sort_by_key(|&li| p.tn.leaf_start[li as usize]);
        let n: u32 = nports.iter().sum();
        // Leaves below every switch with up-links, in NID order.
        let lists: Vec<Vec<u32>> = (0..np)
            .into_par_iter()
            .map(|q| {
                if plan.klow[q] == NONE {
                    return Vec::new();
                }
                let down = p.costs.down_row(q);
                by_nid.iter().copied().filter(|&li| down[li as usize] != INF).collect()
            })
            .collect();
        let mut bstart = Vec::with_capacity(np + 1);
        let mut below = Vec::new();
        let mut tq = Vec::with_capacity(np + 1);
        let mut off = 0u32;
        for list in &lists {
            bstart.push(below.len() as u32);
            tq.push(off as usize);
            for &li in list {
                below.push((p.tn.leaf_start[li as usize], off));
                off += nports[li as usize];
            }
        }
        bstart.push(below.len() as u32);
        tq.push(off as usize);
        let mut t1 = vec![NO_RANK; off as usize];
        let mut t2 = vec![NO_RANK; off as usize];
        let mut prim = vec![false; off as usize];
        let mut nat = vec![false; below.len()];
        // Chains: current chain switch and natural flag per destination NID.
        let mut cur = vec![NONE; n as usize];
        let mut natural = vec![true; n as usize];
        for &li in &by_nid {
            let t0 = p.tn.leaf_start[li as usize];
            for d in t0..t0 + nports[li as usize] {
                cur[d as usize] = o.leaves[li as usize];
            }
        }

        for r in &o.level_ranges {
            let qs: Vec<usize> = r.clone().filter(|&q| plan.klow[q] != NONE).collect();
            let results: Vec<Targets1> = qs
                .par_iter()
                .map_init(Counts::default, |cnt, &q| {
                    assign(plan, q, &nports_of(p, &lists[q], &nports), &cur, &natural, cnt)
                })
                .collect();
            for (&q, (a, b, pr, upd, nt)) in qs.iter().zip(results) {
                nat[bstart[q] as usize..bstart[q + 1] as usize].copy_from_slice(&nt);
                t1[tq[q]..tq[q + 1]].copy_from_slice(&a);
                t2[tq[q]..tq[q + 1]].copy_from_slice(&b);
                prim[tq[q]..tq[q + 1]].copy_from_slice(&pr);
                for (d, next, still) in upd {
                    cur[d as usize] = next;
                    natural[d as usize] = still;
                }
            }
        }
        let pmask = below
            .iter()
            .enumerate()
            .map(|(e, &(_, a))| {
                let b = below.get(e + 1).map_or(prim.len(), |x| x.1 as usize);
                prim_mask(&prim[a as usize..b])
            })
            .collect();
        Targets {
            bstart,
            below,
            t1,
            t2,
            prim,
            nat,
            pmask,
        }
    }

    /// Offset in `t1`/`t2` of the first destination of the leaf whose first NID is `t0`, below
    /// position `q` (`None`: `q` has no entry for it).
    #[cfg(test)]
    pub fn lookup(&self, q: usize, t0: u32) -> Option<usize> {
        let e = &self.below[self.bstart[q] as usize..self.bstart[q + 1] as usize];
        e.binary_search_by_key(&t0, |x| x.0).ok().map(|i| e[i].1 as usize)
    }

    /// [`Targets::lookup`] trying the entry `*hint` first; `*hint` becomes the next entry.
    #[cfg(test)]
    pub fn lookup_from(&self, q: usize, t0: u32, hint: &mut usize) -> Option<usize> {
        self.entry_from(q, t0, hint).map(|i| self.below[i].1 as usize)
    }

    /// The index in `below` of the entry of the leaf whose first NID is `t0`, below position
    /// `q`, trying the entry `*hint` first, then the first one; `*hint` becomes the next entry.
    #[cfg(test)]
    pub fn entry_from(&self, q: usize, t0: u32, hint: &mut usize) -> Option<usize> {
        self.entry_in(self.bstart[q] as usize, self.bstart[q + 1] as usize, t0, hint)
            .map(|(i, _)| i)
    }

    /// [`Targets::entry_from`] among the entries `below[b0..b1]` (one switch's, found once by
    /// the caller; `*hint` relative to `b0`), with the entry's offset in `t1`/`t2`.
    #[inline(always)]
    pub fn entry_in(&self, b0: usize, b1: usize, t0: u32, hint: &mut usize) -> Option<(usize, usize)> {
        let e = &self.below[b0..b1];
        // The hint, else the first entry (a new mirror's first leaf in NID order).
        let i = match (e.get(*hint), e.first()) {
            (Some(x), _) if x.0 == t0 => *hint,
            (_, Some(x)) if x.0 == t0 => 0,
            _ => e.binary_search_by_key(&t0, |x| x.0).ok()?,
        };
        *hint = i + 1;
        Some((b0 + i, e[i].1 as usize))
    }
}

/// The targets of the destinations below `q` (in entry order), and the chain updates of its
/// primaries (destination, next chain switch, still natural).
fn assign(plan: &Plan, q: usize, leaves: &[(u32, u32)], cur: &[u32], natural: &[bool], cnt: &mut Counts) -> Targets1 {
    let k = plan.klow[q];
    let m = plan.m(k);
    let live: Vec<bool> = (0..m).map(|r| plan.up_of(q, r) != u8::MAX).collect();
    for c in [&mut cnt.cp, &mut cnt.cx, &mut cnt.cn] {
        c.clear();
        c.resize(m as usize, 0);
    }
    cnt.ds.clear();
    let kpi = plan.kpi[k as usize];
    let fast = u32::try_from(kpi).ok().map(FastDiv::new);
    let mdiv = FastDiv::new(m.max(1));
    for &(t0, c) in leaves {
        for d in t0..t0 + c {
            let (nom, q2) = match &fast {
                // ⌊d/Π_K⌋ by multiplication; the same as `Plan::nominal`.
                Some(fd) => {
                    let x = fd.div(d);
                    (mdiv.rem(x), u64::from(mdiv.div(x)))
                }
                None => plan.nominal(k, d),
            };
            cnt.ds.push((d, cur[d as usize] == q as u32, nom, q2));
        }
    }
    let total = cnt.ds.len();
    let mut t1 = vec![NO_RANK; total];
    let mut t2 = vec![NO_RANK; total];
    let ds = std::mem::take(&mut cnt.ds);
    let dests = || ds.iter().enumerate().map(|(i, &(d, prim, _, _))| (i, d, prim));
    let nominal = |i: usize| (ds[i].2, ds[i].3);
    // `q2 ≤ d` fits in 32 bits, and `r + 1 + (q2 mod (M − 1))` with `r` a rank or NO_RANK.
    let m1div = FastDiv::new(m.max(2) - 1);
    let start_after = |r: u32, q2: u64| {
        if m > 1 {
            mdiv.rem(r + 1 + m1div.rem(q2 as u32))
        } else {
            0
        }
    };
    // 1. Natural primaries on a live nominal rank, up to the fair share of each rank.
    let nprim = dests().filter(|x| x.2).count();
    let nlive = live.iter().filter(|&&b| b).count().max(1);
    let cap = nprim.div_ceil(nlive) as u32;
    for (i, d, prim) in dests() {
        let (nom, _) = nominal(i);
        if prim && natural[d as usize] && live[nom as usize] && cnt.cp[nom as usize] < cap {
            t1[i] = nom as u16;
            cnt.cp[nom as usize] += 1;
        }
    }
    // 2. The other primaries: fewest primaries.
    for (i, _, prim) in dests() {
        if !prim || t1[i] != NO_RANK {
            continue;
        }
        let (nom, q2) = nominal(i);
        let r = pick(
            m,
            |r| live[r as usize],
            |r| cnt.cp[r as usize],
            nom,
            start_after(nom, q2),
        );
        t1[i] = r as u16;
        cnt.cp[r as usize] += 1;
        if r != nom {
            cnt.cx[r as usize] += 1;
        }
    }
    // 3. Non-primaries: nominal when live and no displaced primary took it, else fewest
    //    primaries then non-primaries.
    for (i, _, prim) in dests() {
        if prim {
            continue;
        }
        let (nom, q2) = nominal(i);
        let r = if live[nom as usize] && cnt.cx[nom as usize] == 0 {
            nom
        } else {
            let (cp, cn) = (&cnt.cp, &cnt.cn);
            pick(
                m,
                |r| live[r as usize],
                |r| 8 * cp[r as usize] + cn[r as usize],
                nom,
                start_after(nom, q2),
            )
        };
        t1[i] = r as u16;
        cnt.cn[r as usize] += 1;
    }
    // 4. Second choices, primaries first: a live rank other than T1 of the fewest primaries
    //    plus second choices, the first in cyclic order from `start_after(T1, q2)` among them
    //    (`pick` with the key kept in an array, u32::MAX where not live).
    let key = &mut cnt.key;
    key.clear();
    key.extend((0..m as usize).map(|r| if live[r] { cnt.cp[r] } else { u32::MAX }));
    // With M ≤ 64 the least key is kept with the bitmasks of its ranks and of the ranks one
    // above, updated as the keys grow; the scan over every rank is left for a T1 that is the
    // only least one with nothing one above.
    let small = m <= 64;
    let (mut mn, mut at_min) = if small { min_mask(key, NONE) } else { (u32::MAX, 0) };
    // The ranks at the least + 1 (none while no rank is live).
    let mut at_next = if small && mn != u32::MAX {
        eq_mask(key, mn + 1)
    } else {
        0
    };
    for want_prim in [true, false] {
        for (i, _, prim) in dests() {
            if prim != want_prim {
                continue;
            }
            let (_, q2) = nominal(i);
            let a = u32::from(t1[i]);
            let r = if small {
                let abit = if a < m { 1u64 << a } else { 0 };
                let (b, cand) = if at_min & !abit != 0 {
                    (mn, at_min & !abit)
                } else if at_next != 0 {
                    // T1 is the only least one: the others are at the least + 1 or above.
                    (mn + 1, at_next)
                } else {
                    min_mask(key, a)
                };
                if b == u32::MAX {
                    NONE
                } else {
                    let hi = cand & (u64::MAX << start_after(a, q2));
                    (if hi != 0 { hi } else { cand }).trailing_zeros()
                }
            } else {
                let saved = key.get(a as usize).copied();
                if let Some(x) = key.get_mut(a as usize) {
                    *x = u32::MAX;
                }
                let b = key.iter().copied().min().unwrap_or(u32::MAX);
                let r = if b == u32::MAX {
                    NONE
                } else {
                    let st = start_after(a, q2) as usize;
                    let ml = m as usize;
                    (st..ml).chain(0..st).find(|&r| key[r] == b).map_or(NONE, |r| r as u32)
                };
                if let Some(v) = saved {
                    key[a as usize] = v;
                }
                r
            };
            if r != NONE {
                t2[i] = r as u16;
                key[r as usize] += 1;
                let rb = 1u64 << (r % 64);
                if small && at_min & rb != 0 {
                    (at_min, at_next) = (at_min & !rb, at_next | rb);
                    if at_min == 0 {
                        // Every live key is above the old least now.
                        (mn, at_min) = (mn + 1, at_next);
                        at_next = eq_mask(key, mn + 1);
                    }
                } else if small {
                    at_next &= !rb;
                }
            }
        }
    }
    let pr = dests().map(|x| x.2).collect();
    let upd = dests()
        .filter(|&(_, _, prim)| prim)
        .map(|(i, d, _)| {
            let r = u32::from(t1[i]);
            let nat = natural[d as usize] && r == nominal(i).0;
            (d, plan.member(k, r), nat)
        })
        .collect();
    let mut nt = Vec::with_capacity(leaves.len());
    let mut i0 = 0usize;
    for &(_, c) in leaves {
        let i1 = i0 + c as usize;
        nt.push((i0..i1).all(|i| u32::from(t1[i]) == ds[i].2));
        i0 = i1;
    }
    cnt.ds = ds;
    (t1, t2, pr, upd, nt)
}

/// The least of `key` over the ranks other than `skip` (at most 64 ranks) and the bitmask of
/// the ranks where it is reached (`u32::MAX` and the dead ranks when none is live).
fn min_mask(key: &[u32], skip: u32) -> (u32, u64) {
    let (mut mn, mut mask) = (u32::MAX, 0u64);
    for (r, &x) in key.iter().enumerate() {
        if r as u32 == skip {
            continue;
        }
        if x < mn {
            (mn, mask) = (x, 1 << r);
        } else if x == mn {
            mask |= 1 << r;
        }
    }
    (mn, mask)
}

/// The bitmask of the ranks whose `key` is `v` (at most 64 ranks).
fn eq_mask(key: &[u32], v: u32) -> u64 {
    key.iter()
        .enumerate()
        .fold(0, |m, (r, &x)| if x == v { m | 1 << r } else { m })
}

/// (first NID, count) of every leaf of `list`.
fn nports_of(p: &Prepared, list: &[u32], nports: &[u32]) -> Vec<(u32, u32)> {
    list.iter()
        .map(|&li| (p.tn.leaf_start[li as usize], nports[li as usize]))
        .collect()
}

/// Among the ranks `0..m` with `ok`, one of smallest `key`: `pref` when it is one of them, else
/// the first in cyclic order from `start`; [`NONE`] when no rank is `ok`.
fn pick<K: Ord + Copy>(m: u32, ok: impl Fn(u32) -> bool, key: impl Fn(u32) -> K, pref: u32, start: u32) -> u32 {
    let mut best: Option<K> = None;
    for r in 0..m {
        if ok(r) {
            let kr = key(r);
            if best.is_none_or(|b| kr < b) {
                best = Some(kr);
            }
        }
    }
    let Some(b) = best else {
        return NONE;
    };
    if pref < m && ok(pref) && key(pref) == b {
        return pref;
    }
    (0..m)
        .map(|i| (start + i) % m)
        .find(|&r| ok(r) && key(r) == b)
        .unwrap_or(NONE)
}
