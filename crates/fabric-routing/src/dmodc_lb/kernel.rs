//! The fill of load-aware Dmodc: levels bottom-up, the switches of a level in parallel.
//!
//! Per switch and destination `d` (topological NID, leaf `λ`):
//!
//! * `λ` below (downward path): Dmodc's down choice, eqs. 4.5/4.7/4.8 on the down groups.
//! * otherwise, when the nominal route of `d` from here exists ([`Plan::nominal_ok`]) and the
//!   flow of `d` here is the nominal one: the nominal port (Dmodc's complete-fabric choice).
//! * otherwise (*displaced*: the nominal upper switch is not a live closer neighbour, or the
//!   nominal route breaks further up, or the flow arrived off its nominal route): the closer
//!   upper group minimising `(load + f) / capacity` — `load` the flow already put on the group
//!   by this switch, `f` the flow of `d`, `capacity` the upper switch's number of ways on
//!   towards `λ` — ties to the nearest rank after the nominal one; the least-loaded port of
//!   the group. Displaced destinations are placed after the nominal ones, in NID order.
//!
//! Flows: a leaf sends its own end ports; an upper switch receives the nominal flow of its
//! children (estimated as all their sources when the nominal route of `d` from it exists) and
//! the displaced flows its children sent it (exact, passed up as records). Every choice is
//! among Dmodc's candidates (`C` of eq. 4.5 with the up-down rule), so every route is
//! up*/down* and reaches its destination whenever Dmodc's does.

use fabric_topology::{Fabric, Lid, PortNum, SwitchId};
use rayon::prelude::*;

use super::plan::Plan;
use crate::engine::LidSet;
use crate::fastdiv::FastDiv;
use crate::fill::{closer_masks, Destinations, LeafSpan, Prepared};
use crate::lft::{Lfts, NO_ROUTE};
use crate::lid::LidPlan;
use crate::prep::{INF, NONE};

/// A displaced flow passed to an upper switch: (upper position, destination NID, flow).
type Record = (u32, u32, u64);

/// The work of one switch: its position, its row and the displaced flows it receives.
type Work<'r> = (usize, &'r mut [u8], Vec<(u32, u64)>);

/// A destination placed after the nominal ones.
struct Deferred {
    d: u32,
    li: u32,
    lid: Lid,
    f: u64,
    r0: u32,
}

#[derive(Default)]
struct Scratch {
    gports: Vec<PortNum>,
    gmeta: Vec<(u32, u32)>,
    down_mask: Vec<u64>,
    tmp: Vec<u8>,
    cset: Vec<u16>,
    deferred: Vec<Deferred>,
}

/// Fills the end-port LIDs of `set` (see the module doc).
pub(super) fn fill_end_ports(fabric: &Fabric, lids: &LidPlan, p: &Prepared, plan: &Plan, set: LidSet, lfts: &mut Lfts) {
    let o = &p.o;
    let np = o.len();
    let Destinations {
        unrouted,
        spans,
        lids: all_lids,
        ports: all_ports,
        ..
    } = Destinations::new(fabric, lids, p, set);
    let put = |row: &mut [u8], lid: Lid, port: PortNum| {
        if lid != 0 {
            row[lid as usize] = port;
        }
    };
    let mut rows: Vec<Option<&mut [u8]>> = lfts.rows_mut().map(Some).collect();
    for (s, row) in rows.iter_mut().enumerate() {
        if o.pos[s] == NONE {
            let row = row.take().expect("row");
            for &lid in unrouted.iter().chain(&all_lids) {
                put(row, lid, NO_ROUTE);
            }
        }
    }
    let ctx = Ctx {
        fabric,
        p,
        plan,
        spans: &spans,
        all_lids: &all_lids,
        all_ports: &all_ports,
        unrouted: &unrouted,
    };
    let mut incoming: Vec<Vec<(u32, u64)>> = vec![Vec::new(); np];
    for r in &o.level_ranges {
        let mut work: Vec<Work<'_>> = r
            .clone()
            .map(|q| {
                let row = rows[o.order[q].idx()].take().expect("row of an oriented switch");
                (q, row, std::mem::take(&mut incoming[q]))
            })
            .collect();
        let outs: Vec<Vec<Record>> = work
            .par_iter_mut()
            .map_init(Scratch::default, |scr, (q, row, inc)| {
                ctx.route_switch(*q, row, inc, scr)
            })
            .collect();
        for out in outs {
            for (u, d, f) in out {
                incoming[u as usize].push((d, f));
            }
        }
    }
}

struct Ctx<'a> {
    fabric: &'a Fabric,
    p: &'a Prepared,
    plan: &'a Plan,
    spans: &'a [LeafSpan],
    all_lids: &'a [Lid],
    all_ports: &'a [PortNum],
    unrouted: &'a [Lid],
}

impl Ctx<'_> {
    /// Fills the row of the switch at position `q`; returns the displaced flows it sends up.
    fn route_switch(&self, q: usize, row: &mut [u8], inc: &mut Vec<(u32, u64)>, scr: &mut Scratch) -> Vec<Record> {
        let (p, plan, o) = (self.p, self.plan, &self.p.o);
        let put = |row: &mut [u8], lid: Lid, port: PortNum| {
            if lid != 0 {
                row[lid as usize] = port;
            }
        };
        for &lid in self.unrouted {
            put(row, lid, NO_ROUTE);
        }
        // Incoming displaced flows, merged per destination.
        inc.sort_unstable();
        inc.dedup_by(|b, a| {
            if a.0 == b.0 {
                a.1 += b.1;
                true
            } else {
                false
            }
        });
        let sid: SwitchId = o.order[q];
        scr.gports.clear();
        scr.gmeta.clear();
        for g in self.fabric.port_groups(sid) {
            scr.gmeta.push((scr.gports.len() as u32, g.ports.len() as u32));
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
        let pi = p.div[q];
        let pi_div = u32::try_from(pi).ok().map(FastDiv::new);
        let k = plan.klow[q];
        let ku = plan.kup[q];
        let my_rank = plan.rank[q];
        let children_flow = plan.flow[q] - plan.own[q];
        let own = plan.own[q];
        let mut load = [0u64; 256];
        let mut out: Vec<Record> = Vec::new();
        let mut ip = 0usize;
        scr.deferred.clear();
        let mut prev_down: Option<u64> = None;
        for span in self.spans {
            let li = span.li as usize;
            let (a, b) = (span.start as usize, (span.start + span.len) as usize);
            let lids_here = &self.all_lids[a..b];
            // Skip the incoming records of destinations before this span.
            while ip < inc.len() && inc[ip].0 < span.t0 {
                ip += 1;
            }
            if o.leaves[li] as usize == q {
                for (&lid, &port) in lids_here.iter().zip(&self.all_ports[a..b]) {
                    put(row, lid, port);
                }
                continue;
            }
            if down_row[li] != INF {
                // Dmodc's down choice: C[⌊d/Π⌋ mod #C], port g[⌊d/(Π·#C)⌋ mod #g].
                let mask = scr.down_mask[li];
                if prev_down != Some(mask) {
                    prev_down = Some(mask);
                    scr.cset.clear();
                    let mut bits = mask;
                    while bits != 0 {
                        scr.cset.push(downs[bits.trailing_zeros() as usize].group);
                        bits &= bits - 1;
                    }
                }
                let nc = scr.cset.len() as u64;
                for (i, &lid) in lids_here.iter().enumerate() {
                    if nc == 0 {
                        put(row, lid, NO_ROUTE);
                        continue;
                    }
                    let d = span.t0 + i as u32;
                    let qd = match &pi_div {
                        Some(fd) => u64::from(fd.div(d)),
                        None => 0,
                    };
                    let (start, len) = scr.gmeta[scr.cset[(qd % nc) as usize] as usize];
                    let port = scr.gports[(u64::from(start) + (qd / nc) % u64::from(len)) as usize];
                    put(row, lid, port);
                }
                continue;
            }
            if full_row[li] == INF || k == NONE {
                for &lid in lids_here {
                    put(row, lid, NO_ROUTE);
                }
                continue;
            }
            let um = plan.umask(q, li);
            if um == 0 {
                for &lid in lids_here {
                    put(row, lid, NO_ROUTE);
                }
                continue;
            }
            let intact = plan.is_full(q, li);
            for (i, &lid) in lids_here.iter().enumerate() {
                let d = span.t0 + i as u32;
                let rec = if ip < inc.len() && inc[ip].0 == d {
                    ip += 1;
                    inc[ip - 1].1
                } else {
                    0
                };
                let native = ku == NONE || plan.nominal(ku, d).0 == my_rank;
                let ok = intact || plan.nominal_ok(p, q, li, d);
                let (r, q2) = plan.nominal(k, d);
                let f_nat = own + if native { children_flow } else { 0 };
                if ok && (f_nat > 0 || rec == 0) {
                    // Nominal: eqs. 4.7–4.8 on the complete fabric.
                    let j = plan.up_of(q, r) as usize;
                    let (start, len) = scr.gmeta[ups[j].group as usize];
                    let pi_ = start as usize + (q2 % u64::from(len)) as usize;
                    let port = scr.gports[pi_];
                    put(row, lid, port);
                    if f_nat > 0 {
                        load[port as usize] += f_nat + rec;
                    }
                    let u = plan.member(k, r);
                    if rec > 0 && plan.klow[u as usize] != NONE {
                        out.push((u, d, rec));
                    }
                    continue;
                }
                let f = if ok { rec } else { own + rec };
                if f == 0 {
                    // No flow of d crosses this switch: the nominal port if it is a candidate,
                    // else a candidate picked by the nominal rank.
                    let rr = if um & (1 << r) != 0 {
                        r
                    } else {
                        nth_bit(um, r % um.count_ones())
                    };
                    let j = plan.up_of(q, rr) as usize;
                    let (start, len) = scr.gmeta[ups[j].group as usize];
                    put(row, lid, scr.gports[start as usize + (q2 % u64::from(len)) as usize]);
                    continue;
                }
                scr.deferred.push(Deferred {
                    d,
                    li: li as u32,
                    lid,
                    f,
                    r0: r,
                });
            }
        }
        // Displaced destinations, by load, in a scrambled order: in NID order a run of
        // destinations of one subtree would fill the least-loaded group alone.
        scr.deferred.sort_unstable_by_key(|df| df.d.wrapping_mul(0x9E37_79B1));
        let m = if k == NONE { 1 } else { u64::from(plan.m(k)) };
        for df in &scr.deferred {
            let li = df.li as usize;
            let um = plan.umask(q, li);
            let mut best: Option<(u32, u64, u64, u64)> = None; // (rank, load, cap, dist)
            let mut bits = um;
            while bits != 0 {
                let r = bits.trailing_zeros();
                bits &= bits - 1;
                let j = plan.up_of(q, r) as usize;
                let (start, len) = scr.gmeta[ups[j].group as usize];
                let gl: u64 = scr.gports[start as usize..(start + len) as usize]
                    .iter()
                    .map(|&pn| load[pn as usize])
                    .sum();
                let u = plan.member(k, r) as usize;
                let cap = plan.capacity(p, u, li) * u64::from(len);
                let dist = (u64::from(r) + m - u64::from(df.r0)) % m.max(1);
                let better = match best {
                    None => true,
                    Some((_, bl, bc, bd)) => {
                        let lhs = u128::from(gl + df.f) * u128::from(bc);
                        let rhs = u128::from(bl + df.f) * u128::from(cap);
                        lhs < rhs || (lhs == rhs && dist < bd)
                    }
                };
                if better {
                    best = Some((r, gl, cap, dist));
                }
            }
            let Some((r, ..)) = best else {
                put(row, df.lid, NO_ROUTE);
                continue;
            };
            let j = plan.up_of(q, r) as usize;
            let (start, len) = scr.gmeta[ups[j].group as usize];
            let ports = &scr.gports[start as usize..(start + len) as usize];
            let port = *ports
                .iter()
                .min_by_key(|&&pn| load[pn as usize])
                .expect("non-empty group");
            load[port as usize] += df.f;
            put(row, df.lid, port);
            let u = plan.member(k, r);
            if plan.klow[u as usize] != NONE {
                out.push((u, df.d, df.f));
            }
        }
        out
    }
}

/// Rank of the `n`-th set bit of `x` (`n < popcount(x)`).
fn nth_bit(mut x: u64, n: u32) -> u32 {
    for _ in 0..n {
        x &= x - 1;
    }
    x.trailing_zeros()
}
