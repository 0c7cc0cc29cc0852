//! The layering of a generation: refused beyond the driver's data VLs with a clear error, the
//! plan and per-path SLs equal to the layering of the tables, every layer acyclic; on the
//! paper's Slim Fly and on random regular graphs (proptest).

use std::sync::Arc;

use fabric_routing::check::cdg_acyclic_per_layer;
use fabric_routing::vl::{base_lids, sl_of_layer};
use fabric_topology::gen::generate_str;
use fabric_topology::{Fabric, FabricEvent};
use proptest::prelude::*;

use super::*;
use crate::compute::{compute, ComputeError, ComputeInput};

fn dfsssp_input(f: Fabric, capacity: Option<u8>) -> ComputeInput {
    ComputeInput {
        engine: EngineKind::Dfsssp,
        data_vl_capacity: capacity,
        ..ComputeInput::from_scratch(Arc::new(f), vec![])
    }
}

/// Every claim about a computed layered generation, checked against the layering of its own
/// tables computed here.
fn check_layered(c: &crate::compute::Computed) {
    let v = c.vl.as_ref().expect("dfsssp is layered");
    let (f, lids, lfts) = (&*c.fabric, &*c.lids, &*c.lfts);
    assert!(fabric_routing::check::validity(f, lids, lfts).valid);
    let l = fabric_routing::vl_layering(EngineKind::Dfsssp, f, lids, lfts, 15)
        .unwrap()
        .unwrap();
    assert_eq!(v.layers, l.num_layers);
    assert_eq!(l.num_layers, l.needed, "the fewest layers");
    assert_eq!(v.data_vls, data_vls_of_layers(l.num_layers, lids.lmc));
    if lids.lmc >= 1 {
        assert_eq!(v.plan, DataVlPlan::identity(v.data_vls));
    } else {
        // No escape LID: layer i on SL/VL i, exactly `layers` data VLs, SL 1 not reserved.
        assert_eq!(v.plan, DataVlPlan::identity_without_escape(v.layers));
        assert_eq!(v.data_vls, v.layers);
    }
    assert!(cdg_acyclic_per_layer(f, &[lfts], &base_lids(f, lids), &l)
        .into_iter()
        .all(|x| x));
    // Per-path SLs: the layer's SL of every (switch, base or switch LID) route, the escape
    // SL for escape LIDs, and each SL maps to a VL of the plan.
    let p = &v.path_sls;
    for s in f.switch_ids() {
        let g = f.switch(s).guid;
        for e in f.end_port_ids() {
            let b = lids.base_lid(e);
            assert_eq!(p.sl(g, b as u16), Some(sl_of_layer(l.layer_of(0, s, b), lids.lmc)));
            if let Some(x) = lids.escape_lid(e) {
                assert_eq!(p.sl(g, x as u16), Some(ESCAPE_SL));
            }
        }
        for t in f.switch_ids() {
            let sl = p.sl(g, lids.switch_lid(t) as u16).unwrap();
            assert!(usize::from(sl) < usize::from(v.data_vls));
        }
    }
}

#[test]
fn the_papers_slim_fly_is_layered_and_refused_with_too_few_vls() {
    let f = generate_str("SLIMFLY(5;4)", None).unwrap();
    let c = compute(dfsssp_input(f.clone(), Some(8))).unwrap();
    check_layered(&c);
    let layers = c.vl.as_ref().unwrap().layers;
    assert!(layers >= 2, "a Slim Fly has CDG cycles on one VL");
    // Exactly enough VLs: accepted; one fewer: refused, saying how many were needed.
    let need = data_vls_of_layers(layers, 1);
    assert!(compute(dfsssp_input(f.clone(), Some(need))).is_ok());
    match compute(dfsssp_input(f.clone(), Some(need - 1))) {
        Err(ComputeError::Vl(e)) => {
            assert_eq!(e.needed(), layers);
            let m = format!("generation refused: {e}");
            assert!(m.contains(&format!("needs {layers} virtual layers")), "{m}");
            assert!(m.contains(&format!("data VL capacity: {}", need - 1)), "{m}");
            assert!(m.contains("nothing installed"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    // One data VL: no base layer at all.
    assert!(matches!(compute(dfsssp_input(f, Some(1))), Err(ComputeError::Vl(_))));
}

#[test]
fn at_lmc_0_the_layers_use_sl_and_vl_0_to_layers_minus_1() {
    let f = generate_str("SLIMFLY(5;4)", None).unwrap();
    let lmc0 = |cap| ComputeInput {
        lmc: 0,
        ..dfsssp_input(f.clone(), cap)
    };
    let c = compute(lmc0(Some(8))).unwrap();
    check_layered(&c);
    let v = c.vl.as_ref().unwrap();
    assert!(v.layers >= 2, "a Slim Fly has CDG cycles on one VL");
    assert_eq!(v.data_vls, v.layers);
    assert_eq!(v.plan.sl_to_vl[1], 1, "layer 1 on SL 1, VL 1");
    assert!(!v.plan.escape);
    let used: std::collections::BTreeSet<u8> = v.path_sls.sl.iter().copied().collect();
    assert_eq!(used, (0..v.layers).collect(), "SLs 0..layers, none skipped");
    // Exactly `layers` VLs suffice; one fewer is refused.
    assert!(compute(lmc0(Some(v.layers))).is_ok());
    match compute(lmc0(Some(v.layers - 1))) {
        Err(ComputeError::Vl(e)) => assert_eq!(e.needed(), v.layers),
        other => panic!("{other:?}"),
    }
}

#[test]
fn one_vl_engines_have_no_layering_and_unknown_capacity_is_accepted() {
    let f = generate_str("SLIMFLY(5;4)", None).unwrap();
    let mut inp = dfsssp_input(f.clone(), Some(1));
    inp.engine = EngineKind::UpDown;
    assert!(compute(inp).unwrap().vl.is_none());
    check_layered(&compute(dfsssp_input(f, None)).unwrap());
}

#[test]
fn a_degraded_slim_fly_is_layered_on_the_repaired_tables() {
    let f = generate_str("SLIMFLY(5;4)", None).unwrap();
    // Cut a few inter-switch cables (virtual faults): the layering covers what is installed.
    let downs: Vec<FabricEvent> = f
        .switch_ids()
        .step_by(7)
        .filter_map(|s| {
            let sw = f.switch(s);
            sw.external_ports()
                .find(|(_, p)| matches!(p.remote, fabric_topology::Remote::Switch { .. }))
                .map(|(port, _)| FabricEvent::LinkDown { switch: sw.guid, port })
        })
        .collect();
    assert!(!downs.is_empty());
    let mut inp = dfsssp_input(f, Some(15));
    inp.exclusions = downs;
    check_layered(&compute(inp).unwrap());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]
    #[test]
    fn random_regular_graphs_are_layered_acyclic_and_deterministic(n in 8u32..24, k in 3u32..5, seed in 0u64..1000) {
        let spec = format!("RRG({},{k},2;{seed})", n + (n * k) % 2);
        let f = generate_str(&spec, None).unwrap();
        let a = compute(dfsssp_input(f.clone(), Some(15))).unwrap();
        check_layered(&a);
        let b = compute(dfsssp_input(f, Some(15))).unwrap();
        prop_assert_eq!(&a.vl.as_ref().unwrap().path_sls, &b.vl.as_ref().unwrap().path_sls);
        prop_assert_eq!(&*a.lfts, &*b.lfts);
    }
}
