//! SMInfoRecord (attribute 0x0018, IBA 15.2.5.9), 32 bytes (25 and 7 of padding): LID,
//! reserved, SMInfo (GUID, SM_Key, ActCount, Priority | SMState).
//!
//! Components (OpenSM `IB_SMIR_COMPMASK_*`): 0 LID, 1 reserved, 2 GUID, 3 SM_Key,
//! 4 ActCount, 5 Priority, 6 SMState. The SM_Key of an answer is 0 (the key never leaves
//! the manager; OpenSM also zeroes it for requesters without the key).

use super::{record_image, ExtraMatch};
use crate::wire::attr;

record_image! {
    /// One SMInfoRecord.
    pub struct SmInfoRecord {
        attr: attr::SM_INFO_RECORD, size: 32, name: "SMInfoRecord", components: 7;
        lid: u16 = (0, 0, 16), comp 0;
        guid: u64 = (4, 0, 64), comp 2;
        sm_key: u64 = (12, 0, 64), comp 3;
        act_count: u32 = (20, 0, 32), comp 4;
        priority: u8 = (24, 0, 4), comp 5;
        sm_state: u8 = (24, 4, 4), comp 6;
    }
}
impl ExtraMatch for SmInfoRecord {}
