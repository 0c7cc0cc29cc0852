//! Tests of the layered multipath routing: the MMS graphs of the paper's deployment (q = 5,
//! Hoffman–Singleton) and q = 7, Algorithm 1's layers on them (minimal layer 0, almost-minimal
//! layers, every layer a valid routing, the union layered onto acyclic VLs), and property tests
//! on random regular graphs.

use proptest::prelude::*;

use super::graphs::{mms_edges, rrg, slim_fly};
use super::*;
use crate::check::{cdg_acyclic_per_layer, validity};
use crate::lid::{assign_lids, Guid2Lid, IB_MAX_UNICAST_LID};
use crate::testutil::degrade;
use crate::vl::{assign_layers, base_lids, IB_MAX_DATA_VLS};

fn diameter_and_degrees(f: &Fabric) -> (u32, Vec<usize>) {
    let mut diam = 0;
    for s in f.switch_ids() {
        let mut dist = vec![u32::MAX; f.num_switches()];
        dist[s.idx()] = 0;
        let mut q = std::collections::VecDeque::from([s]);
        while let Some(x) = q.pop_front() {
            for g in f.port_groups(x) {
                if dist[g.remote.idx()] == u32::MAX {
                    dist[g.remote.idx()] = dist[x.idx()] + 1;
                    q.push_back(g.remote);
                }
            }
        }
        diam = diam.max(*dist.iter().max().unwrap());
    }
    let mut deg: Vec<usize> = f.switch_ids().map(|s| f.port_groups(s).len()).collect();
    deg.sort_unstable();
    deg.dedup();
    (diam, deg)
}

#[test]
fn mms_graphs_are_the_papers_slim_flies() {
    // §3.2: q = 5 gives 2q² = 50 switches of network radix k' = (3q − δ)/2 = 7, diameter 2 (the
    // Hoffman–Singleton graph), p = 4 end ports per switch (200 endpoints).
    let f = slim_fly(5, 4);
    assert_eq!((f.num_switches(), f.num_end_ports()), (50, 200));
    assert_eq!(diameter_and_degrees(&f), (2, vec![7]));
    assert_eq!(mms_edges(5).len(), 50 * 7 / 2);
    // Hoffman–Singleton has girth 5: no triangle, no 4-cycle (every 2-hop pair has one path).
    let f7 = slim_fly(7, 6);
    assert_eq!((f7.num_switches(), f7.num_end_ports()), (98, 588));
    assert_eq!(diameter_and_degrees(&f7), (2, vec![11]));
}

fn plan(f: &Fabric) -> LidPlan {
    assign_lids(f, &Guid2Lid::default(), 0, IB_MAX_UNICAST_LID).unwrap()
}

/// Every layer valid, layer 0 minimal; the union of the layers on acyclic VLs.
fn check_layers(f: &Fabric, lr: &LayeredRouting, lids: &LidPlan) -> u8 {
    for (i, t) in lr.tables.iter().enumerate() {
        assert!(validity(f, lids, t).valid, "layer {i}");
    }
    let tables: Vec<&Lfts> = lr.tables.iter().collect();
    let dl = base_lids(f, lids);
    let l = assign_layers(f, &tables, &dl, IB_MAX_DATA_VLS).unwrap();
    assert!(cdg_acyclic_per_layer(f, &tables, &dl, &l).into_iter().all(|x| x));
    l.needed
}

#[test]
fn slim_fly_layers_follow_algorithm_1() {
    let f = slim_fly(5, 4);
    let lids = plan(&f);
    // The deployment's layer counts (§7.3: 1, 2, 4 and 8 layers).
    let mut needed = Vec::new();
    for k in [1, 2, 4, 8] {
        let lr = build_layers(&f, &lids, k, 0).unwrap();
        let st = layer_stats(&f, &lr);
        assert_eq!(st.pairs, 50 * 49);
        // Layer 0 is minimal; the others almost minimal (3 hops, B.1.1) wherever possible.
        let minimal_only = build_layers(&f, &lids, 1, 0).unwrap();
        assert_eq!(layer_stats(&f, &minimal_only).share_minimal, 1.0);
        assert!(st.max_hops <= 3, "k {k}: {st:?}");
        // Adjacent switches (7 of 49 pairs) have no path of 2 or 3 hops (girth 5): minimal in
        // every layer. The other pairs get almost-minimal paths in the extra layers, within the
        // consistency of destination-based forwarding (B.1.4).
        if k >= 4 {
            assert!(st.share_almost_minimal > 0.3, "k {k}: {st:?}");
            assert!(st.mean_disjoint > 2.0 && st.share_3_disjoint > 0.4, "k {k}: {st:?}");
        }
        eprintln!("k {k}: {st:?}");
        needed.push(check_layers(&f, &lr, &lids));
    }
    // One minimal layer of a diameter-2 graph: 2-hop paths only, yet a Slim Fly is cyclic.
    assert!(needed[0] >= 1 && needed.windows(2).all(|w| w[0] <= w[1]), "{needed:?}");
}

#[test]
fn layers_are_deterministic_and_seeded() {
    let f = slim_fly(5, 4);
    let lids = plan(&f);
    let a = build_layers(&f, &lids, 3, 7).unwrap();
    let b = build_layers(&f, &lids, 3, 7).unwrap();
    assert_eq!(a.tables, b.tables);
    let c = build_layers(&f, &lids, 3, 8).unwrap();
    assert_ne!(a.next[1], c.next[1], "the seed orders the pairs within a priority");
    assert_eq!(
        build_layers(&f, &lids, 0, 0).err(),
        Some(LayeredError::BadLayerCount(0))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]
    #[test]
    fn layered_on_random_regular_graphs(n in 8usize..24, k in 3usize..5, layers in 1usize..5,
                                        seed in 0u64..1000, links in 0usize..3) {
        prop_assume!((n * k).is_multiple_of(2));
        let g = rrg(n, k, 2, seed);
        let f = if links > 0 { degrade(&g, links, 0, seed) } else { g };
        let lids = plan(&f);
        let lr = build_layers(&f, &lids, layers, seed).unwrap();
        prop_assert_eq!(lr.tables.len(), layers);
        check_layers(&f, &lr, &lids);
        let again = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap()
            .install(|| build_layers(&f, &lids, layers, seed).unwrap());
        prop_assert_eq!(&lr.tables, &again.tables);
        // Layer 0 takes minimal paths only.
        let st = layer_stats(&f, &LayeredRouting { k: 1, n: lr.n, next: vec![lr.next[0].clone()], tables: vec![] });
        prop_assert_eq!(st.share_minimal, 1.0);
    }
}
