//! PortInfoRecord (attribute 0x0012, IBA 15.2.5.3), 72 bytes: EndportLID, PortNum,
//! Options, PortInfo (64 bytes, IBA 14.2.5.6), 4 bytes of padding.
//!
//! Components (OpenSM `IB_PIR_COMPMASK_*`): 0 EndportLID, 1 PortNum, 2 Options, then the
//! PortInfo fields in order from 3 (M_Key) to 57 (LinkSpeedExtEnabled), reserved fields
//! included (19, 46, 51, 56). CapabilityMask (7) and CapabilityMask2 (53) select the ports
//! having every bit of the template (OpenSM's capability-mask match), every other component
//! is an equality.

use super::{record_image, CapMask, ExtraMatch};
use crate::wire::attr;

/// Component bits of a PortInfoRecord.
pub mod comp {
    pub const LID: u32 = 0;
    pub const PORT_NUM: u32 = 1;
    pub const OPTIONS: u32 = 2;
    pub const BASE_LID: u32 = 5;
    pub const CAPABILITY_MASK: u32 = 7;
    pub const PORT_STATE: u32 = 15;
    pub const LMC: u32 = 20;
    pub const CAPABILITY_MASK2: u32 = 53;
}

/// PortInfo CapabilityMask bit IsSM.
pub const CAP_IS_SM: u32 = 0x0000_0002;

record_image! {
    /// One PortInfoRecord.
    pub struct PortInfoRecord {
        attr: attr::PORT_INFO_RECORD, size: 72, name: "PortInfoRecord", components: 58;
        endport_lid: u16 = (0, 0, 16), comp 0;
        port_num: u8 = (2, 0, 8), comp 1;
        options: u8 = (3, 0, 8), comp 2;
        m_key: u64 = (4, 0, 64), comp 3;
        gid_prefix: u64 = (12, 0, 64), comp 4;
        base_lid: u16 = (20, 0, 16), comp 5;
        master_sm_base_lid: u16 = (22, 0, 16), comp 6;
        capability_mask: CapMask<u32> = (24, 0, 32), comp 7;
        diag_code: u16 = (28, 0, 16), comp 8;
        m_key_lease_period: u16 = (30, 0, 16), comp 9;
        local_port_num: u8 = (32, 0, 8), comp 10;
        link_width_enabled: u8 = (33, 0, 8), comp 11;
        link_width_supported: u8 = (34, 0, 8), comp 12;
        link_width_active: u8 = (35, 0, 8), comp 13;
        link_speed_supported: u8 = (36, 0, 4), comp 14;
        port_state: u8 = (36, 4, 4), comp 15;
        port_phys_state: u8 = (37, 0, 4), comp 16;
        link_down_def_state: u8 = (37, 4, 4), comp 17;
        m_key_protect_bits: u8 = (38, 0, 2), comp 18;
        lmc: u8 = (38, 5, 3), comp 20;
        link_speed_active: u8 = (39, 0, 4), comp 21;
        link_speed_enabled: u8 = (39, 4, 4), comp 22;
        neighbor_mtu: u8 = (40, 0, 4), comp 23;
        master_sm_sl: u8 = (40, 4, 4), comp 24;
        vl_cap: u8 = (41, 0, 4), comp 25;
        init_type: u8 = (41, 4, 4), comp 26;
        vl_high_limit: u8 = (42, 0, 8), comp 27;
        vl_arb_high_cap: u8 = (43, 0, 8), comp 28;
        vl_arb_low_cap: u8 = (44, 0, 8), comp 29;
        init_type_reply: u8 = (45, 0, 4), comp 30;
        mtu_cap: u8 = (45, 4, 4), comp 31;
        vl_stall_count: u8 = (46, 0, 3), comp 32;
        hoq_life: u8 = (46, 3, 5), comp 33;
        op_vls: u8 = (47, 0, 4), comp 34;
        partition_enforcement_inbound: u8 = (47, 4, 1), comp 35;
        partition_enforcement_outbound: u8 = (47, 5, 1), comp 36;
        filter_raw_inbound: u8 = (47, 6, 1), comp 37;
        filter_raw_outbound: u8 = (47, 7, 1), comp 38;
        m_key_violations: u16 = (48, 0, 16), comp 39;
        p_key_violations: u16 = (50, 0, 16), comp 40;
        q_key_violations: u16 = (52, 0, 16), comp 41;
        guid_cap: u8 = (54, 0, 8), comp 42;
        client_reregister: u8 = (55, 0, 1), comp 43;
        mcast_pkey_trap_suppression: u8 = (55, 1, 2), comp 44;
        subnet_timeout: u8 = (55, 3, 5), comp 45;
        resp_time_value: u8 = (56, 3, 5), comp 47;
        local_phy_errors: u8 = (57, 0, 4), comp 48;
        overrun_errors: u8 = (57, 4, 4), comp 49;
        max_credit_hint: u16 = (58, 0, 16), comp 50;
        link_round_trip_latency: u32 = (61, 0, 24), comp 52;
        capability_mask2: CapMask<u16> = (64, 0, 16), comp 53;
        link_speed_ext_active: u8 = (66, 0, 4), comp 54;
        link_speed_ext_supported: u8 = (66, 4, 4), comp 55;
        link_speed_ext_enabled: u8 = (67, 3, 5), comp 57;
    }
}
impl ExtraMatch for PortInfoRecord {}
