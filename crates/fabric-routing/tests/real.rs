//! Routing real `ibnetdiscover` captures (see `tests/data/README.md`) and random connected
//! switch graphs: the escape routing (Up*/Down*) reaches every connected pair and is
//! deadlock-free on any topology; Dmodc is valid wherever the leaves are up-down connected
//! and every Dmodc route is up*-down* for the ranking.

use proptest::prelude::*;

use fabric_ranking::{rank, RankOptions};
use fabric_routing::check::{self, leaves_updown_connected};
use fabric_routing::{
    assign_lids, parse_opensm_lfts, route_all, write_opensm_lfts, EngineKind, Guid2Lid, LidSet, RoutingContext,
    IB_MAX_UNICAST_LID,
};
use fabric_topology::{Fabric, FabricBuilder, NodeType};

fn load(name: &str, text: &str) -> Fabric {
    fabric_topology::ibnet::parse(text, name)
        .unwrap_or_else(|e| panic!("{e}"))
        .fabric
}

/// Routes with every engine but Dmodk and checks what must hold on any topology.
fn check_all_engines(name: &str, f: &Fabric) {
    let ranking = rank(f, &RankOptions::default());
    let lids = assign_lids(f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
    let ctx = RoutingContext {
        fabric: f,
        ranking: &ranking,
        lids: &lids,
    };
    for kind in [
        EngineKind::Dmodc,
        EngineKind::UpDown,
        EngineKind::UpDownRandom { seed: 3 },
    ] {
        let lfts = route_all(&ctx, kind)
            .unwrap_or_else(|e| panic!("{name} {kind}: {e}"))
            .lfts;
        let v = check::validity(f, &lids, &lfts);
        assert_eq!(v.escape_unreachable_count, 0, "{name} {kind}: escape {v:?}");
        if kind != EngineKind::Dmodc || leaves_updown_connected(f, &ranking) {
            assert!(v.valid, "{name} {kind}: {v:?}");
        }
        assert!(check::deadlock_free(f, &ranking, &lids, &lfts), "{name} {kind}");
        if kind == EngineKind::Dmodc {
            assert_eq!(
                check::updown_violations(f, &ranking, &lids, &lfts, LidSet::Base),
                0,
                "{name}"
            );
            // The OpenSM dump reads back to the same tables.
            let text = write_opensm_lfts(f, &lids, &lfts);
            assert_eq!(
                parse_opensm_lfts(&text, name)
                    .unwrap()
                    .to_lfts(f, fabric_routing::IB_MAX_UNICAST_LID)
                    .unwrap(),
                lfts,
                "{name}"
            );
        }
    }
}

#[test]
fn real_captures_are_routed_validly() {
    for (name, text) in [
        ("loginoff", include_str!("data/loginoff-sx6036-fdr10-8sw.ibnet")),
        ("psmn", include_str!("data/psmn-x5-voltaire4036-qdr.ibnet")),
        ("switchib", include_str!("data/switchib-edr-6sw-flat.ibnet")),
        ("ibtopotool", include_str!("data/ibtopotool-ufm-lab-degraded.ibnet")),
    ] {
        let f = load(name, text);
        check_all_engines(name, &f);
    }
}

#[test]
fn regular_real_fat_trees_are_fully_routed_by_dmodc() {
    // 2-level fat trees (one with a missing cable): every pair and every switch reachable.
    for (name, text) in [
        ("loginoff", include_str!("data/loginoff-sx6036-fdr10-8sw.ibnet")),
        ("switchib", include_str!("data/switchib-edr-6sw-flat.ibnet")),
    ] {
        let f = load(name, text);
        let ranking = rank(&f, &RankOptions::default());
        assert!(leaves_updown_connected(&f, &ranking), "{name}");
        let lids = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        let lfts = route_all(
            &RoutingContext {
                fabric: &f,
                ranking: &ranking,
                lids: &lids,
            },
            EngineKind::Dmodc,
        )
        .unwrap()
        .lfts;
        let v = check::validity(&f, &lids, &lfts);
        assert!(
            v.valid && v.components == 1 && v.disconnected_pairs == 0,
            "{name}: {v:?}"
        );
    }
}

/// A random connected switch graph: a random spanning tree plus extra random cables (parallel
/// cables, cables between any levels), end ports on random switches.
fn random_fabric(n: usize, extra: usize, eps: usize, seed: u64) -> Fabric {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut b = FabricBuilder::new();
    let sws: Vec<_> = (0..n)
        .map(|i| {
            b.add_switch(0x100 + rng.gen_range(0..1u64 << 20) * 64 + i as u64, "sw", 24)
                .unwrap()
        })
        .collect();
    let mut next_port = vec![1u8; n];
    let cable = |b: &mut FabricBuilder, x: usize, y: usize, next: &mut Vec<u8>| {
        if x != y && next[x] <= 24 && next[y] <= 24 {
            b.connect_switches(sws[x], next[x], sws[y], next[y]).unwrap();
            next[x] += 1;
            next[y] += 1;
        }
    };
    for i in 1..n {
        let j = rng.gen_range(0..i);
        cable(&mut b, i, j, &mut next_port);
    }
    for _ in 0..extra {
        let (x, y) = (rng.gen_range(0..n), rng.gen_range(0..n));
        cable(&mut b, x, y, &mut next_port);
    }
    for e in 0..eps {
        let s = rng.gen_range(0..n);
        if next_port[s] <= 24 {
            let ep = b
                .add_end_port(0x9000 + e as u64, 0x8000 + e as u64, "n", 1, 1, NodeType::Compute)
                .unwrap();
            b.connect_end_port(ep, sws[s], next_port[s]).unwrap();
            next_port[s] += 1;
        }
    }
    b.build()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn escape_routing_is_valid_and_deadlock_free_on_random_connected_graphs(
        n in 2usize..24,
        extra in 0usize..30,
        eps in 2usize..40,
        seed in any::<u64>(),
    ) {
        let f = random_fabric(n, extra, eps, seed);
        let ranking = rank(&f, &RankOptions::default());
        let lids = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        let ctx = RoutingContext { fabric: &f, ranking: &ranking, lids: &lids };
        for kind in [EngineKind::UpDown, EngineKind::Dmodc] {
            let lfts = route_all(&ctx, kind).unwrap().lfts;
            let v = check::validity(&f, &lids, &lfts);
            prop_assert_eq!(v.components, 1);
            prop_assert_eq!(v.escape_unreachable_count, 0, "{:?}", v);
            prop_assert!(check::cdg_acyclic(&f, &lids, &lfts, LidSet::Escape));
            prop_assert!(check::cdg_acyclic(&f, &lids, &lfts, LidSet::Base), "{}", kind);
            if kind == EngineKind::UpDown {
                prop_assert!(v.valid, "{:?}", v);
            } else {
                prop_assert_eq!(check::updown_violations(&f, &ranking, &lids, &lfts, LidSet::Base), 0);
                if leaves_updown_connected(&f, &ranking) {
                    prop_assert!(v.valid, "{:?}", v);
                }
            }
        }
    }
}
