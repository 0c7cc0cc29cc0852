//! P_KeyTableRecord (attribute 0x0033, IBA 15.2.5.11), 72 bytes: LID, BlockNum, PortNum,
//! reserved, one P_Key table block (32 P_Keys, bit 15 = full member).
//!
//! Components (OpenSM `IB_PKEY_COMPMASK_*`): 0 LID, 1 BlockNum, 2 PortNum, 3 reserved,
//! 4 P_KeyTable.

use super::{record_image, ExtraMatch};
use crate::wire::attr;

/// Component bits of a P_KeyTableRecord.
pub mod comp {
    pub const LID: u32 = 0;
    pub const BLOCK: u32 = 1;
    pub const PORT: u32 = 2;
}

/// P_Keys per block of a P_Key table.
pub const PKEYS_PER_BLOCK: usize = 32;

record_image! {
    /// One P_KeyTableRecord.
    pub struct PkeyTableRecord {
        attr: attr::P_KEY_TABLE_RECORD, size: 72, name: "P_KeyTableRecord", components: 5;
        lid: u16 = (0, 0, 16), comp 0;
        block_num: u16 = (2, 0, 16), comp 1;
        port_num: u8 = (4, 0, 8), comp 2;
        pkeys: [u16; 32] = (8, 0, 512), comp 4;
    }
}
impl ExtraMatch for PkeyTableRecord {}
