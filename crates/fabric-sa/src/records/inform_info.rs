//! InformInfo (attribute 0x0003, IBA 13.4.8.3), 36 bytes: a subscription to Reports.
//!
//! ```text
//!  0..16 GID  16..18 LIDRangeBegin  18..20 LIDRangeEnd  20..22 reserved  22 IsGeneric
//! 23 Subscribe  24..26 Type  26..28 TrapNumber (generic) / DeviceID (vendor)
//! 28..31 QPN  31 reserved(7..5) | RespTimeValue(4..0)  32 reserved
//! 33..36 ProducerType (generic) / VendorID (vendor)
//! ```
//!
//! InformInfo has no component mask of its own (it is Set, not queried); its fields carry
//! the component bits of InformInfoRecord minus 3 (OpenSM `IB_IIR_COMPMASK_*`): 0 GID,
//! 1 LIDRangeBegin, 2 LIDRangeEnd, 3 reserved, 4 IsGeneric, 5 Subscribe, 6 Type,
//! 7 TrapNumber/DeviceID, 8 QPN, 9 reserved, 10 RespTimeValue, 11 reserved,
//! 12 ProducerType/VendorID.

use super::{record_image, ExtraMatch, Gid};
use crate::wire::attr;

/// LIDRangeBegin 0xffff: every LID.
pub const ALL_LIDS: u16 = 0xffff;
/// Type 0xffff / TrapNumber 0xffff / ProducerType 0xffffff: any.
pub const ANY: u16 = 0xffff;
/// ProducerType / VendorID 0xffffff (24 bits): any.
pub const ANY_PRODUCER: u32 = 0x00ff_ffff;

record_image! {
    /// One InformInfo.
    pub struct InformInfo {
        attr: attr::INFORM_INFO, size: 36, name: "InformInfo", components: 13;
        gid: Gid = (0, 0, 128), comp 0;
        lid_range_begin: u16 = (16, 0, 16), comp 1;
        lid_range_end: u16 = (18, 0, 16), comp 2;
        is_generic: u8 = (22, 0, 8), comp 4;
        subscribe: u8 = (23, 0, 8), comp 5;
        /// Type (0 fatal … 4 informational, 0xffff all).
        trap_type: u16 = (24, 0, 16), comp 6;
        /// TrapNumber (generic) or DeviceID (vendor).
        trap_number: u16 = (26, 0, 16), comp 7;
        qpn: u32 = (28, 0, 24), comp 8;
        resp_time_value: u8 = (31, 3, 5), comp 10;
        /// ProducerType (generic) or VendorID (vendor), 24 bits.
        producer_type: u32 = (33, 0, 24), comp 12;
    }
}
impl ExtraMatch for InformInfo {}
