//! The fill of load-aware Dmodc: the switches of a level in parallel, levels bottom-up (the
//! targets are computed before).
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
//!   least counted, else a least counted member of `C`, and is counted; a displaced
//!   non-primary takes `T2(m, d)` when it is in `C`, else a least counted member. Ties among
//!   the least counted go to the up-link with the fewest primaries of *all* of `s`'s mirror
//!   groups (a second count over the whole switch, taken at its first displaced destination
//!   and following every placed primary; [`Balance::Switch`]), then round robin in NID order;
//!   above the leaves the switch-wide count chooses among the group's up-links counted at most
//!   one above the group's least ([`Balance::Near`]). A switch above the leaves also places
//!   its *arrivals*, the destinations its children actually send up to it off their chains
//!   (their displaced destinations; non-primaries at `m`, counted in no group, but each one
//!   more destination on the up-link it takes): levels are filled bottom-up, and an arrival
//!   keeps `T1(m, d)` while that up-link is below the switch's fair share of primaries and
//!   arrivals, else takes `T2(m, d)` when among the switch's least counted, else a least
//!   counted member of `C` ([`Balance::Arrivals`], the engine's).
//!   So each up-link of `s` carries about the same number of each group's primaries (the
//!   destinations most of `s`'s sources send to; a shift sends a pod to one or two pods) and
//!   of all of them together (a random permutation's mean load of the up-link), and the
//!   second ranks keep the paths of one destination on one down-link wherever that does not
//!   unbalance `s`.
//!   Without a mirror (irregular fabrics) Dmodc's own choice `C[⌊d/Π⌋ mod #C]` (eq. 4.7). The
//!   port within the group is `⌊d/(Π_K·M_K)⌋ mod #g` (eq. 4.8 with the nominal dividers;
//!   Dmodc's on an intact fabric).
//!
//! Every choice is in `C`, so every route is up*/down* (deadlock-free) and reaches its
//! destination whenever Dmodc's does.

use fabric_topology::{Fabric, PortNum};
use rayon::prelude::*;

use super::plan::Plan;
use super::targets::Targets;
use crate::engine::LidSet;
use crate::fastdiv::FastDiv;
use crate::fill::{closer_masks, Destinations, LeafSpan, Prepared};
use crate::lft::{Lfts, NO_ROUTE};
use crate::lid::LidPlan;
use crate::prep::{INF, NONE};

mod look;
mod pick;
mod scratch;
mod write;

use look::{own_tabled, Look, OwnSpan};
use pick::{any_bit, bit, min_load, tie_mask, window};
pub(super) use pick::{least_loaded, usable};
use scratch::Scratch;
use write::{next_destination, put, put_ranks, put_run, put_table};

/// How a displaced destination picks among the least loaded up-links of its mirror group.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Balance {
    /// Round robin (the placement of 27–28 Nov 2026; kept for the tests that compare).
    #[cfg_attr(not(test), allow(dead_code))]
    Group,
    /// The one with the fewest primaries of *all* the switch's mirror groups (counted over the
    /// whole switch before its first displaced destination), then round robin: the groups'
    /// leftovers no longer pile up on the same up-links (28 Nov 2026; kept for the tests).
    #[cfg_attr(not(test), allow(dead_code))]
    Switch,
    /// As [`Balance::Switch`], but above the leaves the switch-wide count chooses among the
    /// group's up-links counted at most one above the group's least (the engine's): lower
    /// random-permutation tails at the same `mu_sp`. A leaf keeps the exact tie (the worst
    /// shift port is a leaf up-link; the tolerance at every switch raised `mu_sp` on one of
    /// five fabrics, at the leaves alone it gained less: docs/routing.md).
    #[cfg_attr(not(test), allow(dead_code))]
    Near,
    /// As [`Balance::Near`], and a switch also places its *arrivals* (the engine's): the
    /// destinations the switches below actually send up to it off their chains (their
    /// displaced destinations, non-primaries here), which its mirror groups do not count.
    /// Levels are filled bottom-up; an arrival keeps its first rank while that up-link holds
    /// fewer than the switch's fair share (its primaries and arrivals over its up-links), else
    /// takes its second rank when that is among the switch's least counted, else a least
    /// counted up-link; the switch-wide count counts them (a random permutation weighs an
    /// arrival less, as few sources send it, but all-to-all counts every destination).
    Arrivals,
}

/// Fills the end-port LIDs of `set` (see the module doc).
pub(super) fn fill_end_ports(
    fabric: &Fabric,
    lids: &LidPlan,
    p: &Prepared,
    (plan, tg): (&Plan, &Targets),
    set: LidSet,
    lfts: &mut Lfts,
    (tabulate, balance): (bool, Balance),
) -> Destinations {
    let o = &p.o;
    let dst = Destinations::new(fabric, lids, p, set);
    let own = own_tabled(p, plan, tg, &dst);
    let ctx = Ctx {
        p,
        plan,
        tg,
        dst: &dst,
        own: &own,
        fabric,
        tabulate,
        balance,
    };
    if balance != Balance::Arrivals {
        lfts.par_rows_mut()
            .enumerate()
            .for_each_init(Scratch::default, |scr, (s, row)| {
                let q = o.pos[s];
                if q == NONE {
                    for &lid in dst.unrouted.iter().chain(&dst.lids) {
                        put(row, lid, NO_ROUTE);
                    }
                } else {
                    ctx.route_switch(q as usize, row, scr, &[]);
                }
            });
        return dst;
    }
    // Levels bottom-up, so that a switch knows the destinations its children send up to it
    // as non-primaries (its arrivals, one bit per destination NID).
    let words = dst
        .spans
        .iter()
        .map(|x| (x.t0 + x.len) as usize)
        .max()
        .unwrap_or(0)
        .div_ceil(64);
    let mut arr: Vec<Vec<u64>> = vec![Vec::new(); o.len()];
    lfts.par_rows_mut().enumerate().for_each(|(s, row)| {
        if o.pos[s] == NONE {
            for &lid in dst.unrouted.iter().chain(&dst.lids) {
                put(row, lid, NO_ROUTE);
            }
        }
    });
    for r in &o.level_ranges {
        let recs: Vec<Vec<(u32, u32)>> = lfts
            .par_rows_mut()
            .enumerate()
            .filter(|(s, _)| r.contains(&(o.pos[*s] as usize)))
            .map_init(Scratch::default, |scr, (s, row)| {
                let q = o.pos[s] as usize;
                scr.rec.clear();
                ctx.route_switch(q, row, scr, &arr[q]);
                std::mem::take(&mut scr.rec)
            })
            .collect();
        for (parent, d) in recs.into_iter().flatten() {
            let b = &mut arr[parent as usize];
            if b.is_empty() {
                b.resize(words, 0);
            }
            b[d as usize / 64] |= 1 << (d % 64);
        }
    }
    dst
}

struct Ctx<'a> {
    fabric: &'a Fabric,
    p: &'a Prepared,
    plan: &'a Plan,
    tg: &'a Targets,
    dst: &'a Destinations,
    /// Per span, as a leaf switch sees it, and whether the next one follows it ([`own_tabled`]).
    own: &'a [OwnSpan],
    /// Whether the usable first ranks take their port from [`Scratch::build_ptab`]'s table
    /// (false: computed per destination, the reference the tests compare with).
    tabulate: bool,
    /// How the displaced destinations break ties ([`Balance`]).
    balance: Balance,
}

impl Ctx<'_> {
    /// Fills the row of the switch at position `q`.
    /// `arr`: the switch's arrivals, one bit per destination NID (empty: none).
    fn route_switch(&self, q: usize, row: &mut [u8], scr: &mut Scratch, arr: &[u64]) {
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
        scr.jmeta.clear();
        scr.jmeta.extend(ups.iter().map(|nb| scr.gmeta[nb.group as usize]));
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
        let mut nom_memo = (NONE, false);
        let (mut gstart, mut gready) = (0usize, true);
        // Whether the whole switch's count ([`Scratch::cload`], over all mirror groups) was taken.
        let mut sready = false;
        let mut look = Look::new(self.plan, q);
        scr.jt.clear();
        scr.jt_full = false;
        (scr.jt_for, scr.prev.0) = (0, 0);
        scr.dtab.clear();
        scr.dtab_none = q2div.is_none();
        scr.gload.clear();
        scr.gload.resize(ups.len(), 0);
        let spans = &self.dst.spans;
        let mut next = 0usize;
        while next < spans.len() {
            let (si, span) = (next, &spans[next]);
            next += 1;
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
            let (m, tgt) = if down {
                (NONE, None)
            } else {
                self.targets_of(q, span, &mut look)
            };
            let (tgt, entry) = match tgt {
                Some((off, e)) => (Some(off), e),
                None => (None, 0),
            };
            if tgt.is_some() && m != gmirror {
                // A new mirror group: its prepass runs at its first displaced destination.
                gmirror = m;
                gstart = si;
                gready = false;
            }
            if let Some(off) = tgt {
                if scr.jt_for != mask {
                    // The previous C's tables are kept: C changes with the destination's pod,
                    // usually back and forth between the full set and a few others.
                    scr.swap_ranks();
                }
                if scr.jt_for != mask {
                    // Rank → up index when that up-neighbour is in C (u8::MAX: not usable).
                    scr.jt_for = mask;
                    scr.jt.clear();
                    scr.jt.extend(ranks.iter().map(|&j| {
                        if j != u8::MAX && (mask >> j) & 1 != 0 {
                            j
                        } else {
                            u8::MAX
                        }
                    }));
                    scr.jt_full = scr.jt.iter().all(|&j| j != u8::MAX);
                    scr.build_ptab();
                }
                // Whether the span has arrivals to place (only those then, after the table).
                let moving = any_bit(arr, span.t0, span.len);
                let mut tabled = false;
                if self.tabulate && scr.jt_full && !scr.dtab_none && self.tg.nat[entry] && {
                    // Whether the mirror's component has the switch's nominal ranks (per
                    // component: consecutive spans share it).
                    let km = plan.klow[m as usize];
                    if nom_memo.0 != km {
                        nom_memo = (km, plan.same_nominal(k, km));
                    }
                    nom_memo.1
                } {
                    // Every first rank is the nominal one and usable: Dmodc's closed form on the
                    // complete component, one period of d tabulated (the ports the per-
                    // destination loop below gives them).
                    if scr.dtab.is_empty() {
                        let dd = q2div.as_ref().map_or(0, |fd| fd.d);
                        scr.build_dtab(plan.kpi[k as usize], ranks, dd);
                    }
                    if !scr.dtab_none && !moving {
                        // This span and the following ones that the loop would table the same
                        // way (same C, every first rank nominal, no arrival), consecutive LIDs
                        // and NIDs written at once.
                        let mut run = (a, b, span.t0, span.step);
                        // A leaf switch reads the destination leaves' own entries as checked once
                        // for every leaf switch ([`own_tabled`]).
                        let leaf_view = look.leafq && arr.is_empty();
                        while let Some(nx) = spans.get(next) {
                            let (lj, m2) = (nx.li as usize, o.leaves[nx.li as usize]);
                            if m2 as usize == q || down_row[lj] != INF || scr.up_mask[lj] != mask {
                                break;
                            }
                            let (m2, km) = if leaf_view {
                                let x = &self.own[next];
                                if !x.nat {
                                    break;
                                }
                                (m2, x.comp)
                            } else {
                                if full_row[lj] == INF {
                                    break;
                                }
                                let (m2, Some((_, e2))) = self.targets_of(q, nx, &mut look) else {
                                    break;
                                };
                                if !self.tg.nat[e2] || any_bit(arr, nx.t0, nx.len) {
                                    break;
                                }
                                (m2, plan.klow[m2 as usize])
                            };
                            if nom_memo.0 != km {
                                nom_memo = (km, plan.same_nominal(k, km));
                            }
                            if !nom_memo.1 {
                                break;
                            }
                            if m2 != gmirror {
                                (gmirror, gstart, gready) = (m2, next, false);
                            }
                            let (na, nb) = (nx.start as usize, (nx.start + nx.len) as usize);
                            if self.own[next - 1].cont && run.1 == na {
                                run.1 = nb;
                            } else {
                                self.put_tabled(row, run, scr);
                                run = (na, nb, nx.t0, nx.step);
                            }
                            next += 1;
                        }
                        self.put_tabled(row, run, scr);
                        continue;
                    }
                    if !scr.dtab_none {
                        let di = scr.dtab_div.rem(span.t0) as usize;
                        put_table(row, lids_here, span.step as usize, (&scr.dtab, scr.dtab_period), di);
                        tabled = true;
                    }
                }
                // ⌊d/(Π_K·M_K)⌋ and its remainder, advanced with d; its phase in the table.
                let (mut q2, mut rem, dd) = match &q2div {
                    Some(fd) => {
                        let x = fd.div(span.t0);
                        (x, span.t0 - x * fd.d, fd.d)
                    }
                    None => (0, 0, 0),
                };
                let (mm, lcm) = (scr.jt.len(), scr.lcm);
                // Without q2 the table serves only when the phase does not matter.
                let table = self.tabulate && (lcm == 1 || (lcm > 1 && dd != 0));
                let mut ph = if lcm > 1 { q2 % lcm } else { 0 };
                let t1s = &self.tg.t1[off..off + lids_here.len()];
                let mut i = 0usize;
                while i < lids_here.len() {
                    if table && !moving {
                        // A run of usable first ranks and no arrival: the tabulated ports, one
                        // phase (quotient q2) at a time.
                        while i < lids_here.len() {
                            let left = lids_here.len() - i;
                            let c = if dd != 0 { left.min((dd - rem) as usize) } else { left };
                            let prow = &scr.ptab[ph as usize * mm..(ph as usize + 1) * mm];
                            let n = put_ranks(row, &lids_here[i..i + c], span.step as usize, &t1s[i..i + c], prow);
                            i += n;
                            if dd != 0 {
                                rem += n as u32;
                                if rem == dd {
                                    (rem, q2, ph) = (0, q2 + 1, if ph + 1 == lcm { 0 } else { ph + 1 });
                                }
                            }
                            if n < c {
                                break;
                            }
                        }
                        if i == lids_here.len() {
                            break;
                        }
                    }
                    let (lid, t) = (lids_here[i], t1s[i]);
                    let d = span.t0 + i as u32;
                    // An arrival (a non-primary sent up by a switch below) to be placed.
                    let place = moving && !self.tg.prim[off + i] && bit(arr, d);
                    if tabled && !place {
                        // Written from the table (every first rank usable: none displaced).
                        next_destination(dd, lcm, &mut rem, &mut q2, &mut ph);
                        i += 1;
                        continue;
                    }
                    if table && !place && usize::from(t) < mm {
                        // A usable first rank: the tabulated port.
                        let e = scr.ptab[ph as usize * mm + usize::from(t)];
                        if e != u16::MAX {
                            put(row, lid, e as PortNum);
                            next_destination(dd, lcm, &mut rem, &mut q2, &mut ph);
                            i += 1;
                            continue;
                        }
                    }
                    let j1 = scr.jt.get(usize::from(t)).copied().unwrap_or(u8::MAX);
                    let j = if j1 != u8::MAX && !place {
                        usize::from(j1)
                    } else {
                        if self.balance != Balance::Group && !sready {
                            sready = true;
                            scr.cload.clear();
                            scr.cload.resize(ups.len(), 0);
                            let a = self.switch_prepass(q, ranks, scr, arr);
                            let total = scr.cload.iter().sum::<u32>() + a;
                            scr.cap = total.div_ceil(ups.len().max(1) as u32);
                        }
                        if !gready {
                            gready = true;
                            if sready {
                                // The group's share of the switch-wide walk.
                                scr.group_load(gstart, gmirror);
                            } else {
                                self.group_prepass(q, gstart, Some(gmirror), ranks, &scr.up_mask, &mut scr.gload, &[]);
                            }
                        }
                        let pr = self.tg.prim[off + i];
                        let arrived = !pr && bit(arr, d);
                        let t2 = usable(ranks, mask, self.tg.t2[off + i]);
                        let j = if arrived {
                            // An arrival: its first rank while below the switch's fair share,
                            // else the second rank when among the switch's least counted, else
                            // a least counted candidate.
                            match (j1, t2) {
                                (j1, _) if j1 != u8::MAX && scr.cload[usize::from(j1)] < scr.cap => usize::from(j1),
                                (_, Some(j2)) if scr.cload[j2] == min_load(&scr.cload, mask) => j2,
                                _ => least_loaded(&scr.cload, mask, cursor),
                            }
                        } else {
                            // Displaced: the mirror's second rank when it is usable and, for a
                            // primary, among the least loaded of the group; else a least loaded
                            // candidate (ties in round robin, NID order).
                            let mn = || min_load(&scr.gload, mask);
                            match t2 {
                                Some(j2) if !pr || scr.gload[j2] == mn() => j2,
                                // Among the group's least loaded: the switch's least loaded.
                                _ if self.balance != Balance::Group => {
                                    let near = self.balance != Balance::Switch && o.leaf_idx[q] == NONE;
                                    let within = mn() + u32::from(near);
                                    least_loaded(&scr.cload, tie_mask(&scr.gload, mask, within), cursor)
                                }
                                _ => least_loaded(&scr.gload, mask, cursor),
                            }
                        };
                        cursor = j as u32 + 1;
                        if pr {
                            scr.gload[j] += 1;
                        }
                        if pr || arrived {
                            if let Some(c) = scr.cload.get_mut(j) {
                                *c += 1;
                            }
                        }
                        // Sent up off its chain: an arrival of the parent (when that routes up).
                        let up = ups[j].pos;
                        if self.balance == Balance::Arrivals && (pr || arrived) && plan.klow[up as usize] != NONE {
                            scr.rec.push((up, d));
                        }
                        j
                    };
                    let (start, len, lendiv) = scr.jmeta[j];
                    let port = if len == 1 {
                        scr.gports[start as usize]
                    } else {
                        // Eq. 4.8 with the nominal dividers (Dmodc's on an intact fabric).
                        let r = if dd != 0 {
                            lendiv.rem(q2)
                        } else {
                            let x = plan.nominal(k, d).1;
                            (x % u64::from(len)) as u32
                        };
                        scr.gports[(start + r) as usize]
                    };
                    put(row, lid, port);
                    next_destination(dd, lcm, &mut rem, &mut q2, &mut ph);
                    i += 1;
                }
                continue;
            }
            scr.cset.clear();
            let mut bits = mask;
            while bits != 0 {
                scr.cset.push(bits.trailing_zeros() as u16);
                bits &= bits - 1;
            }
            // Dmodc: C[⌊d/Π⌋ mod #C], port g[⌊d/(Π·#C)⌋ mod #g], with ⌊d/Π⌋ (its remainder r),
            // its index in C (gi) and its quotient by #C (q2) advanced with d.
            let nc = scr.cset.len() as u64;
            let t0 = u64::from(span.t0);
            let qd = match &pidiv {
                Some(fd) => u64::from(fd.div(span.t0)),
                None => t0 / pi,
            };
            let (mut r, mut gi, mut q2) = (t0 - qd * pi, qd % nc, qd / nc);
            // Runs of destinations with the same port (until r wraps), written at once.
            let (k, step) = (lids_here.len(), span.step as usize);
            let mut i = 0;
            while i < k {
                let j = scr.cset[gi as usize] as usize;
                let (start, len, _) = scr.gmeta[nbrs[j].group as usize];
                let port = if len == 1 {
                    scr.gports[start as usize]
                } else {
                    scr.gports[(start + (q2 % u64::from(len)) as u32) as usize]
                };
                // (One destination at a time without `tabulate`: the reference of the tests.)
                let run = if self.tabulate {
                    (k - i).min(usize::try_from(pi - r).unwrap_or(usize::MAX))
                } else {
                    1
                };
                put_run(row, &lids_here[i..i + run], step, port);
                i += run;
                r += run as u64;
                if r == pi {
                    r = 0;
                    gi += 1;
                    if gi == nc {
                        gi = 0;
                        q2 += 1;
                    }
                }
            }
        }
    }

    /// Writes the destinations `dst.lids[a..b]` (first NID `t0`, LID step `step`) from the
    /// switch's table of `d` ([`Scratch::build_dtab`]).
    #[inline]
    fn put_tabled(&self, row: &mut [u8], (a, b, t0, step): (usize, usize, u32, u32), scr: &Scratch) {
        let di = scr.dtab_div.rem(t0) as usize;
        put_table(
            row,
            &self.dst.lids[a..b],
            step as usize,
            (&scr.dtab, scr.dtab_period),
            di,
        );
    }

    /// Per up index of `q`, the primaries at mirror `m` (spans from `si` on with that mirror;
    /// `None`: every span of the switch) whose first rank `q` can take; returns how many of
    /// the spans' non-primaries are arrivals (`arr`, one bit per destination NID).
    #[allow(clippy::too_many_arguments)]
    fn group_prepass(
        &self,
        q: usize,
        si: usize,
        m: Option<u32>,
        ranks: &[u8],
        up_mask: &[u64],
        load: &mut [u32],
        arr: &[u64],
    ) -> u32 {
        load.iter_mut().for_each(|x| *x = 0);
        let mut arrivals = 0;
        let mut look = Look::new(self.plan, q);
        let (down_row, full_row) = (self.p.costs.down_row(q), self.p.costs.full_row(q));
        for span in &self.dst.spans[si..] {
            let li = span.li as usize;
            if self.p.o.leaves[li] as usize == q || down_row[li] != INF || full_row[li] == INF {
                continue;
            }
            let (m2, tgt) = self.targets_of(q, span, &mut look);
            let Some(at) = tgt else {
                if m.is_none() {
                    continue;
                }
                break;
            };
            if m.is_some_and(|m| m2 != m) {
                break;
            }
            arrivals += self.count_span(span, at, (ranks, up_mask[li]), load, arr);
        }
        arrivals
    }

    /// Counts, per up index, `span`'s primaries (targets at `off`, entry `entry`) whose first
    /// rank the switch can take (`ranks`: its [`Plan::up_row`], `mask`: its closer up-links for
    /// the span's leaf) into `load`; returns how many of its non-primaries are arrivals (`arr`).
    #[inline]
    fn count_span(
        &self,
        span: &LeafSpan,
        (off, entry): (usize, usize),
        (ranks, mask): (&[u8], u64),
        load: &mut [u32],
        arr: &[u64],
    ) -> u32 {
        if span.len <= 64 {
            // The entry's primaries by its bitmask, the arrivals by words.
            let pm = self.tg.pmask[entry];
            let mut bits = pm;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if let Some(j) = usable(ranks, mask, self.tg.t1[off + i]) {
                    load[j] += 1;
                }
            }
            return (window(arr, span.t0, span.len) & !pm).count_ones();
        }
        let mut arrivals = 0;
        for (i, d) in (off..off + span.len as usize).zip(span.t0..) {
            if self.tg.prim[i] {
                if let Some(j) = usable(ranks, mask, self.tg.t1[i]) {
                    load[j] += 1;
                }
            } else {
                arrivals += u32::from(bit(arr, d));
            }
        }
        arrivals
    }

    /// [`Ctx::group_prepass`] over every span of the switch into `scr.cload`, recording the
    /// walk (`scr.pvis`, `scr.pref`) for [`Scratch::group_load`]; returns how many of the
    /// spans' non-primaries are arrivals.
    fn switch_prepass(&self, q: usize, ranks: &[u8], scr: &mut Scratch, arr: &[u64]) -> u32 {
        let (load, pvis, pref, up_mask) = (&mut scr.cload, &mut scr.pvis, &mut scr.pref, &scr.up_mask);
        let nu = load.len();
        load.iter_mut().for_each(|x| *x = 0);
        pvis.clear();
        pref.clear();
        pref.extend_from_slice(load);
        let mut arrivals = 0;
        let mut look = Look::new(self.plan, q);
        let (down_row, full_row) = (self.p.costs.down_row(q), self.p.costs.full_row(q));
        for (si, span) in self.dst.spans.iter().enumerate() {
            let li = span.li as usize;
            if self.p.o.leaves[li] as usize == q || down_row[li] != INF || full_row[li] == INF {
                continue;
            }
            let (m2, tgt) = self.targets_of(q, span, &mut look);
            let Some(at) = tgt else {
                pvis.push((si as u32, NONE));
                pref.extend_from_within(pref.len() - nu..);
                continue;
            };
            pvis.push((si as u32, m2));
            arrivals += self.count_span(span, at, (ranks, up_mask[li]), load, arr);
            pref.extend_from_slice(load);
        }
        arrivals
    }

    /// The mirror of `q` for `span`'s leaf and the offset of the targets of the span's
    /// destinations there with its entry index in [`Targets::below`], if any.
    /// `look`: the previous lookup of the same switch ([`Look::new`]; spans come in NID order).
    #[inline(always)]
    fn targets_of(&self, q: usize, span: &LeafSpan, look: &mut Look) -> (u32, Option<(usize, usize)>) {
        let (plan, tg) = (self.plan, self.tg);
        let leaf = self.p.o.leaves[span.li as usize] as usize;
        // Above the leaves the mirror depends on the leaf's component alone (the first step
        // of the rank path): consecutive leaves of one component share it. A leaf (empty rank
        // path) is its own mirror.
        if look.leafq {
            // A leaf is its own mirror, with one entry: its own destinations.
            let m = if plan.rp_ok[q] { leaf as u32 } else { NONE };
            if m == NONE || plan.klow[leaf] == NONE {
                return (m, None);
            }
            let mut hint = 0;
            let e = tg.entry_in(
                tg.bstart[leaf] as usize,
                tg.bstart[leaf + 1] as usize,
                span.t0,
                &mut hint,
            );
            return (m, e.map(|(i, off)| (off, i)));
        }
        let key = plan.klow[leaf];
        if key != look.k {
            look.k = key;
            let m = plan.mirror(q, leaf);
            look.m = m;
            look.hint = 0;
            (look.b0, look.b1) = if m == NONE || plan.klow[m as usize] == NONE {
                (0, 0)
            } else {
                (tg.bstart[m as usize] as usize, tg.bstart[m as usize + 1] as usize)
            };
        }
        let e = tg.entry_in(look.b0, look.b1, span.t0, &mut look.hint);
        (look.m, e.map(|(i, off)| (off, i)))
    }
}
