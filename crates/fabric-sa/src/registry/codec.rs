//! The registry's own codecs of the four wire images it needs, until the shared ones of
//! [`crate::records`] land (same layouts; the lead switches the registry to them at merge):
//!
//! * [`ServiceRecord`] (IBA 15.2.5.14, 176 bytes), component mask bits 0..=36;
//! * [`InformInfo`] (IBA 13.4.8.3, 36 bytes);
//! * [`InformInfoRecord`] (IBA 15.2.5.12, 64 bytes), component mask bits 0..=15;
//! * [`Notice`] (IBA 13.4.8.2, 80 bytes).
//!
//! Offsets checked against OpenSM's `ib_types.h` (`ib_service_record_t`,
//! `ib_inform_info_t`, `ib_inform_info_record_t`, `ib_mad_notice_attr_t`) and its
//! `IB_SR_COMPMASK_*` / `IB_IIR_COMPMASK_*` bits. Decoders never panic: a short image is a
//! [`DecodeError`]. Reserved fields are read as zero and written as zero.

use crate::records::{need, DecodeError, Record};
use crate::wire::attr;

/// A GID (16 bytes, network order).
pub type Gid = [u8; 16];

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
fn arr<const N: usize>(b: &[u8], o: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[o..o + N]);
    a
}
fn bit(mask: u64, i: u32) -> bool {
    mask & (1u64 << i) != 0
}

/// The GID of a port: subnet prefix and port GUID.
pub fn gid_of(prefix: u64, guid: u64) -> Gid {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&prefix.to_be_bytes());
    g[8..].copy_from_slice(&guid.to_be_bytes());
    g
}

/// The interface id (port GUID) of a GID.
pub fn gid_guid(g: &Gid) -> u64 {
    be64(g, 8)
}

/// ServiceRecord (IBA 15.2.5.14).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceRecord {
    pub service_id: u64,
    pub service_gid: Gid,
    pub service_pkey: u16,
    /// Seconds; 0xFFFF_FFFF = infinite.
    pub service_lease: u32,
    pub service_key: [u8; 16],
    /// UTF-8, NUL-padded.
    pub service_name: [u8; 64],
    pub service_data8: [u8; 16],
    pub service_data16: [u16; 8],
    pub service_data32: [u32; 4],
    pub service_data64: [u64; 2],
}

impl Default for ServiceRecord {
    fn default() -> Self {
        ServiceRecord {
            service_id: 0,
            service_gid: [0; 16],
            service_pkey: 0,
            service_lease: 0,
            service_key: [0; 16],
            service_name: [0; 64],
            service_data8: [0; 16],
            service_data16: [0; 8],
            service_data32: [0; 4],
            service_data64: [0; 2],
        }
    }
}

/// ServiceRecord component mask bits (IBA table 208 / OpenSM `IB_SR_COMPMASK_*`).
pub mod sr_mask {
    pub const SERVICE_ID: u64 = 1 << 0;
    pub const SERVICE_GID: u64 = 1 << 1;
    pub const SERVICE_PKEY: u64 = 1 << 2;
    pub const RESERVED: u64 = 1 << 3;
    pub const SERVICE_LEASE: u64 = 1 << 4;
    pub const SERVICE_KEY: u64 = 1 << 5;
    pub const SERVICE_NAME: u64 = 1 << 6;
    /// ServiceData8\[i\] is bit 7 + i, ServiceData16\[i\] bit 23 + i, ServiceData32\[i\]
    /// bit 31 + i, ServiceData64\[i\] bit 35 + i.
    pub const FIRST_DATA8: u32 = 7;
    pub const FIRST_DATA16: u32 = 23;
    pub const FIRST_DATA32: u32 = 31;
    pub const FIRST_DATA64: u32 = 35;
}

/// Infinite ServiceLease.
pub const LEASE_INFINITE: u32 = 0xFFFF_FFFF;

impl Record for ServiceRecord {
    const ATTR: u16 = attr::SERVICE_RECORD;
    const SIZE: usize = 176;
    const NAME: &'static str = "ServiceRecord";

    fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        need(Self::NAME, b, Self::SIZE)?;
        let mut r = ServiceRecord {
            service_id: be64(b, 0),
            service_gid: arr(b, 8),
            service_pkey: be16(b, 24),
            service_lease: be32(b, 28),
            service_key: arr(b, 32),
            service_name: arr(b, 48),
            service_data8: arr(b, 112),
            ..ServiceRecord::default()
        };
        for (i, v) in r.service_data16.iter_mut().enumerate() {
            *v = be16(b, 128 + 2 * i);
        }
        for (i, v) in r.service_data32.iter_mut().enumerate() {
            *v = be32(b, 144 + 4 * i);
        }
        for (i, v) in r.service_data64.iter_mut().enumerate() {
            *v = be64(b, 160 + 8 * i);
        }
        Ok(r)
    }

    fn encode(&self, out: &mut [u8]) {
        let out = &mut out[..Self::SIZE];
        out.fill(0);
        out[0..8].copy_from_slice(&self.service_id.to_be_bytes());
        out[8..24].copy_from_slice(&self.service_gid);
        out[24..26].copy_from_slice(&self.service_pkey.to_be_bytes());
        out[28..32].copy_from_slice(&self.service_lease.to_be_bytes());
        out[32..48].copy_from_slice(&self.service_key);
        out[48..112].copy_from_slice(&self.service_name);
        out[112..128].copy_from_slice(&self.service_data8);
        for (i, v) in self.service_data16.iter().enumerate() {
            out[128 + 2 * i..130 + 2 * i].copy_from_slice(&v.to_be_bytes());
        }
        for (i, v) in self.service_data32.iter().enumerate() {
            out[144 + 4 * i..148 + 4 * i].copy_from_slice(&v.to_be_bytes());
        }
        for (i, v) in self.service_data64.iter().enumerate() {
            out[160 + 8 * i..168 + 8 * i].copy_from_slice(&v.to_be_bytes());
        }
    }

    /// Every component but the reserved one (bit 3) is compared when selected.
    fn matches(&self, t: &Self, mask: u64) -> bool {
        use sr_mask::*;
        if (mask & SERVICE_ID != 0 && self.service_id != t.service_id)
            || (mask & SERVICE_GID != 0 && self.service_gid != t.service_gid)
            || (mask & SERVICE_PKEY != 0 && self.service_pkey != t.service_pkey)
            || (mask & SERVICE_LEASE != 0 && self.service_lease != t.service_lease)
            || (mask & SERVICE_KEY != 0 && self.service_key != t.service_key)
            || (mask & SERVICE_NAME != 0 && self.service_name != t.service_name)
        {
            return false;
        }
        let d8 = (0..16u32)
            .all(|i| !bit(mask, FIRST_DATA8 + i) || self.service_data8[i as usize] == t.service_data8[i as usize]);
        let d16 = (0..8u32)
            .all(|i| !bit(mask, FIRST_DATA16 + i) || self.service_data16[i as usize] == t.service_data16[i as usize]);
        let d32 = (0..4u32)
            .all(|i| !bit(mask, FIRST_DATA32 + i) || self.service_data32[i as usize] == t.service_data32[i as usize]);
        let d64 = (0..2u32)
            .all(|i| !bit(mask, FIRST_DATA64 + i) || self.service_data64[i as usize] == t.service_data64[i as usize]);
        d8 && d16 && d32 && d64
    }
}

/// InformInfo (IBA 13.4.8.3). The generic/vendor union is kept as its fields:
/// `trap_or_device` is TrapNumber (generic) or DeviceID (vendor), `producer_or_vendor`
/// ProducerType (generic) or VendorID (vendor), 24 bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InformInfo {
    pub gid: Gid,
    pub lid_range_begin: u16,
    pub lid_range_end: u16,
    pub is_generic: u8,
    pub subscribe: u8,
    pub trap_type: u16,
    pub trap_or_device: u16,
    /// 24 bits.
    pub qpn: u32,
    /// 5 bits.
    pub resp_time_value: u8,
    /// 24 bits.
    pub producer_or_vendor: u32,
}

impl Record for InformInfo {
    const ATTR: u16 = attr::INFORM_INFO;
    const SIZE: usize = 36;
    const NAME: &'static str = "InformInfo";

    fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        need(Self::NAME, b, Self::SIZE)?;
        let qpn_rtv = be32(b, 28);
        Ok(InformInfo {
            gid: arr(b, 0),
            lid_range_begin: be16(b, 16),
            lid_range_end: be16(b, 18),
            is_generic: b[22],
            subscribe: b[23],
            trap_type: be16(b, 24),
            trap_or_device: be16(b, 26),
            qpn: qpn_rtv >> 8,
            resp_time_value: (qpn_rtv & 0x1f) as u8,
            producer_or_vendor: be32(b, 32) & 0x00FF_FFFF,
        })
    }

    fn encode(&self, out: &mut [u8]) {
        let out = &mut out[..Self::SIZE];
        out.fill(0);
        out[0..16].copy_from_slice(&self.gid);
        out[16..18].copy_from_slice(&self.lid_range_begin.to_be_bytes());
        out[18..20].copy_from_slice(&self.lid_range_end.to_be_bytes());
        out[22] = self.is_generic;
        out[23] = self.subscribe;
        out[24..26].copy_from_slice(&self.trap_type.to_be_bytes());
        out[26..28].copy_from_slice(&self.trap_or_device.to_be_bytes());
        let qpn_rtv = ((self.qpn & 0x00FF_FFFF) << 8) | u32::from(self.resp_time_value & 0x1f);
        out[28..32].copy_from_slice(&qpn_rtv.to_be_bytes());
        out[32..36].copy_from_slice(&(self.producer_or_vendor & 0x00FF_FFFF).to_be_bytes());
    }

    /// InformInfo is not queried by template (it is only Set); the fields of
    /// [`InformInfoRecord`]'s mask (bits 3..=15, shifted down by 3) are compared.
    fn matches(&self, t: &Self, mask: u64) -> bool {
        inform_fields_match(self, t, mask << 3)
    }
}

/// InformInfoRecord component mask bits (OpenSM `IB_IIR_COMPMASK_*`).
pub mod iir_mask {
    pub const SUBSCRIBER_GID: u64 = 1 << 0;
    pub const ENUM: u64 = 1 << 1;
    pub const GID: u64 = 1 << 3;
    pub const LID_RANGE_BEGIN: u64 = 1 << 4;
    pub const LID_RANGE_END: u64 = 1 << 5;
    pub const IS_GENERIC: u64 = 1 << 7;
    pub const SUBSCRIBE: u64 = 1 << 8;
    pub const TYPE: u64 = 1 << 9;
    pub const TRAP_NUMBER_OR_DEVICE_ID: u64 = 1 << 10;
    pub const QPN: u64 = 1 << 11;
    pub const RESP_TIME_VALUE: u64 = 1 << 13;
    pub const PRODUCER_TYPE_OR_VENDOR_ID: u64 = 1 << 15;
}

/// The InformInfo fields of an InformInfoRecord mask (reserved components 2, 6, 12, 14
/// are never compared).
fn inform_fields_match(s: &InformInfo, t: &InformInfo, mask: u64) -> bool {
    use iir_mask::*;
    !((mask & GID != 0 && s.gid != t.gid)
        || (mask & LID_RANGE_BEGIN != 0 && s.lid_range_begin != t.lid_range_begin)
        || (mask & LID_RANGE_END != 0 && s.lid_range_end != t.lid_range_end)
        || (mask & IS_GENERIC != 0 && s.is_generic != t.is_generic)
        || (mask & SUBSCRIBE != 0 && s.subscribe != t.subscribe)
        || (mask & TYPE != 0 && s.trap_type != t.trap_type)
        || (mask & TRAP_NUMBER_OR_DEVICE_ID != 0 && s.trap_or_device != t.trap_or_device)
        || (mask & QPN != 0 && s.qpn != t.qpn)
        || (mask & RESP_TIME_VALUE != 0 && s.resp_time_value != t.resp_time_value)
        || (mask & PRODUCER_TYPE_OR_VENDOR_ID != 0 && s.producer_or_vendor != t.producer_or_vendor))
}

/// InformInfoRecord (IBA 15.2.5.12): SubscriberGID, Enum, 6 reserved bytes, the
/// InformInfo, 4 bytes of padding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InformInfoRecord {
    pub subscriber_gid: Gid,
    pub subscriber_enum: u16,
    pub inform_info: InformInfo,
}

impl Record for InformInfoRecord {
    const ATTR: u16 = attr::INFORM_INFO_RECORD;
    const SIZE: usize = 64;
    const NAME: &'static str = "InformInfoRecord";

    fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        need(Self::NAME, b, Self::SIZE)?;
        Ok(InformInfoRecord {
            subscriber_gid: arr(b, 0),
            subscriber_enum: be16(b, 16),
            inform_info: InformInfo::decode(&b[24..60])?,
        })
    }

    fn encode(&self, out: &mut [u8]) {
        let out = &mut out[..Self::SIZE];
        out.fill(0);
        out[0..16].copy_from_slice(&self.subscriber_gid);
        out[16..18].copy_from_slice(&self.subscriber_enum.to_be_bytes());
        self.inform_info.encode(&mut out[24..60]);
    }

    fn matches(&self, t: &Self, mask: u64) -> bool {
        use iir_mask::*;
        let differs = (mask & SUBSCRIBER_GID != 0 && self.subscriber_gid != t.subscriber_gid)
            || (mask & ENUM != 0 && self.subscriber_enum != t.subscriber_enum);
        !differs && inform_fields_match(&self.inform_info, &t.inform_info, mask)
    }
}

/// Notice (IBA 13.4.8.2), the data of a Report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notice {
    pub is_generic: bool,
    /// 7 bits (3 = subnet management).
    pub notice_type: u8,
    /// ProducerType (generic) or VendorID (vendor), 24 bits.
    pub producer_or_vendor: u32,
    /// TrapNumber (generic) or DeviceID (vendor).
    pub trap_or_device: u16,
    pub issuer_lid: u16,
    pub toggle: bool,
    /// 15 bits.
    pub count: u16,
    pub data_details: [u8; 54],
    pub issuer_gid: Gid,
}

impl Default for Notice {
    fn default() -> Self {
        Notice {
            is_generic: false,
            notice_type: 0,
            producer_or_vendor: 0,
            trap_or_device: 0,
            issuer_lid: 0,
            toggle: false,
            count: 0,
            data_details: [0; 54],
            issuer_gid: [0; 16],
        }
    }
}

impl Record for Notice {
    const ATTR: u16 = attr::NOTICE;
    const SIZE: usize = 80;
    const NAME: &'static str = "Notice";

    fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        need(Self::NAME, b, Self::SIZE)?;
        let tc = be16(b, 8);
        Ok(Notice {
            is_generic: b[0] & 0x80 != 0,
            notice_type: b[0] & 0x7f,
            producer_or_vendor: be32(b, 0) & 0x00FF_FFFF,
            trap_or_device: be16(b, 4),
            issuer_lid: be16(b, 6),
            toggle: tc & 0x8000 != 0,
            count: tc & 0x7fff,
            data_details: arr(b, 10),
            issuer_gid: arr(b, 64),
        })
    }

    fn encode(&self, out: &mut [u8]) {
        let out = &mut out[..Self::SIZE];
        out.fill(0);
        let first = (u32::from(self.is_generic) << 31)
            | (u32::from(self.notice_type & 0x7f) << 24)
            | (self.producer_or_vendor & 0x00FF_FFFF);
        out[0..4].copy_from_slice(&first.to_be_bytes());
        out[4..6].copy_from_slice(&self.trap_or_device.to_be_bytes());
        out[6..8].copy_from_slice(&self.issuer_lid.to_be_bytes());
        let tc = (u16::from(self.toggle) << 15) | (self.count & 0x7fff);
        out[8..10].copy_from_slice(&tc.to_be_bytes());
        out[10..64].copy_from_slice(&self.data_details);
        out[64..80].copy_from_slice(&self.issuer_gid);
    }

    fn matches(&self, t: &Self, _mask: u64) -> bool {
        self == t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip<R: Record + PartialEq + std::fmt::Debug>(r: &R) {
        let mut b = vec![0u8; R::SIZE];
        r.encode(&mut b);
        assert_eq!(&R::decode(&b).unwrap(), r);
        assert!(R::decode(&b[..R::SIZE - 1]).is_err());
    }

    #[test]
    fn service_record_fields_sit_at_the_offsets_of_ib_types_h() {
        let mut r = ServiceRecord {
            service_id: 0x1122_3344_5566_7788,
            service_gid: gid_of(0xfe80_0000_0000_0000, 0x0002_c903_0001_0002),
            service_pkey: 0xffff,
            service_lease: 60,
            ..Default::default()
        };
        r.service_name[..4].copy_from_slice(b"lnet");
        r.service_data8[15] = 0xa8;
        r.service_data16[7] = 0xb16b;
        r.service_data32[3] = 0xc032_c032;
        r.service_data64[1] = 0xd064_d064_d064_d064;
        let mut b = [0u8; 176];
        r.encode(&mut b);
        assert_eq!(b[0], 0x11);
        assert_eq!(&b[8..10], &[0xfe, 0x80]);
        assert_eq!(&b[24..26], &[0xff, 0xff]);
        assert_eq!(&b[28..32], &[0, 0, 0, 60]);
        assert_eq!(&b[48..52], b"lnet");
        assert_eq!(b[127], 0xa8);
        assert_eq!(&b[142..144], &[0xb1, 0x6b]);
        assert_eq!(&b[156..160], &[0xc0, 0x32, 0xc0, 0x32]);
        assert_eq!(&b[168..176], &0xd064_d064_d064_d064u64.to_be_bytes());
        round_trip(&r);
    }

    #[test]
    fn inform_info_and_notice_fields_sit_at_the_offsets_of_ib_types_h() {
        let ii = InformInfo {
            gid: [0; 16],
            lid_range_begin: 0xffff,
            lid_range_end: 0,
            is_generic: 1,
            subscribe: 1,
            trap_type: 0xffff,
            trap_or_device: 64,
            qpn: 0x00ab_cdef,
            resp_time_value: 0x13,
            producer_or_vendor: 0x00ff_ffff,
        };
        let mut b = [0u8; 36];
        ii.encode(&mut b);
        assert_eq!(&b[16..18], &[0xff, 0xff]);
        assert_eq!(&b[22..28], &[1, 1, 0xff, 0xff, 0, 64]);
        assert_eq!(&b[28..32], &[0xab, 0xcd, 0xef, 0x13]);
        assert_eq!(&b[32..36], &[0, 0xff, 0xff, 0xff]);
        round_trip(&ii);
        let rec = InformInfoRecord {
            subscriber_gid: gid_of(0xfe80_0000_0000_0000, 7),
            subscriber_enum: 3,
            inform_info: ii,
        };
        let mut b = [0u8; 64];
        rec.encode(&mut b);
        assert_eq!(&b[16..18], &[0, 3]);
        assert_eq!(&b[24 + 28..24 + 32], &[0xab, 0xcd, 0xef, 0x13]);
        round_trip(&rec);
        // OpenSM's trap 64: generic_type 0x83, producer type 4, GID at DataDetails + 6.
        let mut n = Notice {
            is_generic: true,
            notice_type: 3,
            producer_or_vendor: 4,
            trap_or_device: 64,
            issuer_lid: 1,
            ..Default::default()
        };
        n.data_details[6..22].copy_from_slice(&gid_of(0xfe80_0000_0000_0000, 9));
        let mut b = [0u8; 80];
        n.encode(&mut b);
        assert_eq!(&b[0..8], &[0x83, 0, 0, 4, 0, 64, 0, 1]);
        assert_eq!(&b[16..18], &[0xfe, 0x80]);
        assert_eq!(b[31], 9);
        round_trip(&n);
    }

    proptest! {
        #[test]
        fn images_round_trip(bytes in proptest::collection::vec(any::<u8>(), 176)) {
            // Decode any image, encode it: decoding that again gives the same record
            // (reserved bytes are dropped, everything else survives).
            let sr = ServiceRecord::decode(&bytes).unwrap();
            let mut b = [0u8; 176];
            sr.encode(&mut b);
            prop_assert_eq!(ServiceRecord::decode(&b).unwrap(), sr);
            prop_assert_eq!(&b[..24], &bytes[..24]);
            prop_assert_eq!(&b[28..], &bytes[28..]);
            let ii = InformInfoRecord::decode(&bytes[..64]).unwrap();
            let mut b = [0u8; 64];
            ii.encode(&mut b);
            prop_assert_eq!(InformInfoRecord::decode(&b).unwrap(), ii);
            let n = Notice::decode(&bytes[..80]).unwrap();
            let mut b = [0u8; 80];
            n.encode(&mut b);
            prop_assert_eq!(&b[..], &bytes[..80]);
        }

        #[test]
        fn a_record_matches_itself_under_any_mask(bytes in proptest::collection::vec(any::<u8>(), 176), mask in any::<u64>()) {
            let sr = ServiceRecord::decode(&bytes).unwrap();
            prop_assert!(sr.matches(&sr, mask));
            let ii = InformInfoRecord::decode(&bytes[..64]).unwrap();
            prop_assert!(ii.matches(&ii, mask));
        }
    }

    #[test]
    fn each_service_record_component_is_compared_only_when_selected() {
        let base = ServiceRecord::default();
        // One changed field per component; the bit that selects it.
        let mut cases: Vec<(ServiceRecord, u32)> = Vec::new();
        let mut r = base.clone();
        r.service_id = 1;
        cases.push((r, 0));
        let mut r = base.clone();
        r.service_gid[15] = 1;
        cases.push((r, 1));
        let mut r = base.clone();
        r.service_pkey = 1;
        cases.push((r, 2));
        let mut r = base.clone();
        r.service_lease = 1;
        cases.push((r, 4));
        let mut r = base.clone();
        r.service_key[0] = 1;
        cases.push((r, 5));
        let mut r = base.clone();
        r.service_name[63] = 1;
        cases.push((r, 6));
        for i in 0..16 {
            let mut r = base.clone();
            r.service_data8[i] = 1;
            cases.push((r, 7 + i as u32));
        }
        for i in 0..8 {
            let mut r = base.clone();
            r.service_data16[i] = 1;
            cases.push((r, 23 + i as u32));
        }
        for i in 0..4 {
            let mut r = base.clone();
            r.service_data32[i] = 1;
            cases.push((r, 31 + i as u32));
        }
        for i in 0..2 {
            let mut r = base.clone();
            r.service_data64[i] = 1;
            cases.push((r, 35 + i as u32));
        }
        assert_eq!(cases.len(), 36, "every component but the reserved one");
        for (r, b) in &cases {
            assert!(!r.matches(&base, 1 << b), "bit {b} selects its field");
            assert!(r.matches(&base, !(1u64 << b)), "bit {b} is the only one comparing it");
        }
    }
}
