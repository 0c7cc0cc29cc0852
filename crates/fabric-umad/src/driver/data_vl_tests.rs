//! Unit tests of [`super::data_vl`]: VL codes, plan tables, capacity and its refusals, the plan
//! in force and the OperationalVLs ports are brought up with.

use fabric_southbound::{DataVlPlan, DriverError};
use proptest::prelude::*;

use super::data_vl::*;
use super::sl2vl::{table_in_force, ESCAPE_VL};
use super::state::tests::{two_by_two, CA, L0, L1, S0};
use super::state::{apply_port_reads, Peer, State};
use crate::mad::*;

/// Sets VLCap (code) on `i`.
fn set_vl_cap(i: &mut PortInfo, code: u8) {
    i.raw[37] = (i.raw[37] & 0x0f) | (code << 4);
}

/// Every port of the fixture: VLCap `code`, OperationalVLs `op`, IsSLMappingSupported.
fn fabric(code: u8, op: u8) -> State {
    let mut st = two_by_two();
    for s in &mut st.switches {
        for (p, r) in s.ports.iter_mut().enumerate() {
            if let Some(i) = r.info.as_mut() {
                set_vl_cap(i, code);
                i.set_operational_vls(op);
                if p == 0 {
                    i.set_capability_mask(CAP_SL_MAPPING);
                }
            }
        }
    }
    for c in &mut st.cas {
        set_vl_cap(&mut c.info, code);
        c.info.set_operational_vls(op);
        c.info.set_capability_mask(CAP_SL_MAPPING);
    }
    st
}

fn message(e: DriverError) -> (Option<u64>, String) {
    match e {
        DriverError::Protocol { guid, message } => (guid, message),
        other => panic!("unexpected error {other:?}"),
    }
}

#[test]
fn vl_codes_as_iba_table_146() {
    let got: Vec<u8> = (0..=6).map(vls_of_code).collect();
    assert_eq!(got, vec![0, 1, 2, 4, 8, 15, 0]);
}

#[test]
fn plan_tables_keep_the_escape_vl() {
    let (t, need) = plan_table(&DataVlPlan::identity(4)).unwrap();
    assert_eq!(&t.0[..5], &[0, 1, 2, 3, 0]);
    assert_eq!(need, 4);
    // The escape-only plan is the driver's escape table.
    let (t, need) = plan_table(&DataVlPlan::escape_only(1, ESCAPE_VL)).unwrap();
    assert_eq!((t, need), (SlToVl::escape(ESCAPE_VL), 2));
    // SL 1 always goes to the escape VL, which counts in the VLs needed.
    let mut p = DataVlPlan::identity(1);
    p.sl_to_vl[1] = 0;
    let (t, need) = plan_table(&p).unwrap();
    assert_eq!((t.0[1], need), (ESCAPE_VL, 2));
    // A VL above the declared count raises it; VL 15 is refused.
    p.sl_to_vl[5] = 6;
    assert_eq!(plan_table(&p).unwrap().1, 7);
    p.sl_to_vl[5] = 15;
    let (g, m) = message(plan_table(&p).unwrap_err());
    assert_eq!(g, None);
    assert!(m.contains("SL 5 to VL 15"), "{m}");
    // No data SL on the escape VL.
    p.sl_to_vl[5] = ESCAPE_VL;
    let (_, m) = message(plan_table(&p).unwrap_err());
    assert!(m.contains("SL 5 to VL 1, the escape VL"), "{m}");
}

#[test]
fn capacity_is_the_fewest_over_live_ports() {
    // INIT ports count with VLCap (raised when armed); ACTIVE ones with OperationalVLs.
    let mut st = fabric(4, 2);
    assert_eq!(capacity(&st), Some(2), "active ports operate VL0-1");
    let mut st8 = fabric(4, 4);
    assert_eq!(capacity(&st8), Some(8));
    // One CA port with VLCap VL0-3.
    set_vl_cap(&mut st8.cas[0].info, 3);
    st8.cas[0].info.set_operational_vls(3);
    assert_eq!(capacity(&st8), Some(4));
    // Down ports and down switches do not count.
    st8.cas[0].up = false;
    assert_eq!(capacity(&st8), Some(8));
    // A port in INIT counts with its VLCap.
    for s in &mut st.switches {
        for r in &mut s.ports {
            if let Some(i) = r.info.as_mut() {
                i.set_state(PortState::Init);
            }
        }
    }
    st.cas[0].info.set_state(PortState::Init);
    assert_eq!(capacity(&st), Some(8));
    assert_eq!(capacity(&State::default()), None);
}

/// (GUID, port, message) of a refusal.
fn refusal(e: DriverError) -> (u64, u8, String) {
    match e {
        DriverError::DataVls { guid, port, reason } => (guid, port, reason),
        other => panic!("unexpected error {other:?}"),
    }
}

#[test]
fn refusals_name_guid_and_port() {
    let st = fabric(4, 4);
    assert!(check_capacity(&st, 8).is_ok());
    let e = check_capacity(&st, 9).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("data VL plan refused: 0x0000000000000010 port 1: the plan needs 9 data VLs"),
        "{e}"
    );
    let (g, p, m) = refusal(e);
    assert_eq!((g, p), (L0, 1), "first live port: leaf 0 port 1");
    assert!(m.contains("this switch port operates 8 (VLCap VL0-7)"), "{m}");
    // An ACTIVE port operating fewer VLs than its VLCap: re-training is named.
    let mut st = fabric(4, 4);
    let i = st.sw_by_guid[&L1];
    st.switches[i].ports[3].info.as_mut().unwrap().set_operational_vls(2);
    let (g, p, m) = refusal(check_capacity(&st, 4).unwrap_err());
    assert_eq!((g, p), (L1, 3));
    assert!(m.contains("operates 2 (OperationalVLs VL0-1 (VLCap VL0-7))"), "{m}");
    assert!(m.contains("re-trained"), "{m}");
    // The CA port.
    let mut st = fabric(4, 4);
    set_vl_cap(&mut st.cas[0].info, 3);
    let (g, p, m) = refusal(check_capacity(&st, 5).unwrap_err());
    assert_eq!((g, p), (CA, 1));
    assert!(m.contains("CA port operates 4 (VLCap VL0-3)"), "{m}");
    // No SL-to-VL tables on a switch.
    let mut st = fabric(4, 4);
    let i = st.sw_by_guid[&S0];
    st.switches[i].ports[0].info.as_mut().unwrap().set_capability_mask(0);
    assert!(check_capacity(&st, 1).is_ok(), "one VL needs no table");
    let (g, p, m) = refusal(check_capacity(&st, 2).unwrap_err());
    assert_eq!((g, p), (S0, 1));
    assert!(m.contains("IsSLMappingSupported"), "{m}");
}

#[test]
fn a_new_table_forgets_what_was_written() {
    let mut st = fabric(4, 4);
    let i = st.sw_by_guid[&S0];
    st.switches[i].sl2vl.insert(1, 2);
    st.cas[0].sl2vl = true;
    assert_eq!(table_in_force(&st), SlToVl::escape(ESCAPE_VL));
    // The escape-only table again: nothing changes.
    assert!(!set_table(&mut st, SlToVl::escape(ESCAPE_VL)));
    assert!(st.switches[i].sl2vl.contains(1, 2) && st.cas[0].sl2vl && st.data_vl_table.is_none());
    let (t, _) = plan_table(&DataVlPlan::identity(4)).unwrap();
    assert!(set_table(&mut st, t));
    assert_eq!(table_in_force(&st), t);
    assert!(!st.switches[i].sl2vl.contains(1, 2) && !st.cas[0].sl2vl);
    assert_eq!(st.sl2vl_gen, 1);
    assert!(!set_table(&mut st, t), "same plan: nothing to rewrite");
    // Back to escape-only: recorded as no plan.
    assert!(set_table(&mut st, SlToVl::escape(ESCAPE_VL)));
    assert!(st.data_vl_table.is_none());
    assert_eq!(st.sl2vl_gen, 2);
}

#[test]
fn ports_come_up_with_the_links_smaller_vlcap() {
    let mut st = fabric(4, 1);
    // Spine 0 port 1 (to leaf 0 port 2) with VLCap VL0-3.
    let i = st.sw_by_guid[&S0];
    set_vl_cap(st.switches[i].ports[1].info.as_mut().unwrap(), 3);
    let l0 = st.sw_by_guid[&L0];
    let p2 = st.switches[l0].ports[2].clone();
    assert_eq!(link_op_vls(&st, p2.info.as_ref().unwrap(), p2.peer), Some(3));
    let p3 = st.switches[l0].ports[3].clone();
    assert_eq!(link_op_vls(&st, p3.info.as_ref().unwrap(), p3.peer), Some(4));
    // Unknown peer: the port's own VLCap; reserved code: left alone.
    assert_eq!(link_op_vls(&st, p3.info.as_ref().unwrap(), None), Some(4));
    let mut bad = p3.info.clone().unwrap();
    set_vl_cap(&mut bad, 0);
    assert_eq!(link_op_vls(&st, &bad, p3.peer), None);
    // The CA's peer is its switch port.
    assert_eq!(ca_peer(&st, CA), Some(Peer::Switch { guid: L0, port: 1 }));
    // A port read back in INIT is armed with them (and the CA behind it).
    let mut info = st.switches[l0].ports[2].info.clone().unwrap();
    info.set_state(PortState::Down);
    st.switches[l0].ports[2].info = Some(info.clone());
    info.set_state(PortState::Init);
    let (mut ev, mut arm) = (Vec::new(), Vec::new());
    apply_port_reads(&mut st, vec![(L0, 2, info)], &mut ev, &mut arm);
    assert_eq!(arm.len(), 1);
    assert_eq!(arm[0].2.operational_vls(), 3);
    assert_eq!(arm[0].2.state(), PortState::Armed);
}

proptest! {
    /// The refusal and the capacity agree: a plan fits exactly when it needs no more VLs than
    /// the capacity (every port supports SL mapping here).
    #[test]
    fn capacity_agrees_with_refusal(codes in proptest::collection::vec(1u8..=5, 13), need in 1u8..=15) {
        let mut st = fabric(4, 4);
        let mut k = 0;
        for s in &mut st.switches {
            for r in s.ports.iter_mut().skip(1) {
                let i = r.info.as_mut().unwrap();
                set_vl_cap(i, codes[k % codes.len()]);
                i.set_operational_vls(codes[(k + 1) % codes.len()]);
                k += 1;
            }
        }
        set_vl_cap(&mut st.cas[0].info, codes[12]);
        let cap = capacity(&st).unwrap();
        prop_assert_eq!(check_capacity(&st, need).is_ok(), need <= cap);
    }
}
