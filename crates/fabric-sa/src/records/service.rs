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
//! one component per data element. ServiceName compares all 64 bytes, as OpenSM's
//! `get_matching_sr` (`memcmp` of the whole field): a name is matched only by a template with
//! the same bytes after its NUL too (unlike NodeDescription, compared up to the first NUL).

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
        /// Component 6, matched on all 64 bytes in `matches_extra` (not up to the first NUL as
        /// a [`Bytes`] field of the table would be).
        service_name: Bytes<64> = (48, 0, 512);
        service_data8: [u8; 16] = (112, 0, 128);
        service_data16: [u16; 8] = (128, 0, 128);
        service_data32: [u32; 4] = (144, 0, 128);
        service_data64: [u64; 2] = (160, 0, 128);
    }
}

impl ExtraMatch for ServiceRecord {
    /// ServiceName on all its bytes, and the data elements, one component each.
    fn matches_extra(&self, t: &Self, mask: u64) -> bool {
        fn each<T: PartialEq>(a: &[T], b: &[T], mask: u64, first: u32) -> bool {
            a.iter()
                .zip(b)
                .enumerate()
                .all(|(i, (x, y))| !sel(mask, first + i as u32) || x == y)
        }
        (!sel(mask, comp::SERVICE_NAME) || self.service_name.0 == t.service_name.0)
            && each(&self.service_data8, &t.service_data8, mask, comp::DATA8)
            && each(&self.service_data16, &t.service_data16, mask, comp::DATA16)
            && each(&self.service_data32, &t.service_data32, mask, comp::DATA32)
            && each(&self.service_data64, &t.service_data64, mask, comp::DATA64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;

    /// Each component compares its own field and only when selected; ServiceName on all 64
    /// bytes (a difference in its last byte counts).
    #[test]
    fn each_component_is_compared_only_when_selected() {
        let base = ServiceRecord::default();
        let mut cases: Vec<(ServiceRecord, u32)> = Vec::new();
        let mut case = |bit: u32, change: &dyn Fn(&mut ServiceRecord)| {
            let mut r = base.clone();
            change(&mut r);
            cases.push((r, bit));
        };
        case(comp::SERVICE_ID, &|r| r.service_id = 1);
        case(comp::SERVICE_GID, &|r| r.service_gid.0[15] = 1);
        case(comp::SERVICE_PKEY, &|r| r.service_pkey = 1);
        case(comp::SERVICE_LEASE, &|r| r.service_lease = 1);
        case(comp::SERVICE_KEY, &|r| r.service_key.0[0] = 1);
        case(comp::SERVICE_NAME, &|r| r.service_name.0[63] = 1);
        for i in 0..16 {
            case(comp::DATA8 + i as u32, &|r| r.service_data8[i] = 1);
        }
        for i in 0..8 {
            case(comp::DATA16 + i as u32, &|r| r.service_data16[i] = 1);
        }
        for i in 0..4 {
            case(comp::DATA32 + i as u32, &|r| r.service_data32[i] = 1);
        }
        for i in 0..2 {
            case(comp::DATA64 + i as u32, &|r| r.service_data64[i] = 1);
        }
        assert_eq!(cases.len(), 36, "every component but the reserved one");
        for (r, b) in &cases {
            assert!(!r.matches(&base, 1 << b), "bit {b} selects its field");
            assert!(r.matches(&base, !(1u64 << b)), "bit {b} is the only one comparing it");
        }
    }
}
