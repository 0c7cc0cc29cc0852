//! `query::answer` through `SaService::handle` on a hand-built fabric (records_fixture):
//! which records each read-only attribute answers, component-mask selection, statuses.

mod records_fixture;

use fabric_sa::records::*;
use fabric_sa::wire::{self, attr, status, SA_HEADER_SIZE};
use fabric_sa::SaResponse;
use records_fixture::*;

const GET: u8 = wire::METHOD_GET;
const TABLE: u8 = wire::METHOD_GET_TABLE;

fn template<R: Record>(r: &R) -> Vec<u8> {
    let mut b = vec![0u8; R::SIZE];
    r.encode(&mut b);
    b
}

/// The records of an answer, checked to be AttributeOffset × 8 bytes apart.
fn records<R: Record>(resp: &SaResponse) -> Vec<R> {
    assert_eq!(resp.header.status, status::OK, "{resp:?}");
    if resp.data.is_empty() {
        return Vec::new();
    }
    assert_eq!(usize::from(resp.header.attr_offset) * 8, R::SIZE);
    assert_eq!(resp.data.len() % R::SIZE, 0);
    resp.data.chunks(R::SIZE).map(|c| R::decode(c).unwrap()).collect()
}

fn query<R: Record>(method: u8, mask: u64, t: &R) -> SaResponse {
    ask(&service(), &request(method, R::ATTR, 0, mask, &template(t)))
}

#[test]
fn node_records_one_per_ca_port_and_one_per_switch() {
    let resp = query(TABLE, 0, &NodeRecord::default());
    assert_eq!(resp.header.method, wire::METHOD_GET_TABLE_RESP);
    assert!(resp.is_rmpp());
    let nr: Vec<NodeRecord> = records(&resp);
    let mut seen: Vec<(u16, u64, u64, u8)> = nr
        .iter()
        .map(|r| (r.lid, r.node_guid, r.port_guid, r.port_num))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            (1, S1, S1, 0),
            (2, S2, S2, 0),
            (3, H1, H1 + 1, 1),
            (4, H2, H2 + 1, 1),
            (6, H2, H2 + 2, 2),
            (7, H3, H3 + 1, 1),
        ]
    );
    let s1 = nr.iter().find(|r| r.node_guid == S1).unwrap();
    assert_eq!((s1.node_type, s1.num_ports), (2, 4));
    assert_eq!(s1.node_description.text(), "S1");
}

#[test]
fn node_record_get_by_any_lid_of_the_lmc_range_answers_the_base_lid() {
    for lid in [4, 5] {
        let t = NodeRecord {
            lid,
            ..Default::default()
        };
        let resp = query(GET, 1, &t);
        assert_eq!(resp.header.method, wire::METHOD_GET_RESP);
        let r: Vec<NodeRecord> = records(&resp);
        assert_eq!((r[0].lid, r[0].port_guid, r[0].port_num), (4, H2 + 1, 1));
    }
}

#[test]
fn get_matching_none_is_no_records_and_several_too_many_with_the_request_echoed() {
    let none = NodeRecord {
        lid: 99,
        ..Default::default()
    };
    let resp = query(GET, 1, &none);
    assert_eq!(resp.header.status, status::NO_RECORDS);
    assert_eq!(resp.header.method, wire::METHOD_GET_RESP);
    assert_eq!(&resp.data[..2], &[0, 99], "the template is echoed");
    let h2 = NodeRecord {
        node_guid: H2,
        ..Default::default()
    };
    let resp = query(GET, 1 << 7, &h2);
    assert_eq!(resp.header.status, status::TOO_MANY_RECORDS, "H2 has two ports");
    let table: Vec<NodeRecord> = records(&query(TABLE, 1 << 7, &h2));
    assert_eq!(table.len(), 2);
}

#[test]
fn an_empty_table_is_a_get_table_resp_with_status_ok_and_no_records() {
    let t = NodeRecord {
        node_guid: 0xdead,
        ..Default::default()
    };
    let resp = query(TABLE, 1 << 7, &t);
    assert_eq!(resp.header.method, wire::METHOD_GET_TABLE_RESP);
    assert_eq!(resp.header.status, status::OK);
    assert!(resp.data.is_empty());
    assert_eq!(resp.header.attr_offset, 0);
}

#[test]
fn node_records_select_by_type_port_guid_and_description() {
    let cas: Vec<NodeRecord> = records(&query(
        TABLE,
        1 << 4,
        &NodeRecord {
            node_type: 1,
            ..Default::default()
        },
    ));
    assert_eq!(cas.len(), 4);
    let by_port: Vec<NodeRecord> = records(&query(
        GET,
        1 << 8,
        &NodeRecord {
            port_guid: H2 + 2,
            ..Default::default()
        },
    ));
    assert_eq!((by_port[0].lid, by_port[0].port_num), (6, 2));
    let mut t = NodeRecord::default();
    t.node_description.0[..9].copy_from_slice(b"H3 mlx5_0");
    let by_desc: Vec<NodeRecord> = records(&query(GET, 1 << 14, &t));
    assert_eq!(by_desc[0].node_guid, H3);
}

#[test]
fn port_info_records_cover_switch_external_ports_with_the_switch_lid() {
    let t = PortInfoRecord {
        endport_lid: 2,
        ..Default::default()
    };
    let pir: Vec<PortInfoRecord> = records(&query(TABLE, 1, &t));
    let ports: Vec<(u16, u8, u16)> = pir.iter().map(|r| (r.endport_lid, r.port_num, r.base_lid)).collect();
    assert_eq!(ports, [(2, 0, 2), (2, 1, 2), (2, 2, 2), (2, 3, 2), (2, 4, 2)]);
    assert!(pir.iter().all(|r| r.m_key == 0), "the M_Key is never answered");
    let all: Vec<PortInfoRecord> = records(&query(TABLE, 0, &PortInfoRecord::default()));
    assert_eq!(all.len(), 14);
    let one: Vec<PortInfoRecord> = records(&query(
        GET,
        0b11,
        &PortInfoRecord {
            endport_lid: 5,
            port_num: 1,
            ..Default::default()
        },
    ));
    assert_eq!((one[0].endport_lid, one[0].lmc, one[0].port_state), (4, 1, 4));
}

#[test]
fn port_info_capability_mask_is_bitwise_only_with_attribute_modifier_bit_31() {
    let t = PortInfoRecord {
        capability_mask: CapMask(0x2),
        ..Default::default()
    };
    let sa = service();
    let exact = ask(&sa, &request(TABLE, attr::PORT_INFO_RECORD, 0, 1 << 7, &template(&t)));
    assert!(
        records::<PortInfoRecord>(&exact).is_empty(),
        "no port has exactly IsSM alone"
    );
    let bitwise = ask(
        &sa,
        &request(TABLE, attr::PORT_INFO_RECORD, 1 << 31, 1 << 7, &template(&t)),
    );
    let sms: Vec<PortInfoRecord> = records(&bitwise);
    assert_eq!(sms.iter().map(|r| r.endport_lid).collect::<Vec<_>>(), [7], "saquery -s");
}

#[test]
fn link_speed_ext_components_select_only_among_ports_with_extended_speeds() {
    // No port of the fixture has IsExtendedSpeedsSupported: LinkSpeedExtActive 5 selects none
    // out, as OpenSM.
    let t = PortInfoRecord {
        link_speed_ext_active: 5,
        ..Default::default()
    };
    let all: Vec<PortInfoRecord> = records(&query(TABLE, 1 << 54, &t));
    assert_eq!(all.len(), 14);
    // LinkSpeedActive (no such condition) does select.
    let t = PortInfoRecord {
        link_speed_active: 5,
        ..Default::default()
    };
    assert!(records::<PortInfoRecord>(&query(TABLE, 1 << 21, &t)).is_empty());
}

#[test]
fn switch_info_records_by_lid() {
    let all: Vec<SwitchInfoRecord> = records(&query(TABLE, 0, &SwitchInfoRecord::default()));
    assert_eq!(all.iter().map(|r| r.lid).collect::<Vec<_>>(), [1, 2]);
    let s2: Vec<SwitchInfoRecord> = records(&query(
        GET,
        1,
        &SwitchInfoRecord {
            lid: 2,
            ..Default::default()
        },
    ));
    assert_eq!((s2[0].linear_fdb_cap, s2[0].linear_fdb_top), (49152, 7));
}

#[test]
fn lft_records_are_the_installed_blocks_up_to_linear_fdb_top() {
    let t = LftRecord {
        lid: 1,
        ..Default::default()
    };
    let blocks: Vec<LftRecord> = records(&query(TABLE, 1, &t));
    assert_eq!(blocks.len(), 1, "top 7: block 0 only");
    assert_eq!(&blocks[0].lft.0[..8], &[0xff, 0, 3, 1, 2, 2, 3, 3]);
    assert!(blocks[0].lft.0[8..].iter().all(|&p| p == 0xff));
    let all: Vec<LftRecord> = records(&query(TABLE, 0, &LftRecord::default()));
    assert_eq!(
        all.iter().map(|r| (r.lid, r.block_num)).collect::<Vec<_>>(),
        [(1, 0), (2, 0)]
    );
    let beyond = query(
        GET,
        0b11,
        &LftRecord {
            lid: 2,
            block_num: 1,
            ..Default::default()
        },
    );
    assert_eq!(beyond.header.status, status::NO_RECORDS);
}

#[test]
fn sm_info_record_is_the_master_without_its_key() {
    let r: Vec<SmInfoRecord> = records(&query(GET, 0, &SmInfoRecord::default()));
    assert_eq!(
        r,
        [SmInfoRecord {
            lid: 7,
            guid: H3 + 1,
            sm_key: 0,
            act_count: 99,
            priority: 14,
            sm_state: 3,
        }]
    );
    let other = query(
        GET,
        1 << 2,
        &SmInfoRecord {
            guid: 5,
            ..Default::default()
        },
    );
    assert_eq!(other.header.status, status::NO_RECORDS);
}

#[test]
fn link_records_both_directions_of_every_live_link() {
    let all: Vec<LinkRecord> = records(&query(TABLE, 0, &LinkRecord::default()));
    let mut links: Vec<(u16, u8, u8, u16)> = all
        .iter()
        .map(|r| (r.from_lid, r.from_port_num, r.to_port_num, r.to_lid))
        .collect();
    links.sort();
    assert_eq!(
        links,
        [
            (1, 1, 1, 3),
            (1, 2, 1, 4),
            (1, 3, 3, 2),
            (2, 1, 2, 6),
            (2, 2, 1, 7),
            (2, 3, 3, 1),
            (3, 1, 1, 1),
            (4, 1, 2, 1),
            (6, 2, 1, 2),
            (7, 1, 2, 2),
        ]
    );
    let from_s1: Vec<LinkRecord> = records(&query(
        TABLE,
        1,
        &LinkRecord {
            from_lid: 1,
            ..Default::default()
        },
    ));
    assert_eq!(from_s1.len(), 3);
    let to_h2: Vec<LinkRecord> = records(&query(
        GET,
        1 << 3,
        &LinkRecord {
            to_lid: 5,
            ..Default::default()
        },
    ));
    assert_eq!((to_h2[0].from_lid, to_h2[0].from_port_num), (1, 2));
}

#[test]
fn guid_info_block_0_is_the_port_guid() {
    let r: Vec<GuidInfoRecord> = records(&query(
        GET,
        1,
        &GuidInfoRecord {
            lid: 6,
            ..Default::default()
        },
    ));
    assert_eq!((r[0].lid, r[0].block_num, r[0].guid0, r[0].guid1), (6, 0, H2 + 2, 0));
    let all: Vec<GuidInfoRecord> = records(&query(TABLE, 0, &GuidInfoRecord::default()));
    assert_eq!(all.len(), 6);
    let block1 = query(
        TABLE,
        0b10,
        &GuidInfoRecord {
            block_num: 1,
            ..Default::default()
        },
    );
    assert!(records::<GuidInfoRecord>(&block1).is_empty());
}

#[test]
fn mc_member_records_are_an_empty_table_without_groups_and_a_join_needs_its_components() {
    let resp = query(TABLE, 0, &McMemberRecord::default());
    assert_eq!(resp.header.status, status::OK);
    assert!(resp.data.is_empty());
    // MGID and PortGID without JoinState (the joins themselves: tests/mcast_join.rs).
    let join = query(wire::METHOD_SET, 0b11, &McMemberRecord::default());
    assert_eq!(join.header.status, status::INSUFFICIENT_COMPONENTS);
    assert_eq!(join.header.method, wire::METHOD_GET_RESP);
}

#[test]
fn set_and_delete_on_read_only_records_are_unsupported_method_attribute() {
    let set = query(wire::METHOD_SET, 1, &NodeRecord::default());
    assert_eq!((set.header.method, set.header.status), (0x81, 0x000c));
    let del = query(wire::METHOD_DELETE, 1, &LinkRecord::default());
    assert_eq!((del.header.method, del.header.status), (0x95, 0x000c));
    let multi = query(wire::METHOD_GET_MULTI, 0, &NodeRecord::default());
    assert_eq!((multi.header.method, multi.header.status), (0x94, 0x000c));
}

#[test]
fn component_bits_beyond_the_record_are_req_invalid() {
    let resp = query(TABLE, 1 << 15, &NodeRecord::default());
    assert_eq!(resp.header.status, status::REQ_INVALID);
    assert_eq!(resp.header.method, wire::METHOD_GET_TABLE_RESP);
    let resp = query(TABLE, 1 << 4, &LinkRecord::default());
    assert_eq!(resp.header.status, status::REQ_INVALID);
    // Reserved components are components: selecting them is valid (and matches all).
    let resp = query(TABLE, 1 << 1, &NodeRecord::default());
    assert_eq!(records::<NodeRecord>(&resp).len(), 6);
}

#[test]
fn a_template_shorter_than_the_record_is_req_invalid() {
    let mut mad = request(GET, attr::NODE_RECORD, 0, 1, &[0, 3]);
    mad.truncate(SA_HEADER_SIZE + 100);
    let resp = ask(&service(), &mad);
    assert_eq!(resp.header.status, status::REQ_INVALID);
    assert_eq!(resp.data.len(), 100, "the request is echoed");
}

#[test]
fn class_port_info_answers_get_only() {
    let sa = service();
    let resp = ask(&sa, &request(GET, attr::CLASS_PORT_INFO, 0, 0, &[]));
    let cpi: Vec<ClassPortInfo> = records(&resp);
    assert_eq!(cpi, [ClassPortInfo::sa()]);
    let resp = ask(&sa, &request(TABLE, attr::CLASS_PORT_INFO, 0, 0, &[]));
    assert_eq!(resp.header.status, status::UNSUPPORTED_METHOD_ATTR);
}

#[test]
fn unknown_attributes_are_unsupported_method_attribute() {
    let sa = service();
    for a in [attr::SL_TO_VL_RECORD, attr::TRACE_RECORD, 0x7777] {
        let resp = ask(&sa, &request(GET, a, 0, 0, &[]));
        assert_eq!(resp.header.status, status::UNSUPPORTED_METHOD_ATTR, "attribute {a:#x}");
        assert_eq!(resp.header.attr_id, a);
    }
    let counters = sa.counters();
    assert_eq!(
        counters
            .answers
            .get(&(attr::SL_TO_VL_RECORD, GET, status::UNSUPPORTED_METHOD_ATTR)),
        Some(&1)
    );
}

#[test]
fn answers_carry_the_transaction_id_and_sm_key_zero() {
    let mut mad = request(
        GET,
        attr::NODE_RECORD,
        0,
        1,
        &template(&NodeRecord {
            lid: 3,
            ..Default::default()
        }),
    );
    mad[36..44].copy_from_slice(&0x1122u64.to_be_bytes());
    let resp = ask(&service(), &mad);
    assert_eq!(resp.header.tid, 0x5a5a_0001);
    assert_eq!(resp.header.sm_key, 0);
    assert_eq!(resp.header.status, status::OK);
}
