//! A small hand-built fabric for the query and fuzz tests, and request builders.
//!
//! ```text
//!   H1 (LID 3) ── 1 S1 (LID 1) 3 ══ 3 S2 (LID 2) 2 ── H3 (LID 7, the SM)
//!   H2 port 1 (LIDs 4-5, LMC 1) ── 2 S1        S2 1 ── H2 port 2 (LID 6)
//!   S1 port 4 and S2 port 4: no cable
//! ```

#![allow(dead_code)]

use std::time::SystemTime;

use fabric_sa::registry::Registry;
use fabric_sa::subnet::{Node, Port, SmData};
use fabric_sa::wire::{SaHeader, MAD_SIZE, SA_CLASS_VERSION, SA_HEADER_SIZE};
use fabric_sa::{LftTable, Requester, SaResponse, SaService, Subnet};

pub const S1: u64 = 0x100;
pub const S2: u64 = 0x200;
pub const H1: u64 = 0x1000;
pub const H2: u64 = 0x2000;
pub const H3: u64 = 0x3000;

/// CapabilityMask of the SM's port (IsSM) and of the others.
pub const CAP_SM: u32 = 0x0000_0002 | 0x0001_0000;
pub const CAP_CA: u32 = 0x0001_0000;

fn node_info(node_type: u8, ports: u8, guid: u64, port_guid: u64, local_port: u8) -> [u8; 40] {
    let mut b = [0u8; 40];
    b[0] = 1;
    b[1] = 1;
    b[2] = node_type;
    b[3] = ports;
    b[4..12].copy_from_slice(&guid.to_be_bytes());
    b[12..20].copy_from_slice(&guid.to_be_bytes());
    b[20..28].copy_from_slice(&port_guid.to_be_bytes());
    b[28..30].copy_from_slice(&[0, 8]);
    b[30..32].copy_from_slice(&[0xc7, 0x38]);
    b[32..36].copy_from_slice(&[0, 0, 0, 1]);
    b[36] = local_port;
    b[37..40].copy_from_slice(&[0x00, 0x02, 0xc9]);
    b
}

fn description(text: &str) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[..text.len()].copy_from_slice(text.as_bytes());
    b
}

fn port_info(lid: u16, lmc: u8, port_num: u8, cap: u32, active: bool) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[0..8].copy_from_slice(&0x1234u64.to_be_bytes()); // an M_Key the SA must not answer
    b[8..16].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
    b[16..18].copy_from_slice(&lid.to_be_bytes());
    b[18..20].copy_from_slice(&7u16.to_be_bytes());
    b[20..24].copy_from_slice(&cap.to_be_bytes());
    b[32] = (1 << 4) | if active { 4 } else { 1 };
    b[33] = if active { 5 << 4 } else { 3 << 4 } | 2;
    b[34] = lmc & 7;
    b[35] = (1 << 4) | 1;
    b[36] = 5 << 4;
    b[28] = port_num; // LocalPortNum
    b
}

fn switch_info(top: u16) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[0..2].copy_from_slice(&49152u16.to_be_bytes());
    b[6..8].copy_from_slice(&top.to_be_bytes());
    b[10..12].copy_from_slice(&1u16.to_be_bytes());
    b
}

/// The fabric of the module documentation.
pub fn subnet() -> Subnet {
    let sw = |guid: u64, name: &str, top: u16, first: u32| Node {
        node_info: node_info(2, 4, guid, guid, 0),
        description: description(name),
        switch_info: Some(switch_info(top)),
        ports: (first..first + 5).collect(),
    };
    let ca = |guid: u64, name: &str, ports: Vec<u32>| Node {
        node_info: node_info(1, ports.len() as u8, guid, guid + 1, 1),
        description: description(name),
        switch_info: None,
        ports: ports.into(),
    };
    let nodes = vec![
        sw(S1, "S1", 7, 0),
        sw(S2, "S2", 7, 5),
        ca(H1, "H1 mlx5_0", vec![10]),
        ca(H2, "H2 mlx5_0", vec![11, 12]),
        ca(H3, "H3 mlx5_0", vec![13]),
    ];
    let port = |node: u32, num: u8, guid: u64, pi: [u8; 64], peer: Option<(u32, u8)>| Port {
        node,
        port_num: num,
        guid,
        port_info: pi,
        peer,
    };
    let swp = |node: u32, guid: u64, lid: u16, num: u8, peer: Option<(u32, u8)>| {
        port(
            node,
            num,
            guid,
            port_info(lid, 0, num, CAP_CA, peer.is_some() || num == 0),
            peer,
        )
    };
    let ports = vec![
        swp(0, S1, 1, 0, None),
        swp(0, S1, 1, 1, Some((2, 1))),
        swp(0, S1, 1, 2, Some((3, 1))),
        swp(0, S1, 1, 3, Some((1, 3))),
        swp(0, S1, 1, 4, None),
        swp(1, S2, 2, 0, None),
        swp(1, S2, 2, 1, Some((3, 2))),
        swp(1, S2, 2, 2, Some((4, 1))),
        swp(1, S2, 2, 3, Some((0, 3))),
        swp(1, S2, 2, 4, None),
        port(2, 1, H1 + 1, port_info(3, 0, 1, CAP_CA, true), Some((0, 1))),
        port(3, 1, H2 + 1, port_info(4, 1, 1, CAP_CA, true), Some((0, 2))),
        port(3, 2, H2 + 2, port_info(6, 0, 2, CAP_CA, true), Some((1, 1))),
        port(4, 1, H3 + 1, port_info(7, 0, 1, CAP_SM, true), Some((1, 2))),
    ];
    let sm = SmData {
        guid: H3 + 1,
        lid: 7,
        priority: 14,
        state: 3,
        act_count: 99,
    };
    let mut s = Subnet::new(nodes, ports, sm, None);
    s.set_lft(0, Some(LftTable::from_slice(&[0xff, 0, 3, 1, 2, 2, 3, 3])));
    s.set_lft(1, Some(LftTable::from_slice(&[0xff, 3, 0, 3, 3, 3, 1, 2])));
    s
}

/// A serving SA over [`subnet`].
pub fn service() -> SaService {
    let sa = SaService::new(Registry::default(), None);
    sa.publish(subnet());
    sa.set_serving(true);
    sa
}

/// An SA request MAD: header fields and the template in the SA data.
pub fn request(method: u8, attr: u16, attr_mod: u32, mask: u64, template: &[u8]) -> Vec<u8> {
    let h = SaHeader {
        class_version: SA_CLASS_VERSION,
        method,
        tid: 0x5a5a_0001,
        attr_id: attr,
        attr_mod,
        component_mask: mask,
        ..Default::default()
    };
    let mut b = vec![0u8; MAD_SIZE];
    h.encode(&mut b);
    b[SA_HEADER_SIZE..SA_HEADER_SIZE + template.len()].copy_from_slice(template);
    b
}

/// The requester of the tests (H1).
pub fn requester() -> Requester {
    Requester {
        lid: 3,
        qpn: 1,
        ..Default::default()
    }
}

/// Sends `mad` to `sa` and returns the answer (panics when there is none).
pub fn ask(sa: &SaService, mad: &[u8]) -> SaResponse {
    sa.handle(mad, &requester(), SystemTime::UNIX_EPOCH)
        .expect("a request gets an answer")
}
