//! A small subnet and MAD helpers shared by the registry tests.
#![allow(dead_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fabric_sa::records::{Gid, Record};
use fabric_sa::subnet::{Node, Port, SmData, NODE_DESC_SIZE, NODE_INFO_SIZE, PORT_INFO_SIZE};
use fabric_sa::wire::{self, SaHeader, MAD_SIZE, SA_HEADER_SIZE};
use fabric_sa::{Requester, SaResponse, SaService, Subnet};

pub const PREFIX: u64 = 0xfe80_0000_0000_0000;
pub const SWITCH_GUID: u64 = 0x0002_c900_0000_0100;
pub const SM_LID: u16 = 1;

/// GUID of CA `i` (LID `2 + i`).
pub fn ca_guid(i: usize) -> u64 {
    0x0002_c900_0000_0001 + i as u64
}
pub fn ca_lid(i: usize) -> u16 {
    2 + i as u16
}
pub fn gid(guid: u64) -> Gid {
    Gid::new(PREFIX, guid)
}

/// The component-mask bit of component `c`.
pub fn bit(c: u32) -> u64 {
    1 << c
}

fn node_info(node_type: u8, ports: u8, guid: u64) -> [u8; NODE_INFO_SIZE] {
    let mut n = [0u8; NODE_INFO_SIZE];
    n[0] = 1;
    n[1] = 1;
    n[2] = node_type;
    n[3] = ports;
    n[12..20].copy_from_slice(&guid.to_be_bytes());
    n[20..28].copy_from_slice(&guid.to_be_bytes());
    n
}

/// A PortInfo with LID `lid` and PortState `state` (4 = Active).
fn port_info(lid: u16, state: u8) -> [u8; PORT_INFO_SIZE] {
    let mut p = [0u8; PORT_INFO_SIZE];
    p[8..16].copy_from_slice(&PREFIX.to_be_bytes());
    p[16..18].copy_from_slice(&lid.to_be_bytes());
    p[18..20].copy_from_slice(&SM_LID.to_be_bytes());
    p[32] = state;
    p
}

/// One switch (port 0 LID 1, the SM's port) and `cas` CAs, CA `i` on switch port `i + 1`
/// with LID `2 + i`; CA `i` is Active unless listed in `down` (then Down, LID kept).
pub fn subnet(cas: usize, down: &[usize]) -> Subnet {
    let mut nodes = vec![Node {
        node_info: node_info(2, cas as u8, SWITCH_GUID),
        description: [0; NODE_DESC_SIZE],
        switch_info: Some([0; 20]),
        ports: (0..=cas as u32).collect(),
    }];
    let mut ports = vec![Port {
        node: 0,
        port_num: 0,
        guid: SWITCH_GUID,
        port_info: port_info(SM_LID, 4),
        peer: None,
    }];
    for i in 0..cas {
        let state = if down.contains(&i) { 1 } else { 4 };
        ports.push(Port {
            node: 0,
            port_num: i as u8 + 1,
            guid: SWITCH_GUID,
            port_info: port_info(SM_LID, state),
            peer: Some((1 + i as u32, 1)),
        });
    }
    for i in 0..cas {
        let state = if down.contains(&i) { 1 } else { 4 };
        nodes.push(Node {
            node_info: node_info(1, 1, ca_guid(i) + 0x1000),
            description: [0; NODE_DESC_SIZE],
            switch_info: None,
            ports: vec![(1 + cas + i) as u32].into(),
        });
        ports.push(Port {
            node: 1 + i as u32,
            port_num: 1,
            guid: ca_guid(i),
            port_info: port_info(ca_lid(i), state),
            peer: Some((0, i as u8 + 1)),
        });
    }
    let sm = SmData {
        guid: SWITCH_GUID,
        lid: SM_LID,
        priority: 0,
        state: 3,
        act_count: 0,
    };
    Subnet::new(nodes, ports, sm, None)
}

/// A serving SA over `subnet` (no persistence).
pub fn service(subnet: Subnet) -> SaService {
    let sa = SaService::new(Default::default(), None);
    sa.publish(subnet);
    sa.set_serving(true);
    sa
}

/// CA `i` as a requester (QP 1, no GRH).
pub fn from_ca(i: usize) -> Requester {
    Requester {
        lid: ca_lid(i),
        qpn: 1,
        sl: 0,
        pkey_index: 0,
        gid: None,
    }
}

pub fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_764_000_000)
}

/// An SA request MAD: `method` on `attr` with `mask` and the record image `data`.
pub fn mad(method: u8, attr: u16, mask: u64, data: &[u8]) -> [u8; MAD_SIZE] {
    let mut b = [0u8; MAD_SIZE];
    SaHeader {
        class_version: wire::SA_CLASS_VERSION,
        method,
        tid: 0x77,
        attr_id: attr,
        component_mask: mask,
        ..Default::default()
    }
    .encode(&mut b);
    b[SA_HEADER_SIZE..SA_HEADER_SIZE + data.len()].copy_from_slice(data);
    b
}

pub fn image<R: Record>(r: &R) -> Vec<u8> {
    let mut b = vec![0u8; R::SIZE];
    r.encode(&mut b);
    b
}

/// The records of an answer (`attr_offset * 8` bytes apart; one for a non-table answer).
pub fn records<R: Record>(resp: &SaResponse) -> Vec<R> {
    resp.data
        .chunks(R::SIZE)
        .filter(|c| c.len() == R::SIZE)
        .map(|c| R::decode(c).unwrap())
        .collect()
}
