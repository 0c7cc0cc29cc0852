//! LinkRecord (attribute 0x0020, IBA 15.2.5.13), 8 bytes (6 and 2 of padding): FromLID,
//! FromPort, ToPort, ToLID. A switch's ports carry the switch's LID.
//!
//! Components (OpenSM `IB_LR_COMPMASK_*`): 0 FromLID, 1 FromPort, 2 ToPort, 3 ToLID.

use super::{record_image, ExtraMatch};
use crate::wire::attr;

record_image! {
    /// One LinkRecord.
    pub struct LinkRecord {
        attr: attr::LINK_RECORD, size: 8, name: "LinkRecord", components: 4;
        from_lid: u16 = (0, 0, 16), comp 0;
        from_port_num: u8 = (2, 0, 8), comp 1;
        to_port_num: u8 = (3, 0, 8), comp 2;
        to_lid: u16 = (4, 0, 16), comp 3;
    }
}
impl ExtraMatch for LinkRecord {}
