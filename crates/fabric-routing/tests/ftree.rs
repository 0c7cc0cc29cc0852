//! The Ftree family (thesis Alg. 1, 8, 9 and the BFS variants of §5.1.3) on generated fabrics:
//! shift-balanced on complete PGFTs, valid / up-down / deadlock-free / deterministic on random
//! degraded PGFTs and QFTs. (The thesis' own examples, on the 2-ary 3-tree `G_d`, are unit
//! tests in `src/ftree/tests.rs`, where the switch addresses of the test PGFT are known.)

mod common;

use common::*;
use fabric_routing::check::{self, leaves_updown_connected};
use fabric_routing::{EngineKind, LidSet};
use proptest::prelude::*;

fn variants(seed: u64) -> [EngineKind; 6] {
    [
        EngineKind::Ftree,
        EngineKind::Ftree2,
        EngineKind::FtreeRandom { seed },
        EngineKind::BfsFtree,
        EngineKind::BfsFtree2,
        EngineKind::BfsFtreeRandom { seed },
    ]
}

fn uses_ranking(kind: EngineKind) -> bool {
    matches!(
        kind,
        EngineKind::Ftree | EngineKind::Ftree2 | EngineKind::FtreeRandom { .. }
    )
}

/// Ftree on complete PGFTs balances shifts perfectly: `mu_sp = 1`, like Dmodk (thesis §1.4.1).
#[test]
fn ftree_on_complete_pgfts_has_mu_sp_one() {
    for s in [
        "PGFT(2;4,4;1,4;1,1)",
        "PGFT(3;4,4,4;1,4,4;1,1,1)",
        "PGFT(3;4,2,3;1,4,2;1,2,1)",
        "XGFT(3;2,2,2;1,2,2)",
    ] {
        let f = fabric(s);
        for kind in [EngineKind::Ftree, EngineKind::Ftree2] {
            let r = route_with(&f, kind, 0);
            assert!(check::validity(&f, &r.lids, &r.lfts).valid, "{s} {kind}");
            assert_eq!(mu_sp(&r), 1, "{s} {kind}");
        }
    }
}

/// Every variant routes a complete QFT (cross-connected groups, several down paths from a top
/// switch to a leaf) validly and deadlock-free, the ranking variants up-down.
#[test]
fn every_variant_routes_a_complete_qft() {
    let f = fabric("QFT(3;4,2,6;1,2,4;1,2,1)");
    for kind in variants(3) {
        let r = route_with(&f, kind, 1);
        let v = check::validity(&f, &r.lids, &r.lfts);
        assert!(v.valid, "{kind}: {v:?}");
        assert!(check::deadlock_free(&f, &r.ranking, &r.lids, &r.lfts), "{kind}");
        if uses_ranking(kind) {
            assert_eq!(
                check::updown_violations(&f, &r.ranking, &r.lids, &r.lfts, LidSet::Base),
                0,
                "{kind}"
            );
        }
    }
}

/// The same bytes on one thread and on several (Ftree-Random routes destinations in parallel).
#[test]
fn tables_do_not_depend_on_the_thread_count() {
    let f = degraded("PGFT(3;4,4,6;1,4,4;1,1,1)", 10, 1, 5);
    for kind in variants(11) {
        let many = route_with(&f, kind, 1);
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| route_with(&f, kind, 1));
        assert!(one.lfts == many.lfts, "{kind}");
    }
}

/// The random variants depend on their seed (on complete fabrics, where every switch has
/// choices; a heavily degraded small fabric may leave none).
#[test]
fn random_variants_differ_between_seeds() {
    for s in ["PGFT(3;4,4,6;1,4,4;1,1,1)", "QFT(3;4,2,6;1,2,4;1,2,1)"] {
        let f = fabric(s);
        for seed in 0..4u64 {
            for kind in [EngineKind::FtreeRandom { seed }, EngineKind::BfsFtreeRandom { seed }] {
                let a = route_with(&f, kind, 0);
                let b = route_with(&f, kind.with_seed(seed + 100), 0);
                assert!(a.lfts != b.lfts, "{s} {kind}");
                assert!(route_with(&f, kind, 0).lfts == a.lfts, "{s} {kind}");
            }
        }
    }
}

/// Where the ranking leaves some leaves without an up-down path, the ranking variants leave
/// those destinations unrouted (never a route that breaks up*/down*), and `route_all_checked`
/// re-routes them by Up*/Down*: the installed routing is valid and deadlock-free.
#[test]
fn unroutable_destinations_are_repaired_by_route_all_checked() {
    let mut seen = 0;
    for seed in 0..40u64 {
        let f = degraded("PGFT(3;4,4,6;1,4,4;1,1,1)", 60, 2, seed);
        let ranking = fabric_ranking::rank(&f, &fabric_ranking::RankOptions::default());
        if leaves_updown_connected(&f, &ranking) {
            continue;
        }
        seen += 1;
        let lids = fabric_routing::assign_lids(&f, &Default::default(), 1, 0xBFFF).unwrap();
        let ctx = fabric_routing::RoutingContext {
            fabric: &f,
            ranking: &ranking,
            lids: &lids,
        };
        for kind in [EngineKind::Ftree, EngineKind::Ftree2, EngineKind::FtreeRandom { seed }] {
            let raw = fabric_routing::route_all(&ctx, kind).unwrap();
            assert_eq!(
                check::updown_violations(&f, &ranking, &lids, &raw.lfts, LidSet::Base),
                0,
                "{kind} seed {seed}"
            );
            let (routed, rc) = fabric_routing::route_all_checked(&ctx, kind, None).unwrap();
            assert!(rc.valid, "{kind} seed {seed}: {rc:?}");
            assert!(check::validity(&f, &lids, &routed.lfts).valid, "{kind} seed {seed}");
            assert!(
                check::cdg_acyclic(&f, &lids, &routed.lfts, LidSet::Base),
                "{kind} seed {seed}"
            );
        }
    }
    assert!(seen > 0, "no fabric without up-down connectivity was generated");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// On random degraded PGFTs and QFTs: every variant valid whenever the fabric allows it
    /// (ranking variants: leaves up-down connected for the ranking; BFS variants: always, a
    /// BFS orientation of a connected fabric is up-down connected), base and escape LIDs
    /// deadlock-free (CDG acyclic), ranking variants without up*/down* violations, the same
    /// bytes on a second run.
    #[test]
    fn every_variant_is_valid_updown_deadlock_free_and_deterministic(
        spec_i in 0usize..4,
        links in 0usize..40,
        switches in 0usize..4,
        seed in any::<u64>(),
    ) {
        let s = [
            "PGFT(3;4,4,6;1,4,4;1,1,1)",
            "PGFT(3;3,3,4;1,3,2;1,2,1)",
            "XGFT(3;2,3,4;1,2,3)",
            "QFT(3;4,2,6;1,2,4;1,2,1)",
        ][spec_i];
        let f = degraded(s, links, switches, seed);
        let ranking = fabric_ranking::rank(&f, &fabric_ranking::RankOptions::default());
        let ud_connected = leaves_updown_connected(&f, &ranking);
        for kind in variants(seed) {
            let r = route_with(&f, kind, 1);
            let v = check::validity(&f, &r.lids, &r.lfts);
            prop_assert_eq!(v.escape_unreachable_count, 0);
            if !uses_ranking(kind) || ud_connected {
                prop_assert!(v.valid, "{} {} (-{} links, -{} switches, seed {}): {:?}", s, kind, links, switches, seed, v);
            }
            prop_assert!(check::cdg_acyclic(&f, &r.lids, &r.lfts, LidSet::Base), "{} {}", s, kind);
            prop_assert!(check::cdg_acyclic(&f, &r.lids, &r.lfts, LidSet::Escape), "{} {}", s, kind);
            if uses_ranking(kind) {
                prop_assert_eq!(check::updown_violations(&f, &ranking, &r.lids, &r.lfts, LidSet::Base), 0, "{} {}", s, kind);
            }
            let again = route_with(&f, kind, 1);
            prop_assert!(again.lfts == r.lfts, "{} {}: not deterministic", s, kind);
        }
    }
}
