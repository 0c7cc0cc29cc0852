//! Notice (attribute 0x0002, IBA 13.4.8.2), 80 bytes: what a Report carries to an
//! InformInfo subscriber (here: traps 64 and 65, GID in / out of service).
//!
//! ```text
//!  0 IsGeneric(7) | Type(6..0)  1..4 ProducerType / VendorID  4..6 TrapNumber / DeviceID
//!  6..8 IssuerLID  8..10 NoticeToggle(15) | NoticeCount(14..0)  10..64 DataDetails
//! 64..80 IssuerGID
//! ```
//!
//! Notice is not queried through the SA (no Get/Set(Notice) here): its "components" are
//! its fields in order (0 IsGeneric … 8 IssuerGID), for tests that select by field.

use super::{record_image, ExtraMatch, Gid, Raw};
use crate::wire::attr;

/// Trap 64: GID now in service.
pub const TRAP_GID_IN_SERVICE: u16 = 64;
/// Trap 65: GID out of service.
pub const TRAP_GID_OUT_OF_SERVICE: u16 = 65;
/// Notice type: subnet management (what OpenSM gives traps 64..67).
pub const TYPE_SUBN_MGMT: u8 = 3;
/// ProducerType: class manager.
pub const PRODUCER_CLASS_MANAGER: u32 = 4;

record_image! {
    /// One Notice.
    pub struct Notice {
        attr: attr::NOTICE, size: 80, name: "Notice", components: 9;
        is_generic: u8 = (0, 0, 1), comp 0;
        notice_type: u8 = (0, 1, 7), comp 1;
        /// ProducerType (generic) or VendorID, 24 bits.
        producer_type: u32 = (1, 0, 24), comp 2;
        /// TrapNumber (generic) or DeviceID.
        trap_number: u16 = (4, 0, 16), comp 3;
        issuer_lid: u16 = (6, 0, 16), comp 4;
        notice_toggle: u8 = (8, 0, 1), comp 5;
        notice_count: u16 = (8, 1, 15), comp 6;
        data_details: Raw<54> = (10, 0, 432), comp 7;
        issuer_gid: Gid = (64, 0, 128), comp 8;
    }
}
impl ExtraMatch for Notice {}

impl Notice {
    /// The notice of trap 64 (`trap` = [`TRAP_GID_IN_SERVICE`]) or 65 for `gid`, issued by
    /// the SM (`sm_lid`, `sm_gid`), as OpenSM builds it: generic, type subnet management,
    /// producer class manager, the GID at DataDetails bytes 6..22.
    pub fn gid_in_out_of_service(trap: u16, gid: Gid, sm_lid: u16, sm_gid: Gid) -> Notice {
        let mut details = [0u8; 54];
        details[6..22].copy_from_slice(&gid.0);
        Notice {
            is_generic: 1,
            notice_type: TYPE_SUBN_MGMT,
            producer_type: PRODUCER_CLASS_MANAGER,
            trap_number: trap,
            issuer_lid: sm_lid,
            data_details: Raw(details),
            issuer_gid: sm_gid,
            ..Default::default()
        }
    }

    /// The GID of a trap 64..67 notice (DataDetails bytes 6..22).
    pub fn details_gid(&self) -> Gid {
        Gid::read(&self.data_details.0, 6)
    }
}
