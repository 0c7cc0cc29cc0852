//! The fill of load-aware Dmodc: every switch in parallel (the targets are computed before).
//!
//! Per switch `s` and destination `d` (topological NID, leaf `λ`):
//!
//! * `s = λ`: the end port's own port.
//! * `λ` below `s` (downward path): Dmodc's down choice, eqs. 4.5/4.7/4.8 on the down groups.
//! * otherwise, with `m` the mirror of `s` for `λ` ([`super::plan`]) and `C` Dmodc's closer up
//!   set of `s` (eq. 4.5 with the up-down rule): the up-neighbour of rank `T1(m, d)` when it
//!   is in `C`. The destinations it cannot keep there (*displaced*) are placed jointly for
//!   the whole *mirror group* (the consecutive leaves with the same mirror `m`: on a PGFT the
//!   destination pod seen from `s`'s position), beyond the thesis: a per-up-link count of the
//!   group's primaries at `m` (the destinations whose chain passes `m`) starts with the ones
//!   kept on their `T1`; a displaced primary takes `T2(m, d)` when it is in `C` and among the
//!   least counted, else a least counted member of `C` (ties in round robin, NID order), and
//!   is counted; a displaced non-primary takes `T2(m, d)` when it is in `C`, else a least
//!   counted member. So each up-link of `s` carries about the same number of the group's
//!   primaries (the destinations most of `s`'s sources send to), and the second ranks keep
//!   the paths of one destination on one down-link wherever that does not unbalance `s`.
//!   Without a mirror (irregular fabrics) Dmodc's own choice `C[⌊d/Π⌋ mod #C]` (eq. 4.7). The
//!   port within the group is `⌊d/(Π_K·M_K)⌋ mod #g` (eq. 4.8 with the nominal dividers;
//!   Dmodc's on an intact fabric).
//!
//! Every choice is in `C`, so every route is up*/down* (deadlock-free) and reaches its
//! destination whenever Dmodc's does.

use fabric_topology::{Fabric, Lid, PortNum};
use rayon::prelude::*;

use super::plan::Plan;
use super::targets::Targets;
use crate::engine::LidSet;
use crate::fastdiv::FastDiv;
use crate::fill::{closer_masks, Destinations, LeafSpan, Prepared};
use crate::lft::{Lfts, NO_ROUTE};
use crate::lid::LidPlan;
use crate::prep::{INF, NONE};

#[derive(Default)]
struct Scratch {
    gports: Vec<PortNum>,
    gmeta: Vec<(u32, u32, FastDiv)>,
    down_mask: Vec<u64>,
    up_mask: Vec<u64>,
    tmp: Vec<u8>,
    cset: Vec<u16>,
    /// Per up index: the primaries of the current mirror group given to it.
    gload: Vec<u32>,
}

/// Fills the end-port LIDs of `set` (see the module doc).
pub(super) fn fill_end_ports(
    fabric: &Fabric,
    lids: &LidPlan,
    p: &Prepared,
    plan: &Plan,
    tg: &Targets,
    set: LidSet,
    lfts: &mut Lfts,
) {
    let o = &p.o;
    let dst = Destinations::new(fabric, lids, p, set);
    let ctx = Ctx {
        p,
        plan,
        tg,
        dst: &dst,
        fabric,
    };
    lfts.par_rows_mut()
        .enumerate()
        .for_each_init(Scratch::default, |scr, (s, row)| {
            let q = o.pos[s];
            if q == NONE {
                for &lid in dst.unrouted.iter().chain(&dst.lids) {
                    put(row, lid, NO_ROUTE);
                }
            } else {
                ctx.route_switch(q as usize, row, scr);
            }
        });
}

#[inline]
fn put(row: &mut [u8], lid: Lid, port: PortNum) {
    if lid != 0 {
        row[lid as usize] = port;
    }
}

struct Ctx<'a> {
    fabric: &'a Fabric,
    p: &'a Prepared,
    plan: &'a Plan,
    tg: &'a Targets,
    dst: &'a Destinations,
}

impl Ctx<'_> {
    /// Fills the row of the switch at position `q`.
    fn route_switch(&self, q: usize, row: &mut [u8], scr: &mut Scratch) {
        let (p, plan, o) = (self.p, self.plan, &self.p.o);
        for &lid in &self.dst.unrouted {
            put(row, lid, NO_ROUTE);
        }
        let sid = o.order[q];
        scr.gports.clear();
        scr.gmeta.clear();
        for g in self.fabric.port_groups(sid) {
            scr.gmeta.push((
                scr.gports.len() as u32,
                g.ports.len() as u32,
                FastDiv::new(g.ports.len().max(1) as u32),
            ));
            scr.gports.extend_from_slice(&g.ports);
        }
        let downs = o.downs(q);
        let ups = o.ups(q);
        let down_row = p.costs.down_row(q);
        let full_row = p.costs.full_row(q);
        closer_masks(
            &mut scr.down_mask,
            &mut scr.tmp,
            downs.iter().map(|nb| p.costs.down_row(nb.pos as usize)),
            down_row,
        );
        closer_masks(
            &mut scr.up_mask,
            &mut scr.tmp,
            ups.iter().map(|nb| p.costs.full_row(nb.pos as usize)),
            full_row,
        );
        let pi = p.div[q];
        let k = plan.klow[q];
        let ranks = plan.up_row(q);
        let mut cursor = 0u32;
        let pidiv = u32::try_from(pi).ok().map(FastDiv::new);
        // ⌊d/(Π_K·M_K)⌋ by multiplication where it fits.
        let q2div = if k == NONE {
            None
        } else {
            u32::try_from(plan.kpi[k as usize].saturating_mul(u64::from(plan.m(k).max(1))))
                .ok()
                .map(FastDiv::new)
        };
        let mut gmirror = NONE;
        scr.gload.clear();
        scr.gload.resize(ups.len(), 0);
        for (si, span) in self.dst.spans.iter().enumerate() {
            let li = span.li as usize;
            let (a, b) = (span.start as usize, (span.start + span.len) as usize);
            let lids_here = &self.dst.lids[a..b];
            if o.leaves[li] as usize == q {
                for (&lid, &port) in lids_here.iter().zip(&self.dst.ports[a..b]) {
                    put(row, lid, port);
                }
                continue;
            }
            let (down, mask) = if down_row[li] != INF {
                (true, scr.down_mask[li])
            } else if full_row[li] != INF && k != NONE {
                (false, scr.up_mask[li])
            } else {
                (false, 0)
            };
            if mask == 0 {
                for &lid in lids_here {
                    put(row, lid, NO_ROUTE);
                }
                continue;
            }
            let nbrs = if down { downs } else { ups };
            scr.cset.clear();
            let mut bits = mask;
            while bits != 0 {
                scr.cset.push(bits.trailing_zeros() as u16);
                bits &= bits - 1;
            }
            let (m, tgt) = if down { (NONE, None) } else { self.targets_of(q, span) };
            if tgt.is_some() && m != gmirror {
                gmirror = m;
                self.group_prepass(q, si, m, ranks, scr);
            }
            let nc = scr.cset.len() as u64;
            for (i, &lid) in lids_here.iter().enumerate() {
                let d = span.t0 + i as u32;
                let j;
                let mut q2 = None;
                if let Some(off) = tgt {
                    if let Some(j1) = usable(ranks, mask, self.tg.t1[off + i]) {
                        j = j1;
                    } else {
                        let pr = self.tg.prim[off + i];
                        // Displaced: the mirror's second rank when it is usable and, for a
                        // primary, among the least loaded of the group; else a least loaded
                        // candidate (ties in round robin, NID order).
                        let mn = min_load(&scr.gload, mask);
                        j = match usable(ranks, mask, self.tg.t2[off + i]) {
                            Some(j2) if !pr || scr.gload[j2] == mn => j2,
                            _ => least_loaded(&scr.gload, mask, cursor),
                        };
                        cursor = j as u32 + 1;
                        if pr {
                            scr.gload[j] += 1;
                        }
                    }
                } else {
                    // Dmodc: C[⌊d/Π⌋ mod #C], port g[⌊d/(Π·#C)⌋ mod #g].
                    let qd = match &pidiv {
                        Some(fd) => u64::from(fd.div(d)),
                        None => u64::from(d) / pi,
                    };
                    if nc == 1 {
                        j = scr.cset[0] as usize;
                        q2 = Some(qd);
                    } else {
                        j = scr.cset[(qd % nc) as usize] as usize;
                        q2 = Some(qd / nc);
                    }
                }
                let (start, len, lendiv) = scr.gmeta[nbrs[j].group as usize];
                let port = if len == 1 {
                    scr.gports[start as usize]
                } else {
                    // Eq. 4.8 with the nominal dividers (Dmodc's on an intact fabric).
                    let q2 = q2.unwrap_or_else(|| match &q2div {
                        Some(fd) => u64::from(fd.div(d)),
                        None => plan.nominal(k, d).1,
                    });
                    let r = match u32::try_from(q2) {
                        Ok(x) => lendiv.rem(x),
                        Err(_) => (q2 % u64::from(len)) as u32,
                    };
                    scr.gports[(start + r) as usize]
                };
                put(row, lid, port);
            }
        }
    }

    /// Per up index of `q`, the primaries at mirror `m` (spans from `si` on with that mirror)
    /// whose first rank `q` can take.
    fn group_prepass(&self, q: usize, si: usize, m: u32, ranks: &[u8], scr: &mut Scratch) {
        scr.gload.iter_mut().for_each(|x| *x = 0);
        let (down_row, full_row) = (self.p.costs.down_row(q), self.p.costs.full_row(q));
        for span in &self.dst.spans[si..] {
            let li = span.li as usize;
            if self.p.o.leaves[li] as usize == q || down_row[li] != INF || full_row[li] == INF {
                continue;
            }
            let (m2, Some(off)) = self.targets_of(q, span) else {
                break;
            };
            if m2 != m {
                break;
            }
            let mask = scr.up_mask[li];
            for i in off..off + span.len as usize {
                if self.tg.prim[i] {
                    if let Some(j) = usable(ranks, mask, self.tg.t1[i]) {
                        scr.gload[j] += 1;
                    }
                }
            }
        }
    }

    /// The mirror of `q` for `span`'s leaf and the offset of the targets of the span's
    /// destinations there, if any.
    fn targets_of(&self, q: usize, span: &LeafSpan) -> (u32, Option<usize>) {
        let leaf = self.p.o.leaves[span.li as usize] as usize;
        let m = self.plan.mirror(q, leaf);
        if m == NONE || self.plan.klow[m as usize] == NONE {
            return (m, None);
        }
        (m, self.tg.lookup(m as usize, span.t0))
    }
}

/// The up index of rank `t` (`ranks`: [`Plan::up_row`] of the switch) when it is a live
/// neighbour in `mask`. The mirror's component may be larger than the switch's (removed
/// switches), and [`super::targets::NO_RANK`] is beyond every row.
#[inline]
pub(super) fn usable(ranks: &[u8], mask: u64, t: u16) -> Option<usize> {
    match ranks.get(usize::from(t)) {
        Some(&j) if j != u8::MAX && (mask >> j) & 1 != 0 => Some(usize::from(j)),
        _ => None,
    }
}

/// Among the up indices of `mask`, one with the fewest destinations so far in `load`; among
/// those, the first in cyclic order from `cursor`.
pub(super) fn least_loaded(load: &[u32], mask: u64, cursor: u32) -> usize {
    let rot = mask.rotate_right(cursor % 64);
    let mut bits = rot;
    let mut best = (u32::MAX, 0usize);
    while bits != 0 {
        let j = ((bits.trailing_zeros() + cursor) % 64) as usize;
        bits &= bits - 1;
        if load[j] < best.0 {
            best = (load[j], j);
        }
    }
    best.1
}

fn min_load(load: &[u32], mask: u64) -> u32 {
    let mut bits = mask;
    let mut m = u32::MAX;
    while bits != 0 {
        m = m.min(load[bits.trailing_zeros() as usize]);
        bits &= bits - 1;
    }
    m
}
