//! PathRecord (attribute 0x0035, IBA 15.2.5.16), 64 bytes.
//!
//! ```text
//!  0..8 ServiceID  8..24 DGID  24..40 SGID  40..42 DLID  42..44 SLID
//! 44..48 RawTraffic(31) | reserved(30..28) | FlowLabel(27..8) | HopLimit(7..0)
//! 48 TClass  49 Reversible(7) | NumbPath(6..0)  50..52 P_Key  52..54 QoSClass(15..4) | SL(3..0)
//! 54 MTUSelector(7..6) | MTU(5..0)  55 RateSelector | Rate  56 PacketLifeTimeSelector | PacketLifeTime
//! 57 Preference  58..64 reserved
//! ```
//!
//! Component bits (OpenSM `IB_PR_COMPMASK_*`): 0 ServiceID (8 MSB), 1 ServiceID (56 LSB),
//! 2 DGID, 3 SGID, 4 DLID, 5 SLID, 6 RawTraffic, 7 reserved, 8 FlowLabel, 9 HopLimit,
//! 10 TClass, 11 Reversible, 12 NumbPath, 13 P_Key, 14 QoSClass, 15 SL, 16 MTUSelector,
//! 17 MTU, 18 RateSelector, 19 Rate, 20 PacketLifeTimeSelector, 21 PacketLifeTime,
//! 22 Preference, 23 reserved.

use super::{
    components, need, numeric_rank, rate_rank, rd16, rd32, rd64, sel, selected_by, wr16, wr32, wr64, DecodeError, Gid,
    Record,
};
use crate::wire::attr;

/// Component bits of a PathRecord.
pub mod comp {
    pub const SERVICE_ID_MSB: u32 = 0;
    pub const SERVICE_ID_LSB: u32 = 1;
    pub const DGID: u32 = 2;
    pub const SGID: u32 = 3;
    pub const DLID: u32 = 4;
    pub const SLID: u32 = 5;
    pub const RAW_TRAFFIC: u32 = 6;
    pub const FLOW_LABEL: u32 = 8;
    pub const HOP_LIMIT: u32 = 9;
    pub const TCLASS: u32 = 10;
    pub const REVERSIBLE: u32 = 11;
    pub const NUMB_PATH: u32 = 12;
    pub const PKEY: u32 = 13;
    pub const QOS_CLASS: u32 = 14;
    pub const SL: u32 = 15;
    pub const MTU_SELECTOR: u32 = 16;
    pub const MTU: u32 = 17;
    pub const RATE_SELECTOR: u32 = 18;
    pub const RATE: u32 = 19;
    pub const PKT_LIFE_SELECTOR: u32 = 20;
    pub const PKT_LIFE: u32 = 21;
    pub const PREFERENCE: u32 = 22;
}

/// One PathRecord.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PathRecord {
    pub service_id: u64,
    pub dgid: Gid,
    pub sgid: Gid,
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: bool,
    /// 20 bits.
    pub flow_label: u32,
    pub hop_limit: u8,
    pub tclass: u8,
    pub reversible: bool,
    /// 7 bits.
    pub num_path: u8,
    pub pkey: u16,
    /// 12 bits.
    pub qos_class: u16,
    /// 4 bits.
    pub sl: u8,
    /// 2 bits (see [`super::selector`]).
    pub mtu_selector: u8,
    /// 6 bits (1 = 256 … 5 = 4096).
    pub mtu: u8,
    pub rate_selector: u8,
    /// 6 bits (IBA table 224 codes).
    pub rate: u8,
    pub pkt_life_selector: u8,
    /// 6 bits.
    pub pkt_life: u8,
    pub preference: u8,
}

/// Size of the path properties block ([`PathRecord::read_properties`]).
pub const PROPERTIES_SIZE: usize = 13;

impl PathRecord {
    /// A PathRecord holding only the path properties read from `b` (13 bytes: RawTraffic,
    /// FlowLabel, HopLimit, TClass, Reversible, NumbPath, P_Key, QoSClass, SL and the MTU,
    /// Rate and PacketLifeTime selectors and values), laid out as in a PathRecord (bytes
    /// 44..57) and a MultiPathRecord (bytes 0..13).
    pub fn read_properties(b: &[u8]) -> PathRecord {
        let hfr = rd32(b, 0);
        let qs = rd16(b, 8);
        PathRecord {
            raw_traffic: hfr >> 31 != 0,
            flow_label: (hfr >> 8) & 0xf_ffff,
            hop_limit: hfr as u8,
            tclass: b[4],
            reversible: b[5] & 0x80 != 0,
            num_path: b[5] & 0x7f,
            pkey: rd16(b, 6),
            qos_class: qs >> 4,
            sl: (qs & 0xf) as u8,
            mtu_selector: b[10] >> 6,
            mtu: b[10] & 0x3f,
            rate_selector: b[11] >> 6,
            rate: b[11] & 0x3f,
            pkt_life_selector: b[12] >> 6,
            pkt_life: b[12] & 0x3f,
            ..PathRecord::default()
        }
    }

    /// Writes the path properties ([`PathRecord::read_properties`]) into `b` (13 bytes).
    pub fn write_properties(&self, b: &mut [u8]) {
        let hfr = (u32::from(self.raw_traffic) << 31) | ((self.flow_label & 0xf_ffff) << 8) | u32::from(self.hop_limit);
        wr32(b, 0, hfr);
        b[4] = self.tclass;
        b[5] = (u8::from(self.reversible) << 7) | (self.num_path & 0x7f);
        wr16(b, 6, self.pkey);
        wr16(b, 8, ((self.qos_class & 0xfff) << 4) | u16::from(self.sl & 0xf));
        b[10] = (self.mtu_selector << 6) | (self.mtu & 0x3f);
        b[11] = (self.rate_selector << 6) | (self.rate & 0x3f);
        b[12] = (self.pkt_life_selector << 6) | (self.pkt_life & 0x3f);
    }
}

impl Record for PathRecord {
    const ATTR: u16 = attr::PATH_RECORD;
    const SIZE: usize = 64;
    const NAME: &'static str = "PathRecord";
    const COMPONENTS: u64 = components(24);

    fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        need(Self::NAME, b, Self::SIZE)?;
        Ok(PathRecord {
            service_id: rd64(b, 0),
            dgid: Gid::read(b, 8),
            sgid: Gid::read(b, 24),
            dlid: rd16(b, 40),
            slid: rd16(b, 42),
            preference: b[57],
            ..PathRecord::read_properties(&b[44..57])
        })
    }

    fn encode(&self, out: &mut [u8]) {
        let b = &mut out[..Self::SIZE];
        wr64(b, 0, self.service_id);
        self.dgid.write(b, 8);
        self.sgid.write(b, 24);
        wr16(b, 40, self.dlid);
        wr16(b, 42, self.slid);
        self.write_properties(&mut b[44..57]);
        b[57] = self.preference;
        b[58..64].fill(0);
    }

    /// Equality on every selected component, except MTU, Rate and PacketLifeTime: with their
    /// selector bit set as well, the template's selector applies (greater than, less than,
    /// exactly, largest = any), as OpenSM reads a path query. NumbPath is not a match: in a
    /// query it is the number of paths asked for (the path computation reads it).
    fn matches(&self, t: &Self, mask: u64) -> bool {
        use comp::*;
        let eq = |bit: u32, same: bool| !sel(mask, bit) || same;
        let with_selector =
            |sbit: u32, vbit: u32, s: u8, want: u8, v: u8, rank| selected_by(mask, sbit, vbit, s, want, v, rank);
        eq(SERVICE_ID_MSB, self.service_id >> 56 == t.service_id >> 56)
            && eq(SERVICE_ID_LSB, self.service_id << 8 == t.service_id << 8)
            && eq(DGID, self.dgid == t.dgid)
            && eq(SGID, self.sgid == t.sgid)
            && eq(DLID, self.dlid == t.dlid)
            && eq(SLID, self.slid == t.slid)
            && eq(RAW_TRAFFIC, self.raw_traffic == t.raw_traffic)
            && eq(FLOW_LABEL, self.flow_label == t.flow_label)
            && eq(HOP_LIMIT, self.hop_limit == t.hop_limit)
            && eq(TCLASS, self.tclass == t.tclass)
            && eq(REVERSIBLE, self.reversible == t.reversible)
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
            && eq(PREFERENCE, self.preference == t.preference)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PathRecord image laid out by hand at the offsets of IBA 15.2.5.16.
    #[test]
    fn decodes_the_documented_offsets() {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&0x1000_0000_0000_0001u64.to_be_bytes());
        b[8..16].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
        b[16..24].copy_from_slice(&0x22u64.to_be_bytes());
        b[24..32].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
        b[32..40].copy_from_slice(&0x11u64.to_be_bytes());
        b[40..42].copy_from_slice(&[0, 7]);
        b[42..44].copy_from_slice(&[0, 3]);
        // RawTraffic 1, FlowLabel 0x12345, HopLimit 0x40.
        b[44..48].copy_from_slice(&[0x81, 0x23, 0x45, 0x40]);
        b[48] = 9;
        b[49] = 0x80 | 2;
        b[50..52].copy_from_slice(&[0xff, 0xff]);
        // QoSClass 0xabc, SL 5.
        b[52..54].copy_from_slice(&[0xab, 0xc5]);
        b[54] = (2 << 6) | 4;
        b[55] = (2 << 6) | 3;
        b[56] = (2 << 6) | 0x12;
        b[57] = 1;
        let r = PathRecord::decode(&b).unwrap();
        assert_eq!(r.service_id, 0x1000_0000_0000_0001);
        assert_eq!(r.dgid.guid(), 0x22);
        assert_eq!(r.sgid.guid(), 0x11);
        assert_eq!((r.dlid, r.slid), (7, 3));
        assert!(r.raw_traffic);
        assert_eq!((r.flow_label, r.hop_limit), (0x12345, 0x40));
        assert_eq!((r.tclass, r.reversible, r.num_path), (9, true, 2));
        assert_eq!((r.pkey, r.qos_class, r.sl), (0xffff, 0xabc, 5));
        assert_eq!((r.mtu_selector, r.mtu), (2, 4));
        assert_eq!((r.rate_selector, r.rate), (2, 3));
        assert_eq!((r.pkt_life_selector, r.pkt_life, r.preference), (2, 0x12, 1));
        let mut out = [0xaau8; 64];
        r.encode(&mut out);
        assert_eq!(out, b);
        assert_eq!(
            PathRecord::decode(&b[..63]),
            Err(DecodeError {
                record: "PathRecord",
                len: 63,
                need: 64
            })
        );
    }

    #[test]
    fn selectors_apply_only_with_their_bit() {
        let rec = PathRecord {
            mtu: 4,
            rate: 3,
            ..Default::default()
        };
        let t = PathRecord {
            mtu_selector: selector_less(),
            mtu: 5,
            ..Default::default()
        };
        let mtu = 1 << comp::MTU;
        let mtu_sel = mtu | 1 << comp::MTU_SELECTOR;
        assert!(!rec.matches(&t, mtu), "MTU alone is an exact match");
        assert!(rec.matches(&t, mtu_sel), "2048 < 4096");
        assert!(
            rec.matches(&t, 1 << comp::MTU_SELECTOR),
            "selector alone selects nothing"
        );
        let t = PathRecord {
            rate_selector: 0,
            rate: 5,
            ..Default::default()
        };
        let rate_gt = 1 << comp::RATE | 1 << comp::RATE_SELECTOR;
        assert!(rec.matches(&t, rate_gt), "10 Gb/s > 5 Gb/s although code 3 < 5");
    }

    fn selector_less() -> u8 {
        super::super::selector::LESS_THAN
    }
}
