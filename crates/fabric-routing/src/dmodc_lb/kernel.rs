//! The fill of load-aware Dmodc: every switch in parallel (the targets are computed before).
//!
//! Per switch `s` and destination `d` (topological NID, leaf `λ`):
//!
//! * `s = λ`: the end port's own port.
//! * `λ` below `s` (downward path): Dmodc's down choice, eqs. 4.5/4.7/4.8 on the down groups.
//! * otherwise, with `m` the mirror of `s` for `λ` ([`super::plan`]) and `C` Dmodc's closer up
//!   set of `s` (eq. 4.5 with the up-down rule): the up-neighbour of rank `T1(m, d)` when it
//!   is in `C`, else the one of rank `T2(m, d)` when it is in `C`, else the next member of
//!   `C` in round robin (a cursor per switch, advanced in NID order, so that the destinations
//!   this switch has to divert spread over its surviving up-links); without a mirror
//!   (irregular fabrics) Dmodc's own choice `C[⌊d/Π⌋ mod #C]` (eq. 4.7). The port within the
//!   group is `⌊d/(Π_K·M_K)⌋ mod #g` (eq. 4.8 with the nominal dividers; Dmodc's on an intact
//!   fabric).
//!
//! Every choice is in `C`, so every route is up*/down* (deadlock-free) and reaches its
//! destination whenever Dmodc's does.

use fabric_topology::{Fabric, Lid, PortNum};
use rayon::prelude::*;

use super::plan::Plan;
use super::targets::{Targets, NO_RANK};
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
        for span in &self.dst.spans {
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
            let tgt = if down { None } else { self.targets_of(q, span) };
            let nc = scr.cset.len() as u64;
            for (i, &lid) in lids_here.iter().enumerate() {
                let d = span.t0 + i as u32;
                let j;
                let mut q2 = None;
                if let Some(off) = tgt {
                    if let Some(j1) = self.usable(q, mask, self.tg.t1[off + i]) {
                        j = j1;
                    } else if let Some(j2) = self.usable(q, mask, self.tg.t2[off + i]) {
                        j = j2;
                    } else {
                        // Diverted: round robin over the candidates, in NID order.
                        let rot = mask.rotate_right(cursor % 64);
                        let jr = (rot.trailing_zeros() + cursor) % 64;
                        j = jr as usize;
                        cursor = jr + 1;
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

    /// The up index of rank `t` when it is a live neighbour of `q` in `mask`.
    #[inline]
    fn usable(&self, q: usize, mask: u64, t: u16) -> Option<usize> {
        // The mirror's component may be larger than this switch's (removed switches).
        let k = self.plan.klow[q];
        if t == NO_RANK || k == NONE || u32::from(t) >= self.plan.m(k) {
            return None;
        }
        let j = self.plan.up_of(q, u32::from(t));
        (j != u8::MAX && mask & (1 << j) != 0).then_some(j as usize)
    }

    /// Offset of the targets of `span`'s destinations at the mirror of `q`, if any.
    fn targets_of(&self, q: usize, span: &LeafSpan) -> Option<usize> {
        let leaf = self.p.o.leaves[span.li as usize] as usize;
        let m = self.plan.mirror(q, leaf);
        if m == NONE || self.plan.klow[m as usize] == NONE {
            return None;
        }
        self.tg.lookup(m as usize, span.t0)
    }
}
