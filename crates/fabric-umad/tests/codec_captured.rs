//! Decoders against byte images captured from ibsim (`fabric-umad-probe --capture`, on
//! `tests/data/net.2sw2path4hca` = Debian ibsim-utils `net-examples/net.2sw2path4hca`, client on
//! Hca1, before any configuration). Expected values come from the net file and from `smpquery`
//! on the same simulator, not from the decoders.

use fabric_umad::mad::*;

fn load(name: &str) -> Smp {
    let path = format!("{}/tests/data/smp/{name}.hex", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let bytes = parse_hex(&text).unwrap_or_else(|| panic!("{path}: bad hex"));
    assert_eq!(
        bytes.len(),
        232,
        "{path}: only the first 232 bytes of a reply are valid"
    );
    Smp::parse(&bytes).unwrap()
}

#[test]
fn headers_are_directed_route_get_responses() {
    let s = load("node_info_switch");
    assert_eq!(s.class(), CLASS_SMP_DR);
    assert_eq!(s.method(), METHOD_GET_RESP);
    assert_eq!(s.status(), 0);
    assert_eq!(s.attr_id(), ATTR_NODE_INFO);
    assert_eq!(s.hop_count(), 1);
    // The D bit (direction: response) is set in the raw status word.
    assert_eq!(s.bytes[4] & 0x80, 0x80);
    let p = load("port_info_switch_p1");
    assert_eq!((p.attr_id(), p.attr_mod()), (ATTR_PORT_INFO, 1));
}

#[test]
fn node_info_of_switch_and_ca() {
    let n = NodeInfo::decode(load("node_info_switch").data());
    // net file: `Switch 8 "Switch1"`; ibsim numbers switch GUIDs from 0x200000.
    assert_eq!(n.node_type, NODE_TYPE_SWITCH);
    assert_eq!(n.num_ports, 8);
    assert_eq!(n.node_guid, 0x20_0000);
    assert_eq!(n.port_guid, 0x20_0000);
    // Reached from Hca1 through Switch1 port 1.
    assert_eq!(n.local_port, 1);
    let c = NodeInfo::decode(load("node_info_ca").data());
    // `Hca 2 "Hca1"`: CA GUIDs from 0x100000, port GUID = node GUID + port.
    assert_eq!(c.node_type, NODE_TYPE_CA);
    assert_eq!(c.num_ports, 2);
    assert_eq!(c.node_guid, 0x10_0000);
    assert_eq!(c.port_guid, 0x10_0001);
    assert_eq!(c.local_port, 1);
}

#[test]
fn node_description() {
    assert_eq!(decode_node_desc(load("node_desc_switch").data()), "Switch1");
}

#[test]
fn port_info_before_configuration() {
    let ca = PortInfo::decode(load("port_info_ca").data());
    // smpquery portinfo: LinkState Initialize, PhysLinkState LinkUp, 4X, 2.5 Gbps, VL0-7, LMC 0.
    assert_eq!(ca.state(), PortState::Init);
    assert_eq!(ca.phys_state(), PHYS_LINK_UP);
    assert_eq!(ca.link_width_active(), 2);
    assert_eq!(ca.link_speed_active(), 1);
    assert_eq!(ca.speed_string().as_deref(), Some("4xSDR"));
    assert_eq!(ca.vl_cap(), 4);
    assert_eq!(ca.lid(), 0);
    assert_eq!(ca.lmc(), 0);
    assert_eq!(ca.local_port(), 1);
    // IsSM (bit 1) is set: the probe opened issm0.
    assert_ne!(ca.capability_mask() & 0x2, 0);
    let p0 = PortInfo::decode(load("port_info_switch_p0").data());
    // Switch port 0 (management port) is always ACTIVE.
    assert_eq!(p0.state(), PortState::Active);
    let p1 = PortInfo::decode(load("port_info_switch_p1").data());
    assert_eq!(p1.state(), PortState::Init);
    assert_eq!(p1.link_width_active(), 2);
}

#[test]
fn switch_info_lft_and_sl2vl() {
    let si = SwitchInfo::decode(load("switch_info").data());
    // ibsim prints MaxLinearCap = 30720 at start-up; LinearFDBTop starts at 0; the port state
    // change flag is set by the links coming up.
    assert_eq!(si.linear_fdb_cap(), 30720);
    assert_eq!(si.multicast_fdb_cap(), 1024);
    assert_eq!(si.linear_fdb_top(), 0);
    assert!(si.port_state_change());
    // `smpquery switchinfo` on ibsim: OptSLtoVLMapping 0, EnhancedPort0 0 (base port 0);
    // FilterRawInbound/Outbound 1 are the bits next to EnhancedPort0 in the same byte.
    assert!(!si.optimized_sl2vl());
    assert!(!si.enhanced_port0());
    assert_eq!(si.raw[16] & 0x30, 0x30, "FilterRaw bits of byte 16");
    // Switch port 0 CapMask 0xc048 (`smpquery portinfo`): IsSLMappingSupported (0x40) set.
    let p0 = PortInfo::decode(load("port_info_switch_p0").data());
    assert_ne!(p0.capability_mask() & CAP_SL_MAPPING, 0);
    let lft = load("lft_block0");
    assert_eq!(lft.attr_id(), ATTR_LFT);
    assert!(lft.data().iter().all(|&p| p == 0xff), "LFTs start as all 255");
    let t = SlToVl::decode(load("sl2vl_switch").data());
    assert_eq!(t.0, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 7]);
    assert_eq!(SlToVl::decode(&t.encode()), t);
}
