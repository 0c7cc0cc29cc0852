//! Tests of the DFSSSP engine: shortest paths on any topology, refused by the daemon's check,
//! its layering on a degraded fat-tree and a torus.

use super::*;
use crate::check::{cdg_acyclic_per_layer, validity};
use crate::layered::graphs::torus;
use crate::testutil::*;
use crate::vl::{base_lids, layer_base};
use crate::{engine, engine_fits, EngineKind, TraceEnd};

#[test]
fn dfsssp_is_selectable_and_refused_by_the_daemon_check() {
    let k: EngineKind = "dfsssp".parse().unwrap();
    assert_eq!(k, EngineKind::Dfsssp);
    assert_eq!(engine(k).name(), "dfsssp");
    let f = torus(3, 3);
    match engine_fits(k, &f) {
        Err(RoutingError::Unsupported { engine, reason }) => {
            assert_eq!(engine, "dfsssp");
            assert!(reason.contains("SL"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
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
