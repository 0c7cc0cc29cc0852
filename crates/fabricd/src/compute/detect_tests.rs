//! `[routing] topology = "auto"` decided inside the computation ([`ComputeInput::detect_topology`]).

use super::*;
use fabric_topology::{FabricBuilder, NodeType};

/// Three switches in a ring, one node on each: every switch is a leaf, every cable joins two
/// leaves (no fat-tree).
fn ring() -> Fabric {
    let mut b = FabricBuilder::new();
    let s: Vec<_> = (0..3)
        .map(|i| b.add_switch(0x10 + i, format!("sw{i}"), 8).unwrap())
        .collect();
    for i in 0..3 {
        b.connect_switches(s[i], 5, s[(i + 1) % 3], 6).unwrap();
        let e = b
            .add_end_port(
                0x101 + 0x10 * i as u64,
                0x100 + 0x10 * i as u64,
                format!("n{i}"),
                1,
                1,
                NodeType::Compute,
            )
            .unwrap();
        b.connect_end_port(e, s[i], 1).unwrap();
    }
    b.build()
}

/// With detection, a fabric that ranks as no fat-tree has its base LIDs routed by Up*/Down*
/// (every pair valid, the switch LIDs included), a fat-tree keeps the configured engine, and a
/// topology-agnostic engine is kept as configured; without detection the engine routes as
/// configured (and the fallback repairs what it leaves).
#[test]
fn auto_topology_routes_a_non_fat_tree_by_updown_in_the_computation() {
    let run = |f: Fabric, detect: bool, engine: EngineKind| {
        let c = compute(ComputeInput {
            job: 1,
            engine,
            detect_topology: detect,
            ..ComputeInput::from_scratch(Arc::new(f), vec![])
        })
        .unwrap();
        assert!(c.routing_check.valid, "{:?}", c.routing_check);
        c.routing_check.engine.clone()
    };
    assert_eq!(run(ring(), true, EngineKind::Dmodc), "updown");
    assert_eq!(run(ring(), false, EngineKind::Dmodc), "dmodc");
    assert_eq!(run(ring(), true, EngineKind::Dfsssp), "dfsssp");
    assert_eq!(run(super::tests::tiny(), true, EngineKind::Dmodc), "dmodc");
    // Judged on the fabric as routed (virtual faults applied): with n0 cut off, sw0 is no leaf
    // any more and ranks above the two others (one same-level cable of three: a fat-tree).
    let c = compute(ComputeInput {
        job: 1,
        detect_topology: true,
        ..ComputeInput::from_scratch(Arc::new(ring()), vec![FabricEvent::LinkDown { switch: 0x10, port: 1 }])
    })
    .unwrap();
    assert_eq!(c.routing_check.engine, "dmodc");
}
