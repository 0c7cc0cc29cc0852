//! Multicast test helpers over the registry tests' subnet (one switch, CAs `0..n` at LIDs
//! `2 + i`): end ports with MTUCap 4096 and 4x QDR (40 Gb/s, rate code 7), MCMemberRecord
//! requests from a CA or the daemon (LID 0), the create mask.
#![allow(dead_code)]

use std::sync::Arc;

use fabric_sa::mcast::join_state::*;
use fabric_sa::records::mc_member::comp;
use fabric_sa::records::{Gid, McMemberRecord};
use fabric_sa::wire::{self, attr, SaHeader, MAD_SIZE, SA_HEADER_SIZE};
use fabric_sa::{Partitions, Requester, SaResponse, SaService, Subnet};

use crate::registry_support::{ca_guid, from_ca, gid, image, records, subnet, t0};

/// MGID, PortGID, JoinState.
pub const JOIN: u64 = 1 << comp::MGID | 1 << comp::PORT_GID | 1 << comp::JOIN_STATE;
/// What a create needs on top: Q_Key, TClass, P_Key, FlowLabel, SL.
pub const CREATE: u64 =
    JOIN | 1 << comp::QKEY | 1 << comp::TCLASS | 1 << comp::PKEY | 1 << comp::FLOW_LABEL | 1 << comp::SL;
pub const QKEY: u32 = 0x0b1b;
/// MTU code 4096 and rate code 40 Gb/s of the fixture's ports.
pub const PORT_MTU: u8 = 5;
pub const PORT_RATE: u8 = 7;

/// Sets MTUCap / NeighborMTU (`mtu`) and 4x QDR on a PortInfo image.
pub fn set_caps(pi: &mut [u8; 64], mtu: u8) {
    pi[31] = 0x02; // LinkWidthActive 4x
    pi[35] = 0x44; // LinkSpeedActive QDR | enabled
    pi[36] = (mtu << 4) | (pi[36] & 0x0f);
    pi[41] = (pi[41] & 0xf0) | mtu;
}

/// The registry tests' subnet with `cas` CAs, every port MTU 4096 and 4x QDR, the CAs of
/// `down` Down.
pub fn mc_subnet(cas: usize, down: &[usize]) -> Subnet {
    let mut s = subnet(cas, down);
    for p in s.ports_mut() {
        set_caps(&mut p.port_info, PORT_MTU);
    }
    s.reindex();
    s
}

/// A serving SA over [`mc_subnet`] (no persistence, no partitions).
pub fn mc_service(cas: usize) -> SaService {
    crate::registry_support::service(mc_subnet(cas, &[]))
}

/// An MGID `ff15:...:n` (site-local, no signature).
pub fn mgid(n: u16) -> Gid {
    let mut m = [0u8; 16];
    m[0] = 0xff;
    m[1] = 0x15;
    m[14..16].copy_from_slice(&n.to_be_bytes());
    Gid(m)
}

/// A join or create record of CA `ca` for `mgid` with `state`, default partition.
pub fn rec(mgid: Gid, ca: usize, state: u8) -> McMemberRecord {
    McMemberRecord {
        mgid,
        port_gid: gid(ca_guid(ca)),
        qkey: QKEY,
        pkey: 0xffff,
        join_state: state,
        ..Default::default()
    }
}

/// An MCMemberRecord request MAD with SM_Key `sm_key`.
pub fn mc_mad(method: u8, mask: u64, r: &McMemberRecord, sm_key: u64) -> [u8; MAD_SIZE] {
    let mut b = [0u8; MAD_SIZE];
    SaHeader {
        class_version: wire::SA_CLASS_VERSION,
        method,
        tid: 0x99,
        attr_id: attr::MC_MEMBER_RECORD,
        component_mask: mask,
        sm_key,
        ..Default::default()
    }
    .encode(&mut b);
    let img = image(r);
    b[SA_HEADER_SIZE..SA_HEADER_SIZE + img.len()].copy_from_slice(&img);
    b
}

/// `method` on `r` with `mask`, from `from`.
pub fn mc(sa: &SaService, method: u8, mask: u64, r: &McMemberRecord, from: &Requester) -> SaResponse {
    sa.handle(&mc_mad(method, mask, r, 0), from, t0()).expect("an answer")
}

/// A join (Set) of CA `ca` on its own behalf.
pub fn join(sa: &SaService, mask: u64, r: &McMemberRecord, ca: usize) -> SaResponse {
    mc(sa, wire::METHOD_SET, mask, r, &from_ca(ca))
}

/// A leave (Delete) of CA `ca` on its own behalf.
pub fn leave(sa: &SaService, r: &McMemberRecord, ca: usize) -> SaResponse {
    mc(sa, wire::METHOD_DELETE, JOIN, r, &from_ca(ca))
}

/// The one record of an answer with status 0.
pub fn one(resp: &SaResponse) -> McMemberRecord {
    assert_eq!(resp.header.status, 0, "{resp:?}");
    let r: Vec<McMemberRecord> = records(resp);
    assert_eq!(r.len(), 1, "{resp:?}");
    r[0].clone()
}

/// Partitions: every CA in `full` a full member of `pkey` and of nothing else unless listed
/// elsewhere; `tables` gives each port's table exactly.
pub fn partitions(tables: &[(u64, Vec<u16>)]) -> Arc<Partitions> {
    Arc::new(Partitions {
        tables: tables.iter().cloned().collect(),
        ipoib_groups: Vec::new(),
    })
}

/// The state bits a test uses.
pub const FULL_SEND_ONLY: u8 = FULL | SEND_ONLY_NON;
