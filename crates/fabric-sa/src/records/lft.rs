//! LinearForwardingTableRecord (attribute 0x0015, IBA 15.2.5.6), 72 bytes: LID,
//! BlockNum, reserved, 64 LFT entries (output port per LID, block × 64 onwards).
//!
//! Components (OpenSM `IB_LFTR_COMPMASK_*`): 0 LID, 1 BlockNum, 2 reserved,
//! 3 LinearForwardingTable.

use super::{record_image, ExtraMatch, Raw};
use crate::wire::attr;

/// Component bits of an LFTRecord.
pub mod comp {
    pub const LID: u32 = 0;
    pub const BLOCK: u32 = 1;
}

record_image! {
    /// One LinearForwardingTableRecord.
    pub struct LftRecord {
        attr: attr::LFT_RECORD, size: 72, name: "LinearForwardingTableRecord", components: 4;
        lid: u16 = (0, 0, 16), comp 0;
        block_num: u16 = (2, 0, 16), comp 1;
        lft: Raw<64> = (8, 0, 512), comp 3;
    }
}
impl ExtraMatch for LftRecord {}
