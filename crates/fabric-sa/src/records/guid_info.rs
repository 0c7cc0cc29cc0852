//! GUIDInfoRecord (attribute 0x0030, IBA 15.2.5.18), 72 bytes: LID, BlockNum, reserved,
//! reserved, 8 GUIDs (GUIDInfo block, IBA 14.2.5.5).
//!
//! Components (OpenSM `IB_GIR_COMPMASK_*`): 0 LID, 1 BlockNum, 2 and 3 reserved,
//! 4..=11 GUID0..GUID7.

use super::{record_image, ExtraMatch};
use crate::wire::attr;

record_image! {
    /// One GUIDInfoRecord.
    pub struct GuidInfoRecord {
        attr: attr::GUID_INFO_RECORD, size: 72, name: "GUIDInfoRecord", components: 12;
        lid: u16 = (0, 0, 16), comp 0;
        block_num: u8 = (2, 0, 8), comp 1;
        guid0: u64 = (8, 0, 64), comp 4;
        guid1: u64 = (16, 0, 64), comp 5;
        guid2: u64 = (24, 0, 64), comp 6;
        guid3: u64 = (32, 0, 64), comp 7;
        guid4: u64 = (40, 0, 64), comp 8;
        guid5: u64 = (48, 0, 64), comp 9;
        guid6: u64 = (56, 0, 64), comp 10;
        guid7: u64 = (64, 0, 64), comp 11;
    }
}
impl ExtraMatch for GuidInfoRecord {}
