//! Tests of the VL layering: a ring needs exactly two layers, fat-tree routings one, the check
//! catches a cyclic layer, balancing keeps every layer acyclic; property tests on random regular
//! graphs (valid, per-layer acyclic, deterministic, thread-count independent).

use proptest::prelude::*;

use super::*;
use crate::check::{cdg_acyclic, validity};
use crate::engine::LidSet;
use crate::layered::graphs::{rrg, torus};
use crate::testutil::*;
use crate::EngineKind;

fn dfsssp(f: &Fabric, lmc: u8) -> (LidPlan, Lfts) {
    let (_, lids, lfts) = routed(f, EngineKind::Dfsssp, lmc);
    (lids, lfts)
}

fn per_layer(f: &Fabric, lids: &LidPlan, lfts: &Lfts, l: &VlLayering) -> Vec<bool> {
    cdg_acyclic_per_layer(f, &[lfts], &base_lids(f, lids), l)
}

#[test]
fn a_ring_needs_exactly_two_layers() {
    let f = torus(6, 1);
    let (lids, lfts) = dfsssp(&f, 0);
    assert!(validity(&f, &lids, &lfts).valid);
    assert!(
        !cdg_acyclic(&f, &lids, &lfts, LidSet::Base),
        "shortest paths on a ring are cyclic on one VL"
    );
    let l = layer_base(&f, &lids, &lfts, 2).unwrap();
    assert_eq!((l.needed, l.num_layers), (2, 2));
    assert_eq!(per_layer(&f, &lids, &lfts, &l), vec![true, true]);
    assert_eq!(
        layer_base(&f, &lids, &lfts, 1),
        Err(VlError::TooFewVls {
            available: 1,
            needed: 2
        })
    );
}

#[test]
fn a_fat_tree_routing_needs_one_layer() {
    let t = pgft(&[4, 4], &[1, 2], &[1, 1]);
    let (_, lids, lfts) = routed(&t.fabric, EngineKind::Dmodc, 1);
    let l = layer_base(&t.fabric, &lids, &lfts, 1).unwrap();
    assert_eq!((l.needed, l.num_layers), (1, 1));
    assert!(l.layer.iter().all(|&x| x == 0));
    assert_eq!(per_layer(&t.fabric, &lids, &lfts, &l), vec![true]);
}

#[test]
fn the_check_catches_a_cyclic_layer() {
    let f = torus(6, 1);
    let (lids, lfts) = dfsssp(&f, 0);
    let mut l = layer_base(&f, &lids, &lfts, 2).unwrap();
    assert!(l.layer.contains(&1));
    l.layer.iter_mut().for_each(|x| *x = 0);
    assert_eq!(per_layer(&f, &lids, &lfts, &l), vec![false, true]);
}

#[test]
fn balancing_spreads_routes_and_keeps_layers_acyclic() {
    let f = torus(4, 4);
    let (lids, lfts) = dfsssp(&f, 1);
    let tight = layer_base(&f, &lids, &lfts, IB_MAX_DATA_VLS).unwrap();
    let needed = tight.needed;
    assert!(needed >= 2, "a torus is cyclic on one VL");
    let l = layer_base(&f, &lids, &lfts, needed + 3).unwrap();
    assert_eq!((l.needed, l.num_layers), (needed, needed + 3));
    assert!(l.routes_per_layer.iter().all(|&c| c > 0), "{:?}", l.routes_per_layer);
    assert!(per_layer(&f, &lids, &lfts, &l).into_iter().all(|x| x));
    // The escape LIDs are layered apart (Up*/Down*: one layer).
    let esc: Vec<Lid> = base_lids(&f, &lids)
        .iter()
        .filter(|&&x| x % 2 == 0)
        .map(|x| x + 1)
        .collect();
    let e = assign_layers(&f, &[&lfts], &esc, 1).unwrap();
    assert_eq!(e.needed, 1);
}

#[test]
fn service_levels_skip_the_escape_sl() {
    assert_eq!((0..4).map(|i| sl_of_layer(i, 1)).collect::<Vec<_>>(), vec![0, 2, 3, 4]);
    assert_eq!(max_base_layers(8, 1), 7);
    assert_eq!(max_base_layers(8, 0), 8);
    let f = torus(3, 1);
    let (lids, lfts) = dfsssp(&f, 0);
    assert!(matches!(
        layer_base(&f, &lids, &lfts, 0),
        Err(VlError::BadMaximum { .. })
    ));
    assert!(matches!(
        layer_base(&f, &lids, &lfts, 16),
        Err(VlError::BadMaximum { .. })
    ));
    assert!(matches!(
        assign_layers(&f, &[&lfts], &[lfts.row_len() as Lid], 2),
        Err(VlError::TablesTooSmall { .. })
    ));
}

fn run(f: &Fabric) -> (LidPlan, Lfts, Result<VlLayering, VlError>) {
    let (lids, lfts) = dfsssp(f, 1);
    let l = layer_base(f, &lids, &lfts, IB_MAX_DATA_VLS);
    (lids, lfts, l)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn dfsssp_on_random_regular_graphs(n in 8usize..28, k in 3usize..6, seed in 0u64..1000, links in 0usize..4) {
        prop_assume!((n * k).is_multiple_of(2));
        let g = rrg(n, k, 2, seed);
        let f = if links > 0 { degrade(&g, links, 0, seed) } else { g };
        let (lids, lfts, l) = run(&f);
        prop_assert!(validity(&f, &lids, &lfts).valid);
        let l = l.unwrap();
        prop_assert!(l.needed >= 1 && l.num_layers == IB_MAX_DATA_VLS.max(l.needed));
        prop_assert!(per_layer(&f, &lids, &lfts, &l).into_iter().all(|x| x));
        // Before balancing, the cycle breaking alone: each of its layers is acyclic too.
        let tight = layer_base(&f, &lids, &lfts, l.needed).unwrap();
        prop_assert!(per_layer(&f, &lids, &lfts, &tight).into_iter().all(|x| x));
        // Deterministic, and independent of the thread count.
        let (_, lfts2, l2) = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap().install(|| run(&f));
        prop_assert_eq!(&lfts, &lfts2);
        prop_assert_eq!(Some(&l), l2.as_ref().ok());
    }
}
