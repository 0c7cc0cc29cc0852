//! Subnet management packets (SMPs): the 256-byte MAD image, directed-route and LID-routed
//! addressing, and the attributes the subnet manager reads and writes (NodeInfo,
//! NodeDescription, PortInfo, SwitchInfo, LinearForwardingTable, SLtoVLMappingTable, Notice).
//!
//! Offsets follow the InfiniBand Architecture Specification vol. 1 ch. 14 (cross-checked against
//! `smpquery` on ibsim, see `tests/data/*.hex`). Decoders take the 64 attribute-data bytes and
//! never panic; encoders write into a 64-byte buffer.
//!
//! Layout: `smp` (header constants, [`Route`], [`Smp`], hex images), `attr` (the attributes),
//! `tables` (MFT and P_Key blocks, M_Key and partition enforcement fields), `perf`
//! (Performance Management GMPs: PortCounters, PortCountersExtended, ClassPortInfo),
//! `bytes` (big-endian field access). Everything is re-exported here: `crate::mad::*` is the
//! codec's one path.

mod attr;
mod bytes;
mod perf;
mod smp;
mod tables;

pub use attr::*;
pub use perf::*;
pub use smp::*;
pub use tables::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directed_route_request_layout() {
        let d = [0u8; SMP_DATA_SIZE];
        let mut s = Smp::request(&Route::Directed(vec![1, 5, 3]), METHOD_GET, ATTR_PORT_INFO, 7, &d).unwrap();
        s.set_tid(0x1122_3344_5566_7788);
        let b = &s.bytes;
        assert_eq!(&b[0..4], &[1, 0x81, 1, 1]);
        assert_eq!(b[6], 0);
        assert_eq!(b[7], 3);
        assert_eq!(&b[8..16], &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]);
        assert_eq!(&b[16..18], &[0x00, 0x15]);
        assert_eq!(&b[20..24], &[0, 0, 0, 7]);
        assert_eq!(&b[32..36], &[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(&b[128..133], &[0, 1, 5, 3, 0]);
        assert!(Smp::request(&Route::Directed(vec![1; 64]), METHOD_GET, 0x11, 0, &d).is_err());
    }

    #[test]
    fn lid_routed_request_has_no_dr_fields() {
        let d = [0u8; SMP_DATA_SIZE];
        let s = Smp::request(&Route::Lid(9), METHOD_SET, ATTR_LFT, 2, &d).unwrap();
        assert_eq!(s.class(), CLASS_SMP_LID);
        assert_eq!(s.hop_count(), 0);
        assert_eq!(&s.bytes[32..36], &[0, 0, 0, 0]);
    }

    #[test]
    fn dr_status_masks_direction_bit() {
        let d = [0u8; SMP_DATA_SIZE];
        let mut s = Smp::request(&Route::Directed(vec![]), METHOD_GET, 0x11, 0, &d).unwrap();
        s.bytes[4] = 0x80;
        s.bytes[5] = 0x1c;
        assert_eq!(s.status(), 0x1c);
        assert!(Smp::parse(&s.bytes[..100]).is_err());
        let mut bad = s.bytes;
        bad[1] = 0x04;
        assert!(matches!(Smp::parse(&bad), Err(MadError::NotSmp { class: 4, .. })));
    }

    #[test]
    fn sm_info_layout_and_lid_response() {
        let i = SmInfo {
            guid: 0x0002_c980_0000_0001,
            sm_key: 0,
            act_count: 0x0102_0304,
            priority: 14,
            state: SM_STATE_MASTER,
        };
        let d = i.encode();
        // Byte offsets of IBA 14.2.5.13, written out by hand.
        assert_eq!(&d[0..8], &[0x00, 0x02, 0xc9, 0x80, 0, 0, 0, 0x01]);
        assert_eq!(&d[16..20], &[1, 2, 3, 4]);
        assert_eq!(d[20], 0xe3);
        assert_eq!(SmInfo::decode(&d), i);
        let mut req = Smp::request(&Route::Lid(2), METHOD_GET, ATTR_SM_INFO, 0, &[0; SMP_DATA_SIZE]).unwrap();
        req.set_tid(0xdead_beef_0000_0042);
        assert!(req.is_request());
        let r = req.lid_response(0, &d);
        assert!(!r.is_request());
        assert_eq!(r.method(), METHOD_GET_RESP);
        assert_eq!(r.tid(), 0xdead_beef_0000_0042);
        assert_eq!(r.attr_id(), ATTR_SM_INFO);
        assert_eq!(r.data()[20], 0xe3);
        let e = req.lid_response(STATUS_UNSUPPORTED_ATTR, &[0; SMP_DATA_SIZE]);
        assert_eq!(e.status(), 0x0c);
    }

    /// Trap 128 (a port state changed) issued by the switch of LID 5.
    fn trap_128() -> Notice {
        Notice {
            generic: true,
            notice_type: 1,
            producer: 2,
            trap_number: 128,
            issuer_lid: 5,
            toggle_count: 0,
            lid_addr: 5,
        }
    }

    #[test]
    fn trap_repress_layout() {
        // Trap 128 from a switch, as ibsim sends it: class 0x01, method Trap (0x05), TID 0,
        // attribute Notice (0x0002).
        let n = trap_128();
        let mut b = [0u8; MAD_SIZE];
        b[..4].copy_from_slice(&[1, CLASS_SMP_LID, 1, METHOD_TRAP]);
        b[8..16].copy_from_slice(&0x0000_0000_0000_0abcu64.to_be_bytes());
        b[17] = 0x02;
        b[64..128].copy_from_slice(&n.encode());
        let trap = Smp::parse(&b).unwrap();
        let r = trap.trap_repress();
        // Method 0x07, everything else as received (TID, attribute, notice).
        assert_eq!(&r.bytes[..4], &[1, 1, 1, 0x07]);
        assert_eq!(&r.bytes[4..], &b[4..]);
        assert!(!r.is_request());
    }

    #[test]
    fn node_info_round_trip() {
        let n = NodeInfo {
            node_type: 2,
            num_ports: 36,
            system_image_guid: 0xaa,
            node_guid: 0x0002_c903_0000_1234,
            port_guid: 0x0002_c903_0000_1234,
            partition_cap: 8,
            device_id: 0xc738,
            revision: 0xa1,
            local_port: 17,
            vendor_id: 0x2c9,
        };
        assert_eq!(NodeInfo::decode(&n.encode()), n);
    }

    #[test]
    fn optimized_sl2vl_and_enhanced_port0_bits() {
        // SwitchInfo byte 11 = LifeTimeValue(5) | PortStateChange(1) | OptSLtoVLMapping(2),
        // byte 16 = InboundEnf | OutboundEnf | FilterRawIn | FilterRawOut | EnhancedPort0 | 0.
        let mut raw = [0u8; SMP_DATA_SIZE];
        raw[11] = (0x13 << 3) | 0x04;
        raw[16] = 0xf0;
        let si = SwitchInfo::decode(&raw);
        assert!(!si.optimized_sl2vl() && !si.enhanced_port0());
        assert_eq!(si.life_time_value(), 0x13);
        raw[11] |= 0x01;
        raw[16] |= 0x08;
        let si = SwitchInfo::decode(&raw);
        assert!(si.optimized_sl2vl() && si.enhanced_port0());
        assert!(si.port_state_change());
    }

    #[test]
    fn sl2vl_set_image_and_modifiers() {
        // SL 1 on VL 1, every other SL on VL 0: byte 0 = SL0<<4 | SL1.
        let d = SlToVl::escape(1).encode();
        assert_eq!(&d[..8], &[0x01, 0, 0, 0, 0, 0, 0, 0]);
        assert!(d[8..].iter().all(|&b| b == 0));
        let d = SlToVl::escape(7).encode();
        assert_eq!(d[0], 0x07);
        // Modifier: output port in bits 0-7, input port in bits 8-15; OpenSM's all-pairs Set
        // is 0x30000 and its "every input port to output p" Set is 0x20000 | p.
        assert_eq!(SlToVl::switch_modifier(0, 36), 0x0024);
        assert_eq!(SlToVl::switch_modifier(36, 1), 0x2401);
        assert_eq!(SlToVl::all_ports_modifier(), 0x0003_0000);
        assert_eq!(SL2VL_ALL_INPUT_PORTS | 5, 0x0002_0005);
        assert_eq!(CAP_SL_MAPPING, 0x40);
        // The whole request as it goes on the wire: Set, attribute 0x0017, modifier 0x30000.
        let s = Smp::request(
            &Route::Directed(vec![1, 3]),
            METHOD_SET,
            ATTR_SL2VL,
            SlToVl::all_ports_modifier(),
            &SlToVl::escape(1).encode(),
        )
        .unwrap();
        assert_eq!(&s.bytes[16..18], &[0x00, 0x17]);
        assert_eq!(&s.bytes[20..24], &[0x00, 0x03, 0x00, 0x00]);
        assert_eq!(s.bytes[3], METHOD_SET);
        assert_eq!(s.bytes[64], 0x01);
    }

    #[test]
    fn port_info_fields() {
        let mut p = PortInfo::decode(&[0u8; 64]);
        p.set_lid(0x1234);
        p.set_master_sm_lid(7);
        p.set_lmc(1);
        p.set_state(PortState::Armed);
        p.set_phys_state(PHYS_DISABLED);
        assert_eq!(&p.raw[16..20], &[0x12, 0x34, 0, 7]);
        assert_eq!(p.raw[32] & 0x0f, 3);
        assert_eq!(p.raw[33] >> 4, 3);
        assert_eq!(p.raw[34] & 7, 1);
        let q = p.for_set();
        assert_eq!(q.state(), PortState::NoChange);
        assert_eq!(q.phys_state(), 0);
        assert_eq!(q.lid(), 0x1234);
    }

    #[test]
    fn sl2vl_and_notice_round_trip() {
        let t = SlToVl([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
        let e = t.encode();
        assert_eq!(&e[..8], &[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]);
        assert_eq!(SlToVl::decode(&e), t);
        assert_eq!(SlToVl::switch_modifier(3, 5), 0x0305);
        let n = trap_128();
        let d = n.encode();
        assert_eq!(&d[..12], &[0x81, 0, 0, 2, 0, 128, 0, 5, 0, 0, 0, 5]);
        assert_eq!(Notice::decode(&d), n);
    }

    #[test]
    fn hex_round_trip() {
        let b: Vec<u8> = (0..=255u8).collect();
        assert_eq!(parse_hex(&to_hex(&b)).unwrap(), b);
        assert!(parse_hex("abc").is_none());
        assert!(parse_hex("zz").is_none());
    }

    #[test]
    fn debug_shows_accessor_values() {
        let smp = Smp::request(&Route::Lid(3), METHOD_GET, ATTR_PORT_INFO, 2, &[0; SMP_DATA_SIZE]).unwrap();
        assert_eq!(
            format!("{smp:?}"),
            "Smp { class: 1, method: 1, status: 0, attr: 21, modifier: 2, tid: 0 }"
        );
        let mut p = PortInfo::decode(&[0; SMP_DATA_SIZE]);
        p.set_lid(7);
        p.set_state(PortState::Active);
        assert_eq!(
            format!("{p:?}"),
            "PortInfo { lid: 7, master_sm_lid: 0, lmc: 0, state: Active, phys_state: 0, width_active: 0, speed_active: 0 }"
        );
        let s = SwitchInfo::decode(&[0; SMP_DATA_SIZE]);
        assert_eq!(
            format!("{s:?}"),
            "SwitchInfo { linear_fdb_cap: 0, linear_fdb_top: 0, port_state_change: false }"
        );
    }
}
