//! Dmodk recognises a complete PGFT from its structure (ranking, port groups), not from the
//! names fabricctl's generator writes (issue #16): a generated fabric with other names, GUIDs,
//! port numbers and record order, written as an `ibnetdiscover` dump and read back, is routed
//! by Dmodk with exactly Dmodc's tables; a degraded one is refused with a reason.

mod common;

use common::disguise::disguise;
use proptest::prelude::*;

use fabric_ranking::{rank, RankOptions};
use fabric_routing::{assign_lids, route_all, Dmodk, EngineKind, Guid2Lid, RoutingContext, RoutingError};
use fabric_topology::gen::{degrade, generate, Degrade, PgftLayout};
use fabric_topology::Fabric;

fn tables(f: &Fabric, kind: EngineKind) -> Result<fabric_routing::Lfts, RoutingError> {
    let ranking = rank(f, &RankOptions::default());
    let lids = assign_lids(f, &Guid2Lid::default(), 1, fabric_routing::IB_MAX_UNICAST_LID).unwrap();
    route_all(
        &RoutingContext {
            fabric: f,
            ranking: &ranking,
            lids: &lids,
        },
        kind,
    )
    .map(|r| r.lfts)
}

fn check_disguised(spec: &str, seed: u64) {
    let g = generate(&spec.parse().unwrap()).unwrap();
    for keep_order in [true, false] {
        let f = disguise(&g.fabric, seed, keep_order);
        assert_eq!(f.num_switches(), g.fabric.num_switches());
        // Not recognisable by name any more, but by structure.
        assert!(PgftLayout::recognize(&f).is_err(), "{spec}");
        let ranking = rank(&f, &RankOptions::default());
        let layout = PgftLayout::recognize_structure(&f, &ranking.level).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(layout.spec.m, g.layout.spec.m, "{spec}");
        assert_eq!(layout.spec.w, g.layout.spec.w, "{spec}");
        assert_eq!(layout.spec.p, g.layout.spec.p, "{spec}");
        Dmodk::check_fabric(&f).unwrap();
        let dmodk = tables(&f, EngineKind::Dmodk).unwrap();
        if keep_order {
            // GUIDs in topological order: Dmodc's closed form is Dmodk's.
            let dmodc = tables(&f, EngineKind::Dmodc).unwrap();
            assert_eq!(dmodk, dmodc, "{spec} seed {seed}: Dmodk differs from Dmodc");
        }
        let lids = assign_lids(&f, &Guid2Lid::default(), 1, fabric_routing::IB_MAX_UNICAST_LID).unwrap();
        let v = fabric_routing::check::validity(&f, &lids, &dmodk);
        assert!(v.valid, "{spec} seed {seed} keep_order {keep_order}: {v:?}");
        assert!(
            fabric_routing::check::deadlock_free(&f, &ranking, &lids, &dmodk),
            "{spec}"
        );
    }
}

#[test]
fn disguised_pgfts_read_from_a_dump_are_routed_like_dmodc() {
    for (spec, seed) in [
        ("PGFT(3;4,4,6;1,4,4;1,1,1)", 1),
        ("PGFT(3;2,2,3;1,2,2;1,2,1)", 2),
        ("PGFT(2;8,16;1,8;1,2)", 3),
        ("XGFT(3;3,2,2;1,2,3)", 4),
        ("KARY(3,3)", 5),
        ("RLFT(3;16;1,2,1)", 6),
        ("PGFT(4;2,2,2,3;1,2,2,2;1,1,2,1)", 7),
    ] {
        check_disguised(spec, seed);
    }
}

#[test]
fn generated_fabrics_are_still_routed_and_degraded_ones_refused_with_a_reason() {
    let g = generate(&"PGFT(3;4,4,6;1,4,4;1,1,1)".parse().unwrap()).unwrap();
    assert_eq!(
        tables(&g.fabric, EngineKind::Dmodk).unwrap(),
        tables(&g.fabric, EngineKind::Dmodc).unwrap()
    );
    for (links, switches) in [(1usize, 0usize), (0, 1), (5, 1)] {
        let d = degrade(
            &g.fabric,
            &Degrade {
                remove_links: links,
                remove_switches: switches,
                seed: 3,
            },
        )
        .unwrap();
        for f in [d.clone(), disguise(&d, 9, true), disguise(&d, 9, false)] {
            match tables(&f, EngineKind::Dmodk) {
                Err(RoutingError::NotCompletePgft(reason)) => {
                    assert!(reason.len() > 20, "{reason}");
                    assert_eq!(Dmodk::check_fabric(&f), Err(RoutingError::NotCompletePgft(reason)));
                }
                other => panic!("degraded ({links} links, {switches} switches): {:?}", other.map(|_| ())),
            }
        }
    }
    // A QFT with cross-connected groups is not a PGFT.
    let q = generate(&"QFT(3;4,4,4;1,2,2;1,2,1)".parse().unwrap()).unwrap();
    assert!(matches!(
        tables(&q.fabric, EngineKind::Dmodk),
        Err(RoutingError::NotCompletePgft(_))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn any_disguise_of_a_complete_pgft_gives_dmodc_tables(
        shape in prop::sample::select(vec![
            "PGFT(3;3,3,4;1,3,2;1,2,1)",
            "PGFT(2;6,8;1,6;1,1)",
            "XGFT(3;2,3,3;1,2,2)",
        ]),
        seed in any::<u64>(),
    ) {
        check_disguised(shape, seed);
    }
}
