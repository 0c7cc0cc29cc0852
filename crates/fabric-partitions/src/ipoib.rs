//! IPoIB broadcast groups of the partitions with the `ipoib` flag.

use serde::{Deserialize, Serialize};

use crate::pkey::FULL_MEMBER_BIT;

/// OpenSM's default multicast group MTU (IBA encoding: 4 = 2048 bytes).
pub const DEFAULT_MGRP_MTU: u8 = 4;
/// OpenSM's default multicast group rate (IBA encoding: 3 = 10 Gb/s).
pub const DEFAULT_MGRP_RATE: u8 = 3;
/// OpenSM's default SL.
pub const DEFAULT_SL: u8 = 0;
/// OpenSM's default multicast scope (2 = link-local).
pub const DEFAULT_MGRP_SCOPE: u8 = 2;
/// The Q_Key of IPoIB broadcast groups (`OSM_IPOIB_BROADCAST_MGRP_QKEY`).
pub const IPOIB_BROADCAST_QKEY: u32 = 0x0B1B;

/// One IPoIB broadcast group OpenSM creates at start (well-known: it stays without members).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IpoibGroup {
    /// The partition's P_Key with bit 15 set (as in the MGID and the MCMemberRecord).
    pub pkey: u16,
    /// The partition's name.
    pub name: String,
    /// MTU, IBA encoding (1 = 256 .. 5 = 4096).
    pub mtu: u8,
    /// Rate, IBA encoding (3 = 10 Gb/s, ...).
    pub rate: u8,
    /// Service level.
    pub sl: u8,
    /// Multicast scope nibble (2 = link-local, 5 = site-local, 8 = organisation, 14 = global).
    pub scope: u8,
    /// Q_Key (0x0B1B unless the file gives one).
    pub qkey: u32,
    /// Traffic class.
    pub tclass: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl IpoibGroup {
    /// A group with OpenSM's defaults for the partition `pkey` (bit 15 is set here).
    pub fn with_defaults(pkey: u16, name: impl Into<String>) -> IpoibGroup {
        IpoibGroup {
            pkey: pkey | FULL_MEMBER_BIT,
            name: name.into(),
            mtu: DEFAULT_MGRP_MTU,
            rate: DEFAULT_MGRP_RATE,
            sl: DEFAULT_SL,
            scope: DEFAULT_MGRP_SCOPE,
            qkey: IPOIB_BROADCAST_QKEY,
            tclass: 0,
            flow_label: 0,
        }
    }

    /// The IPv4 broadcast MGID `ff1S:401b:PPPP:0000:0000:0000:ffff:ffff` (S = scope, PPPP = the
    /// P_Key with bit 15 set): the group OpenSM creates for the partition.
    pub fn broadcast_mgid(&self) -> [u8; 16] {
        let mut m = [0u8; 16];
        m[0] = 0xff;
        m[1] = 0x10 | (self.scope & 0x0f);
        m[2] = 0x40;
        m[3] = 0x1b;
        m[4..6].copy_from_slice(&(self.pkey | FULL_MEMBER_BIT).to_be_bytes());
        m[12..16].copy_from_slice(&[0xff; 4]);
        m
    }

    /// The IPv6 all-nodes MGID `ff1S:601b:PPPP:0000:0000:0000:0000:0001` that every IPoIB
    /// interface joins at start. OpenSM does **not** create it in advance (the first join creates
    /// it); it is here for the SA, which may.
    pub fn ipv6_all_nodes_mgid(&self) -> [u8; 16] {
        let mut m = [0u8; 16];
        m[0] = 0xff;
        m[1] = 0x10 | (self.scope & 0x0f);
        m[2] = 0x60;
        m[3] = 0x1b;
        m[4..6].copy_from_slice(&(self.pkey | FULL_MEMBER_BIT).to_be_bytes());
        m[15] = 0x01;
        m
    }

    /// The MGIDs OpenSM creates at start for this group: the IPv4 broadcast group only (checked
    /// in `osm_prtn_config.c`'s `partition_create` and `osm_prtn.c`'s `osm_prtn_add_mcgroup`;
    /// the 2008 versions also created `ff12:401b:PPPP::1`, a workaround since removed).
    pub fn mgids(&self) -> Vec<[u8; 16]> {
        vec![self.broadcast_mgid()]
    }
}

/// Formats an MGID as IPv6 text, the longest run of zero groups compressed, as `saquery`
/// (`inet_ntop`) prints it: `ff12:401b:ffff::ffff:ffff`.
pub fn fmt_mgid(mgid: &[u8; 16]) -> String {
    let g: Vec<u16> = mgid.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
    // The longest run of two or more zero groups (the first of equal runs) becomes `::`
    // (RFC 5952).
    let (mut best, mut run) = ((0, 0), (0, 0));
    for (i, &v) in g.iter().enumerate() {
        if v == 0 {
            if run.1 == 0 {
                run.0 = i;
            }
            run.1 += 1;
            if run.1 > best.1 {
                best = run;
            }
        } else {
            run.1 = 0;
        }
    }
    let hex = |r: &[u16]| r.iter().map(|v| format!("{v:x}")).collect::<Vec<_>>().join(":");
    if best.1 < 2 {
        return hex(&g);
    }
    format!("{}::{}", hex(&g[..best.0]), hex(&g[best.0 + best.1..]))
}
