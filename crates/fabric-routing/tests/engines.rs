//! Engine acceptance tests on generated fat-trees: Dmodc = Dmodk on complete PGFTs, optimal
//! shift-permutation congestion on complete PGFTs, validity and deadlock freedom on randomly
//! degraded ones, determinism.

mod common;

use common::*;
use proptest::prelude::*;

use fabric_routing::check::{self, leaves_updown_connected};
use fabric_routing::{engine, EngineKind, Lfts, LidSet, RoutingContext, RoutingError};
use fabric_topology::gen::{generate, PgftSpec};
use fabric_topology::FabricEvent;

/// A random complete PGFT / XGFT / k-ary n-tree, small enough for debug builds.
fn arb_spec() -> impl Strategy<Value = PgftSpec> {
    let pgft = (2usize..=3)
        .prop_flat_map(|h| {
            (
                proptest::collection::vec(1u32..=4, h),
                proptest::collection::vec(1u32..=3, h - 1),
                proptest::collection::vec(1u32..=2, h - 1),
            )
        })
        .prop_filter_map("valid PGFT", |(m, wu, pu)| {
            let w = std::iter::once(1).chain(wu).collect();
            let p = std::iter::once(1).chain(pu).collect();
            PgftSpec::pgft(m, w, p).ok()
        });
    let xgft = (2usize..=3)
        .prop_flat_map(|h| {
            (
                proptest::collection::vec(1u32..=4, h),
                proptest::collection::vec(1u32..=3, h - 1),
            )
        })
        .prop_filter_map("valid XGFT", |(m, wu)| {
            PgftSpec::xgft(m, std::iter::once(1).chain(wu).collect()).ok()
        });
    let kary = (2u32..=4, 2usize..=3).prop_filter_map("valid k-ary n-tree", |(k, n)| PgftSpec::kary(k, n).ok());
    prop_oneof![pgft, xgft, kary]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// On complete fat-trees with generator GUIDs, Dmodc (costs, dividers, topological NIDs,
    /// groups by GUID) and Dmodk (closed form from addresses) write the same bytes.
    #[test]
    fn dmodc_equals_dmodk_on_complete_fat_trees(spec in arb_spec()) {
        let f = generate(&spec).unwrap().fabric;
        let a = route_with(&f, EngineKind::Dmodc, 1);
        let b = route_with(&f, EngineKind::Dmodk, 1);
        // Compare the base-LID entries of end ports explicitly (the destinations Dmodk defines),
        // then the whole tables (switch LIDs and escape LIDs are routed the same way by both).
        for s in f.switch_ids() {
            for e in f.end_port_ids() {
                let lid = a.lids.base_lid(e);
                prop_assert_eq!(a.lfts.get(s, lid), b.lfts.get(s, lid), "{} switch {:?} end port {:?}", spec, s, e);
            }
        }
        prop_assert!(a.lfts == b.lfts, "{}", spec);
        let v = check::validity(&f, &a.lids, &a.lfts);
        prop_assert!(v.valid, "{}: {:?}", spec, v);
        prop_assert!(check::deadlock_free(&f, &a.ranking, &a.lids, &a.lfts));
    }

    /// On randomly degraded PGFTs (links and non-leaf switches removed): every engine's base
    /// routing is valid whenever the leaves stay up-down connected (Up*/Down* whenever the fabric
    /// is connected), the escape routing always, and both LID sets are deadlock-free.
    #[test]
    fn engines_are_valid_and_deadlock_free_on_degraded_pgfts(
        spec_i in 0usize..3,
        links in 0usize..40,
        switches in 0usize..4,
        seed in any::<u64>(),
    ) {
        let s = ["PGFT(3;4,4,6;1,4,4;1,1,1)", "PGFT(3;3,3,4;1,3,2;1,2,1)", "XGFT(3;2,3,4;1,2,3)"][spec_i];
        let f = degraded(s, links, switches, seed);
        let ranking = fabric_ranking::rank(&f, &fabric_ranking::RankOptions::default());
        let ud_connected = leaves_updown_connected(&f, &ranking);
        for kind in [EngineKind::Dmodc, EngineKind::UpDown, EngineKind::UpDownRandom { seed }] {
            let r = route_with(&f, kind, 1);
            let v = check::validity(&f, &r.lids, &r.lfts);
            prop_assert_eq!(v.escape_unreachable_count, 0, "{} {}: escape {:?}", s, kind, v);
            if kind != EngineKind::Dmodc || ud_connected {
                prop_assert!(v.valid, "{} {} (-{} links, -{} switches, seed {}): {:?}", s, kind, links, switches, seed, v);
            }
            prop_assert!(check::cdg_acyclic(&f, &r.lids, &r.lfts, LidSet::Base), "{} {}", s, kind);
            prop_assert!(check::cdg_acyclic(&f, &r.lids, &r.lfts, LidSet::Escape), "{} {}", s, kind);
            if kind == EngineKind::Dmodc {
                prop_assert_eq!(check::updown_violations(&f, &ranking, &r.lids, &r.lfts, LidSet::Base), 0);
            }
        }
        // Dmodk refuses anything but a complete PGFT.
        if links + switches > 0 {
            let r = fabric_ranking::rank(&f, &fabric_ranking::RankOptions::default());
            let lids = fabric_routing::assign_lids(&f, &Default::default(), 1, 0xBFFF).unwrap();
            let mut lfts = Lfts::new(f.num_switches(), lids.top());
            let e = engine(EngineKind::Dmodk).route(&RoutingContext { fabric: &f, ranking: &r, lids: &lids }, LidSet::Base, &mut lfts);
            prop_assert!(matches!(e, Err(RoutingError::NotCompletePgft(_))), "{:?}", e);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Gdmodc (thesis Alg. 4 over Dmodc) on randomly degraded PGFTs with random node groups:
    /// valid whenever the leaves stay up-down connected, every route up-down, both LID sets
    /// deadlock-free, the same bytes on a second run; one group for everybody is Dmodc itself.
    #[test]
    fn grouped_dmodc_is_valid_deadlock_free_and_deterministic(
        spec_i in 0usize..3,
        links in 0usize..40,
        switches in 0usize..4,
        ngroups in 1u32..5,
        seed in any::<u64>(),
    ) {
        use rand::{Rng, SeedableRng};
        let s = ["PGFT(3;4,4,6;1,4,4;1,1,1)", "PGFT(3;3,3,4;1,3,2;1,2,1)", "XGFT(3;2,3,4;1,2,3)"][spec_i];
        let f = degraded(s, links, switches, seed);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let groups = fabric_routing::NodeGroups::new((0..f.num_end_ports()).map(|_| rng.gen_range(0..ngroups)).collect());
        let r = route_grouped(&f, EngineKind::Dmodc, 1, &groups);
        let ranking = &r.ranking;
        let v = check::validity(&f, &r.lids, &r.lfts);
        prop_assert_eq!(v.escape_unreachable_count, 0);
        if leaves_updown_connected(&f, ranking) {
            prop_assert!(v.valid, "{} (-{} links, -{} switches, seed {}): {:?}", s, links, switches, seed, v);
        }
        prop_assert_eq!(check::updown_violations(&f, ranking, &r.lids, &r.lfts, LidSet::Base), 0);
        prop_assert!(check::cdg_acyclic(&f, &r.lids, &r.lfts, LidSet::Base));
        prop_assert!(check::cdg_acyclic(&f, &r.lids, &r.lfts, LidSet::Escape));
        let again = route_grouped(&f, EngineKind::Dmodc, 1, &groups);
        prop_assert!(again.lfts == r.lfts, "deterministic");
        let one = fabric_routing::NodeGroups::new(vec![3; f.num_end_ports()]);
        let plain = route_with(&f, EngineKind::Dmodc, 1);
        prop_assert!(route_grouped(&f, EngineKind::Dmodc, 1, &one).lfts == plain.lfts, "one group = Dmodc");
    }

    /// Gdmodc = Gdmodk on complete fat-trees (same gNIDs: the topological NIDs are the
    /// generator's end-node indices there).
    #[test]
    fn grouped_dmodc_equals_grouped_dmodk_on_complete_fat_trees(spec in arb_spec(), ngroups in 1u32..4, seed in any::<u64>()) {
        use rand::{Rng, SeedableRng};
        let f = generate(&spec).unwrap().fabric;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let groups = fabric_routing::NodeGroups::new((0..f.num_end_ports()).map(|_| rng.gen_range(0..ngroups)).collect());
        let a = route_grouped(&f, EngineKind::Dmodc, 1, &groups);
        let b = route_grouped(&f, EngineKind::Dmodk, 1, &groups);
        prop_assert!(a.lfts == b.lfts, "{}", spec);
    }
}

#[test]
fn groups_for_another_fabric_are_refused() {
    let f = fabric("PGFT(2;4,4;1,2;1,1)");
    let ranking = fabric_ranking::rank(&f, &fabric_ranking::RankOptions::default());
    let lids = fabric_routing::assign_lids(&f, &Default::default(), 1, 0xBFFF).unwrap();
    let ctx = RoutingContext {
        fabric: &f,
        ranking: &ranking,
        lids: &lids,
    };
    let groups = fabric_routing::NodeGroups::new(vec![0; 3]);
    let e = fabric_routing::route_all_grouped(&ctx, EngineKind::Dmodc, Some(&groups)).unwrap_err();
    assert_eq!(
        e,
        RoutingError::GroupsMismatch {
            groups: 3,
            end_ports: 16
        }
    );
    assert!(e.to_string().contains("3 end ports but the fabric has 16"), "{e}");
}

/// Thesis §4.2.3 / Fig. 4.6 baseline: on complete PGFTs Dmodc is optimal for shift
/// permutations (`mu^SP = 1`).
#[test]
fn dmodc_shift_permutations_are_contention_free_on_complete_pgfts() {
    for s in ["PGFT(2;18,36;1,18;1,1)", "PGFT(3;18,9,36;1,9,18;1,2,1)", "KARY(4,3)"] {
        let r = route_with(&fabric(s), EngineKind::Dmodc, 1);
        assert_eq!(mu_sp(&r), 1, "{s}");
    }
}

/// A fabric split in two is routed (each part by itself) and reported, not an error.
#[test]
fn split_fabric_is_reported_not_crashed_on() {
    // PGFT(2;2,4;1,2;1,1): 4 leaves, 2 spines. Cut leaves 0,1 from spine 1 and leaves 2,3 from
    // spine 0: two components of 4 end ports each.
    let f = fabric("PGFT(2;2,4;1,2;1,1)");
    let mut ev = Vec::new();
    for leaf in 0..4u32 {
        let l = fabric_topology::SwitchId(leaf);
        for g in f.port_groups(l) {
            let spine = g.remote.0 - 4;
            if (leaf < 2) != (spine == 0) {
                ev.push(FabricEvent::LinkDown {
                    switch: f.switch(l).guid,
                    port: g.ports[0],
                });
            }
        }
    }
    let f = f.apply(&ev).unwrap();
    for kind in [EngineKind::Dmodc, EngineKind::UpDown] {
        let r = route_with(&f, kind, 1);
        let v = check::validity(&f, &r.lids, &r.lfts);
        assert!(v.valid, "{kind}: {v:?}");
        assert_eq!(v.components, 2);
        assert_eq!(v.disconnected_pairs, 2 * 4 * 4);
        assert!(check::deadlock_free(&f, &r.ranking, &r.lids, &r.lfts));
        // A pair across the cut has no route.
        let mut hops = Vec::new();
        let (a, b) = (fabric_topology::EndPortId(0), fabric_topology::EndPortId(7));
        assert!(fabric_routing::trace(&f, &r.lfts, a, r.lids.base_lid(b), &mut hops).is_err());
    }
}

/// Same input, same bytes: twice, and with 1 and 2 worker threads.
#[test]
fn routing_is_deterministic_across_runs_and_thread_counts() {
    let f = degraded("PGFT(3;6,6,8;1,6,6;1,1,1)", 30, 3, 11);
    let run = |threads: usize, kind: EngineKind| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| route_with(&f, kind, 1).lfts)
    };
    for kind in [
        EngineKind::Dmodc,
        EngineKind::UpDown,
        EngineKind::UpDownRandom { seed: 5 },
    ] {
        let a = run(1, kind);
        assert_eq!(a, run(2, kind), "{kind}");
        assert_eq!(a.as_bytes(), run(2, kind).as_bytes(), "{kind}");
    }
}

/// LMC 0: only base LIDs, routed by the engine; the escape set is refused.
#[test]
fn lmc0_routes_base_lids_only() {
    let f = fabric("PGFT(3;4,4,6;1,4,4;1,1,1)");
    let r = route_with(&f, EngineKind::Dmodc, 0);
    assert_eq!(r.lids.lmc, 0);
    assert!(check::validity(&f, &r.lids, &r.lfts).valid);
    let mut lfts = r.lfts.clone();
    let e = engine(EngineKind::UpDown).route(
        &RoutingContext {
            fabric: &f,
            ranking: &r.ranking,
            lids: &r.lids,
        },
        LidSet::Escape,
        &mut lfts,
    );
    assert_eq!(e, Err(RoutingError::NoEscapeLids));
}

/// The congestion checker can see contention: seeded random Up*/Down* selection is not
/// contention-free for shifts on the same PGFT where Dmodc is.
#[test]
fn random_selection_has_shift_contention() {
    let r = route_with(
        &fabric("PGFT(2;18,36;1,18;1,1)"),
        EngineKind::UpDownRandom { seed: 1 },
        1,
    );
    assert!(mu_sp(&r) > 1);
}

/// A quasi fat-tree (cross-connected groups) is not a PGFT: Dmodk refuses it, Dmodc and
/// Up*/Down* route it validly and deadlock-free.
#[test]
fn quasi_fat_tree_is_routed_by_dmodc_and_refused_by_dmodk() {
    let f = fabric("QFT(3;4,2,6;1,2,4;1,2,1)");
    for kind in [EngineKind::Dmodc, EngineKind::UpDown] {
        let r = route_with(&f, kind, 1);
        let v = check::validity(&f, &r.lids, &r.lfts);
        assert!(v.valid, "{kind}: {v:?}");
        assert!(check::deadlock_free(&f, &r.ranking, &r.lids, &r.lfts), "{kind}");
    }
    let r = fabric_ranking::rank(&f, &fabric_ranking::RankOptions::default());
    let lids = fabric_routing::assign_lids(&f, &Default::default(), 1, 0xBFFF).unwrap();
    let mut lfts = Lfts::new(f.num_switches(), lids.top());
    let e = engine(EngineKind::Dmodk).route(
        &RoutingContext {
            fabric: &f,
            ranking: &r,
            lids: &lids,
        },
        LidSet::Base,
        &mut lfts,
    );
    assert!(matches!(e, Err(RoutingError::NotCompletePgft(_))), "{e:?}");
}
