//! MCMemberRecord (attribute 0x0038, IBA 15.2.5.17), 56 bytes (52 and 4 of padding):
//! codec and component mask; joins, leaves and queries are `crate::mcast`'s.
//!
//! Components (OpenSM `IB_MCR_COMPMASK_*`): 0 MGID, 1 PortGID, 2 Q_Key, 3 MLID,
//! 4 MTUSelector, 5 MTU, 6 TClass, 7 P_Key, 8 RateSelector, 9 Rate,
//! 10 PacketLifeTimeSelector, 11 PacketLifeTime, 12 SL, 13 FlowLabel, 14 HopLimit,
//! 15 Scope, 16 JoinState, 17 ProxyJoin. Selectors are matched as equalities by
//! [`Record::matches`](super::Record::matches); `crate::mcast` gives them their meaning.

use super::{record_image, ExtraMatch, Gid};
use crate::wire::attr;

/// Component bits of an MCMemberRecord (OpenSM `IB_MCR_COMPMASK_*`).
pub mod comp {
    pub const MGID: u32 = 0;
    pub const PORT_GID: u32 = 1;
    pub const QKEY: u32 = 2;
    pub const MLID: u32 = 3;
    pub const MTU_SELECTOR: u32 = 4;
    pub const MTU: u32 = 5;
    pub const TCLASS: u32 = 6;
    pub const PKEY: u32 = 7;
    pub const RATE_SELECTOR: u32 = 8;
    pub const RATE: u32 = 9;
    pub const PKT_LIFE_SELECTOR: u32 = 10;
    pub const PKT_LIFE: u32 = 11;
    pub const SL: u32 = 12;
    pub const FLOW_LABEL: u32 = 13;
    pub const HOP_LIMIT: u32 = 14;
    pub const SCOPE: u32 = 15;
    pub const JOIN_STATE: u32 = 16;
    pub const PROXY_JOIN: u32 = 17;
}

record_image! {
    /// One MCMemberRecord.
    pub struct McMemberRecord {
        attr: attr::MC_MEMBER_RECORD, size: 56, name: "MCMemberRecord", components: 18;
        mgid: Gid = (0, 0, 128), comp 0;
        port_gid: Gid = (16, 0, 128), comp 1;
        qkey: u32 = (32, 0, 32), comp 2;
        mlid: u16 = (36, 0, 16), comp 3;
        mtu_selector: u8 = (38, 0, 2), comp 4;
        mtu: u8 = (38, 2, 6), comp 5;
        tclass: u8 = (39, 0, 8), comp 6;
        pkey: u16 = (40, 0, 16), comp 7;
        rate_selector: u8 = (42, 0, 2), comp 8;
        rate: u8 = (42, 2, 6), comp 9;
        pkt_life_selector: u8 = (43, 0, 2), comp 10;
        pkt_life: u8 = (43, 2, 6), comp 11;
        sl: u8 = (44, 0, 4), comp 12;
        flow_label: u32 = (44, 4, 20), comp 13;
        hop_limit: u8 = (47, 0, 8), comp 14;
        scope: u8 = (48, 0, 4), comp 15;
        join_state: u8 = (48, 4, 4), comp 16;
        proxy_join: u8 = (49, 0, 1), comp 17;
    }
}
impl ExtraMatch for McMemberRecord {}
