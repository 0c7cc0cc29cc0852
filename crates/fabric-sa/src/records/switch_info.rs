//! SwitchInfoRecord (attribute 0x0014, IBA 15.2.5.4), 24 bytes: LID, reserved, SwitchInfo
//! (20 bytes, IBA 14.2.5.4).
//!
//! Components: 0 LID, 1 reserved, then the SwitchInfo fields in order from 2
//! (LinearFDBCap) to 20 (MulticastFDBTop), 19 being the reserved bits. OpenSM matches only
//! the LID (`IB_SWIR_COMPMASK_LID`); the other components are a superset it ignores.

use super::{record_image, ExtraMatch};
use crate::wire::attr;

record_image! {
    /// One SwitchInfoRecord.
    pub struct SwitchInfoRecord {
        attr: attr::SWITCH_INFO_RECORD, size: 24, name: "SwitchInfoRecord", components: 21;
        lid: u16 = (0, 0, 16), comp 0;
        linear_fdb_cap: u16 = (4, 0, 16), comp 2;
        random_fdb_cap: u16 = (6, 0, 16), comp 3;
        multicast_fdb_cap: u16 = (8, 0, 16), comp 4;
        linear_fdb_top: u16 = (10, 0, 16), comp 5;
        default_port: u8 = (12, 0, 8), comp 6;
        default_mcast_primary_port: u8 = (13, 0, 8), comp 7;
        default_mcast_not_primary_port: u8 = (14, 0, 8), comp 8;
        life_time_value: u8 = (15, 0, 5), comp 9;
        port_state_change: u8 = (15, 5, 1), comp 10;
        optimized_sl2vl_mapping_programming: u8 = (15, 6, 2), comp 11;
        lids_per_port: u16 = (16, 0, 16), comp 12;
        partition_enforcement_cap: u16 = (18, 0, 16), comp 13;
        inbound_enforcement_cap: u8 = (20, 0, 1), comp 14;
        outbound_enforcement_cap: u8 = (20, 1, 1), comp 15;
        filter_raw_inbound_cap: u8 = (20, 2, 1), comp 16;
        filter_raw_outbound_cap: u8 = (20, 3, 1), comp 17;
        enhanced_port0: u8 = (20, 4, 1), comp 18;
        multicast_fdb_top: u16 = (22, 0, 16), comp 20;
    }
}
impl ExtraMatch for SwitchInfoRecord {}
