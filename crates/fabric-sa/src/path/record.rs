//! A minimal PathRecord (IBA vol. 1 15.2.5.16) and MultiPathRecord (15.2.5.20) codec, private
//! to the path module until the records module's own PathRecord lands (same field set).
//!
//! ```text
//! PathRecord (64 bytes)
//!  0..8 ServiceID  8..24 DGID  24..40 SGID  40..42 DLID  42..44 SLID
//! 44..48 RawTraffic(31) | reserved(30..28) | FlowLabel(27..8) | HopLimit(7..0)
//! 48 TClass  49 Reversible(7) | NumbPath(6..0)  50..52 P_Key  52..54 QoSClass(15..4) | SL(3..0)
//! 54 MTUSelector(7..6) | MTU  55 RateSelector | Rate  56 PacketLifeTimeSelector | PacketLifeTime
//! 57 Preference  58..64 reserved
//!
//! MultiPathRecord (24 bytes, then SGIDCount + DGIDCount GIDs of 16 bytes)
//!  0..4 RawTraffic | reserved | FlowLabel | HopLimit  4 TClass  5 Reversible | NumbPath
//!  6..8 P_Key  8..10 QoSClass | SL  10 MTUSelector | MTU  11 RateSelector | Rate
//! 12 PacketLifeTimeSelector | PacketLifeTime  13 ServiceID (8 MSB)  14 IndependenceSelector
//! 15 SGIDCount  16 DGIDCount  17..24 ServiceID (56 LSB)  24.. SGIDs then DGIDs
//! ```

use crate::records::{need, DecodeError};

/// PathRecord component-mask bits (IBA table 203; OpenSM `IB_PR_COMPMASK_*`).
/// Bits 0 and 1 (ServiceID) select no path and are not read.
pub mod pr_mask {
    pub const DGID: u64 = 1 << 2;
    pub const SGID: u64 = 1 << 3;
    pub const DLID: u64 = 1 << 4;
    pub const SLID: u64 = 1 << 5;
    pub const RAW_TRAFFIC: u64 = 1 << 6;
    pub const FLOW_LABEL: u64 = 1 << 8;
    pub const HOP_LIMIT: u64 = 1 << 9;
    pub const TCLASS: u64 = 1 << 10;
    pub const REVERSIBLE: u64 = 1 << 11;
    pub const NUMB_PATH: u64 = 1 << 12;
    pub const PKEY: u64 = 1 << 13;
    pub const QOS_CLASS: u64 = 1 << 14;
    pub const SL: u64 = 1 << 15;
    pub const MTU_SELECTOR: u64 = 1 << 16;
    pub const MTU: u64 = 1 << 17;
    pub const RATE_SELECTOR: u64 = 1 << 18;
    pub const RATE: u64 = 1 << 19;
    pub const PKT_LIFE_SELECTOR: u64 = 1 << 20;
    pub const PKT_LIFE: u64 = 1 << 21;
    pub const PREFERENCE: u64 = 1 << 22;
}

/// MultiPathRecord component-mask bits (IBA table 213; OpenSM `IB_MPR_COMPMASK_*`).
pub mod mpr_mask {
    pub const RAW_TRAFFIC: u64 = 1 << 0;
    pub const FLOW_LABEL: u64 = 1 << 2;
    pub const HOP_LIMIT: u64 = 1 << 3;
    pub const TCLASS: u64 = 1 << 4;
    pub const REVERSIBLE: u64 = 1 << 5;
    pub const NUMB_PATH: u64 = 1 << 6;
    pub const PKEY: u64 = 1 << 7;
    pub const QOS_CLASS: u64 = 1 << 8;
    pub const SL: u64 = 1 << 9;
    pub const MTU_SELECTOR: u64 = 1 << 10;
    pub const MTU: u64 = 1 << 11;
    pub const RATE_SELECTOR: u64 = 1 << 12;
    pub const RATE: u64 = 1 << 13;
    pub const PKT_LIFE_SELECTOR: u64 = 1 << 14;
    pub const PKT_LIFE: u64 = 1 << 15;
    pub const SGID_COUNT: u64 = 1 << 19;
    pub const DGID_COUNT: u64 = 1 << 20;
}

/// Bytes of a PathRecord.
pub const PATH_RECORD_SIZE: usize = 64;
/// Bytes of a MultiPathRecord before its GIDs.
pub const MULTI_PATH_HEADER_SIZE: usize = 24;

/// The fields of a PathRecord.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathRecord {
    pub service_id: u64,
    pub dgid: [u8; 16],
    pub sgid: [u8; 16],
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: bool,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub tclass: u8,
    pub reversible: bool,
    pub numb_path: u8,
    pub pkey: u16,
    pub qos_class: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub pkt_life_selector: u8,
    pub pkt_life: u8,
    pub preference: u8,
}

fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}
fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn gid(b: &[u8], o: usize) -> [u8; 16] {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[o..o + 16]);
    g
}

impl PathRecord {
    /// Reads the 64-byte image.
    pub fn decode(b: &[u8]) -> Result<PathRecord, DecodeError> {
        need("PathRecord", b, PATH_RECORD_SIZE)?;
        let hfr = be32(b, 44);
        let qs = be16(b, 52);
        Ok(PathRecord {
            service_id: u64::from_be_bytes(b[0..8].try_into().unwrap_or_default()),
            dgid: gid(b, 8),
            sgid: gid(b, 24),
            dlid: be16(b, 40),
            slid: be16(b, 42),
            raw_traffic: hfr >> 31 != 0,
            flow_label: (hfr >> 8) & 0xf_ffff,
            hop_limit: hfr as u8,
            tclass: b[48],
            reversible: b[49] & 0x80 != 0,
            numb_path: b[49] & 0x7f,
            pkey: be16(b, 50),
            qos_class: qs >> 4,
            sl: (qs & 0x0f) as u8,
            mtu_selector: b[54] >> 6,
            mtu: b[54] & 0x3f,
            rate_selector: b[55] >> 6,
            rate: b[55] & 0x3f,
            pkt_life_selector: b[56] >> 6,
            pkt_life: b[56] & 0x3f,
            preference: b[57],
        })
    }

    /// Writes the 64-byte image into `out[..64]`.
    pub fn encode(&self, out: &mut [u8]) {
        let out = &mut out[..PATH_RECORD_SIZE];
        out[0..8].copy_from_slice(&self.service_id.to_be_bytes());
        out[8..24].copy_from_slice(&self.dgid);
        out[24..40].copy_from_slice(&self.sgid);
        out[40..42].copy_from_slice(&self.dlid.to_be_bytes());
        out[42..44].copy_from_slice(&self.slid.to_be_bytes());
        let hfr = (u32::from(self.raw_traffic) << 31) | ((self.flow_label & 0xf_ffff) << 8) | u32::from(self.hop_limit);
        out[44..48].copy_from_slice(&hfr.to_be_bytes());
        out[48] = self.tclass;
        out[49] = (u8::from(self.reversible) << 7) | (self.numb_path & 0x7f);
        out[50..52].copy_from_slice(&self.pkey.to_be_bytes());
        let qs = ((self.qos_class & 0x0fff) << 4) | u16::from(self.sl & 0x0f);
        out[52..54].copy_from_slice(&qs.to_be_bytes());
        out[54] = (self.mtu_selector << 6) | (self.mtu & 0x3f);
        out[55] = (self.rate_selector << 6) | (self.rate & 0x3f);
        out[56] = (self.pkt_life_selector << 6) | (self.pkt_life & 0x3f);
        out[57] = self.preference;
        out[58..64].fill(0);
    }
}

/// A MultiPathRecord request: the PathRecord-like template fields (as a [`PathRecord`] with
/// a PathRecord component mask) and the GIDs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiPathRequest {
    pub template: PathRecord,
    /// The template's component mask, translated to PathRecord bits.
    pub pr_mask: u64,
    pub sgids: Vec<[u8; 16]>,
    pub dgids: Vec<[u8; 16]>,
}

/// Why a MultiPathRecord request is invalid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MultiPathError {
    #[error(transparent)]
    Truncated(#[from] DecodeError),
    #[error("MultiPathRecord without SGIDCount/DGIDCount in the component mask or with a zero count (SGIDCount {sgids}, DGIDCount {dgids})")]
    NoGids { sgids: u8, dgids: u8 },
    #[error("MultiPathRecord announces {want} GIDs but its data holds {have}")]
    MissingGids { want: usize, have: usize },
}

impl MultiPathRequest {
    /// Reads a MultiPathRecord request (`b`: the whole, reassembled SA data) under `mask`.
    pub fn decode(b: &[u8], mask: u64) -> Result<MultiPathRequest, MultiPathError> {
        need("MultiPathRecord", b, MULTI_PATH_HEADER_SIZE)?;
        let hfr = be32(b, 0);
        let qs = be16(b, 8);
        let template = PathRecord {
            raw_traffic: hfr >> 31 != 0,
            flow_label: (hfr >> 8) & 0xf_ffff,
            hop_limit: hfr as u8,
            tclass: b[4],
            reversible: b[5] & 0x80 != 0,
            numb_path: b[5] & 0x7f,
            pkey: be16(b, 6),
            qos_class: qs >> 4,
            sl: (qs & 0x0f) as u8,
            mtu_selector: b[10] >> 6,
            mtu: b[10] & 0x3f,
            rate_selector: b[11] >> 6,
            rate: b[11] & 0x3f,
            pkt_life_selector: b[12] >> 6,
            pkt_life: b[12] & 0x3f,
            ..PathRecord::default()
        };
        const MAP: [(u64, u64); 15] = [
            (mpr_mask::RAW_TRAFFIC, pr_mask::RAW_TRAFFIC),
            (mpr_mask::FLOW_LABEL, pr_mask::FLOW_LABEL),
            (mpr_mask::HOP_LIMIT, pr_mask::HOP_LIMIT),
            (mpr_mask::TCLASS, pr_mask::TCLASS),
            (mpr_mask::REVERSIBLE, pr_mask::REVERSIBLE),
            (mpr_mask::NUMB_PATH, pr_mask::NUMB_PATH),
            (mpr_mask::PKEY, pr_mask::PKEY),
            (mpr_mask::QOS_CLASS, pr_mask::QOS_CLASS),
            (mpr_mask::SL, pr_mask::SL),
            (mpr_mask::MTU_SELECTOR, pr_mask::MTU_SELECTOR),
            (mpr_mask::MTU, pr_mask::MTU),
            (mpr_mask::RATE_SELECTOR, pr_mask::RATE_SELECTOR),
            (mpr_mask::RATE, pr_mask::RATE),
            (mpr_mask::PKT_LIFE_SELECTOR, pr_mask::PKT_LIFE_SELECTOR),
            (mpr_mask::PKT_LIFE, pr_mask::PKT_LIFE),
        ];
        let pr_mask = MAP.iter().filter(|(m, _)| mask & m != 0).fold(0, |a, (_, p)| a | p);
        let ns = if mask & mpr_mask::SGID_COUNT != 0 { b[15] } else { 0 };
        let nd = if mask & mpr_mask::DGID_COUNT != 0 { b[16] } else { 0 };
        if ns == 0 || nd == 0 {
            return Err(MultiPathError::NoGids { sgids: ns, dgids: nd });
        }
        let want = usize::from(ns) + usize::from(nd);
        let have = (b.len() - MULTI_PATH_HEADER_SIZE) / 16;
        if have < want {
            return Err(MultiPathError::MissingGids { want, have });
        }
        let g = |i: usize| gid(b, MULTI_PATH_HEADER_SIZE + 16 * i);
        Ok(MultiPathRequest {
            template,
            pr_mask,
            sgids: (0..usize::from(ns)).map(g).collect(),
            dgids: (usize::from(ns)..want).map(g).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_record_round_trips_at_the_documented_offsets() {
        let r = PathRecord {
            service_id: 0x0102_0304_0506_0708,
            dgid: [0xd; 16],
            sgid: [0x5; 16],
            dlid: 0x1234,
            slid: 0x0042,
            raw_traffic: true,
            flow_label: 0xabcde,
            hop_limit: 0x40,
            tclass: 0x77,
            reversible: true,
            numb_path: 0x7f,
            pkey: 0xffff,
            qos_class: 0xabc,
            sl: 0xf,
            mtu_selector: 2,
            mtu: 5,
            rate_selector: 2,
            rate: 16,
            pkt_life_selector: 2,
            pkt_life: 18,
            preference: 2,
        };
        let mut b = [0u8; 64];
        r.encode(&mut b);
        assert_eq!(&b[40..44], &[0x12, 0x34, 0x00, 0x42]);
        assert_eq!(&b[44..48], &[0x8a, 0xbc, 0xde, 0x40]);
        assert_eq!(b[49], 0xff);
        assert_eq!(&b[52..58], &[0xab, 0xcf, 0x85, 0x90, 0x92, 0x02]);
        assert_eq!(PathRecord::decode(&b), Ok(r));
        assert!(PathRecord::decode(&b[..63]).is_err());
    }

    #[test]
    fn multipath_request_reads_gids_and_translates_the_mask() {
        let mut b = vec![0u8; 24 + 3 * 16];
        b[5] = 0x82; // reversible, NumbPath 2
        b[9] = 0x01; // SL 1
        b[15] = 1;
        b[16] = 2;
        for i in 0..3 {
            b[24 + 16 * i + 15] = i as u8 + 1;
        }
        let m = mpr_mask::SGID_COUNT | mpr_mask::DGID_COUNT | mpr_mask::NUMB_PATH | mpr_mask::SL;
        let r = MultiPathRequest::decode(&b, m).unwrap();
        assert_eq!(r.pr_mask, pr_mask::NUMB_PATH | pr_mask::SL);
        assert_eq!(
            (r.template.numb_path, r.template.reversible, r.template.sl),
            (2, true, 1)
        );
        assert_eq!(r.sgids.len(), 1);
        assert_eq!(r.dgids.iter().map(|g| g[15]).collect::<Vec<_>>(), vec![2, 3]);
        assert!(matches!(
            MultiPathRequest::decode(&b[..24 + 32], m),
            Err(MultiPathError::MissingGids { want: 3, have: 2 })
        ));
        assert!(matches!(
            MultiPathRequest::decode(&b, mpr_mask::SGID_COUNT),
            Err(MultiPathError::NoGids { sgids: 1, dgids: 0 })
        ));
    }
}
