//! LMC ≥ 2 end to end in the routing crate ([`crate::lid`]'s offsets): `route_all` fills every
//! layer offset (single-table engines repeat offset 0, `layered:K` puts layer `i` on offset `i`)
//! and the escape offset (the last one) by Up*/Down*; the checks, the fallback and the VL
//! layering cover every layer offset. References: the same engine with LMC 0 / LMC 1 (equal
//! routes on every offset), Algorithm 1's own tables ([`build_layers`]).

use proptest::prelude::*;

use fabric_topology::{EndPortId, Fabric, SwitchId};

use crate::check::{self, trace, TraceEnd};
use crate::layered::build_layers;
use crate::lid::{assign_lids, Guid2Lid, LidPlan, IB_MAX_UNICAST_LID};
use crate::testutil::{degrade, pgft, ranking};
use crate::vl::{base_lids, cdg_acyclic_per_layer, layer_base, IB_MAX_DATA_VLS};
use crate::{route_all, route_all_checked, EngineKind, Fallback, Lfts, RoutingContext, RoutingError};

fn plan(f: &Fabric, lmc: u8) -> LidPlan {
    assign_lids(f, &Guid2Lid::default(), lmc, IB_MAX_UNICAST_LID).unwrap()
}

fn route(f: &Fabric, kind: EngineKind, lids: &LidPlan) -> Result<Lfts, RoutingError> {
    let r = ranking(f);
    let ctx = RoutingContext {
        fabric: f,
        ranking: &r,
        lids,
    };
    route_all(&ctx, kind).map(|x| x.lfts)
}

/// Every connected pair of live end ports reaches its destination on every offset
/// `0..2^lmc` (layers and escape): walks, independent of `check`'s implementation.
fn every_offset_delivers(f: &Fabric, lids: &LidPlan, lfts: &Lfts) -> Result<(), String> {
    let comp = crate::hops::components(f);
    let at = |e: EndPortId| f.end_port(e).attach.unwrap().0.idx();
    let live: Vec<EndPortId> = f.end_port_ids().filter(|&e| f.end_port_live(e)).collect();
    let mut hops = Vec::new();
    for &d in &live {
        for o in 0..lids.lids_per_end_port() {
            let lid = lids.base_lid(d) + o;
            for &s in live.iter().filter(|&&s| s != d && comp[at(s)] == comp[at(d)]) {
                match trace(f, lfts, s, lid, &mut hops) {
                    Ok(TraceEnd::EndPort(x)) if x == d => {}
                    r => return Err(format!("{s:?} -> {d:?} offset {o} (LID {lid}): {r:?}")),
                }
            }
        }
    }
    Ok(())
}

/// `lfts` (plan `lids`) holds, on offset `o` of every end port, what `reference` (plan `rl`)
/// holds on offset `ro(o)`; switch LIDs equal too when `switches`.
fn same_routes(
    f: &Fabric,
    (lids, lfts): (&LidPlan, &Lfts),
    (rl, reference): (&LidPlan, &Lfts),
    offsets: impl Iterator<Item = (u32, u32)> + Clone,
    switches: bool,
) -> Result<(), String> {
    for s in f.switch_ids().filter(|&s| f.switch(s).up) {
        for e in f.end_port_ids() {
            for (o, ro) in offsets.clone() {
                let (a, b) = (lfts.get(s, lids.base_lid(e) + o), reference.get(s, rl.base_lid(e) + ro));
                if a != b {
                    return Err(format!("switch {s:?} end port {e:?} offset {o}: {a} vs reference {b}"));
                }
            }
        }
        if switches {
            for t in f.switch_ids() {
                if lfts.get(s, lids.switch_lid(t)) != reference.get(s, rl.switch_lid(t)) {
                    return Err(format!("switch {s:?} towards switch {t:?}"));
                }
            }
        }
    }
    Ok(())
}

fn random_pgft() -> impl Strategy<Value = Fabric> {
    (2u32..5, 2u32..5, 1u32..3, 0usize..6, 0usize..2, any::<u64>()).prop_map(|(m1, m2, p2, links, sws, seed)| {
        let t = pgft(&[m1, m2], &[1, m1], &[1, p2]);
        degrade(&t.fabric, links, sws, seed)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// LMC 2 and 3 on random degraded PGFTs: every layer offset carries the engine's LMC-0
    /// routes (Dmodc and Up*/Down* do not depend on the LID values), the escape offset carries
    /// the LMC-1 escape routes (Up*/Down*), every offset delivers, and `check::validity` agrees.
    #[test]
    fn lmc_2_and_3_fill_every_offset_on_degraded_pgfts(f in random_pgft(), lmc in 2u8..=3, updown in any::<bool>()) {
        let kind = if updown { EngineKind::UpDown } else { EngineKind::Dmodc };
        let lids = plan(&f, lmc);
        let lfts = route(&f, kind, &lids).unwrap();
        let (l0, l1) = (plan(&f, 0), plan(&f, 1));
        let (t0, t1) = (route(&f, kind, &l0).unwrap(), route(&f, kind, &l1).unwrap());
        let n = lids.layer_offsets();
        prop_assert_eq!(n, (1 << lmc) - 1);
        same_routes(&f, (&lids, &lfts), (&l0, &t0), (0..n).map(|o| (o, 0)), true).map_err(TestCaseError::fail)?;
        let esc = lids.escape_offset().unwrap();
        same_routes(&f, (&lids, &lfts), (&l1, &t1), std::iter::once((esc, 1)), false).map_err(TestCaseError::fail)?;
        let v0 = check::validity(&f, &l0, &t0);
        let v = check::validity(&f, &lids, &lfts);
        prop_assert_eq!(v.valid, v0.valid && check::validity(&f, &l1, &t1).valid);
        // Every offset counts: the unreachable (pair, offset)s are n times LMC 0's.
        prop_assert_eq!(v.unreachable_count, u64::from(n) * v0.unreachable_count);
        if v.valid {
            every_offset_delivers(&f, &lids, &lfts).map_err(TestCaseError::fail)?;
        }
        // Deterministic.
        prop_assert_eq!(route(&f, kind, &lids).unwrap(), lfts);
    }

    /// The fallback repairs every layer offset: after `route_all_checked` every offset of every
    /// connected pair delivers (Dmodc fails on degraded trees that lost up-down connectivity).
    #[test]
    fn fallback_repairs_every_layer_offset(f in random_pgft(), lmc in 2u8..=3) {
        let lids = plan(&f, lmc);
        let r = ranking(&f);
        let ctx = RoutingContext { fabric: &f, ranking: &r, lids: &lids };
        let (routed, c) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();
        if c.valid {
            every_offset_delivers(&f, &lids, &routed.lfts).map_err(TestCaseError::fail)?;
        }
        let l1 = plan(&f, 1);
        let ctx1 = RoutingContext { fabric: &f, ranking: &r, lids: &l1 };
        let (_, c1) = route_all_checked(&ctx1, EngineKind::Dmodc, None).unwrap();
        prop_assert_eq!(c.valid, c1.valid);
        prop_assert_eq!(c.fallback, c1.fallback);
    }
}

/// Two leaves that share no spine (Dmodc cannot route between them): the fallback splices
/// Up*/Down* into every layer offset.
#[test]
fn fallback_splices_every_layer_offset() {
    let t = pgft(&[2, 4], &[1, 3], &[1, 1]);
    let f = &t.fabric;
    let leaves: Vec<SwitchId> = f.switch_ids().filter(|&s| f.is_leaf(s)).collect();
    let mut ev = Vec::new();
    for (leaf, keep) in [(leaves[0], 0), (leaves[1], 1)] {
        for (i, g) in f.port_groups(leaf).iter().enumerate() {
            if i != keep {
                for &p in &g.ports {
                    ev.push(fabric_topology::FabricEvent::LinkDown {
                        switch: f.switch(leaf).guid,
                        port: p,
                    });
                }
            }
        }
    }
    let f = f.apply(&ev).unwrap();
    let lids = plan(&f, 2);
    let r = ranking(&f);
    let ctx = RoutingContext {
        fabric: &f,
        ranking: &r,
        lids: &lids,
    };
    let plain = route_all(&ctx, EngineKind::Dmodc).unwrap();
    let v = check::validity(&f, &lids, &plain.lfts);
    assert!(!v.valid && v.unreachable_count > 0);
    let (routed, c) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();
    assert!(c.valid, "{c:?}");
    assert_ne!(c.fallback, Fallback::None);
    every_offset_delivers(&f, &lids, &routed.lfts).unwrap();
}

fn slim_fly() -> Fabric {
    fabric_topology::gen::generate_str("SLIMFLY(5;4)", None).unwrap()
}

/// `layered:K` on the paper's Slim Fly (q = 5, p = 4; §4–5): layer `i` of Algorithm 1 on offset
/// `i` (offsets ≥ K repeat layer `i mod K`), the escape offset by Up*/Down* (= LMC 1's escape),
/// every offset valid, and the union VL-layered through `vl::layer_base` (the entry of the VL
/// layering) onto acyclic layers.
#[test]
fn layered_on_slimfly_puts_layer_i_on_offset_i() {
    let f = slim_fly();
    let l1 = plan(&f, 1);
    let t1 = route(&f, EngineKind::UpDown, &l1).unwrap();
    for (lmc, k) in [(2u8, 3u8), (2, 2), (3, 7), (3, 4)] {
        let lids = plan(&f, lmc);
        let kind = EngineKind::Layered { k, seed: 1 };
        let lfts = route(&f, kind, &lids).unwrap();
        let reference = build_layers(&f, &lids, usize::from(k), 1).unwrap();
        for o in 0..lids.layer_offsets() {
            let table = &reference.tables[o as usize % usize::from(k)];
            same_routes(&f, (&lids, &lfts), (&lids, table), std::iter::once((o, 0)), o == 0).unwrap();
        }
        let esc = lids.escape_offset().unwrap();
        same_routes(&f, (&lids, &lfts), (&l1, &t1), std::iter::once((esc, 1)), false).unwrap();
        assert!(check::validity(&f, &lids, &lfts).valid, "LMC {lmc} layered:{k}");
        every_offset_delivers(&f, &lids, &lfts).unwrap();
        // Distinct offsets do take distinct paths (layers 1.. are almost minimal).
        let differ = f
            .switch_ids()
            .flat_map(|s| f.end_port_ids().map(move |e| (s, e)))
            .filter(|&(s, e)| lfts.get(s, lids.base_lid(e)) != lfts.get(s, lids.base_lid(e) + 1))
            .count();
        assert!(differ > 0, "LMC {lmc} layered:{k}: offsets 0 and 1 identical");
        let vl = layer_base(&f, &lids, &lfts, IB_MAX_DATA_VLS).unwrap();
        assert!(
            vl.num_layers >= 2,
            "a Slim Fly's layers need several VLs: {}",
            vl.num_layers
        );
        let dl = base_lids(&f, &lids);
        assert_eq!(
            dl.len(),
            f.num_end_ports() * lids.layer_offsets() as usize + f.num_switches()
        );
        assert!(cdg_acyclic_per_layer(&f, &[&lfts], &dl, &vl).into_iter().all(|x| x));
        assert_eq!(route(&f, kind, &lids).unwrap(), lfts, "deterministic");
    }
}

/// Single-table engines on the Slim Fly with LMC 2: every offset equal, valid.
#[test]
fn single_table_engines_repeat_offset_0_on_slimfly() {
    let f = slim_fly();
    let lids = plan(&f, 2);
    for kind in [EngineKind::Sssp, EngineKind::UpDown] {
        let lfts = route(&f, kind, &lids).unwrap();
        same_routes(&f, (&lids, &lfts), (&lids, &lfts), (1..3).map(|o| (o, 0)), false).unwrap();
        assert!(check::validity(&f, &lids, &lfts).valid, "{kind}");
        every_offset_delivers(&f, &lids, &lfts).unwrap();
    }
}

/// More layers than layer offsets is a clear error; fewer are repeated.
#[test]
fn layered_needs_enough_offsets() {
    let f = slim_fly();
    for (lmc, k) in [(0u8, 2u8), (1, 2), (2, 4), (3, 8)] {
        let e = route(&f, EngineKind::Layered { k, seed: 0 }, &plan(&f, lmc)).unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(e, RoutingError::Unsupported { engine: "layered", .. }),
            "{text}"
        );
        assert!(text.contains(&format!("{k} layers need")), "{text}");
    }
    assert!(route(&f, EngineKind::Layered { k: 1, seed: 0 }, &plan(&f, 0)).is_ok());
    assert_eq!(crate::layered::lmc_for_layers(3), Some(2));
    assert_eq!(crate::layered::lmc_for_layers(4), Some(3));
    assert_eq!(crate::layered::lmc_for_layers(1), Some(0));
    assert_eq!(crate::layered::lmc_for_layers(127), Some(7));
    assert_eq!(crate::layered::lmc_for_layers(128), None);
}

/// The incremental path routes LMC ≥ 2 in full (`FullReason::Lmc`), with the bytes of
/// `route_all_checked`, also when given a previous state.
#[test]
fn incremental_routes_lmc_2_in_full() {
    use crate::incremental::{route_checked_incremental, FullReason, RoutePath};
    let f = std::sync::Arc::new(pgft(&[3, 4], &[1, 3], &[1, 2]).fabric);
    let lids = plan(&f, 2);
    let r = ranking(&f);
    let ctx = RoutingContext {
        fabric: &f,
        ranking: &r,
        lids: &lids,
    };
    let (full, _) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();
    let a = route_checked_incremental(&f, &r, &lids, EngineKind::Dmodc, None, None).unwrap();
    assert_eq!(a.path, RoutePath::Full(FullReason::Lmc));
    assert_eq!(*a.lfts, full.lfts);
    every_offset_delivers(&f, &lids, &a.lfts).unwrap();
}
