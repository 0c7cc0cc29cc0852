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

/// Fills the end-port LIDs of `set` on every row: a port, or [`NO_ROUTE`] where there is no
/// up-down path (or the end port is not live / not on an oriented leaf).
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
    // Per leaf: (LID, leaf port) of its end ports in port order (= topological NID order).
    let mut leaf_start = Vec::with_capacity(nl + 1);
    let mut leaf_eps: Vec<(Lid, PortNum)> = Vec::new();
    for &lp in &o.leaves {
        leaf_start.push(leaf_eps.len());
        let sw = o.order[lp as usize];
        for &ep in fabric.attached_end_ports(sw) {
            let port = fabric.end_port(ep).attach.map_or(NO_ROUTE, |(_, pn)| pn);
            leaf_eps.push((lid_of(ep), port));
        }
    }
    leaf_start.push(leaf_eps.len());

    lfts.par_rows_mut().enumerate().for_each(|(s, row)| {
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
            for &(lid, _) in &leaf_eps {
                put(row, lid, NO_ROUTE);
            }
            return;
        }
        let sp = sp as usize;
        let groups = fabric.port_groups(SwitchId(s as u32));
        let pi = p.div[sp];
        let downs = o.downs(sp);
        let ups = o.ups(sp);
        let down_row = p.costs.down_row(sp);
        let full_row = p.costs.full_row(sp);
        let mut cset: Vec<u16> = Vec::with_capacity(downs.len().max(ups.len()));
        let mut rng = match select {
            Select::Random { seed } => Some(rand_chacha::ChaCha8Rng::seed_from_u64(
                seed ^ fabric
                    .switch(SwitchId(s as u32))
                    .guid
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15),
            )),
            Select::Dmodc => None,
        };
        for li in 0..nl {
            let eps = &leaf_eps[leaf_start[li]..leaf_start[li + 1]];
            if eps.is_empty() {
                continue;
            }
            if o.leaves[li] as usize == sp {
                for &(lid, port) in eps {
                    put(row, lid, port);
                }
                continue;
            }
            // Eq. 4.5 with the up-down guarantee: C, ordered by remote GUID.
            cset.clear();
            let dc = down_row[li];
            if dc != INF {
                for nb in downs {
                    if p.costs.down[nb.pos as usize * nl + li] < dc {
                        cset.push(nb.group);
                    }
                }
            } else {
                let fc = full_row[li];
                if fc != INF {
                    for nb in ups {
                        if p.costs.full[nb.pos as usize * nl + li] < fc {
                            cset.push(nb.group);
                        }
                    }
                }
            }
            if cset.is_empty() {
                for &(lid, _) in eps {
                    put(row, lid, NO_ROUTE);
                }
                continue;
            }
            match (&mut rng, select) {
                (Some(rng), _) => {
                    let total: usize = cset.iter().map(|&g| groups[g as usize].ports.len()).sum();
                    for &(lid, _) in eps {
                        let mut k = rng.gen_range(0..total);
                        let mut port = NO_ROUTE;
                        for &g in &cset {
                            let gp = &groups[g as usize].ports;
                            if k < gp.len() {
                                port = gp[k];
                                break;
                            }
                            k -= gp.len();
                        }
                        put(row, lid, port);
                    }
                }
                _ => {
                    // Eqs. 4.7–4.8 for d = t, t+1, ...: q = ⌊d/Π⌋ kept incrementally as
                    // (gi, q2) = (q mod #C, ⌊q/#C⌋); r = d mod Π.
                    let nc = cset.len() as u64;
                    let t0 = p.tn.leaf_start[li] as u64;
                    let q = t0 / pi;
                    let mut r = t0 % pi;
                    let mut gi = (q % nc) as usize;
                    let mut q2 = q / nc;
                    for &(lid, _) in eps {
                        let gp = &groups[cset[gi] as usize].ports;
                        let k = if gp.len() == 1 {
                            0
                        } else {
                            (q2 % gp.len() as u64) as usize
                        };
                        put(row, lid, gp[k]);
                        r += 1;
                        if r == pi {
                            r = 0;
                            gi += 1;
                            if gi as u64 == nc {
                                gi = 0;
                                q2 += 1;
                            }
                        }
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check;
    use crate::testutil::*;
    use crate::{assign_lids, route_all, EngineKind, Guid2Lid, IB_MAX_UNICAST_LID};

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
