//! MultiPathRecord (attribute 0x003a, IBA 15.2.5.20): the template of a GetMulti request;
//! the answer is PathRecords. 24 bytes followed by SGIDCount + DGIDCount GIDs (at most 11 in
//! the first 200 bytes, OpenSM's `IB_MULTIPATH_MAX_GIDS`).
//!
//! ```text
//!  0..4 RawTraffic(31) | reserved | FlowLabel(27..8) | HopLimit(7..0)  4 TClass
//!  5 Reversible(7) | NumbPath(6..0)  6..8 P_Key  8..10 QoSClass(15..4) | SL(3..0)
//! 10 MTUSelector | MTU  11 RateSelector | Rate  12 PacketLifeTimeSelector | PacketLifeTime
//! 13 ServiceID (8 MSB)  14 IndependenceSelector(7..6) | reserved  15 SGIDCount  16 DGIDCount
//! 17..24 ServiceID (56 LSB)  24.. SGIDs then DGIDs, 16 bytes each
//! ```
//!
//! Component bits (OpenSM `IB_MPR_COMPMASK_*`): 0 RawTraffic, 1 reserved, 2 FlowLabel,
//! 3 HopLimit, 4 TClass, 5 Reversible, 6 NumbPath, 7 P_Key, 8 QoSClass, 9 SL,
//! 10 MTUSelector, 11 MTU, 12 RateSelector, 13 Rate, 14 PacketLifeTimeSelector,
//! 15 PacketLifeTime, 16 ServiceID (8 MSB), 17 IndependenceSelector, 18 reserved,
//! 19 SGIDCount, 20 DGIDCount, 21 ServiceID (56 LSB).

use super::path::PROPERTIES_SIZE;
use super::{components, need, numeric_rank, rate_rank, sel, selected_by, DecodeError, Gid, PathRecord, Record};
use crate::wire::attr;

/// At most this many GIDs fit a MultiPathRecord in one MAD.
pub const MAX_GIDS: usize = 11;
/// Bytes before the GIDs.
pub const FIXED_SIZE: usize = 24;

/// Component bits of a MultiPathRecord.
pub mod comp {
    pub const RAW_TRAFFIC: u32 = 0;
    pub const FLOW_LABEL: u32 = 2;
    pub const HOP_LIMIT: u32 = 3;
    pub const TCLASS: u32 = 4;
    pub const REVERSIBLE: u32 = 5;
    pub const NUMB_PATH: u32 = 6;
    pub const PKEY: u32 = 7;
    pub const QOS_CLASS: u32 = 8;
    pub const SL: u32 = 9;
    pub const MTU_SELECTOR: u32 = 10;
    pub const MTU: u32 = 11;
    pub const RATE_SELECTOR: u32 = 12;
    pub const RATE: u32 = 13;
    pub const PKT_LIFE_SELECTOR: u32 = 14;
    pub const PKT_LIFE: u32 = 15;
    pub const SERVICE_ID_MSB: u32 = 16;
    pub const INDEPENDENCE_SELECTOR: u32 = 17;
    pub const SGID_COUNT: u32 = 19;
    pub const DGID_COUNT: u32 = 20;
    pub const SERVICE_ID_LSB: u32 = 21;
}

/// One MultiPathRecord.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MultiPathRecord {
    pub raw_traffic: bool,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub tclass: u8,
    pub reversible: bool,
    pub num_path: u8,
    pub pkey: u16,
    pub qos_class: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub pkt_life_selector: u8,
    pub pkt_life: u8,
    /// ServiceID (the 8 MSB and 56 LSB put together).
    pub service_id: u64,
    /// 2 bits.
    pub independence: u8,
    /// The source GIDs (SGIDCount of them).
    pub sgids: Vec<Gid>,
    /// The destination GIDs (DGIDCount of them).
    pub dgids: Vec<Gid>,
}

impl MultiPathRecord {
    /// The size of this record's image (24 bytes and its GIDs).
    pub fn image_len(&self) -> usize {
        FIXED_SIZE + 16 * (self.sgids.len() + self.dgids.len())
    }
}

/// Why a MultiPathRecord is not a usable request even though its bytes decode.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MultiPathError {
    #[error(transparent)]
    Short(#[from] DecodeError),
    #[error("MultiPathRecord: SGIDCount {sgids} + DGIDCount {dgids} GIDs need {need} bytes, the request has {len}")]
    GidsTruncated {
        sgids: u8,
        dgids: u8,
        need: usize,
        len: usize,
    },
}

impl MultiPathRecord {
    /// Reads a GetMulti payload: the 24 fixed bytes and SGIDCount + DGIDCount GIDs, which
    /// may exceed one MAD (the payload was reassembled from RMPP segments).
    pub fn decode_request(b: &[u8]) -> Result<Self, MultiPathError> {
        need(Self::NAME, b, FIXED_SIZE)?;
        let (ns, nd) = (b[15], b[16]);
        let total = FIXED_SIZE + 16 * (usize::from(ns) + usize::from(nd));
        if b.len() < total {
            return Err(MultiPathError::GidsTruncated {
                sgids: ns,
                dgids: nd,
                need: total,
                len: b.len(),
            });
        }
        let mut r = Self::fixed(b);
        let gid = |i: usize| Gid::read(b, FIXED_SIZE + 16 * i);
        r.sgids = (0..usize::from(ns)).map(gid).collect();
        r.dgids = (usize::from(ns)..usize::from(ns) + usize::from(nd)).map(gid).collect();
        Ok(r)
    }

    fn fixed(b: &[u8]) -> Self {
        let p = PathRecord::read_properties(&b[..PROPERTIES_SIZE]);
        let mut sid = [0u8; 8];
        sid[0] = b[13];
        sid[1..].copy_from_slice(&b[17..24]);
        MultiPathRecord {
            raw_traffic: p.raw_traffic,
            flow_label: p.flow_label,
            hop_limit: p.hop_limit,
            tclass: p.tclass,
            reversible: p.reversible,
            num_path: p.num_path,
            pkey: p.pkey,
            qos_class: p.qos_class,
            sl: p.sl,
            mtu_selector: p.mtu_selector,
            mtu: p.mtu,
            rate_selector: p.rate_selector,
            rate: p.rate,
            pkt_life_selector: p.pkt_life_selector,
            pkt_life: p.pkt_life,
            service_id: u64::from_be_bytes(sid),
            independence: b[14] >> 6,
            sgids: Vec::new(),
            dgids: Vec::new(),
        }
    }

    /// The path properties of this record as a PathRecord (every other field default): the
    /// PathRecord template of a GetMulti request.
    pub fn path_template(&self) -> PathRecord {
        PathRecord {
            raw_traffic: self.raw_traffic,
            flow_label: self.flow_label,
            hop_limit: self.hop_limit,
            tclass: self.tclass,
            reversible: self.reversible,
            num_path: self.num_path,
            pkey: self.pkey,
            qos_class: self.qos_class,
            sl: self.sl,
            mtu_selector: self.mtu_selector,
            mtu: self.mtu,
            rate_selector: self.rate_selector,
            rate: self.rate,
            pkt_life_selector: self.pkt_life_selector,
            pkt_life: self.pkt_life,
            ..PathRecord::default()
        }
    }
}

impl Record for MultiPathRecord {
    const ATTR: u16 = attr::MULTI_PATH_RECORD;
    /// The size of the record in one MAD (24 bytes and 11 GIDs).
    const SIZE: usize = FIXED_SIZE + 16 * MAX_GIDS;
    const NAME: &'static str = "MultiPathRecord";
    const COMPONENTS: u64 = components(22);

    /// Reads the 24 fixed bytes and as many of SGIDCount + DGIDCount GIDs as the buffer and
    /// [`MAX_GIDS`] allow (see [`MultiPathRecord::decode_request`] for the strict reading).
    fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        need(Self::NAME, b, FIXED_SIZE)?;
        let mut r = Self::fixed(b);
        let room = (b.len().min(Self::SIZE) - FIXED_SIZE) / 16;
        let ns = usize::from(b[15]).min(room);
        let nd = usize::from(b[16]).min(room - ns);
        let gid = |i: usize| Gid::read(b, FIXED_SIZE + 16 * i);
        r.sgids = (0..ns).map(gid).collect();
        r.dgids = (ns..ns + nd).map(gid).collect();
        Ok(r)
    }

    /// Writes the fixed bytes and the GIDs that fit `out[..SIZE]`; the counts say how many
    /// were written.
    fn encode(&self, out: &mut [u8]) {
        let b = &mut out[..Self::SIZE];
        b.fill(0);
        self.path_template().write_properties(&mut b[..PROPERTIES_SIZE]);
        let sid = self.service_id.to_be_bytes();
        b[13] = sid[0];
        b[14] = (self.independence & 0x3) << 6;
        let ns = self.sgids.len().min(MAX_GIDS);
        let nd = self.dgids.len().min(MAX_GIDS - ns);
        b[15] = ns as u8;
        b[16] = nd as u8;
        b[17..24].copy_from_slice(&sid[1..]);
        for (i, g) in self.sgids[..ns].iter().chain(&self.dgids[..nd]).enumerate() {
            g.write(b, FIXED_SIZE + 16 * i);
        }
    }

    /// Equality on the selected components (selectors as for PathRecord); the GID lists are
    /// not components, their counts are.
    fn matches(&self, t: &Self, mask: u64) -> bool {
        use comp::*;
        let eq = |bit: u32, same: bool| !sel(mask, bit) || same;
        let with_selector =
            |sbit: u32, vbit: u32, s: u8, want: u8, v: u8, rank| selected_by(mask, sbit, vbit, s, want, v, rank);
        eq(RAW_TRAFFIC, self.raw_traffic == t.raw_traffic)
            && eq(FLOW_LABEL, self.flow_label == t.flow_label)
            && eq(HOP_LIMIT, self.hop_limit == t.hop_limit)
            && eq(TCLASS, self.tclass == t.tclass)
            && eq(REVERSIBLE, self.reversible == t.reversible)
            && eq(NUMB_PATH, self.num_path == t.num_path)
            && eq(PKEY, self.pkey == t.pkey)
            && eq(QOS_CLASS, self.qos_class == t.qos_class)
            && eq(SL, self.sl == t.sl)
            && with_selector(MTU_SELECTOR, MTU, t.mtu_selector, t.mtu, self.mtu, numeric_rank)
            && with_selector(RATE_SELECTOR, RATE, t.rate_selector, t.rate, self.rate, rate_rank)
            && with_selector(
                PKT_LIFE_SELECTOR,
                PKT_LIFE,
                t.pkt_life_selector,
                t.pkt_life,
                self.pkt_life,
                numeric_rank,
            )
            && eq(SERVICE_ID_MSB, self.service_id >> 56 == t.service_id >> 56)
            && eq(INDEPENDENCE_SELECTOR, self.independence == t.independence)
            && eq(SGID_COUNT, self.sgids.len() == t.sgids.len())
            && eq(DGID_COUNT, self.dgids.len() == t.dgids.len())
            && eq(SERVICE_ID_LSB, self.service_id << 8 == t.service_id << 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gids_follow_the_fixed_part_sources_first() {
        let mut b = vec![0u8; FIXED_SIZE + 3 * 16];
        b[5] = 0x80 | 4;
        b[13] = 0x12;
        b[14] = 2 << 6;
        b[15] = 1;
        b[16] = 2;
        b[17..24].copy_from_slice(&[0, 0, 0, 0, 0, 0, 9]);
        for i in 0..3 {
            b[FIXED_SIZE + 16 * i + 15] = i as u8 + 1;
        }
        let r = MultiPathRecord::decode_request(&b).unwrap();
        assert_eq!((r.reversible, r.num_path), (true, 4));
        assert_eq!(r.service_id, 0x1200_0000_0000_0009);
        assert_eq!(r.independence, 2);
        assert_eq!(r.sgids.iter().map(Gid::guid).collect::<Vec<_>>(), [1]);
        assert_eq!(r.dgids.iter().map(Gid::guid).collect::<Vec<_>>(), [2, 3]);
        assert!(matches!(
            MultiPathRecord::decode_request(&b[..FIXED_SIZE + 40]),
            Err(MultiPathError::GidsTruncated { need: 72, .. })
        ));
        let mut out = [0u8; MultiPathRecord::SIZE];
        r.encode(&mut out);
        assert_eq!(&out[..b.len()], &b[..]);
    }
}
