//! NodeRecord (attribute 0x0011, IBA 15.2.5.2), 112 bytes (108 and 4 bytes of padding):
//! LID, reserved, NodeInfo (40 bytes), NodeDescription (64 bytes).
//!
//! Components (OpenSM `IB_NR_COMPMASK_*`): 0 LID, 1 reserved, 2 BaseVersion,
//! 3 ClassVersion, 4 NodeType, 5 NumPorts, 6 SystemImageGUID, 7 NodeGUID, 8 PortGUID,
//! 9 PartitionCap, 10 DeviceID, 11 Revision, 12 LocalPortNum, 13 VendorID,
//! 14 NodeDescription. The LID matches every LID of the port's LMC range (the query does
//! it, the record's LID is the base LID); the NodeDescription compares up to its first NUL.

use super::{record_image, Bytes, ExtraMatch};
use crate::wire::attr;

/// Component bits of a NodeRecord.
pub mod comp {
    pub const LID: u32 = 0;
    pub const NODE_TYPE: u32 = 4;
    pub const NODE_GUID: u32 = 7;
    pub const PORT_GUID: u32 = 8;
    pub const LOCAL_PORT_NUM: u32 = 12;
    pub const NODE_DESCRIPTION: u32 = 14;
}

record_image! {
    /// One NodeRecord.
    pub struct NodeRecord {
        attr: attr::NODE_RECORD, size: 112, name: "NodeRecord", components: 15;
        lid: u16 = (0, 0, 16);
        base_version: u8 = (4, 0, 8), comp 2;
        class_version: u8 = (5, 0, 8), comp 3;
        node_type: u8 = (6, 0, 8), comp 4;
        num_ports: u8 = (7, 0, 8), comp 5;
        sys_guid: u64 = (8, 0, 64), comp 6;
        node_guid: u64 = (16, 0, 64), comp 7;
        port_guid: u64 = (24, 0, 64), comp 8;
        partition_cap: u16 = (32, 0, 16), comp 9;
        device_id: u16 = (34, 0, 16), comp 10;
        revision: u32 = (36, 0, 32), comp 11;
        /// LocalPortNum (saquery: `port_num`).
        port_num: u8 = (40, 0, 8), comp 12;
        vendor_id: u32 = (41, 0, 24), comp 13;
        node_description: Bytes<64> = (44, 0, 512), comp 14;
    }
}
impl ExtraMatch for NodeRecord {}
