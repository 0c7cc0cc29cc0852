//! ClassPortInfo (attribute 0x0001, IBA 13.4.8.1), 72 bytes: what the SA says about itself.
//! Only Get is answered; the component mask is not read (there are no components).
//!
//! [`ClassPortInfo::sa`] is the answer, OpenSM's (`osm_sa_class_port_info.c`) field by field
//! except the capability bits, which say what this SA does:
//! * CapabilityMask: `IsMultiPathSupported` (bit 10: GetMulti(MultiPathRecord) is answered)
//!   and `IsPortInfoCapMaskMatchSupported` (bit 13: a PortInfoRecord template's
//!   CapabilityMask selects the ports having all its bits, which `saquery -s` relies on).
//!   Not set: `IsSubnGetSetNoticeSup` (bit 1, Get/Set(Notice) are not answered),
//!   `IsUDMulticastSupported` (bit 9, multicast joins are not served yet),
//!   `IsSubnOptRecsSup` (bit 8, optional records such as SLtoVL, VLArb, P_Key tables are not).
//! * CapabilityMask2: `IsFullPortInfoRecSupported` (bit 6: PortInfoRecords of every switch
//!   port) and `IsPortInfoCapMask2MatchSupported` (bit 10).
//! * RespTimeValue 16 (4.096 µs × 2^16 ≈ 268 ms), what OpenSM derives from its default
//!   200 ms transaction timeout.
//! * Redirect: none (GID, TC/SL/FL, LID, P_Key 0), QP 1 and the well-known Q_Key
//!   0x80010000, as OpenSM; Trap: all 0 but the well-known Q_Key.

use super::{record_image, CapMask, ExtraMatch, Gid};
use crate::wire::attr;

/// CapabilityMask bit: MultiPathRecord supported.
pub const CAP_MULTIPATH: u16 = 1 << 10;
/// CapabilityMask IsUDMulticastSupported: MCMemberRecord joins are served.
pub const CAP_UD_MULTICAST: u16 = 1 << 9;
/// CapabilityMask bit: PortInfoRecord CapabilityMask matched as "all these bits".
pub const CAP_PORT_INFO_CAPMASK_MATCH: u16 = 1 << 13;
/// CapabilityMask2 bit: PortInfoRecords for every switch port.
pub const CAP2_FULL_PORTINFO_REC: u32 = 1 << 6;
/// CapabilityMask2 bit: PortInfoRecord CapabilityMask2 matched as "all these bits".
pub const CAP2_PORT_INFO_CAPMASK2_MATCH: u32 = 1 << 10;
/// The QP1 well-known Q_Key.
pub const QP1_QKEY: u32 = 0x8001_0000;

record_image! {
    /// ClassPortInfo.
    pub struct ClassPortInfo {
        attr: attr::CLASS_PORT_INFO, size: 72, name: "ClassPortInfo", components: 0;
        base_version: u8 = (0, 0, 8);
        class_version: u8 = (1, 0, 8);
        capability_mask: CapMask<u16> = (2, 0, 16);
        capability_mask2: u32 = (4, 0, 27);
        resp_time_value: u8 = (7, 3, 5);
        redirect_gid: Gid = (8, 0, 128);
        redirect_tc: u8 = (24, 0, 8);
        redirect_sl: u8 = (25, 0, 4);
        redirect_fl: u32 = (25, 4, 20);
        redirect_lid: u16 = (28, 0, 16);
        redirect_pkey: u16 = (30, 0, 16);
        redirect_qp: u32 = (33, 0, 24);
        redirect_qkey: u32 = (36, 0, 32);
        trap_gid: Gid = (40, 0, 128);
        trap_tc: u8 = (56, 0, 8);
        trap_sl: u8 = (57, 0, 4);
        trap_fl: u32 = (57, 4, 20);
        trap_lid: u16 = (60, 0, 16);
        trap_pkey: u16 = (62, 0, 16);
        trap_hop_limit: u8 = (64, 0, 8);
        trap_qp: u32 = (65, 0, 24);
        trap_qkey: u32 = (68, 0, 32);
    }
}
impl ExtraMatch for ClassPortInfo {}

impl ClassPortInfo {
    /// The SA's ClassPortInfo (see the module documentation for every value).
    pub fn sa() -> ClassPortInfo {
        ClassPortInfo {
            base_version: 1,
            class_version: crate::wire::SA_CLASS_VERSION,
            capability_mask: CapMask(CAP_UD_MULTICAST | CAP_MULTIPATH | CAP_PORT_INFO_CAPMASK_MATCH),
            capability_mask2: CAP2_FULL_PORTINFO_REC | CAP2_PORT_INFO_CAPMASK2_MATCH,
            resp_time_value: 16,
            redirect_qp: 1,
            redirect_qkey: QP1_QKEY,
            trap_qkey: QP1_QKEY,
            ..Default::default()
        }
    }
}
