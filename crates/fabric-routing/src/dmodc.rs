//! Dmodc (thesis §4.2): costs, dividers and topological NIDs ([`crate::prep`]), then for every
//! switch `s` and leaf `λ` the closer port groups `C` (eq. 4.5), and for every end port `d` on
//! `λ` the group `C[⌊d/Π_s⌋ mod #C]` (eq. 4.7) and the port `g[⌊d/(Π_s·#C)⌋ mod #g]` (eq. 4.8),
//! `d` being the topological NID.
//!
//! Up-down guarantee (the downcost variant of §4.2.1/§4.2.2): when `s` has a downward path to
//! `λ` (finite downcost `c'`), `C` holds the down groups whose remote has a smaller downcost;
//! otherwise the up groups whose remote has a smaller cost `c`. A route therefore never turns
//! up after going down. On (degraded) PGFTs this is exactly eq. 4.5: there a switch with a
//! downward path to `λ` has `c = c'` and no up group is closer. The plain eq. 4.5 would allow a
//! down-up turn on a degraded PGFT (a switch that lost its link towards `λ` stepping down to a
//! leaf whose other parent still has one).
//!
//! The same filling code serves Up*/Down* (Alg. 12 = BFS directions + this selection; Alg. 11 =
//! random port among `C`).

use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use fabric_topology::{Fabric, Lid, PortNum, SwitchId};

use crate::prep::{self, Costs, Oriented, TopoNids, INF, NONE};
use crate::{check_route_args, swlid, Lfts, LidPlan, LidSet, RoutingContext, RoutingEngine, RoutingError, NO_ROUTE};

/// The Dmodc engine (default). Uses the ranking for link directions.
#[derive(Copy, Clone, Debug, Default)]
pub struct Dmodc;

impl RoutingEngine for Dmodc {
    fn name(&self) -> &'static str {
        "dmodc"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        let prep = Prepared::new(ctx.fabric, &ctx.ranking.level);
        fill_end_ports(ctx.fabric, ctx.lids, &prep, set, Select::Dmodc, lfts);
        if set == LidSet::Base {
            swlid::fill_switch_lids(ctx.fabric, ctx.lids, &prep.o, lfts);
        }
        Ok(())
    }
}

/// Everything Dmodc computes before filling the tables.
pub(crate) struct Prepared {
    pub o: Oriented,
    pub costs: Costs,
    /// Per position: Π.
    pub div: Vec<u64>,
    pub tn: TopoNids,
}

impl Prepared {
    pub fn new(fabric: &Fabric, level: &[Option<u32>]) -> Self {
        let o = Oriented::new(fabric, level);
        let costs = prep::costs(&o);
        let div = prep::dividers(&o);
        let tn = prep::topological_nids(fabric, &o, &costs);
        Prepared { o, costs, div, tn }
    }
}

/// How a port is picked among the closer groups.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Select {
    /// Eqs. 4.7–4.8 on topological NIDs.
    Dmodc,
    /// Uniformly random port of `C` (Alg. 11), from a generator seeded by `(seed, switch GUID)`.
    Random { seed: u64 },
}

/// Per-task buffers of [`fill_end_ports`] (reused across the switches a rayon task handles).
#[derive(Default)]
struct Scratch {
    /// Per leaf: bit `j` set when down neighbour `j` has a smaller downcost (resp. up
    /// neighbour `j` a smaller cost) than this switch.
    down_mask: Vec<u64>,
    up_mask: Vec<u64>,
    cset: Vec<u16>,
    /// Flattened port groups of the switch: ports of group g at `gports[gmeta[g].0..]`.
    gports: Vec<PortNum>,
    gmeta: Vec<(u32, FastDiv)>,
}

/// Sets bit `j` of `mask[l]` where `nbr_row[l] < own[l]`.
#[inline]
fn closer_bits(mask: &mut [u64], nbr_row: &[u8], own: &[u8], j: usize) {
    for ((m, &a), &b) in mask.iter_mut().zip(nbr_row).zip(own) {
        *m |= u64::from(a < b) << j;
    }
}

/// Fills the end-port LIDs of `set` on every row: a port, or [`NO_ROUTE`] where there is no
/// up-down path (or the end port is not live / not on an oriented leaf).
///
/// Per switch: the port groups are flattened once, and the "closer" relation to every leaf is
/// computed neighbour by neighbour as bit masks over the leaves (sequential, vectorisable
/// passes over the cost rows). Per (switch, leaf): `C` is rebuilt from its mask only when the
/// mask changes. Per end port: the group/port pair changes only every `Π` destinations, so
/// most entries are a store and two additions — no division and no allocation per LFT entry.
pub(crate) fn fill_end_ports(
    fabric: &Fabric,
    lids: &LidPlan,
    p: &Prepared,
    set: LidSet,
    select: Select,
    lfts: &mut Lfts,
) {
    let o = &p.o;
    let nl = o.num_leaves();
    let off = set.offset();
    let lid_of = |ep: fabric_topology::EndPortId| -> Lid {
        let b = lids.base_lid(ep);
        if b == 0 {
            0
        } else {
            b + off
        }
    };
    // End ports that no switch can route to (not live, or on a leaf without a level).
    let unrouted: Vec<Lid> = fabric
        .end_port_ids()
        .filter(|&ep| p.tn.of_end_port[ep.idx()] == NONE)
        .map(lid_of)
        .filter(|&l| l != 0)
        .collect();
    // Per leaf: LIDs of its end ports in port order (= topological NID order), and leaf ports.
    let mut leaf_start = Vec::with_capacity(nl + 1);
    let mut leaf_lids: Vec<Lid> = Vec::new();
    let mut leaf_ports: Vec<PortNum> = Vec::new();
    for &lp in &o.leaves {
        leaf_start.push(leaf_lids.len());
        let sw = o.order[lp as usize];
        for &ep in fabric.attached_end_ports(sw) {
            leaf_lids.push(lid_of(ep));
            leaf_ports.push(fabric.end_port(ep).attach.map_or(NO_ROUTE, |(_, pn)| pn));
        }
    }
    leaf_start.push(leaf_lids.len());
    // Fast division by every possible #C (a switch has at most 255 port groups).
    let by_nc: Vec<FastDiv> = (0..=256u32).map(|n| FastDiv::new(n.max(1))).collect();

    lfts.par_rows_mut()
        .enumerate()
        .for_each_init(Scratch::default, |scr, (s, row)| {
            let put = |row: &mut [u8], lid: Lid, port: PortNum| {
                if lid != 0 {
                    row[lid as usize] = port;
                }
            };
            for &lid in &unrouted {
                put(row, lid, NO_ROUTE);
            }
            let sp = o.pos[s];
            if sp == NONE {
                for &lid in &leaf_lids {
                    put(row, lid, NO_ROUTE);
                }
                return;
            }
            let sp = sp as usize;
            let sid = SwitchId(s as u32);
            let groups = fabric.port_groups(sid);
            scr.gports.clear();
            scr.gmeta.clear();
            for g in groups {
                scr.gmeta
                    .push((scr.gports.len() as u32, FastDiv::new(g.ports.len().max(1) as u32)));
                scr.gports.extend_from_slice(&g.ports);
            }
            let pi = p.div[sp];
            let pi_div = (pi <= u64::from(u32::MAX)).then(|| FastDiv::new(pi as u32));
            let downs = o.downs(sp);
            let ups = o.ups(sp);
            let down_row = p.costs.down_row(sp);
            let full_row = p.costs.full_row(sp);
            let masks = downs.len() <= 64 && ups.len() <= 64;
            if masks {
                scr.down_mask.clear();
                scr.down_mask.resize(nl, 0);
                for (j, nb) in downs.iter().enumerate() {
                    closer_bits(&mut scr.down_mask, p.costs.down_row(nb.pos as usize), down_row, j);
                }
                scr.up_mask.clear();
                scr.up_mask.resize(nl, 0);
                for (j, nb) in ups.iter().enumerate() {
                    closer_bits(&mut scr.up_mask, p.costs.full_row(nb.pos as usize), full_row, j);
                }
            }
            let mut rng = match select {
                Select::Random { seed } => Some(rand_chacha::ChaCha8Rng::seed_from_u64(
                    seed ^ fabric.switch(sid).guid.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                )),
                Select::Dmodc => None,
            };
            // The C of the previous leaf: (down?, mask); u64::MAX + kind 2 = none yet.
            let mut prev: (u8, u64) = (2, 0);
            for li in 0..nl {
                let (a, b) = (leaf_start[li], leaf_start[li + 1]);
                if a == b {
                    continue;
                }
                let lids_here = &leaf_lids[a..b];
                if o.leaves[li] as usize == sp {
                    for (&lid, &port) in lids_here.iter().zip(&leaf_ports[a..b]) {
                        put(row, lid, port);
                    }
                    continue;
                }
                // Eq. 4.5 with the up-down guarantee: C, ordered by remote GUID.
                let (kind, nbrs) = if down_row[li] != INF {
                    (0u8, downs)
                } else if full_row[li] != INF {
                    (1u8, ups)
                } else {
                    for &lid in lids_here {
                        put(row, lid, NO_ROUTE);
                    }
                    continue;
                };
                if masks {
                    let mask = if kind == 0 { scr.down_mask[li] } else { scr.up_mask[li] };
                    if (kind, mask) != prev {
                        prev = (kind, mask);
                        scr.cset.clear();
                        let mut bits = mask;
                        while bits != 0 {
                            scr.cset.push(nbrs[bits.trailing_zeros() as usize].group);
                            bits &= bits - 1;
                        }
                    }
                } else {
                    scr.cset.clear();
                    let (costs, own) = if kind == 0 {
                        (&p.costs.down, down_row[li])
                    } else {
                        (&p.costs.full, full_row[li])
                    };
                    for nb in nbrs {
                        if costs[nb.pos as usize * nl + li] < own {
                            scr.cset.push(nb.group);
                        }
                    }
                }
                let cset = &scr.cset;
                if cset.is_empty() {
                    for &lid in lids_here {
                        put(row, lid, NO_ROUTE);
                    }
                    continue;
                }
                let (gports, gmeta) = (&scr.gports, &scr.gmeta);
                if let Some(rng) = rng.as_mut() {
                    // Alg. 11: a uniformly random port among the ports of C.
                    let total: u32 = cset.iter().map(|&g| gmeta[g as usize].1.d).sum();
                    for &lid in lids_here {
                        let mut k = rng.gen_range(0..total);
                        let mut port = NO_ROUTE;
                        for &g in cset {
                            let (start, len) = gmeta[g as usize];
                            if k < len.d {
                                port = gports[(start + k) as usize];
                                break;
                            }
                            k -= len.d;
                        }
                        put(row, lid, port);
                    }
                    continue;
                }
                // Eqs. 4.7–4.8 for d = t, t+1, ...: q = ⌊d/Π⌋ kept incrementally as
                // (gi, q2) = (q mod #C, ⌊q/#C⌋) and r = d mod Π; the port changes when r wraps.
                let nc = &by_nc[cset.len()];
                let t0 = p.tn.leaf_start[li];
                let (q, mut r) = match &pi_div {
                    Some(fd) => {
                        let q = fd.div(t0);
                        (q, u64::from(t0 - q * fd.d))
                    }
                    None => (0, u64::from(t0)),
                };
                let mut gi = nc.rem(q) as usize;
                let mut q2 = nc.div(q);
                let pick = |gi: usize, q2: u32| {
                    let (start, len) = gmeta[cset[gi] as usize];
                    gports[(start + if len.d == 1 { 0 } else { len.rem(q2) }) as usize]
                };
                let mut port = pick(gi, q2);
                for &lid in lids_here {
                    put(row, lid, port);
                    r += 1;
                    if r == pi {
                        r = 0;
                        gi += 1;
                        if gi == cset.len() {
                            gi = 0;
                            q2 += 1;
                        }
                        port = pick(gi, q2);
                    }
                }
            }
        });
}

/// Exact division and remainder of a `u32` by a fixed `u32` through one 128-bit multiply
/// (Lemire, Kaser & Kurz, "Faster remainder by direct computation", 2019: with
/// `M = ⌈2^64 / d⌉`, `⌊M·a / 2^64⌋ = ⌊a/d⌋` and `⌊(M·a mod 2^64)·d / 2^64⌋ = a mod d` for every
/// 32-bit `a`).
#[derive(Copy, Clone, Debug)]
pub(crate) struct FastDiv {
    pub d: u32,
    m: u64,
}

impl FastDiv {
    /// `d` must be at least 1.
    pub fn new(d: u32) -> Self {
        let d = d.max(1);
        FastDiv {
            d,
            m: (u64::MAX / u64::from(d)).wrapping_add(1),
        }
    }
    #[inline]
    pub fn div(&self, a: u32) -> u32 {
        if self.d == 1 {
            a
        } else {
            ((u128::from(self.m) * u128::from(a)) >> 64) as u32
        }
    }
    #[inline]
    pub fn rem(&self, a: u32) -> u32 {
        let low = self.m.wrapping_mul(u64::from(a));
        ((u128::from(low) * u128::from(self.d)) >> 64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check;
    use crate::testutil::*;
    use crate::{assign_lids, route_all, EngineKind, Guid2Lid, IB_MAX_UNICAST_LID};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn fast_division_is_exact(a in any::<u32>(), d in prop_oneof![1u32..300, any::<u32>().prop_map(|x| x.max(1))]) {
            let f = FastDiv::new(d);
            prop_assert_eq!(f.div(a), a / d);
            prop_assert_eq!(f.rem(a), a % d);
        }
    }

    #[test]
    fn fast_division_edges() {
        for d in [1u32, 2, 3, 7, 255, 256, 65535, u32::MAX - 1, u32::MAX] {
            let f = FastDiv::new(d);
            for a in [0u32, 1, d - 1, d, d.wrapping_add(1), u32::MAX - 1, u32::MAX] {
                assert_eq!((f.div(a), f.rem(a)), (a / d, a % d), "{a} / {d}");
            }
        }
    }

    fn route(f: &Fabric, kind: EngineKind) -> (LidPlan, Lfts) {
        let r = ranking(f);
        let lids = assign_lids(f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        let ctx = RoutingContext {
            fabric: f,
            ranking: &r,
            lids: &lids,
        };
        let out = route_all(&ctx, kind).unwrap();
        (lids, out.lfts)
    }

    /// Eqs. 4.7–4.8 evaluated directly (with divisions) on a complete PGFT must give the same
    /// entries as the incremental loop.
    #[test]
    fn dmodc_matches_the_formula_on_a_complete_pgft() {
        let t = pgft(&[4, 3, 4], &[1, 3, 2], &[1, 2, 1]);
        let f = &t.fabric;
        let (lids, lfts) = route(f, EngineKind::Dmodc);
        let prep = Prepared::new(f, &bfs_rank(f));
        let o = &prep.o;
        for s in f.switch_ids() {
            let sp = o.pos[s.idx()] as usize;
            for ep in f.end_port_ids() {
                let (leaf, lport) = f.end_port(ep).attach.unwrap();
                let got = lfts.get(s, lids.base_lid(ep));
                if leaf == s {
                    assert_eq!(got, lport);
                    continue;
                }
                let lp = o.pos[leaf.idx()] as usize;
                let li = o.leaf_idx[lp] as usize;
                let c = prep.costs.full_row(sp)[li];
                let closer: Vec<usize> = f
                    .port_groups(s)
                    .iter()
                    .enumerate()
                    .filter(|(_, g)| prep.costs.full_row(o.pos[g.remote.idx()] as usize)[li] < c)
                    .map(|(i, _)| i)
                    .collect();
                let d = prep.tn.of_end_port[ep.idx()] as u64;
                let pi = prep.div[sp];
                let g = &f.port_groups(s)[closer[((d / pi) % closer.len() as u64) as usize]];
                let want = g.ports[((d / (pi * closer.len() as u64)) % g.ports.len() as u64) as usize];
                assert_eq!(got, want, "switch {s:?} end port {ep:?}");
            }
        }
    }

    #[test]
    fn every_route_is_up_down_and_valid_on_degraded_pgfts() {
        let t = pgft(&[4, 4, 6], &[1, 4, 4], &[1, 1, 1]);
        for seed in 0..6 {
            let f = degrade(&t.fabric, 6 + seed as usize * 4, (seed % 3) as usize, seed);
            let r = ranking(&f);
            let (lids, lfts) = route(&f, EngineKind::Dmodc);
            assert_eq!(
                check::updown_violations(&f, &r, &lids, &lfts, LidSet::Base),
                0,
                "seed {seed}"
            );
            assert!(check::deadlock_free(&f, &r, &lids, &lfts), "seed {seed}");
            let v = check::validity(&f, &lids, &lfts);
            assert_eq!(
                v.escape_unreachable_count, 0,
                "escape routing must reach everything (seed {seed})"
            );
            if check::leaves_updown_connected(&f, &r) {
                assert!(v.valid, "seed {seed}: {v:?}");
            }
        }
    }
}
