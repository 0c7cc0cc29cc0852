//! The SA MAD (IBA vol. 1 15.2.1.1): the common MAD header, the RMPP header (13.6.2.1), the SA
//! header (SM_Key, AttributeOffset, ComponentMask) and 200 bytes of SA data.
//!
//! ```text
//!  0 BaseVersion  1 MgmtClass  2 ClassVersion  3 R|Method  4..6 Status  6..8 ClassSpecific
//!  8..16 TransactionID  16..18 AttributeID  18..20 reserved  20..24 AttributeModifier
//! 24 RMPPVersion  25 RMPPType  26 RRespTime(7..3)|RMPPFlags(2..0)  27 RMPPStatus
//! 28..32 Data1 (SegmentNumber)  32..36 Data2 (PayloadLength / NewWindowLast)
//! 36..44 SM_Key  44..46 AttributeOffset (8-byte words)  46..48 reserved  48..56 ComponentMask
//! 56..256 SA data
//! ```

/// Size of a MAD.
pub const MAD_SIZE: usize = 256;
/// Size of the SA MAD header (common + RMPP + SA).
pub const SA_HEADER_SIZE: usize = 56;
/// SA data bytes in one MAD (one RMPP segment).
pub const SA_DATA_SIZE: usize = MAD_SIZE - SA_HEADER_SIZE;

/// Subnet Administration management class.
pub const CLASS_SUBN_ADM: u8 = 0x03;
/// SubnAdm class version.
pub const SA_CLASS_VERSION: u8 = 2;

/// SubnAdmGet.
pub const METHOD_GET: u8 = 0x01;
/// SubnAdmSet.
pub const METHOD_SET: u8 = 0x02;
/// Send.
pub const METHOD_SEND: u8 = 0x03;
/// Trap.
pub const METHOD_TRAP: u8 = 0x05;
/// Report (SA to subscriber).
pub const METHOD_REPORT: u8 = 0x06;
/// TrapRepress.
pub const METHOD_TRAP_REPRESS: u8 = 0x07;
/// SubnAdmGetTable.
pub const METHOD_GET_TABLE: u8 = 0x12;
/// SubnAdmGetTraceTable.
pub const METHOD_GET_TRACE_TABLE: u8 = 0x13;
/// SubnAdmGetMulti.
pub const METHOD_GET_MULTI: u8 = 0x14;
/// SubnAdmDelete.
pub const METHOD_DELETE: u8 = 0x15;
/// Response bit of the method.
pub const METHOD_RESPONSE: u8 = 0x80;
/// GetResp (also the answer to Set).
pub const METHOD_GET_RESP: u8 = 0x81;
/// ReportResp.
pub const METHOD_REPORT_RESP: u8 = 0x86;
/// GetTableResp.
pub const METHOD_GET_TABLE_RESP: u8 = 0x92;
/// GetMultiResp.
pub const METHOD_GET_MULTI_RESP: u8 = 0x94;
/// DeleteResp.
pub const METHOD_DELETE_RESP: u8 = 0x95;

/// Attribute ids (IBA 15.2.5, table 207).
pub mod attr {
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    pub const NOTICE: u16 = 0x0002;
    pub const INFORM_INFO: u16 = 0x0003;
    pub const NODE_RECORD: u16 = 0x0011;
    pub const PORT_INFO_RECORD: u16 = 0x0012;
    pub const SL_TO_VL_RECORD: u16 = 0x0013;
    pub const SWITCH_INFO_RECORD: u16 = 0x0014;
    pub const LFT_RECORD: u16 = 0x0015;
    pub const RFT_RECORD: u16 = 0x0016;
    pub const MFT_RECORD: u16 = 0x0017;
    pub const SM_INFO_RECORD: u16 = 0x0018;
    pub const LINK_RECORD: u16 = 0x0020;
    pub const GUID_INFO_RECORD: u16 = 0x0030;
    pub const SERVICE_RECORD: u16 = 0x0031;
    pub const P_KEY_TABLE_RECORD: u16 = 0x0033;
    pub const PATH_RECORD: u16 = 0x0035;
    pub const VL_ARB_RECORD: u16 = 0x0036;
    pub const MC_MEMBER_RECORD: u16 = 0x0038;
    pub const TRACE_RECORD: u16 = 0x0039;
    pub const MULTI_PATH_RECORD: u16 = 0x003a;
    pub const SERVICE_ASSOCIATION_RECORD: u16 = 0x003b;
    pub const INFORM_INFO_RECORD: u16 = 0x00f3;
}

/// MAD status codes: common (IBA 13.4.7, bits 4..2) and SA-specific (15.2.1.1, bits 15..8).
pub mod status {
    pub const OK: u16 = 0x0000;
    /// Bad class version.
    pub const BAD_VERSION: u16 = 0x0004;
    /// Method not supported.
    pub const UNSUPPORTED_METHOD: u16 = 0x0008;
    /// Method/attribute combination not supported.
    pub const UNSUPPORTED_METHOD_ATTR: u16 = 0x000c;
    /// One or more fields of the attribute or modifier are invalid.
    pub const INVALID_FIELD: u16 = 0x001c;
    /// ERR_NO_RESOURCES.
    pub const NO_RESOURCES: u16 = 0x0100;
    /// ERR_REQ_INVALID: a field of the request (e.g. the component mask) is invalid.
    pub const REQ_INVALID: u16 = 0x0200;
    /// ERR_NO_RECORDS.
    pub const NO_RECORDS: u16 = 0x0300;
    /// ERR_REQ_TOO_MANY_RECORDS (Get matching more than one record).
    pub const TOO_MANY_RECORDS: u16 = 0x0400;
    /// ERR_REQ_INVALID_GID.
    pub const INVALID_GID: u16 = 0x0500;
    /// ERR_REQ_INSUFFICIENT_COMPONENTS.
    pub const INSUFFICIENT_COMPONENTS: u16 = 0x0600;
    /// ERR_REQ_DENIED.
    pub const DENIED: u16 = 0x0700;
}

/// RMPP types (IBA 13.6.2.1).
pub mod rmpp_type {
    pub const DATA: u8 = 1;
    pub const ACK: u8 = 2;
    pub const STOP: u8 = 3;
    pub const ABORT: u8 = 4;
}

/// RMPP flags (low 3 bits of byte 26).
pub mod rmpp_flag {
    pub const ACTIVE: u8 = 0x01;
    pub const FIRST: u8 = 0x02;
    pub const LAST: u8 = 0x04;
}

/// Why a MAD could not be read as an SA MAD.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("MAD of {0} bytes is shorter than the 56-byte SA header")]
    Truncated(usize),
    #[error("base version {0} (expected 1)")]
    BaseVersion(u8),
    #[error("management class {0:#04x} is not Subnet Administration (0x03)")]
    NotSa(u8),
}

/// The fields of an SA MAD header, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SaHeader {
    pub class_version: u8,
    pub method: u8,
    pub status: u16,
    pub tid: u64,
    pub attr_id: u16,
    pub attr_mod: u32,
    pub rmpp: RmppHeader,
    pub sm_key: u64,
    /// AttributeOffset in 8-byte words (the size of one record of a table answer).
    pub attr_offset: u16,
    pub component_mask: u64,
}

/// The RMPP header (bytes 24..36).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RmppHeader {
    pub version: u8,
    pub rmpp_type: u8,
    pub resp_time: u8,
    pub flags: u8,
    pub status: u8,
    /// Data1: SegmentNumber (DATA, ACK).
    pub data1: u32,
    /// Data2: PayloadLength (DATA) or NewWindowLast (ACK).
    pub data2: u32,
}

fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}
fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn be64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_be_bytes(a)
}

impl SaHeader {
    /// Reads the header of an SA MAD (at least 56 bytes; more is the SA data).
    pub fn decode(mad: &[u8]) -> Result<SaHeader, WireError> {
        if mad.len() < SA_HEADER_SIZE {
            return Err(WireError::Truncated(mad.len()));
        }
        if mad[0] != 1 {
            return Err(WireError::BaseVersion(mad[0]));
        }
        if mad[1] != CLASS_SUBN_ADM {
            return Err(WireError::NotSa(mad[1]));
        }
        Ok(SaHeader {
            class_version: mad[2],
            method: mad[3],
            status: be16(mad, 4),
            tid: be64(mad, 8),
            attr_id: be16(mad, 16),
            attr_mod: be32(mad, 20),
            rmpp: RmppHeader {
                version: mad[24],
                rmpp_type: mad[25],
                resp_time: mad[26] >> 3,
                flags: mad[26] & 0x07,
                status: mad[27],
                data1: be32(mad, 28),
                data2: be32(mad, 32),
            },
            sm_key: be64(mad, 36),
            attr_offset: be16(mad, 44),
            component_mask: be64(mad, 48),
        })
    }

    /// Writes the header into the first 56 bytes of `out`.
    pub fn encode(&self, out: &mut [u8]) {
        out[0] = 1;
        out[1] = CLASS_SUBN_ADM;
        out[2] = self.class_version;
        out[3] = self.method;
        out[4..6].copy_from_slice(&self.status.to_be_bytes());
        out[6..8].fill(0);
        out[8..16].copy_from_slice(&self.tid.to_be_bytes());
        out[16..18].copy_from_slice(&self.attr_id.to_be_bytes());
        out[18..20].fill(0);
        out[20..24].copy_from_slice(&self.attr_mod.to_be_bytes());
        out[24] = self.rmpp.version;
        out[25] = self.rmpp.rmpp_type;
        out[26] = (self.rmpp.resp_time << 3) | (self.rmpp.flags & 0x07);
        out[27] = self.rmpp.status;
        out[28..32].copy_from_slice(&self.rmpp.data1.to_be_bytes());
        out[32..36].copy_from_slice(&self.rmpp.data2.to_be_bytes());
        out[36..44].copy_from_slice(&self.sm_key.to_be_bytes());
        out[44..46].copy_from_slice(&self.attr_offset.to_be_bytes());
        out[46..48].fill(0);
        out[48..56].copy_from_slice(&self.component_mask.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_at_the_documented_offsets() {
        let h = SaHeader {
            class_version: 2,
            method: METHOD_GET_TABLE,
            status: 0x0300,
            tid: 0x1122_3344_5566_7788,
            attr_id: attr::PATH_RECORD,
            attr_mod: 7,
            rmpp: RmppHeader {
                version: 1,
                rmpp_type: rmpp_type::DATA,
                resp_time: 0x1f,
                flags: rmpp_flag::ACTIVE | rmpp_flag::FIRST,
                status: 0,
                data1: 1,
                data2: 220,
            },
            sm_key: 0xaabb,
            attr_offset: 8,
            component_mask: 0x0c,
        };
        let mut b = [0u8; MAD_SIZE];
        h.encode(&mut b);
        assert_eq!(&b[0..4], &[1, 3, 2, 0x12]);
        assert_eq!(&b[16..18], &[0, 0x35]);
        assert_eq!(b[26], 0xfb);
        assert_eq!(&b[44..46], &[0, 8]);
        assert_eq!(b[55], 0x0c);
        assert_eq!(SaHeader::decode(&b), Ok(h));
        assert_eq!(SaHeader::decode(&b[..55]), Err(WireError::Truncated(55)));
    }
}
