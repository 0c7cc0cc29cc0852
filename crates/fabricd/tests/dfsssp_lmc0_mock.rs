//! Issue #19: DFSSSP with `[routing] lmc = 0` and direct updates (no escape LID, as OpenSM's
//! dfsssp) operates exactly its `layers` data VLs: layer `i` on SL = VL `i`, SL/VL 1 not kept
//! for an escape VL that does not exist. Through the daemon's own event loop over the mock
//! driver's `SLIMFLY(5;4)` (2 layers), with ports of exactly 2 data VLs: the generation is
//! committed (with the escape VL kept, layer 1 would be on SL/VL 2 and need 3 data VLs: the
//! mock refuses that plan), every live port holds the identity table of the 2 layers, and the
//! SLs the daemon publishes for PathRecords are 0 and 1.

use std::collections::BTreeSet;

use fabric_mock::MockConfig;
use fabric_routing::EngineKind;
use fabric_southbound::DataVlPlan;
use fabric_topology::Remote;
use fabricd::state::Phase;

mod loop_harness;
use loop_harness::{start_with, until};

const SPEC: &str = "SLIMFLY(5;4)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_lmc0_dfsssp_operates_exactly_its_layers_data_vls() {
    let mock = MockConfig {
        data_vls: 2,
        ..MockConfig::default()
    };
    let d = start_with(SPEC, EngineKind::Dfsssp, false, 0, mock);
    let p = until(&d, "generation 1", |p| {
        p.generation() >= 1 && p.phase == Phase::Idle || !p.last_error.is_empty()
    })
    .await;
    assert!(p.last_error.is_empty(), "refused: {}", p.last_error);
    let g = p.current.clone().expect("generation 1");
    assert_eq!(g.lids.lmc, 0);
    let v = g.vl.as_ref().expect("dfsssp is layered");
    assert_eq!(v.layers, 2, "SLIMFLY(5;4) needs 2 layers");
    assert_eq!(v.data_vls, v.layers, "no escape VL at LMC 0");
    assert_eq!(v.plan, DataVlPlan::identity_without_escape(v.layers));

    // Every live port of the simulated fabric holds SL i -> VL i for the layers, VL 0 beyond.
    let mut want = [0u8; 16];
    for (sl, vl) in want.iter_mut().enumerate().take(usize::from(v.layers)) {
        *vl = sl as u8;
    }
    assert_eq!(d.mock.data_vl_plan_in_force(), Some(want));
    let f = d.mock.cabling();
    let mut ports = 0;
    for s in f.switch_ids() {
        let sw = f.switch(s);
        for (pn, port) in sw.external_ports() {
            if port.remote != Remote::None {
                assert_eq!(
                    d.mock.sl_to_vl_of_switch_port(sw.guid, pn),
                    Some(want),
                    "{} port {pn}",
                    sw.desc
                );
                ports += 1;
            }
        }
    }
    for e in f.end_port_ids() {
        let ep = f.end_port(e);
        assert_eq!(d.mock.sl_to_vl_of_end_port(ep.port_guid), Some(want), "{}", ep.desc);
    }
    assert_eq!(ports, 50 * (7 + 4), "50 switches, 7 switch and 4 end-node cables each");
    let highest_vl = want.iter().copied().max().unwrap();
    assert_eq!(highest_vl + 1, v.layers, "the data VLs operated are the layers");

    // The published per-path SLs (PathRecord SL) use exactly SLs 0..layers.
    let used: BTreeSet<u8> = v.path_sls.sl.iter().copied().collect();
    assert_eq!(used, (0..v.layers).collect::<BTreeSet<u8>>());
    d.task.abort();
}
