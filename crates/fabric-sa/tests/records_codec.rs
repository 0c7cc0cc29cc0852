//! Record codecs: encode → decode round trips, decoders never panic, the layouts of the
//! table-declared records are disjoint and inside the image, and hand-built images read at
//! the offsets of IBA 15.2.5 / OpenSM's `ib_types.h`.

use fabric_sa::records::*;
use proptest::prelude::*;

/// Round trip from arbitrary bytes: decode, encode, decode again gives the same record, and
/// the second encoding is the first one (encode is canonical: reserved bits zero).
fn round_trips<R: Record + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    let r = R::decode(bytes).expect("long enough");
    let mut once = vec![0xa5u8; R::SIZE];
    r.encode(&mut once);
    let again = R::decode(&once).expect("own image decodes");
    assert_eq!(again, r, "{}", R::NAME);
    let mut twice = vec![0x5au8; R::SIZE];
    again.encode(&mut twice);
    assert_eq!(twice, once, "{}", R::NAME);
}

/// Every field bit of `fields` survives decode → encode; every other bit is cleared.
fn fields_cover<R: Record>(fields: &[FieldSpec], bytes: &[u8]) {
    let r = R::decode(bytes).unwrap();
    let mut out = vec![0u8; R::SIZE];
    r.encode(&mut out);
    let mut covered = vec![0u8; R::SIZE];
    for f in fields {
        for i in f.start..f.start + f.width {
            covered[i / 8] |= 1 << (7 - i % 8);
        }
    }
    for i in 0..R::SIZE {
        assert_eq!(
            out[i],
            bytes[i] & covered[i],
            "{} byte {i}: fields keep their bits and only theirs",
            R::NAME
        );
    }
}

/// A short image is an error naming the record and both lengths; a MultiPathRecord needs
/// only its 24 fixed bytes (its GIDs are as many as the image holds).
fn decode_any<R: Record>(bytes: &[u8]) {
    let need = if R::ATTR == MultiPathRecord::ATTR {
        multi_path::FIXED_SIZE
    } else {
        R::SIZE
    };
    match R::decode(bytes) {
        Ok(_) => assert!(bytes.len() >= need, "{}", R::NAME),
        Err(e) => {
            assert!(bytes.len() < need);
            assert_eq!((e.len, e.need, e.record), (bytes.len(), need, R::NAME));
        }
    }
}

macro_rules! for_every_record {
    ($m:ident, $b:expr) => {
        $m::<ClassPortInfo>($b);
        $m::<NodeRecord>($b);
        $m::<PortInfoRecord>($b);
        $m::<SwitchInfoRecord>($b);
        $m::<LftRecord>($b);
        $m::<SmInfoRecord>($b);
        $m::<LinkRecord>($b);
        $m::<GuidInfoRecord>($b);
        $m::<McMemberRecord>($b);
        $m::<PathRecord>($b);
        $m::<MultiPathRecord>($b);
        $m::<ServiceRecord>($b);
        $m::<InformInfo>($b);
        $m::<InformInfoRecord>($b);
        $m::<Notice>($b);
    };
}

proptest! {
    #[test]
    fn every_record_round_trips(bytes in prop::collection::vec(any::<u8>(), 200..=256)) {
        for_every_record!(round_trips, &bytes);
    }

    /// GIDs print as IPv6 text like `inet_ntop` (std's formatter as the oracle), except the
    /// IPv4-embedded forms (first 80 bits zero), which no IB GID has.
    #[test]
    fn gid_text_is_ipv6_text(b in any::<[u8; 16]>(), zero_groups in any::<u8>()) {
        let mut b = b;
        for i in (0..8).filter(|i| zero_groups & (1 << i) != 0) {
            b[2 * i..2 * i + 2].fill(0);
        }
        prop_assume!(b[..10].iter().any(|&c| c != 0));
        prop_assert_eq!(Gid(b).to_string(), std::net::Ipv6Addr::from(b).to_string());
    }

    #[test]
    fn no_decoder_panics_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        for_every_record!(decode_any, &bytes);
        let _ = MultiPathRecord::decode_request(&bytes);
    }

    #[test]
    fn table_declared_fields_keep_exactly_their_bits(bytes in prop::collection::vec(any::<u8>(), 200)) {
        fields_cover::<ClassPortInfo>(ClassPortInfo::FIELDS, &bytes);
        fields_cover::<NodeRecord>(NodeRecord::FIELDS, &bytes);
        fields_cover::<PortInfoRecord>(PortInfoRecord::FIELDS, &bytes);
        fields_cover::<SwitchInfoRecord>(SwitchInfoRecord::FIELDS, &bytes);
        fields_cover::<LftRecord>(LftRecord::FIELDS, &bytes);
        fields_cover::<SmInfoRecord>(SmInfoRecord::FIELDS, &bytes);
        fields_cover::<LinkRecord>(LinkRecord::FIELDS, &bytes);
        fields_cover::<GuidInfoRecord>(GuidInfoRecord::FIELDS, &bytes);
        fields_cover::<McMemberRecord>(McMemberRecord::FIELDS, &bytes);
        fields_cover::<ServiceRecord>(ServiceRecord::FIELDS, &bytes);
        fields_cover::<InformInfo>(InformInfo::FIELDS, &bytes);
        fields_cover::<Notice>(Notice::FIELDS, &bytes);
    }

    /// A record matches itself under every mask, and a field changed in a selected
    /// component makes it a non-match.
    #[test]
    fn a_record_matches_itself_and_not_a_changed_lid(bytes in prop::collection::vec(any::<u8>(), 200), mask in any::<u64>()) {
        let n = NodeRecord::decode(&bytes).unwrap();
        prop_assert!(n.matches(&n, mask));
        let mut other = n.clone();
        other.node_guid ^= 1;
        prop_assert_eq!(n.matches(&other, mask), mask & (1 << 7) == 0);
        let p = PortInfoRecord::decode(&bytes).unwrap();
        prop_assert!(p.matches(&p, mask));
        let s = ServiceRecord::decode(&bytes).unwrap();
        prop_assert!(s.matches(&s, mask));
        let mut other = s.clone();
        other.service_data16[3] ^= 1;
        prop_assert_eq!(s.matches(&other, mask), mask & (1 << (23 + 3)) == 0);
        let i = InformInfoRecord::decode(&bytes).unwrap();
        prop_assert!(i.matches(&i, mask));
        let mut other = i.clone();
        other.inform_info.qpn ^= 1;
        prop_assert_eq!(i.matches(&other, mask), mask & (1 << 11) == 0);
        let r = PathRecord::decode(&bytes).unwrap();
        let mut t = r;
        // Exact selectors make the MTU/rate/lifetime tests equalities.
        t.mtu_selector = 2;
        t.rate_selector = 2;
        t.pkt_life_selector = 2;
        prop_assert!(r.matches(&t, mask));
    }
}

fn check_layout(name: &str, size: usize, fields: &[FieldSpec], components: u64) {
    let mut seen = vec![false; size * 8];
    for f in fields {
        assert!(f.start + f.width <= size * 8, "{name}.{} beyond {size} bytes", f.name);
        for (i, s) in seen.iter_mut().enumerate().skip(f.start).take(f.width) {
            assert!(!*s, "{name}.{} overlaps at bit {i}", f.name);
            *s = true;
        }
        if let Some(c) = f.component {
            assert!(components & (1 << c) != 0, "{name}.{}: component {c} outside", f.name);
        }
    }
}

#[test]
fn layouts_are_disjoint_and_inside_their_images() {
    check_layout(
        "ClassPortInfo",
        ClassPortInfo::SIZE,
        ClassPortInfo::FIELDS,
        ClassPortInfo::COMPONENTS,
    );
    check_layout(
        "NodeRecord",
        NodeRecord::SIZE,
        NodeRecord::FIELDS,
        NodeRecord::COMPONENTS,
    );
    check_layout(
        "PortInfoRecord",
        PortInfoRecord::SIZE,
        PortInfoRecord::FIELDS,
        PortInfoRecord::COMPONENTS,
    );
    check_layout(
        "SwitchInfoRecord",
        SwitchInfoRecord::SIZE,
        SwitchInfoRecord::FIELDS,
        SwitchInfoRecord::COMPONENTS,
    );
    check_layout("LftRecord", LftRecord::SIZE, LftRecord::FIELDS, LftRecord::COMPONENTS);
    check_layout(
        "SmInfoRecord",
        SmInfoRecord::SIZE,
        SmInfoRecord::FIELDS,
        SmInfoRecord::COMPONENTS,
    );
    check_layout(
        "LinkRecord",
        LinkRecord::SIZE,
        LinkRecord::FIELDS,
        LinkRecord::COMPONENTS,
    );
    check_layout(
        "GuidInfoRecord",
        GuidInfoRecord::SIZE,
        GuidInfoRecord::FIELDS,
        GuidInfoRecord::COMPONENTS,
    );
    check_layout(
        "McMemberRecord",
        McMemberRecord::SIZE,
        McMemberRecord::FIELDS,
        McMemberRecord::COMPONENTS,
    );
    check_layout(
        "ServiceRecord",
        ServiceRecord::SIZE,
        ServiceRecord::FIELDS,
        ServiceRecord::COMPONENTS,
    );
    check_layout(
        "InformInfo",
        InformInfo::SIZE,
        InformInfo::FIELDS,
        InformInfo::COMPONENTS,
    );
    check_layout("Notice", Notice::SIZE, Notice::FIELDS, Notice::COMPONENTS);
    // The PortInfoRecord has a field for every non-reserved component 0..=57.
    let comps: Vec<u32> = PortInfoRecord::FIELDS.iter().filter_map(|f| f.component).collect();
    let want: Vec<u32> = (0..58).filter(|c| ![19, 46, 51, 56].contains(c)).collect();
    assert_eq!(comps, want);
}

/// Sizes of IBA table 207 (padded to 8 bytes where the record is not a multiple of 8).
#[test]
fn sizes_and_attribute_ids_are_the_standard_ones() {
    let sizes = [
        (ClassPortInfo::ATTR, ClassPortInfo::SIZE),
        (NodeRecord::ATTR, NodeRecord::SIZE),
        (PortInfoRecord::ATTR, PortInfoRecord::SIZE),
        (SwitchInfoRecord::ATTR, SwitchInfoRecord::SIZE),
        (LftRecord::ATTR, LftRecord::SIZE),
        (SmInfoRecord::ATTR, SmInfoRecord::SIZE),
        (LinkRecord::ATTR, LinkRecord::SIZE),
        (GuidInfoRecord::ATTR, GuidInfoRecord::SIZE),
        (ServiceRecord::ATTR, ServiceRecord::SIZE),
        (PathRecord::ATTR, PathRecord::SIZE),
        (McMemberRecord::ATTR, McMemberRecord::SIZE),
        (MultiPathRecord::ATTR, MultiPathRecord::SIZE),
        (InformInfo::ATTR, InformInfo::SIZE),
        (InformInfoRecord::ATTR, InformInfoRecord::SIZE),
        (Notice::ATTR, Notice::SIZE),
    ];
    assert_eq!(
        sizes,
        [
            (0x01, 72),
            (0x11, 112),
            (0x12, 72),
            (0x14, 24),
            (0x15, 72),
            (0x18, 32),
            (0x20, 8),
            (0x30, 72),
            (0x31, 176),
            (0x35, 64),
            (0x38, 56),
            (0x3a, 200),
            (0x03, 36),
            (0xf3, 64),
            (0x02, 80),
        ]
    );
}

#[test]
fn node_record_reads_node_info_and_description_at_their_offsets() {
    let mut b = [0u8; 112];
    b[0..2].copy_from_slice(&[0x00, 0x2a]);
    b[4] = 1; // BaseVersion
    b[5] = 1; // ClassVersion
    b[6] = 2; // NodeType switch
    b[7] = 36; // NumPorts
    b[8..16].copy_from_slice(&0x1111u64.to_be_bytes());
    b[16..24].copy_from_slice(&0x2222u64.to_be_bytes());
    b[24..32].copy_from_slice(&0x3333u64.to_be_bytes());
    b[32..34].copy_from_slice(&[0, 8]);
    b[34..36].copy_from_slice(&[0xc7, 0x38]);
    b[36..40].copy_from_slice(&[0, 0, 0, 0xa1]);
    b[40] = 5; // LocalPortNum
    b[41..44].copy_from_slice(&[0x00, 0x02, 0xc9]);
    b[44..48].copy_from_slice(b"sw-1");
    let r = NodeRecord::decode(&b).unwrap();
    assert_eq!(r.lid, 42);
    assert_eq!(
        (r.base_version, r.class_version, r.node_type, r.num_ports),
        (1, 1, 2, 36)
    );
    assert_eq!((r.sys_guid, r.node_guid, r.port_guid), (0x1111, 0x2222, 0x3333));
    assert_eq!((r.partition_cap, r.device_id, r.revision), (8, 0xc738, 0xa1));
    assert_eq!((r.port_num, r.vendor_id), (5, 0x2c9));
    assert_eq!(r.node_description.text(), "sw-1");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["node_description"], "sw-1");
    assert_eq!(json["port_num"], 5);
}

#[test]
fn port_info_record_reads_the_packed_port_info_bits() {
    let mut b = [0u8; 72];
    b[0..2].copy_from_slice(&[0, 7]); // EndportLID
    b[2] = 3; // PortNum
    b[4 + 16..4 + 18].copy_from_slice(&[0, 7]); // LID
    b[4 + 18..4 + 20].copy_from_slice(&[0, 1]); // MasterSMLID
    b[4 + 20..4 + 24].copy_from_slice(&[0, 0, 0, 0x02]); // CapabilityMask IsSM
    b[4 + 32] = 0x54; // LinkSpeedSupported 5, PortState 4 (Active)
    b[4 + 33] = 0x52; // PortPhysState 5 (LinkUp), LinkDownDefault 2
    b[4 + 34] = 0x41; // M_KeyProtectBits 1, LMC 1
    b[4 + 36] = 0x5a; // NeighborMTU 5, MasterSMSL 10
    b[4 + 51] = 0x93; // ClientReregister 1, SubnetTimeout 0x13
    b[4 + 57..4 + 60].copy_from_slice(&[0x01, 0x02, 0x03]); // LinkRoundTripLatency
    let r = PortInfoRecord::decode(&b).unwrap();
    assert_eq!(
        (r.endport_lid, r.port_num, r.base_lid, r.master_sm_base_lid),
        (7, 3, 7, 1)
    );
    assert_eq!(r.capability_mask, CapMask(0x02));
    assert_eq!((r.link_speed_supported, r.port_state), (5, 4));
    assert_eq!((r.port_phys_state, r.link_down_def_state), (5, 2));
    assert_eq!((r.m_key_protect_bits, r.lmc), (1, 1));
    assert_eq!((r.neighbor_mtu, r.master_sm_sl), (5, 10));
    assert_eq!((r.client_reregister, r.subnet_timeout), (1, 0x13));
    assert_eq!(r.link_round_trip_latency, 0x010203);
    // CapabilityMask in a template selects the ports having all its bits (saquery -s).
    let mut t = PortInfoRecord {
        capability_mask: CapMask(0x02),
        ..Default::default()
    };
    assert!(r.matches(&t, 1 << 7));
    t.capability_mask = CapMask(0x06);
    assert!(!r.matches(&t, 1 << 7));
}

#[test]
fn class_port_info_is_opensms_with_our_capabilities() {
    let mut b = [0u8; 72];
    ClassPortInfo::sa().encode(&mut b);
    assert_eq!(&b[0..2], &[1, 2], "base version 1, class version 2");
    assert_eq!(
        &b[2..4],
        &[0x26, 0x00],
        "IsUDMulticastSupported | IsMultiPathSupported | IsPortInfoCapMaskMatchSupported"
    );
    // CapabilityMask2 bits 6 and 10 sit above the 5-bit RespTimeValue (16).
    assert_eq!(
        u32::from_be_bytes(b[4..8].try_into().unwrap()),
        ((1 << 6 | 1 << 10) << 5) | 16
    );
    assert_eq!(&b[32..36], &[0, 0, 0, 1], "redirect QP 1");
    assert_eq!(&b[36..40], &[0x80, 0x01, 0, 0], "redirect Q_Key");
    assert_eq!(&b[68..72], &[0x80, 0x01, 0, 0], "trap Q_Key");
    assert!(b[8..32].iter().chain(&b[40..68]).all(|&c| c == 0));
}

#[test]
fn notice_of_trap_64_carries_the_gid_in_its_details() {
    let gid = Gid::new(0xfe80_0000_0000_0000, 0x42);
    let sm = Gid::new(0xfe80_0000_0000_0000, 0x1);
    let n = Notice::gid_in_out_of_service(64, gid, 1, sm);
    let mut b = [0u8; 80];
    n.encode(&mut b);
    assert_eq!(b[0], 0x83, "generic, type subnet management");
    assert_eq!(&b[1..4], &[0, 0, 4], "producer: class manager");
    assert_eq!(&b[4..6], &[0, 64]);
    assert_eq!(&b[6..8], &[0, 1]);
    assert_eq!(&b[16..32], &gid.0, "DataDetails bytes 6..22");
    assert_eq!(&b[64..80], &sm.0);
    assert_eq!(Notice::decode(&b).unwrap().details_gid(), gid);
}

#[test]
fn inform_info_record_embeds_inform_info_at_24() {
    let mut b = [0u8; 64];
    b[15] = 9; // SubscriberGID
    b[16..18].copy_from_slice(&[0, 2]); // Enum
    b[24 + 15] = 7; // GID
    b[24 + 16..24 + 18].copy_from_slice(&[0xff, 0xff]); // LIDRangeBegin
    b[24 + 22] = 1; // IsGeneric
    b[24 + 23] = 1; // Subscribe
    b[24 + 24..24 + 26].copy_from_slice(&[0xff, 0xff]);
    b[24 + 26..24 + 28].copy_from_slice(&[0, 64]);
    b[24 + 28..24 + 32].copy_from_slice(&[0x00, 0x00, 0x12, 0x13]); // QPN 0x12, RTV 0x13
    b[24 + 33..24 + 36].copy_from_slice(&[0xff, 0xff, 0xff]);
    let r = InformInfoRecord::decode(&b).unwrap();
    assert_eq!((r.subscriber_gid.guid(), r.subscriber_enum), (9, 2));
    let i = &r.inform_info;
    assert_eq!(
        (i.gid.guid(), i.lid_range_begin, i.is_generic, i.subscribe),
        (7, 0xffff, 1, 1)
    );
    assert_eq!(
        (i.trap_type, i.trap_number, i.qpn, i.resp_time_value),
        (0xffff, 64, 0x12, 0x13)
    );
    assert_eq!(i.producer_type, 0xff_ffff);
}

#[test]
fn service_record_reads_name_lease_and_data() {
    let mut b = [0u8; 176];
    b[0..8].copy_from_slice(&0x1000_0000_0000_00aau64.to_be_bytes());
    b[23] = 5;
    b[24..26].copy_from_slice(&[0xff, 0xff]);
    b[28..32].copy_from_slice(&[0, 0, 0x0e, 0x10]);
    b[32] = 0xab;
    b[48..53].copy_from_slice(b"lustr");
    b[112] = 1;
    b[128..130].copy_from_slice(&[0, 2]);
    b[144..148].copy_from_slice(&[0, 0, 0, 3]);
    b[168..176].copy_from_slice(&4u64.to_be_bytes());
    let r = ServiceRecord::decode(&b).unwrap();
    assert_eq!(r.service_id, 0x1000_0000_0000_00aa);
    assert_eq!(
        (r.service_gid.guid(), r.service_pkey, r.service_lease),
        (5, 0xffff, 3600)
    );
    assert_eq!(r.service_key.0[0], 0xab);
    assert_eq!(r.service_name.text(), "lustr");
    assert_eq!(
        (r.service_data8[0], r.service_data16[0], r.service_data32[0]),
        (1, 2, 3)
    );
    assert_eq!(r.service_data64, [0, 4]);
    // The name is compared on all 64 bytes (OpenSM's memcmp in get_matching_sr).
    let mut t = r.clone();
    assert!(r.matches(&t, 1 << 6));
    t.service_name.0[40] = b'x';
    assert!(!r.matches(&t, 1 << 6), "bytes after the NUL count too");
    assert!(r.matches(&t, 1 << 0), "the name is not selected");
}
