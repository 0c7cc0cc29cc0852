//! Tests of the data VLs of the simulated fabric (the `vls` module) on the hand-built two-level
//! fabric of `tests`: capacity, refusals naming GUID and port, tables recorded per port, the
//! plan in force on ports that come up later.

use fabric_southbound::{DataVlPlan, DriverError, SouthboundDriver};
use proptest::prelude::*;

use super::tests::{two_level, L0, L1, N0, N2, S0, S1};
use super::*;

fn fabric(cfg: MockConfig) -> MockFabric {
    MockFabric::new(two_level()).with_config(cfg).unwrap()
}

/// The table of `DataVlPlan::identity(n)` (with SL 1 on the escape VL 1).
fn identity(n: u8) -> [u8; 16] {
    DataVlPlan::identity(n).sl_to_vl
}

/// Every cabled switch port and every end port of the fixture.
const SWITCH_PORTS: [(Guid, PortNum); 12] = [
    (L0, 1),
    (L0, 2),
    (L0, 3),
    (L0, 4),
    (L1, 1),
    (L1, 2),
    (L1, 3),
    (L1, 4),
    (S0, 1),
    (S0, 2),
    (S1, 1),
    (S1, 2),
];

#[tokio::test]
async fn identity_plan_is_recorded_on_every_live_port() {
    let m = fabric(MockConfig::default());
    assert_eq!(m.data_vl_capacity(), Some(DEFAULT_DATA_VLS));
    assert_eq!(m.data_vl_plan_in_force(), None);
    assert_eq!(m.sl_to_vl_of_switch_port(L0, 1), None, "nothing before a plan");
    m.program_data_vls(&DataVlPlan::identity(4)).await.unwrap();
    let want = identity(4);
    assert_eq!(m.data_vl_plan_in_force(), Some(want));
    for (g, p) in SWITCH_PORTS {
        assert_eq!(m.sl_to_vl_of_switch_port(g, p), Some(want), "{g:#x} port {p}");
    }
    assert_eq!(m.sl_to_vl_of_switch_port(L0, 5), None, "uncabled port");
    assert_eq!(m.sl_to_vl_of_switch_port(L0, 200), None, "no such port");
    for g in [N0, N2] {
        assert_eq!(m.sl_to_vl_of_end_port(g), Some(want));
    }
}

#[tokio::test]
async fn a_plan_beyond_vlcap_is_refused_naming_guid_and_port() {
    let m = fabric(MockConfig::default());
    let e = m.program_data_vls(&DataVlPlan::identity(9)).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "data VL plan refused: 0x0000000000000010 port 1: the plan needs 9 data VLs, this port has VLCap 8"
    );
    assert_eq!(m.data_vl_plan_in_force(), None, "nothing recorded");
    assert_eq!(m.sl_to_vl_of_end_port(N0), None);
    // One spine with 4 VLs: the capacity drops and the refusal names it.
    let cfg = MockConfig {
        data_vls_of: vec![(S1, 4)],
        ..MockConfig::default()
    };
    let m = fabric(cfg);
    assert_eq!(m.data_vl_capacity(), Some(4));
    match m.program_data_vls(&DataVlPlan::identity(5)).await.unwrap_err() {
        DriverError::DataVls { guid, port, .. } => assert_eq!((guid, port), (S1, 1)),
        other => panic!("{other:?}"),
    }
    m.program_data_vls(&DataVlPlan::identity(4)).await.unwrap();
    // VL 15 is no data VL.
    let mut p = DataVlPlan::identity(2);
    p.sl_to_vl[3] = 15;
    let e = m.program_data_vls(&p).await.unwrap_err();
    assert!(e.to_string().contains("SL 3 to VL 15"), "{e}");
    // No data SL on the escape VL.
    p.sl_to_vl[3] = 1;
    let e = m.program_data_vls(&p).await.unwrap_err();
    assert!(e.to_string().contains("SL 3 to VL 1, the escape VL"), "{e}");
}

#[tokio::test]
async fn the_escape_sl_keeps_the_escape_vl() {
    let m = fabric(MockConfig::default());
    let mut p = DataVlPlan::identity(3);
    p.sl_to_vl[1] = 0;
    m.program_data_vls(&p).await.unwrap();
    assert_eq!(m.sl_to_vl_of_end_port(N0).unwrap()[1], 1);
    // Without an escape VL the plan is taken as given.
    let m = fabric(MockConfig {
        escape_vl: None,
        ..MockConfig::default()
    });
    m.program_data_vls(&p).await.unwrap();
    assert_eq!(m.sl_to_vl_of_end_port(N0).unwrap()[1], 0);
}

#[tokio::test]
async fn ports_that_come_up_later_get_the_plan_in_force() {
    let cfg = MockConfig {
        data_vls_of: vec![(S1, 2)],
        ..MockConfig::default()
    };
    let m = fabric(cfg);
    // Spine 1 (2 VLs) is down, L0 port 3 (to S0) too, and end port N2.
    m.set_switch_state(S1, false).await.unwrap();
    m.set_port_state(L0, 3, false).await.unwrap();
    m.set_end_port_state(N2, false).await.unwrap();
    assert_eq!(m.data_vl_capacity(), Some(8), "down ports do not count");
    m.program_data_vls(&DataVlPlan::identity(6)).await.unwrap();
    let want = identity(6);
    assert_eq!(m.sl_to_vl_of_switch_port(L0, 3), None);
    assert_eq!(m.sl_to_vl_of_switch_port(S0, 1), None, "far end of the down cable");
    assert_eq!(m.sl_to_vl_of_end_port(N2), None);
    assert_eq!(m.sl_to_vl_of_switch_port(S1, 1), None);
    m.set_port_state(L0, 3, true).await.unwrap();
    assert_eq!(m.sl_to_vl_of_switch_port(L0, 3), Some(want));
    assert_eq!(m.sl_to_vl_of_switch_port(S0, 1), Some(want));
    m.set_end_port_state(N2, true).await.unwrap();
    assert_eq!(m.sl_to_vl_of_end_port(N2), Some(want));
    // The spine comes back: its ports get the plan in force (the mock records it; a real
    // driver would find the spine cannot hold it), and the capacity drops to its 2 VLs.
    m.set_switch_state(S1, true).await.unwrap();
    assert_eq!(m.sl_to_vl_of_switch_port(S1, 2), Some(want));
    assert_eq!(m.data_vl_capacity(), Some(2));
}

#[tokio::test]
async fn a_rebooted_switch_loses_its_tables_before_getting_the_plan() {
    let m = fabric(MockConfig {
        reset_on_power_cycle: true,
        ..MockConfig::default()
    });
    m.program_data_vls(&DataVlPlan::identity(4)).await.unwrap();
    m.set_port_state(S0, 1, false).await.unwrap();
    m.set_switch_state(S0, false).await.unwrap();
    m.set_switch_state(S0, true).await.unwrap();
    assert_eq!(m.sl_to_vl_of_switch_port(S0, 1), None, "its port 1 is still down");
    assert_eq!(m.sl_to_vl_of_switch_port(S0, 2), Some(identity(4)));
}

#[test]
fn vlcap_is_validated() {
    for bad in [0u8, 16] {
        let e = MockConfig {
            data_vls: bad,
            ..MockConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains(&format!("data_vls: {bad} data VLs")), "{e}");
        let e = MockConfig {
            data_vls_of: vec![(S0, bad)],
            ..MockConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("data_vls_of 0x0000000000000020"), "{e}");
    }
}

proptest! {
    /// Random VLCaps per switch and random plans: a plan is accepted exactly when it needs no
    /// more VLs than the capacity, and then every live port holds its table.
    #[test]
    fn accepted_exactly_within_capacity(
        caps in proptest::collection::vec(1u8..=15, 4),
        ep_cap in 1u8..=15,
        table in proptest::collection::vec(0u8..=14, 16),
    ) {
        let cfg = MockConfig {
            data_vls: ep_cap,
            data_vls_of: [L0, L1, S0, S1].into_iter().zip(caps.iter().copied()).collect(),
            ..MockConfig::default()
        };
        let m = fabric(cfg);
        let mut plan = DataVlPlan {
            sl_to_vl: [0; 16],
            data_vls: 1,
            escape: true,
        };
        plan.sl_to_vl.copy_from_slice(&table);
        // The escape VL (1) is SL 1's alone.
        for v in plan.sl_to_vl.iter_mut().filter(|v| **v == 1) {
            *v = 0;
        }
        plan.sl_to_vl[1] = 1;
        plan.data_vls = plan.sl_to_vl.iter().copied().max().unwrap() + 1;
        let cap = m.data_vl_capacity().unwrap();
        prop_assert_eq!(cap, caps.iter().copied().min().unwrap().min(ep_cap));
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let r = rt.block_on(m.program_data_vls(&plan));
        prop_assert_eq!(r.is_ok(), plan.data_vls <= cap);
        let want = r.is_ok().then_some(plan.sl_to_vl);
        for (g, p) in SWITCH_PORTS {
            prop_assert_eq!(m.sl_to_vl_of_switch_port(g, p), want);
        }
        prop_assert_eq!(m.sl_to_vl_of_end_port(N0), want);
    }
}
