//! The repair pass of load-aware Dmodc (beyond the thesis): after the placement
//! ([`super::kernel`]), move single (switch, destination) up-routes off the directed ports whose
//! estimated random-permutation tail is largest, while the estimate drops.
//!
//! **What it estimates** (the quantity `mu_rp` measures, docs/routing.md "Metrics"). For every
//! switch `x` and destination `d`, `c(x, d)` is the number of sources whose path to `d` crosses
//! `x` (a flow count along the tables). A directed switch-to-switch port `e` of `x` carries the
//! destinations `D_e` routed through it; under a uniformly random permutation of the `N` end
//! ports it carries on average `μ_e = Σ_{d∈D_e} c(x, d) / N` paths, and never more than
//! `m_e = min(|D_e|, sources below x)` (each destination has one source, an up-link's sources are
//! below it). Its load is estimated as `Binomial(m_e, μ_e / m_e)` — on a port whose sources all
//! send to all of `D_e` this is `fabric_metrics::rp_floor`'s `Hypergeometric(N, |D_e|, n)` up to
//! the finite-population factor. The pass lowers the objective `λ(6) + λ(7) + A` with
//! `λ(t) = Σ_e P(X_e ≥ t)` (the expected number of ports at the `mu ≥ 7` threshold and one
//! below it; tails read from a table per (mean, cap) class, [`tail`]) and the all-to-all term
//! `A = Σ_e w · (m_e / m_max)^16` (`m_e`: the port's destinations, capped by its sources below,
//! i.e. its all-to-all `min(src, dst)`; `m_max` the largest of the placement), which only the
//! hottest all-to-all ports feel.
//!
//! **Moves.** A move re-routes destination `d` at a switch `x` that sends `d` upwards to another
//! of Dmodc's closer up-neighbours of `x` (eq. 4.5 with the up-down rule, the candidates the
//! kernel chooses from), so every route stays up*/down* and valid. The paths of `d` from the new
//! neighbour on are that neighbour's own (a destination's paths stay coalesced on the down side
//! wherever they were). The pass visits the ports of the all-to-all term first (those with
//! `m_e ≥ 0.9 · m_max`, the destinations of the smallest flows first), then the *hot* ports
//! (the largest estimated tails, up to half of the total, at most [`MAX_HOT`]) in decreasing
//! order, the destinations of the largest flows first; for every destination `d` on a hot
//! port, the move points are the switch of the port itself when it sends `d` up, and the
//! switches that send `d` up into it within two hops backwards (the leaves below a middle
//! up-link, the middle switches of other pods below a top down-link, …). Every candidate
//! move's change of the estimate is evaluated on the two paths up to where they merge; the
//! moves of one port are applied best first, each re-evaluated on the current state and kept
//! only when the estimate drops.
//!
//! **Shift guard** ([`guard`]): a move is applied only when no port it loads gets a shift
//! count above the largest count of the ports whose counts were computed (exactly, per shift
//! of the global end order), so `mu_sp` never rises. A port whose bound
//! `min(|D_e|, sources below)` after the move is at most that largest count is admitted
//! without its counts (no shift can exceed it; the decisions are the exact guard's).
//!
//! **Status**: engine `dmodc-lb:repair` ([`super::DmodcLbRepair`]); `dmodc-lb` does not run
//! it, because it costs seconds of CPU on an 8 000-node fabric where the placement takes tens
//! of milliseconds (docs/routing.md, dmodc-lb); it runs on at most [`MAX_DESTINATIONS`]
//! end-port LIDs (16-bit flows), above that the placement stands.
//!
//! Moves are applied sequentially in a fixed order (ports by estimate then index, candidates
//! by change then (switch, neighbour, destination)), so deterministic and independent of the
//! thread count; the flow counts and port loads are computed in parallel per block of
//! destinations (integer sums), the candidates of one hot port in parallel per destination
//! (read-only, then sorted by that total order). The guard finds a port's destinations in a
//! per-switch index built by one scan and kept with the moves, not by a scan per port. Run
//! only on fabrics that are not intact (complete fabrics keep Dmodc's tables).

use rayon::prelude::*;

use fabric_topology::{EndPortId, Fabric, Lid, PortNum};

use super::plan::Plan;
use crate::fill::{Destinations, Prepared};
use crate::lft::{Lfts, NO_ROUTE};
use crate::prep::{INF, NONE};

mod guard;
mod tail;

use guard::Shifts;
use tail::tail67_tab;
#[cfg(test)]
pub(super) use tail::tail67_tab as tail67_table;
#[cfg(test)]
pub(super) use tail::{tail67, tail67_poisson};

/// Destinations per block of the flow counts.
const B: usize = 64;
/// Most hot ports visited.
const MAX_HOT: usize = 1024;
/// Most move points per (hot port, destination).
const MAX_POINTS: usize = 8;
/// Most destinations tried per hot port (the largest flows).
const MAX_DESTS: usize = 32;
/// Alternatives tried per move point (the least loaded).
const MAX_ALTS: usize = 2;
/// The all-to-all term of the objective: `A2A_W · (m_e / m_max)^A2A_POW` per port, `m_e`
/// its destinations (capped by its sources below), `m_max` the largest at the start.
const A2A_W: f64 = 0.005;
const A2A_POW: i32 = 16;
/// Ports at least this share of `m_max` are visited first (the all-to-all term's ports).
const A2A_HOT: f64 = 0.9;
/// Hot ports whose shift counts are computed at the start (the guard's first limit).
const GUARD_SEED: usize = 32;

/// The state of the pass: tables as positions, flows and port loads.
struct State<'a> {
    p: &'a Prepared,
    plan: &'a Plan,
    lfts: &'a mut Lfts,
    fabric: &'a Fabric,
    /// Destinations: LID, leaf index, topological NID.
    lid: Vec<Lid>,
    leaf: Vec<u32>,
    nid: Vec<u32>,
    end_port: Vec<EndPortId>,
    /// `nb[q * 256 + port]`: the neighbour position behind that port of `q` ([`NONE`]: none).
    nb: Vec<u32>,
    /// `pidx[q * 256 + port]`: the dense directed-port index ([`NONE`]: not switch-to-switch).
    pidx: Vec<u32>,
    /// Per directed port: its switch position, Σ flows, destinations with a flow, the cap on
    /// distinct sources.
    pq: Vec<u32>,
    sum: Vec<u64>,
    cnt: Vec<u32>,
    cap: Vec<u32>,
    /// Flow counts, block-major: `c[(i / B * np + q) * B + i % B]` (16 bits: a flow counts
    /// sources, fewer than the destinations, at most [`MAX_DESTINATIONS`]).
    c: Vec<u16>,
    np: usize,
    n: f64,
    /// The all-to-all term: weight and the largest `min(|D_e|, cap)` of the placement.
    a2a_w: f64,
    a2a_ref: f64,
    a2a_pow: i32,
    /// Per directed port: its current term of the objective ([`State::tail`]), kept with
    /// every applied move.
    tl: Vec<f64>,
}

/// One candidate move: the change of the estimate, the switch, the new up-neighbour, the
/// destination.
type Cand = (f64, u32, u32, u32);

/// Scratch of the candidate search of one destination.
#[derive(Default)]
struct Search {
    bufs: Bufs,
    points: Vec<u32>,
    frontier: Vec<u32>,
    next: Vec<u32>,
    alts: Vec<(u64, u32)>,
}

/// Buffers of [`State::eval`]: the ports' changes, the old and new paths and where they merge.
#[derive(Default)]
struct Bufs {
    deltas: Vec<Delta>,
    old: Vec<u32>,
    new: Vec<u32>,
    ko: usize,
    kn: usize,
}

/// One port's change in a move.
#[derive(Copy, Clone)]
struct Delta {
    port: u32,
    dsum: i64,
    dcnt: i32,
}

/// Runs the repair pass on the end-port LIDs of `dst` (see the module doc).
pub(super) fn repair(fabric: &Fabric, p: &Prepared, plan: &Plan, dst: &Destinations, lfts: &mut Lfts) {
    repair_ordered(fabric, p, plan, dst, lfts, true, true);
}

/// The guard's work in one pass: ports materialised (exact per-shift counts), loaded ports
/// admitted by the bound without counts.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct GuardStats {
    pub materialised: usize,
    pub bounded: usize,
}

/// The pass with the ports of the all-to-all term first (`a2a_first`, what the engine runs)
/// or, as the pass of 28 Nov 2026 (morning), after the tail's hot ports and only those that
/// are not among them (for the tests); `bound` false materialises every loaded port (the
/// exact guard without the bound, for the tests: same decisions).
pub(super) fn repair_ordered(
    fabric: &Fabric,
    p: &Prepared,
    plan: &Plan,
    dst: &Destinations,
    lfts: &mut Lfts,
    a2a_first: bool,
    bound: bool,
) -> GuardStats {
    State::new(fabric, p, plan, dst, lfts).map_or_else(GuardStats::default, |mut st| st.run(a2a_first, bound))
}

/// The objective of the tables (see the module doc) and its all-to-all reference `m_max`
/// (`reference`: use this one instead of the tables' own), for the tests.
#[cfg(test)]
pub(super) fn estimate(
    fabric: &Fabric,
    p: &Prepared,
    plan: &Plan,
    dst: &Destinations,
    lfts: &mut Lfts,
    reference: Option<f64>,
) -> (f64, f64) {
    State::new(fabric, p, plan, dst, lfts).map_or((0.0, 1.0), |mut st| {
        if let Some(r) = reference {
            st.a2a_ref = r;
        }
        ((0..st.pq.len()).map(|e| st.tail(e)).sum(), st.a2a_ref)
    })
}

/// The most destinations the pass runs on: a flow counts sources, fewer than the destinations,
/// and flows are 16-bit. Above (24-bit addresses, more than 65 536 end-port LIDs) the
/// placement stands without the pass.
pub(super) const MAX_DESTINATIONS: usize = 1 << 16;
const _: () = assert!(MAX_DESTINATIONS - 1 <= u16::MAX as usize);

impl<'a> State<'a> {
    /// Flows and port loads of the tables (`None`: fewer than two destinations, or more than
    /// [`MAX_DESTINATIONS`]).
    fn new(
        fabric: &'a Fabric,
        p: &'a Prepared,
        plan: &'a Plan,
        dst: &Destinations,
        lfts: &'a mut Lfts,
    ) -> Option<Self> {
        let o = &p.o;
        let np = o.len();
        let mut lid = Vec::new();
        let mut leaf = Vec::new();
        let mut nid = Vec::new();
        let mut end_port = Vec::new();
        for span in &dst.spans {
            for i in 0..span.len {
                let l = dst.lids[(span.start + i) as usize];
                if l == 0 {
                    continue;
                }
                lid.push(l);
                leaf.push(span.li);
                nid.push(span.t0 + i);
                end_port.push(dst.end_ports[(span.start + i) as usize]);
            }
        }
        let nd = lid.len();
        if nd < 2 || np == 0 || nd > MAX_DESTINATIONS {
            return None;
        }
        // Sources per leaf position.
        let mut ends = vec![0u32; np];
        for &li in &leaf {
            ends[o.leaves[li as usize] as usize] += 1;
        }
        let mut nb = vec![NONE; np * 256];
        let mut pidx = vec![NONE; np * 256];
        let mut pq = Vec::new();
        let mut cap = Vec::new();
        for q in 0..np {
            let groups = fabric.port_groups(o.order[q]);
            let below: u32 = o
                .leaves
                .iter()
                .enumerate()
                .filter(|&(li, _)| p.costs.down_row(q)[li] != INF)
                .map(|(_, &lq)| ends[lq as usize])
                .sum();
            for (up, list) in [(true, o.ups(q)), (false, o.downs(q))] {
                for n in list {
                    for &port in &groups[n.group as usize].ports {
                        let k = q * 256 + usize::from(port);
                        nb[k] = n.pos;
                        pidx[k] = pq.len() as u32;
                        pq.push(q as u32);
                        cap.push(if up { below.max(1) } else { u32::MAX });
                    }
                }
            }
        }
        let npt = pq.len();
        let mut st = State {
            p,
            plan,
            lfts,
            fabric,
            lid,
            leaf,
            nid,
            end_port,
            nb,
            pidx,
            pq,
            sum: vec![0; npt],
            cnt: vec![0; npt],
            cap,
            c: Vec::new(),
            np,
            n: nd as f64,
            a2a_w: A2A_W,
            a2a_ref: 1.0,
            a2a_pow: A2A_POW,
            tl: Vec::new(),
        };
        st.flows(&ends);
        st.a2a_ref = f64::from((0..npt).map(|e| st.cnt[e].min(st.cap[e])).max().unwrap_or(1).max(1));
        Some(st)
    }
}

impl State<'_> {
    #[inline]
    fn row_port(&self, q: usize, i: usize) -> PortNum {
        self.lfts.get(self.p.o.order[q], self.lid[i])
    }

    /// The next switch position of destination `i` at `q` ([`NONE`]: an end port or no route).
    #[inline]
    fn next(&self, q: usize, i: usize) -> u32 {
        self.nb[q * 256 + usize::from(self.row_port(q, i))]
    }

    #[inline]
    fn ci(&self, q: usize, i: usize) -> usize {
        (i / B * self.np + q) * B + i % B
    }

    /// The flow counts `c(q, i)` and the port loads (Σ flows and destinations with a flow per
    /// directed port), per block of destinations in parallel (integer sums: the same for any
    /// thread count). An entry's flow is complete when its switch is visited: up-routers in
    /// ascending position (level order; a switch without up-links routes nothing upwards),
    /// then down-routers descending (a switch without down-links, nothing downwards).
    fn flows(&mut self, ends: &[u32]) {
        let np = self.np;
        let nd = self.lid.len();
        let npt = self.pq.len();
        let mut c = vec![0u16; nd.div_ceil(B) * np * B];
        let this = &*self;
        let o = &this.p.o;
        let (sum, cnt) = c
            .par_chunks_mut(np * B)
            .enumerate()
            .fold(
                || (vec![0u64; npt], vec![0u32; npt]),
                |(mut sum, mut cnt), (b, blk)| {
                    let lo = b * B;
                    let hi = (lo + B).min(nd);
                    let len = hi - lo;
                    // The block's LIDs: one contiguous run of every LFT row, or gathered.
                    let lids = &this.lid[lo..hi];
                    let l0 = lids[0] as usize;
                    let run = lids.iter().enumerate().all(|(j, &l)| l as usize == l0 + j);
                    let mut own = [0u32; B];
                    for (j, &li) in this.leaf[lo..hi].iter().enumerate() {
                        own[j] = o.leaves[li as usize];
                    }
                    for q in 0..np {
                        if ends[q] > 0 {
                            let e = ends[q] as u16;
                            for (j, v) in blk[q * B..q * B + len].iter_mut().enumerate() {
                                if own[j] as usize != q {
                                    *v = e;
                                }
                            }
                        }
                    }
                    let mut fl = [0u16; B];
                    let mut gathered = [NO_ROUTE; B];
                    for pass in 0..2 {
                        for k in 0..np {
                            let q = if pass == 0 { k } else { np - 1 - k };
                            if (pass == 0 && o.ups(q).is_empty()) || (pass == 1 && o.downs(q).is_empty()) {
                                continue;
                            }
                            fl[..len].copy_from_slice(&blk[q * B..q * B + len]);
                            if fl[..len].iter().all(|&f| f == 0) {
                                continue;
                            }
                            let row = this.lfts.row(o.order[q]);
                            let ports: &[PortNum] = if run && l0 + len <= row.len() {
                                &row[l0..l0 + len]
                            } else {
                                for (j, &l) in lids.iter().enumerate() {
                                    gathered[j] = row.get(l as usize).copied().unwrap_or(NO_ROUTE);
                                }
                                &gathered[..len]
                            };
                            let nb = &this.nb[q * 256..q * 256 + 256];
                            let pidx = &this.pidx[q * 256..q * 256 + 256];
                            for (j, (&f, &port)) in fl[..len].iter().zip(ports).enumerate() {
                                if f == 0 {
                                    continue;
                                }
                                let port = usize::from(port);
                                let y = nb[port];
                                if y != NONE && ((pass == 0) == (y as usize > q)) {
                                    blk[y as usize * B + j] += f;
                                    let e = pidx[port] as usize;
                                    sum[e] += u64::from(f);
                                    cnt[e] += 1;
                                }
                            }
                        }
                    }
                    (sum, cnt)
                },
            )
            .reduce(
                || (vec![0u64; npt], vec![0u32; npt]),
                |(mut s1, mut c1), (s2, c2)| {
                    s1.iter_mut().zip(&s2).for_each(|(a, b)| *a += b);
                    c1.iter_mut().zip(&c2).for_each(|(a, b)| *a += b);
                    (s1, c1)
                },
            );
        self.c = c;
        self.sum = sum;
        self.cnt = cnt;
    }

    /// Estimated `P(X ≥ 6) + P(X ≥ 7)` of port `e` with `sum`/`cnt` as given.
    #[inline]
    fn tail_with(&self, e: usize, sum: u64, cnt: u32) -> f64 {
        let m = cnt.min(self.cap[e]);
        tail67_tab(sum as f64 / self.n, m) + self.a2a_w * (f64::from(m) / self.a2a_ref).powi(self.a2a_pow)
    }

    fn tail(&self, e: usize) -> f64 {
        self.tail_with(e, self.sum[e], self.cnt[e])
    }

    /// The hot ports, then the moves of each (see the module doc).
    fn run(&mut self, a2a_first: bool, bound: bool) -> GuardStats {
        let npt = self.pq.len();
        self.tl = (0..npt).map(|e| self.tail(e)).collect();
        let tails = &self.tl;
        let total: f64 = tails.iter().sum();
        if total <= 0.0 {
            return GuardStats::default();
        }
        let mut order: Vec<u32> = (0..npt as u32).filter(|&e| tails[e as usize] > 0.0).collect();
        order.sort_by(|&a, &b| tails[b as usize].total_cmp(&tails[a as usize]).then(a.cmp(&b)));
        // The ports of the all-to-all term first, every one of them (their smallest flows
        // first: a destination leaves a port's count only when its last flow through it
        // moves), then the tail's hottest (their largest flows first). A port of both kinds is
        // visited twice: visited only as a tail port, with the largest flows first, the
        // all-to-all term rarely drops (5 % file of seed 2: mu_a2a 73 against 67).
        let a2a: Vec<u32> = (0..npt as u32)
            .filter(|&e| f64::from(self.cnt[e as usize].min(self.cap[e as usize])) >= A2A_HOT * self.a2a_ref)
            .collect();
        let mut tail = Vec::new();
        let mut acc = 0.0;
        for &e in &order {
            if acc >= 0.5 * total || tail.len() >= MAX_HOT {
                break;
            }
            acc += tails[e as usize];
            tail.push(e);
        }
        let guard_seed: Vec<u32> = tail.iter().take(GUARD_SEED).copied().collect();
        // `hot[a2a_at]`: the all-to-all term's ports.
        let (hot, a2a_at) = if a2a_first {
            let n = a2a.len();
            (a2a.into_iter().chain(tail).collect::<Vec<_>>(), 0..n)
        } else {
            let n = tail.len();
            let extra = a2a.into_iter().filter(|e| !tail.contains(e)).collect::<Vec<_>>();
            let hot: Vec<u32> = tail.into_iter().chain(extra).collect();
            let m = hot.len();
            (hot, n..m)
        };
        let mut sh = Shifts::new(&self.leaf, &self.end_port, &self.p.o.leaves, self.np, npt);
        sh.bound = bound;
        for &e in &guard_seed {
            sh.ensure(self, e as usize);
        }
        // The destinations with a flow on every hot port at the start (the guard's index: one
        // scan per switch).
        let on: Vec<Vec<u32>> = hot
            .iter()
            .map(|&e| {
                let z = self.pq[e as usize] as usize;
                sh.index(self, z);
                let mut v: Vec<u32> = sh
                    .dests(e as usize)
                    .iter()
                    .copied()
                    .filter(|&i| self.c[self.ci(z, i as usize)] > 0)
                    .collect();
                v.sort_unstable();
                v
            })
            .collect();
        let mut cands: Vec<Cand> = Vec::new();
        let mut bufs = Bufs::default();
        for (k, &e) in hot.iter().enumerate() {
            let z = self.pq[e as usize] as usize;
            // The destinations of the port with the largest flows first.
            let mut ds: Vec<u32> = on[k].clone();
            if !a2a_at.contains(&k) {
                ds.sort_by_key(|&i| (std::cmp::Reverse(self.c[self.ci(z, i as usize)]), i));
            } else {
                ds.sort_by_key(|&i| (self.c[self.ci(z, i as usize)], i));
            }
            ds.truncate(MAX_DESTS);
            // The candidates of every destination on the state before this port's moves, in
            // parallel (read-only), then sorted by a total order: the same for any thread count.
            let this = &*self;
            let found: Vec<Vec<Cand>> = ds
                .par_iter()
                .map_init(Search::default, |sc, &i| this.candidates(z, e, i as usize, sc))
                .collect();
            cands.clear();
            found.into_iter().for_each(|f| cands.extend(f));
            cands.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2, a.3).cmp(&(b.1, b.2, b.3))));
            for &(_, x, u, i) in &cands {
                let (x, u, i) = (x as usize, u as usize, i as usize);
                if self.next(x, i) == u as u32 || !self.closer(x, u, i) {
                    continue;
                }
                if self.eval(x, u, i, &mut bufs) < -1e-15 && sh.admits(self, x, i, &bufs.deltas) {
                    sh.apply(&bufs.deltas, i);
                    self.apply(x, u, i, &bufs);
                }
            }
        }
        #[cfg(test)]
        assert!(sh.index_is_exact(self), "the guard's index follows the moves");
        GuardStats {
            materialised: sh.materialised,
            bounded: sh.bounded,
        }
    }

    /// The improving moves of destination `i` on hot port `e` of switch `z` (see the module
    /// doc): at every move point, the least loaded closer alternatives.
    fn candidates(&self, z: usize, e: u32, i: usize, sc: &mut Search) -> Vec<Cand> {
        let mut out = Vec::new();
        if self.pidx[z * 256 + usize::from(self.row_port(z, i))] != e || self.c[self.ci(z, i)] == 0 {
            return out;
        }
        let Search {
            bufs,
            points,
            frontier,
            next,
            alts,
        } = sc;
        self.move_points(z, i, points, frontier, next);
        for &x in points.iter() {
            let x = x as usize;
            let cur = self.next(x, i);
            // The least loaded closer alternatives at x.
            alts.clear();
            for u in self.p.o.ups(x) {
                if u.pos == cur || !self.closer(x, u.pos as usize, i) {
                    continue;
                }
                let pe = self.pidx[x * 256 + usize::from(self.port_to(x, u.pos as usize, i))];
                alts.push((self.sum[pe as usize], u.pos));
            }
            alts.sort_unstable();
            for &(_, u) in alts.iter().take(MAX_ALTS) {
                let d = self.eval(x, u as usize, i, bufs);
                if d < -1e-15 {
                    out.push((d, x as u32, u, i as u32));
                }
            }
        }
        out
    }

    /// Whether up-neighbour `u` of `x` is one of Dmodc's closer candidates for `i`'s leaf.
    fn closer(&self, x: usize, u: usize, i: usize) -> bool {
        let li = self.leaf[i] as usize;
        let c = &self.p.costs;
        c.down_row(x)[li] == INF && c.full_row(u)[li] < c.full_row(x)[li]
    }

    /// The switches that send `i` upwards into port `z`'s switch within two hops backwards,
    /// and `z` itself when it sends `i` upwards.
    fn move_points(&self, z: usize, i: usize, out: &mut Vec<u32>, frontier: &mut Vec<u32>, nextf: &mut Vec<u32>) {
        out.clear();
        let o = &self.p.o;
        if (self.next(z, i) as usize) > z && self.next(z, i) != NONE {
            out.push(z as u32);
        }
        frontier.clear();
        frontier.push(z as u32);
        for _ in 0..2 {
            nextf.clear();
            for &w in frontier.iter() {
                let w = w as usize;
                for n in o.ups(w).iter().chain(o.downs(w)) {
                    let u = n.pos as usize;
                    if self.c[self.ci(u, i)] == 0 || self.next(u, i) != w as u32 {
                        continue;
                    }
                    if u < w && out.len() < MAX_POINTS && !out.contains(&(u as u32)) {
                        out.push(u as u32);
                    }
                    nextf.push(u as u32);
                }
            }
            std::mem::swap(frontier, nextf);
        }
    }

    /// The path of `i` from `x` (excluded) through `y`: the switches until the end.
    fn path_from(&self, mut y: u32, i: usize, out: &mut Vec<u32>) {
        out.clear();
        while y != NONE && out.len() <= 64 {
            out.push(y);
            y = self.next(y as usize, i);
        }
    }

    /// The change of the estimate when `x` sends `i` to `u` instead; `deltas` gets the ports'
    /// changes (the flow counts change by the same amounts on the switches of the paths).
    fn eval(&self, x: usize, u: usize, i: usize, bufs: &mut Bufs) -> f64 {
        let Bufs {
            deltas,
            old,
            new,
            ko,
            kn,
        } = bufs;
        deltas.clear();
        let f = i64::from(self.c[self.ci(x, i)]);
        let y = self.next(x, i);
        self.path_from(y, i, old);
        self.path_from(u as u32, i, new);
        // Merge point: the first switch of the new path on the old one.
        (*ko, *kn) = (old.len(), new.len());
        for (j, &s) in new.iter().enumerate() {
            if let Some(k) = old.iter().position(|&t| t == s) {
                (*ko, *kn) = (k, j);
                break;
            }
        }
        let (ko, kn) = (*ko, *kn);
        let e_old = self.pidx[x * 256 + usize::from(self.row_port(x, i))];
        deltas.push(Delta {
            port: e_old,
            dsum: -f,
            dcnt: -1,
        });
        let e_new = self.pidx[x * 256 + usize::from(self.port_to(x, u, i))];
        deltas.push(Delta {
            port: e_new,
            dsum: f,
            dcnt: 1,
        });
        for (list, k, sign) in [(&*old, ko, -1i64), (&*new, kn, 1)] {
            for &s in &list[..k] {
                let s = s as usize;
                let e = self.pidx[s * 256 + usize::from(self.row_port(s, i))];
                if e == NONE {
                    continue;
                }
                let c = i64::from(self.c[self.ci(s, i)]);
                let dcnt = if sign < 0 {
                    -i32::from(c == f)
                } else {
                    i32::from(c == 0)
                };
                deltas.push(Delta {
                    port: e,
                    dsum: sign * f,
                    dcnt,
                });
            }
        }
        deltas
            .iter()
            .map(|d| {
                let e = d.port as usize;
                let s = (self.sum[e] as i64 + d.dsum) as u64;
                let c = (self.cnt[e] as i32 + d.dcnt) as u32;
                self.tail_with(e, s, c) - self.tl[e]
            })
            .sum()
    }

    /// The port of `x` towards up-neighbour `u` for `i` (eq. 4.8's port within the group).
    fn port_to(&self, x: usize, u: usize, i: usize) -> PortNum {
        let n = self
            .p
            .o
            .ups(x)
            .iter()
            .find(|n| n.pos as usize == u)
            .expect("an up-neighbour");
        let ports = &self.fabric.port_groups(self.p.o.order[x])[n.group as usize].ports;
        if ports.len() == 1 {
            return ports[0];
        }
        let q2 = self.plan.nominal(self.plan.klow[x], self.nid[i]).1;
        ports[(q2 % ports.len() as u64) as usize]
    }

    /// Applies the move evaluated last into `bufs`.
    fn apply(&mut self, x: usize, u: usize, i: usize, bufs: &Bufs) {
        let f = self.c[self.ci(x, i)];
        for d in &bufs.deltas {
            let e = d.port as usize;
            self.sum[e] = (self.sum[e] as i64 + d.dsum) as u64;
            self.cnt[e] = (self.cnt[e] as i32 + d.dcnt) as u32;
            self.tl[e] = self.tail(e);
        }
        for &s in &bufs.old[..bufs.ko] {
            let k = self.ci(s as usize, i);
            self.c[k] -= f;
        }
        for &s in &bufs.new[..bufs.kn] {
            let k = self.ci(s as usize, i);
            self.c[k] += f;
        }
        let port = self.port_to(x, u, i);
        self.lfts.set(self.p.o.order[x], self.lid[i], port);
    }
}
