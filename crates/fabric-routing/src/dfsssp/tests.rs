//! Tests of the DFSSSP engine: shortest paths on any topology, its layering for the daemon,
//! its layering on a degraded fat-tree and a torus.

use crate::check::{cdg_acyclic_per_layer, validity};
use crate::layered::graphs::torus;
use crate::testutil::*;
use crate::vl::{base_lids, layer_base};
use crate::{engine, engine_fits, EngineKind, TraceEnd};

#[test]
fn dfsssp_is_selectable_fits_any_fabric_and_needs_a_layering() {
    let k: EngineKind = "dfsssp".parse().unwrap();
    assert_eq!(k, EngineKind::Dfsssp);
    assert_eq!(engine(k).name(), "dfsssp");
    let f = torus(3, 3);
    assert_eq!(engine_fits(k, &f), Ok(()));
    assert!(k.needs_vl_layering() && k.is_topology_agnostic());
    assert!(!EngineKind::Dmodc.needs_vl_layering() && !EngineKind::Dmodc.is_topology_agnostic());
    assert!(!EngineKind::UpDown.needs_vl_layering() && EngineKind::UpDown.is_topology_agnostic());
}

#[test]
fn vl_layering_is_none_on_one_vl_engines_and_the_fewest_layers_for_dfsssp() {
    let f = torus(5, 4);
    let (_, lids, lfts) = routed(&f, EngineKind::Dfsssp, 1);
    assert_eq!(crate::vl_layering(EngineKind::UpDown, &f, &lids, &lfts, 8), Ok(None));
    let l = crate::vl_layering(EngineKind::Dfsssp, &f, &lids, &lfts, 8)
        .unwrap()
        .unwrap();
    // No balancing: exactly the layers the cycle breaking needed.
    assert_eq!(l.num_layers, l.needed);
    assert!(l.needed >= 2);
    let balanced = layer_base(&f, &lids, &lfts, 7).unwrap();
    assert_eq!(balanced.needed, l.needed);
    assert!(cdg_acyclic_per_layer(&f, &[&lfts], &base_lids(&f, &lids), &l)
        .into_iter()
        .all(|x| x));
    // Two data VLs leave one base layer (VL 1 is the escape's): too few, and it says so.
    match crate::vl_layering(EngineKind::Dfsssp, &f, &lids, &lfts, 2) {
        Err(crate::vl::VlError::TooFewVls { available: 1, needed }) => assert_eq!(needed, l.needed),
        other => panic!("{other:?}"),
    }
    assert_eq!(crate::data_vls_of_layers(l.num_layers, 1), l.num_layers + 1);
    assert_eq!(crate::data_vls_of_layers(1, 1), 2);
    assert_eq!(crate::data_vls_of_layers(1, 0), 1);
}

#[test]
fn dfsssp_takes_minimal_paths_on_a_torus() {
    let f = torus(5, 4);
    let (_, lids, lfts) = routed(&f, EngineKind::Dfsssp, 1);
    assert!(validity(&f, &lids, &lfts).valid);
    let mut hops = Vec::new();
    for a in f.end_port_ids() {
        for b in f.end_port_ids() {
            let r = crate::check::trace(&f, &lfts, a, lids.base_lid(b), &mut hops);
            assert_eq!(r, Ok(TraceEnd::EndPort(b)));
            let (sa, sb) = (a.0 as i32, b.0 as i32);
            let (dx, dy) = ((sa % 5 - sb % 5).abs(), (sa / 5 - sb / 5).abs());
            let min = dx.min(5 - dx) + dy.min(4 - dy);
            assert_eq!(hops.len() as i32, min + 1, "{a:?} -> {b:?}");
        }
    }
    let l = layer_base(&f, &lids, &lfts, 8).unwrap();
    assert!(l.needed >= 2);
    assert!(cdg_acyclic_per_layer(&f, &[&lfts], &base_lids(&f, &lids), &l)
        .into_iter()
        .all(|x| x));
}

#[test]
fn dfsssp_on_a_degraded_fat_tree_is_valid_and_layered() {
    let t = pgft(&[4, 4, 3], &[1, 2, 2], &[1, 1, 1]);
    for seed in 0..4 {
        let f = degrade(&t.fabric, 6, 1, seed);
        let (_, lids, lfts) = routed(&f, EngineKind::Dfsssp, 1);
        assert!(validity(&f, &lids, &lfts).valid, "seed {seed}");
        let l = layer_base(&f, &lids, &lfts, 7).unwrap();
        assert!(cdg_acyclic_per_layer(&f, &[&lfts], &base_lids(&f, &lids), &l)
            .into_iter()
            .all(|x| x));
    }
}
