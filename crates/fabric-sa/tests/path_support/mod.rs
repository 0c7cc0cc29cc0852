//! Shared by the path tests: routed fat-trees turned into SA snapshots, request MADs, and a
//! reader of PathRecord images at the offsets of IBA 15.2.5.16 (independent of the crate's
//! own codec).

#![allow(dead_code)]

use std::time::SystemTime;

use fabric_ranking::{rank, RankOptions};
use fabric_routing::{
    assign_lids, route_all_checked, EngineKind, Guid2Lid, Lfts, LidPlan, RoutingContext, IB_MAX_UNICAST_LID,
};
use fabric_sa::subnet::{from_model, Escape, SmData};
use fabric_sa::wire::{self, SaHeader, MAD_SIZE, SA_HEADER_SIZE};
use fabric_sa::{Request, Requester, SaResponse, Subnet};
use fabric_topology::Fabric;

/// The escape SL the tests publish.
pub const ESCAPE_SL: u8 = 1;

pub struct Routed {
    pub fabric: Fabric,
    pub lids: LidPlan,
    pub lfts: Lfts,
    pub subnet: Subnet,
}

/// Routes `fabric` (Dmodc, checked; LMC 1: base and escape LIDs) and builds its snapshot.
pub fn routed(fabric: Fabric) -> Routed {
    let ranking = rank(&fabric, &RankOptions::default());
    let lids = assign_lids(&fabric, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
    let ctx = RoutingContext {
        fabric: &fabric,
        ranking: &ranking,
        lids: &lids,
    };
    let (r, _) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();
    let subnet = snapshot(&fabric, &lids, &r.lfts);
    Routed {
        fabric,
        lids,
        lfts: r.lfts,
        subnet,
    }
}

pub fn snapshot(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts) -> Subnet {
    let sm = SmData {
        guid: 1,
        lid: 1,
        priority: 0,
        state: 3,
        act_count: 0,
    };
    from_model(fabric, lids, lfts, sm, Some(Escape { sl: ESCAPE_SL }))
}

/// A GID of the default subnet prefix.
pub fn gid(guid: u64) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
    g[8..].copy_from_slice(&guid.to_be_bytes());
    g
}

/// A request MAD: header fields and the SA data.
pub fn mad(method: u8, attr: u16, mask: u64, data: &[u8]) -> Vec<u8> {
    let h = SaHeader {
        class_version: wire::SA_CLASS_VERSION,
        method,
        tid: 0x77,
        attr_id: attr,
        component_mask: mask,
        ..SaHeader::default()
    };
    let mut b = vec![0u8; MAD_SIZE.max(SA_HEADER_SIZE + data.len())];
    h.encode(&mut b);
    b[SA_HEADER_SIZE..SA_HEADER_SIZE + data.len()].copy_from_slice(data);
    b
}

/// Answers one PathRecord/MultiPathRecord MAD through `fabric_sa::path::answer`.
pub fn ask(subnet: &Subnet, mad: &[u8]) -> SaResponse {
    let req = Request {
        header: SaHeader::decode(mad).unwrap(),
        data: &mad[SA_HEADER_SIZE..],
        from: Requester::default(),
        now: SystemTime::UNIX_EPOCH,
        trusted: false,
    };
    fabric_sa::path::answer(subnet, &req)
}

/// A PathRecord template (64 bytes) with the end points set.
#[derive(Clone, Copy, Default)]
pub struct Template {
    pub sgid: Option<u64>,
    pub dgid: Option<u64>,
    pub slid: Option<u16>,
    pub dlid: Option<u16>,
}

impl Template {
    /// Image and component mask (bits 2..5: DGID, SGID, DLID, SLID).
    pub fn image(&self) -> ([u8; 64], u64) {
        let mut b = [0u8; 64];
        let mut m = 0u64;
        if let Some(g) = self.dgid {
            b[8..24].copy_from_slice(&gid(g));
            m |= 1 << 2;
        }
        if let Some(g) = self.sgid {
            b[24..40].copy_from_slice(&gid(g));
            m |= 1 << 3;
        }
        if let Some(l) = self.dlid {
            b[40..42].copy_from_slice(&l.to_be_bytes());
            m |= 1 << 4;
        }
        if let Some(l) = self.slid {
            b[42..44].copy_from_slice(&l.to_be_bytes());
            m |= 1 << 5;
        }
        (b, m)
    }
}

/// A PathRecord read at the documented offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pr {
    pub dgid_guid: u64,
    pub sgid_guid: u64,
    pub dlid: u16,
    pub slid: u16,
    pub hop_limit: u8,
    pub reversible: bool,
    pub pkey: u16,
    pub sl: u8,
    pub mtu: u8,
    pub rate: u8,
    pub pkt_life: u8,
    pub preference: u8,
}

pub fn read_pr(b: &[u8]) -> Pr {
    assert_eq!(b.len(), 64);
    let be16 = |o: usize| u16::from_be_bytes([b[o], b[o + 1]]);
    let be64 = |o: usize| u64::from_be_bytes(b[o..o + 8].try_into().unwrap());
    assert_eq!(be64(8), 0xfe80_0000_0000_0000, "DGID prefix");
    assert_eq!(be64(24), 0xfe80_0000_0000_0000, "SGID prefix");
    assert_eq!(b[54] >> 6, 2, "MTU selector 'exactly'");
    assert_eq!(b[55] >> 6, 2, "rate selector 'exactly'");
    assert_eq!(b[56] >> 6, 2, "packet lifetime selector 'exactly'");
    Pr {
        dgid_guid: be64(16),
        sgid_guid: be64(32),
        dlid: be16(40),
        slid: be16(42),
        hop_limit: b[47],
        reversible: b[49] & 0x80 != 0,
        pkey: be16(50),
        sl: b[53] & 0x0f,
        mtu: b[54] & 0x3f,
        rate: b[55] & 0x3f,
        pkt_life: b[56] & 0x3f,
        preference: b[57],
    }
}

/// The records of an answer (AttributeOffset 8: 64 bytes each).
pub fn records(r: &SaResponse) -> Vec<Pr> {
    assert_eq!(r.header.attr_offset, 8);
    assert_eq!(r.data.len() % 64, 0);
    r.data.chunks(64).map(read_pr).collect()
}
