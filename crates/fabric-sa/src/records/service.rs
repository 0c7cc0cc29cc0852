//! ServiceRecord (attribute 0x0031, IBA 15.2.5.14), 176 bytes.
//!
//! ```text
//!   0..8 ServiceID  8..24 ServiceGID  24..26 ServiceP_Key  26..28 reserved
//!  28..32 ServiceLease  32..48 ServiceKey  48..112 ServiceName  112..128 ServiceData8[16]
//! 128..144 ServiceData16[8]  144..160 ServiceData32[4]  160..176 ServiceData64[2]
//! ```
//!
//! Components (OpenSM `IB_SR_COMPMASK_*`): 0 ServiceID, 1 ServiceGID, 2 ServiceP_Key,
//! 3 reserved, 4 ServiceLease, 5 ServiceKey, 6 ServiceName, 7..=22 ServiceData8[0..16],
//! 23..=30 ServiceData16[0..8], 31..=34 ServiceData32[0..4], 35..=36 ServiceData64[0..2]:
//! one component per data element. ServiceName compares up to its first NUL.

use super::{record_image, sel, Bytes, ExtraMatch, Gid, Raw};
use crate::wire::attr;

/// Component bits of a ServiceRecord.
pub mod comp {
    pub const SERVICE_ID: u32 = 0;
    pub const SERVICE_GID: u32 = 1;
    pub const SERVICE_PKEY: u32 = 2;
    pub const SERVICE_LEASE: u32 = 4;
    pub const SERVICE_KEY: u32 = 5;
    pub const SERVICE_NAME: u32 = 6;
    pub const DATA8: u32 = 7;
    pub const DATA16: u32 = 23;
    pub const DATA32: u32 = 31;
    pub const DATA64: u32 = 35;
}

/// The lease that never expires.
pub const INDEFINITE_LEASE: u32 = 0xffff_ffff;

record_image! {
    /// One ServiceRecord.
    pub struct ServiceRecord {
        attr: attr::SERVICE_RECORD, size: 176, name: "ServiceRecord", components: 37;
        service_id: u64 = (0, 0, 64), comp 0;
        service_gid: Gid = (8, 0, 128), comp 1;
        service_pkey: u16 = (24, 0, 16), comp 2;
        /// Seconds; 0xffffffff: indefinite.
        service_lease: u32 = (28, 0, 32), comp 4;
        service_key: Raw<16> = (32, 0, 128), comp 5;
        service_name: Bytes<64> = (48, 0, 512), comp 6;
        service_data8: [u8; 16] = (112, 0, 128);
        service_data16: [u16; 8] = (128, 0, 128);
        service_data32: [u32; 4] = (144, 0, 128);
        service_data64: [u64; 2] = (160, 0, 128);
    }
}

impl ExtraMatch for ServiceRecord {
    /// The data elements, one component each.
    fn matches_extra(&self, t: &Self, mask: u64) -> bool {
        fn each<T: PartialEq>(a: &[T], b: &[T], mask: u64, first: u32) -> bool {
            a.iter()
                .zip(b)
                .enumerate()
                .all(|(i, (x, y))| !sel(mask, first + i as u32) || x == y)
        }
        each(&self.service_data8, &t.service_data8, mask, comp::DATA8)
            && each(&self.service_data16, &t.service_data16, mask, comp::DATA16)
            && each(&self.service_data32, &t.service_data32, mask, comp::DATA32)
            && each(&self.service_data64, &t.service_data64, mask, comp::DATA64)
    }
}
