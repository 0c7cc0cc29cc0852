//! Routing at scale (issue #17): `route_all` for Dmodc prepares once, writes each row in one
//! pass from a zeroed allocation and, on fat-trees whose Up*/Down* preparation is Dmodc's,
//! writes the escape LIDs together with the base LIDs. These tests hold it to the reference
//! kept here — the Dmodc engine on `Lfts::new` tables followed by `route_escape`, as
//! `route_all` did before — byte for byte, on random degraded fat-trees and on direct
//! topologies, with regular and irregular LID plans, on 1 and 3 threads.

mod common;

use common::*;
use proptest::prelude::*;

use fabric_ranking::{rank, RankOptions};
use fabric_routing::{
    assign_lids, engine, route_all, route_all_reusing, route_escape, EngineKind, Guid2Lid, Lfts, LidPlan, LidSet,
    RoutingContext, IB_MAX_UNICAST_LID,
};
use fabric_topology::Fabric;

/// The reference: Dmodc's base LIDs on fresh `NO_ROUTE` tables, then (LMC 1) the escape.
fn reference(ctx: &RoutingContext<'_>) -> Lfts {
    let mut lfts = Lfts::new(ctx.fabric.num_switches(), ctx.lids.top());
    engine(EngineKind::Dmodc).route(ctx, LidSet::Base, &mut lfts).unwrap();
    if ctx.lids.lmc >= 1 {
        route_escape(ctx, &mut lfts).unwrap();
    }
    lfts
}

/// LID plans: LMC 0, LMC 1, and LMC 1 with the pairs in reverse end-port order above a gap
/// (irregular steps between a leaf's LIDs).
fn plans(f: &Fabric) -> Vec<LidPlan> {
    let mut reversed = Guid2Lid::new();
    let n = f.num_end_ports() as u32;
    for (i, e) in f.end_ports().iter().enumerate() {
        let b = 2 * (n - i as u32) + 100;
        reversed.insert(e.port_guid, b, b + 1);
    }
    vec![
        assign_lids(f, &Guid2Lid::default(), 0, IB_MAX_UNICAST_LID).unwrap(),
        assign_lids(f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap(),
        assign_lids(f, &reversed, 1, IB_MAX_UNICAST_LID).unwrap(),
    ]
}

/// Routes `f` with every plan, compares with the reference; returns how many LMC 1 routings
/// shared the escape.
fn check_equal(f: &Fabric) -> Result<usize, TestCaseError> {
    let ranking = rank(f, &RankOptions::default());
    let mut shared = 0;
    for lids in plans(f) {
        let ctx = RoutingContext {
            fabric: f,
            ranking: &ranking,
            lids: &lids,
        };
        let want = reference(&ctx);
        let got = route_all(&ctx, EngineKind::Dmodc).unwrap();
        prop_assert!(lids.lmc == 1 || !got.escape_shared);
        shared += usize::from(got.escape_shared);
        if got.lfts != want {
            let s = (0..f.num_switches())
                .find(|&s| {
                    got.lfts.row(fabric_topology::SwitchId(s as u32)) != want.row(fabric_topology::SwitchId(s as u32))
                })
                .unwrap_or(0);
            let sw = fabric_topology::SwitchId(s as u32);
            let lid = got.lfts.row(sw).iter().zip(want.row(sw)).position(|(a, b)| a != b);
            prop_assert!(
                false,
                "lmc {} shared {}: switch {s} differs first at LID {lid:?}",
                lids.lmc,
                got.escape_shared
            );
        }
    }
    Ok(shared)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Degraded PGFTs, XGFTs and a QFT: `route_all`'s Dmodc tables equal the reference.
    #[test]
    fn route_all_dmodc_equals_the_reference_on_degraded_fat_trees(
        spec_i in 0usize..4,
        links in 0usize..30,
        switches in 0usize..3,
        seed in any::<u64>(),
    ) {
        let s = [
            "PGFT(3;4,4,6;1,4,4;1,1,1)",
            "PGFT(3;3,3,4;1,3,2;1,2,1)",
            "XGFT(3;2,3,4;1,2,3)",
            "PGFT(2;4,6;1,4;1,2)",
        ][spec_i];
        let f = degraded(s, links, switches, seed);
        check_equal(&f)?;
    }

    /// Direct topologies (no fat-tree: the escape is never Dmodc's) and random regular graphs.
    #[test]
    fn route_all_dmodc_equals_the_reference_on_direct_topologies(
        spec_i in 0usize..3,
        seed in 0u64..1000,
        links in 0usize..6,
    ) {
        let s = ["SLIMFLY(5;2)".to_string(), "HYPERX(3,3;2)".to_string(), format!("RRG(12,4,2;{seed})")][spec_i].clone();
        let d = fabric_topology::gen::Degrade { remove_links: links, remove_switches: 0, seed };
        let f = fabric_topology::gen::generate_str(&s, (links > 0).then_some(&d)).unwrap();
        prop_assert_eq!(check_equal(&f)?, 0, "{}: the escape of a direct topology is not Dmodc's", s);
    }
}

/// Both paths are taken: the escape is shared on complete fat-trees and on some lightly
/// degraded ones, and prepared on its own where Up*/Down* orients differently.
#[test]
fn escape_is_shared_on_fat_trees_and_not_elsewhere() {
    for s in [
        "PGFT(3;4,4,6;1,4,4;1,1,1)",
        "XGFT(3;2,3,4;1,2,3)",
        "PGFT(3;3,3,4;1,3,2;1,2,1)",
    ] {
        // Two LMC 1 plans per fabric.
        assert_eq!(check_equal(&fabric(s)).unwrap(), 2, "{s}");
    }
    let (mut shared, mut own) = (0, 0);
    for seed in 0..24 {
        // A few cables only: a top switch that lost one is no longer an Up*/Down* root.
        let f = degraded(
            "PGFT(3;4,4,6;1,4,4;1,1,1)",
            1 + seed as usize % 6,
            (seed % 5 / 4) as usize,
            seed,
        );
        let n = check_equal(&f).unwrap();
        shared += n;
        own += 2 - n;
    }
    assert!(shared > 0 && own > 0, "shared {shared}, own {own}");
}

/// The bytes do not depend on the number of threads.
#[test]
fn route_all_dmodc_is_independent_of_the_thread_count() {
    for (s, links) in [
        ("PGFT(3;4,4,6;1,4,4;1,1,1)", 0),
        ("PGFT(3;4,4,6;1,4,4;1,1,1)", 20),
        ("SLIMFLY(5;2)", 0),
    ] {
        let f = if s.starts_with("SLIMFLY") {
            fabric_topology::gen::generate_str(s, None).unwrap()
        } else {
            degraded(s, links, 1, 7)
        };
        let ranking = rank(&f, &RankOptions::default());
        for lids in plans(&f) {
            let ctx = RoutingContext {
                fabric: &f,
                ranking: &ranking,
                lids: &lids,
            };
            let run = |t: usize| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(t)
                    .build()
                    .unwrap()
                    .install(|| route_all(&ctx, EngineKind::Dmodc).unwrap().lfts)
            };
            assert!(run(1) == run(3), "{s} lmc {}", lids.lmc);
        }
    }
}

/// Tables routed into a reused allocation (garbage contents, smaller or larger than needed)
/// equal fresh ones, for Dmodc (which rewrites every entry) and for another engine (reset).
#[test]
fn route_all_reusing_equals_route_all() {
    let f = degraded("PGFT(3;4,4,6;1,4,4;1,1,1)", 3, 0, 11);
    let ranking = rank(&f, &RankOptions::default());
    for lids in plans(&f) {
        let ctx = RoutingContext {
            fabric: &f,
            ranking: &ranking,
            lids: &lids,
        };
        for kind in [EngineKind::Dmodc, EngineKind::UpDown] {
            let want = route_all(&ctx, kind).unwrap().lfts;
            for (ns, top) in [
                (3, 40),
                (f.num_switches() + 5, lids.top() + 300),
                (f.num_switches(), lids.top()),
            ] {
                let mut spare = Lfts::new(ns, top);
                for s in 0..ns {
                    for lid in 0..=top {
                        spare.set(fabric_topology::SwitchId(s as u32), lid, (s as u32 * 7 + lid) as u8 % 5);
                    }
                }
                let got = route_all_reusing(&ctx, kind, None, Some(spare)).unwrap().lfts;
                assert!(got == want, "{kind} lmc {} spare {ns}x{top}", lids.lmc);
            }
        }
    }
}
