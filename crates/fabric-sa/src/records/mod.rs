//! SA records (IBA vol. 1 15.2.5): one module per record type, each with its wire image
//! (`decode`/`encode`, sizes of table 207), its component-mask bits and the match of a
//! template under a mask.
//!
//! Decoders never panic: a short buffer is a [`DecodeError`]. Offsets and component bits
//! follow IBA vol. 1 15.2.5 as OpenSM's `ib_types.h` lays them out; the field names of the
//! serialised form (`serde`) are those `saquery` prints where it prints the field raw.

use std::fmt;

pub mod class_port_info;
pub mod guid_info;
pub mod inform_info;
pub mod inform_info_record;
pub mod lft;
pub mod link;
pub mod mc_member;
pub mod multi_path;
pub mod node;
pub mod notice;
pub mod path;
pub mod pkey_table;
pub mod port_info;
pub mod service;
pub mod sm_info;
pub mod switch_info;

pub use class_port_info::ClassPortInfo;
pub use guid_info::GuidInfoRecord;
pub use inform_info::InformInfo;
pub use inform_info_record::InformInfoRecord;
pub use lft::LftRecord;
pub use link::LinkRecord;
pub use mc_member::McMemberRecord;
pub use multi_path::MultiPathRecord;
pub use node::NodeRecord;
pub use notice::Notice;
pub use path::PathRecord;
pub use pkey_table::PkeyTableRecord;
pub use port_info::PortInfoRecord;
pub use service::ServiceRecord;
pub use sm_info::SmInfoRecord;
pub use switch_info::SwitchInfoRecord;

/// Why a record image could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{record}: {len} bytes, the record needs {need}")]
pub struct DecodeError {
    pub record: &'static str,
    pub len: usize,
    pub need: usize,
}

/// A record type of the SA.
pub trait Record: Sized {
    /// AttributeID.
    const ATTR: u16;
    /// Bytes of the wire image (AttributeOffset × 8 in a table answer).
    const SIZE: usize;
    /// Name in logs and errors ("PathRecord").
    const NAME: &'static str;
    /// The component-mask bits this record has (bit i = component i of its table in IBA
    /// 15.2.5, reserved components included). A request selecting a bit outside is invalid.
    const COMPONENTS: u64 = u64::MAX;
    /// Reads the wire image.
    fn decode(b: &[u8]) -> Result<Self, DecodeError>;
    /// Writes the wire image into `out[..SIZE]`.
    fn encode(&self, out: &mut [u8]);
    /// Whether `self` matches `template` on every component selected by `mask` (bit i =
    /// component i of the record's table in IBA 15.2.5).
    fn matches(&self, template: &Self, mask: u64) -> bool;
}

/// Checks the length of a record image.
pub fn need(record: &'static str, b: &[u8], need: usize) -> Result<(), DecodeError> {
    if b.len() < need {
        Err(DecodeError {
            record,
            len: b.len(),
            need,
        })
    } else {
        Ok(())
    }
}

/// The components `0..n` of a record (its [`Record::COMPONENTS`]).
pub const fn components(n: u32) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Whether component `bit` is selected by `mask`.
#[inline]
pub fn sel(mask: u64, bit: u32) -> bool {
    mask & (1u64 << bit) != 0
}

/// A 128-bit GID (subnet prefix, interface id), printed as `saquery` prints it (IPv6 text).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The GID of `guid` in subnet `prefix`.
    pub fn new(prefix: u64, guid: u64) -> Gid {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&prefix.to_be_bytes());
        b[8..].copy_from_slice(&guid.to_be_bytes());
        Gid(b)
    }
    /// The subnet prefix (upper 64 bits).
    pub fn prefix(&self) -> u64 {
        rd64(&self.0, 0)
    }
    /// The interface id (lower 64 bits: the port GUID for a unicast GID).
    pub fn guid(&self) -> u64 {
        rd64(&self.0, 8)
    }
    /// A multicast GID (first byte 0xff).
    pub fn is_multicast(&self) -> bool {
        self.0[0] == 0xff
    }
    pub(crate) fn read(b: &[u8], o: usize) -> Gid {
        let mut g = [0u8; 16];
        g.copy_from_slice(&b[o..o + 16]);
        Gid(g)
    }
    pub(crate) fn write(&self, b: &mut [u8], o: usize) {
        b[o..o + 16].copy_from_slice(&self.0);
    }
}

/// IPv6 text (RFC 5952: lowercase hex groups, the longest run of two or more zero groups —
/// the first of equal runs — written `::`), as `inet_ntop` prints it for `saquery`.
impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g: [u16; 8] = std::array::from_fn(|i| rd16(&self.0, 2 * i));
        let (mut best, mut run) = ((0usize, 0usize), (0usize, 0usize));
        for (i, &v) in g.iter().enumerate() {
            if v == 0 {
                if run.1 == 0 {
                    run.0 = i;
                }
                run.1 += 1;
                if run.1 > best.1 {
                    best = run;
                }
            } else {
                run.1 = 0;
            }
        }
        let groups = |f: &mut fmt::Formatter<'_>, r: &[u16]| -> fmt::Result {
            for (i, v) in r.iter().enumerate() {
                if i > 0 {
                    f.write_str(":")?;
                }
                write!(f, "{v:x}")?;
            }
            Ok(())
        };
        if best.1 < 2 {
            return groups(f, &g);
        }
        groups(f, &g[..best.0])?;
        f.write_str("::")?;
        groups(f, &g[best.0 + best.1..])
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl serde::Serialize for Gid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A fixed-size byte field (a NodeDescription, a ServiceName, a ServiceKey) serialised as
/// text up to its first NUL when it is UTF-8, as hex otherwise.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bytes<const N: usize>(pub [u8; N]);

impl<const N: usize> Default for Bytes<N> {
    fn default() -> Self {
        Bytes([0; N])
    }
}

impl<const N: usize> Bytes<N> {
    pub(crate) fn read(b: &[u8], o: usize) -> Self {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[o..o + N]);
        Bytes(a)
    }
    /// The text up to the first NUL (lossy UTF-8).
    pub fn text(&self) -> String {
        let end = self.0.iter().position(|&c| c == 0).unwrap_or(N);
        String::from_utf8_lossy(&self.0[..end]).into_owned()
    }
}

impl<const N: usize> fmt::Debug for Bytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text())
    }
}

impl<const N: usize> serde::Serialize for Bytes<N> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let end = self.0.iter().position(|&c| c == 0).unwrap_or(N);
        match std::str::from_utf8(&self.0[..end]) {
            Ok(t) if self.0[end..].iter().all(|&c| c == 0) => s.serialize_str(t),
            _ => {
                let hex: String = self.0.iter().map(|c| format!("{c:02x}")).collect();
                s.serialize_str(&hex)
            }
        }
    }
}

pub(crate) fn rd16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}
pub(crate) fn rd32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
pub(crate) fn rd64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_be_bytes(a)
}
pub(crate) fn wr16(b: &mut [u8], o: usize, v: u16) {
    b[o..o + 2].copy_from_slice(&v.to_be_bytes());
}
pub(crate) fn wr32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_be_bytes());
}
pub(crate) fn wr64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_be_bytes());
}

/// Path selectors (MTU, rate, packet lifetime; IBA 15.2.5.16): how a template's value
/// selects a record's value.
pub mod selector {
    pub const GREATER_THAN: u8 = 0;
    pub const LESS_THAN: u8 = 1;
    pub const EXACTLY: u8 = 2;
    pub const LARGEST: u8 = 3;
}

/// Whether `value` satisfies `(selector, wanted)` in the order given by `rank`.
pub fn selected(selector: u8, wanted: u8, value: u8, rank: fn(u8) -> u32) -> bool {
    match selector {
        selector::GREATER_THAN => rank(value) > rank(wanted),
        selector::LESS_THAN => rank(value) < rank(wanted),
        selector::EXACTLY => value == wanted,
        _ => true,
    }
}

/// A template's value component `vbit` with its selector component `sbit` under `mask`
/// (PathRecord, MultiPathRecord): no constraint without `vbit`; with `sbit` as well, the
/// template's `selector` applies to `wanted` ([`selected`]); without it, an exact match.
pub fn selected_by(mask: u64, sbit: u32, vbit: u32, selector: u8, wanted: u8, value: u8, rank: fn(u8) -> u32) -> bool {
    if !sel(mask, vbit) {
        true
    } else if sel(mask, sbit) {
        selected(selector, wanted, value, rank)
    } else {
        value == wanted
    }
}

/// The order of MTU and packet-lifetime codes (numeric).
pub fn numeric_rank(code: u8) -> u32 {
    u32::from(code)
}

/// The order of rate codes (IBA table 224: the codes are not monotonic in bandwidth): the
/// rate in Mb/s, 0 for an unknown code.
pub fn rate_rank(code: u8) -> u32 {
    match code {
        2 => 2_500,
        3 => 10_000,
        4 => 30_000,
        5 => 5_000,
        6 => 20_000,
        7 => 40_000,
        8 => 60_000,
        9 => 80_000,
        10 => 120_000,
        11 => 14_000,
        12 => 56_000,
        13 => 112_000,
        14 => 168_000,
        15 => 25_000,
        16 => 100_000,
        17 => 200_000,
        18 => 300_000,
        19 => 28_000,
        20 => 50_000,
        21 => 400_000,
        22 => 600_000,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_prints_as_ipv6_text_like_saquery() {
        let g = Gid::new(0xfe80_0000_0000_0000, 0x0002_c903_0000_0001);
        assert_eq!(g.to_string(), "fe80::2:c903:0:1");
        assert_eq!(g.guid(), 0x0002_c903_0000_0001);
        assert_eq!(serde_json::to_string(&g).unwrap(), "\"fe80::2:c903:0:1\"");
        let text = |b: [u16; 8]| {
            let mut g = Gid::default();
            for (i, v) in b.iter().enumerate() {
                g.0[2 * i..2 * i + 2].copy_from_slice(&v.to_be_bytes());
            }
            g.to_string()
        };
        assert_eq!(text([0; 8]), "::");
        assert_eq!(
            text([0xff12, 0x401b, 0xffff, 0, 0, 0, 0xffff, 0xffff]),
            "ff12:401b:ffff::ffff:ffff"
        );
        assert_eq!(text([1, 0, 2, 3, 4, 5, 6, 7]), "1:0:2:3:4:5:6:7");
        assert_eq!(text([1, 0, 0, 2, 0, 0, 3, 0]), "1::2:0:0:3:0");
        assert_eq!(text([1, 0, 0, 2, 0, 0, 0, 0]), "1:0:0:2::");
        assert_eq!(text([0, 0, 0, 0, 0, 0, 0, 1]), "::1");
    }

    #[test]
    fn rate_order_is_by_bandwidth_not_code() {
        // 5 Gb/s (code 5) is slower than 10 Gb/s (code 3).
        assert!(selected(selector::LESS_THAN, 3, 5, rate_rank));
        assert!(!selected(selector::GREATER_THAN, 3, 5, rate_rank));
        assert!(selected(selector::LARGEST, 3, 5, rate_rank));
    }
}

/// Raw bytes (an LFT block, a ServiceKey, a Notice's DataDetails) serialised as hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Raw<const N: usize>(pub [u8; N]);

impl<const N: usize> Default for Raw<N> {
    fn default() -> Self {
        Raw([0; N])
    }
}

impl<const N: usize> fmt::Debug for Raw<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.0 {
            write!(f, "{c:02x}")?;
        }
        Ok(())
    }
}

impl<const N: usize> serde::Serialize for Raw<N> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{self:?}"))
    }
}

/// A capability mask in a template: a record matches when it has every bit the template has
/// (OpenSM's `IsPortInfoCapMaskMatchSupported`), not on equality.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct CapMask<T>(pub T);

/// A field of a record image: read and written at a bit offset (counted from the first
/// byte's most significant bit) and width, compared for the component mask.
pub trait FieldValue: Sized {
    /// Reads the field at bit `start`, `width` bits (multi-byte fields: byte aligned).
    fn get(b: &[u8], start: usize, width: usize) -> Self;
    /// Writes the field (bits beyond `width` are dropped).
    fn put(&self, b: &mut [u8], start: usize, width: usize);
    /// Whether a record's value (`self`) matches the template's.
    fn same(&self, template: &Self) -> bool;
}

fn get_bits(b: &[u8], start: usize, width: usize) -> u64 {
    if start.is_multiple_of(8) && width.is_multiple_of(8) {
        return b[start / 8..(start + width) / 8]
            .iter()
            .fold(0u64, |v, &c| (v << 8) | u64::from(c));
    }
    (start..start + width).fold(0u64, |v, i| (v << 1) | u64::from((b[i / 8] >> (7 - i % 8)) & 1))
}

fn put_bits(b: &mut [u8], start: usize, width: usize, v: u64) {
    if start.is_multiple_of(8) && width.is_multiple_of(8) {
        let n = width / 8;
        b[start / 8..start / 8 + n].copy_from_slice(&v.to_be_bytes()[8 - n..]);
        return;
    }
    for (k, i) in (start..start + width).enumerate() {
        let bit = (v >> (width - 1 - k)) & 1;
        let m = 1u8 << (7 - i % 8);
        if bit != 0 {
            b[i / 8] |= m;
        } else {
            b[i / 8] &= !m;
        }
    }
}

macro_rules! uint_field {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            fn get(b: &[u8], start: usize, width: usize) -> Self {
                get_bits(b, start, width) as $t
            }
            fn put(&self, b: &mut [u8], start: usize, width: usize) {
                put_bits(b, start, width, u64::from(*self));
            }
            fn same(&self, t: &Self) -> bool {
                self == t
            }
        }
        impl FieldValue for CapMask<$t> {
            fn get(b: &[u8], start: usize, width: usize) -> Self {
                CapMask(get_bits(b, start, width) as $t)
            }
            fn put(&self, b: &mut [u8], start: usize, width: usize) {
                put_bits(b, start, width, u64::from(self.0));
            }
            fn same(&self, t: &Self) -> bool {
                self.0 & t.0 == t.0
            }
        }
        impl<const N: usize> FieldValue for [$t; N] {
            fn get(b: &[u8], start: usize, _width: usize) -> Self {
                const W: usize = std::mem::size_of::<$t>() * 8;
                std::array::from_fn(|i| get_bits(b, start + i * W, W) as $t)
            }
            fn put(&self, b: &mut [u8], start: usize, _width: usize) {
                const W: usize = std::mem::size_of::<$t>() * 8;
                for (i, v) in self.iter().enumerate() {
                    put_bits(b, start + i * W, W, u64::from(*v));
                }
            }
            fn same(&self, t: &Self) -> bool {
                self == t
            }
        }
    )*};
}
uint_field!(u8, u16, u32, u64);

impl FieldValue for Gid {
    fn get(b: &[u8], start: usize, _width: usize) -> Self {
        Gid::read(b, start / 8)
    }
    fn put(&self, b: &mut [u8], start: usize, _width: usize) {
        self.write(b, start / 8);
    }
    fn same(&self, t: &Self) -> bool {
        self == t
    }
}

impl<const N: usize> FieldValue for Raw<N> {
    fn get(b: &[u8], start: usize, _width: usize) -> Self {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[start / 8..start / 8 + N]);
        Raw(a)
    }
    fn put(&self, b: &mut [u8], start: usize, _width: usize) {
        b[start / 8..start / 8 + N].copy_from_slice(&self.0);
    }
    fn same(&self, t: &Self) -> bool {
        self == t
    }
}

impl<const N: usize> FieldValue for Bytes<N> {
    fn get(b: &[u8], start: usize, _width: usize) -> Self {
        Bytes::read(b, start / 8)
    }
    fn put(&self, b: &mut [u8], start: usize, _width: usize) {
        b[start / 8..start / 8 + N].copy_from_slice(&self.0);
    }
    /// Text compared up to the first NUL, as OpenSM's `strncmp`.
    fn same(&self, t: &Self) -> bool {
        let end = |a: &[u8; N]| a.iter().position(|&c| c == 0).unwrap_or(N);
        self.0[..end(&self.0)] == t.0[..end(&t.0)]
    }
}

/// Matching beyond the per-field equality of [`record_image!`] (a record's own rules).
pub trait ExtraMatch {
    fn matches_extra(&self, _template: &Self, _mask: u64) -> bool {
        true
    }
}

/// One field of a record image: name, first bit, width in bits, component bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldSpec {
    pub name: &'static str,
    pub start: usize,
    pub width: usize,
    pub component: Option<u32>,
}

/// Declares a record whose wire image is a list of fields at fixed bit positions
/// `(byte, bit from the MSB, width in bits)`: the struct, its [`Record`] implementation
/// (decode, encode with reserved bits zero, match on every field carrying a component bit)
/// and `FIELDS`, the layout (checked for overlaps by the tests).
macro_rules! record_image {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            attr: $attr:expr, size: $size:expr, name: $nm:expr, components: $ncomp:expr;
            $(
                $(#[$fmeta:meta])*
                $field:ident : $ty:ty = ($byte:expr, $bit:expr, $width:expr) $(, comp $comp:expr)?;
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// The layout of the wire image.
            pub const FIELDS: &'static [$crate::records::FieldSpec] = &[
                $( $crate::records::FieldSpec {
                    name: stringify!($field),
                    start: $byte * 8 + $bit,
                    width: $width,
                    component: record_image!(@comp $($comp)?),
                }, )*
            ];
        }

        impl $crate::records::Record for $name {
            const ATTR: u16 = $attr;
            const SIZE: usize = $size;
            const NAME: &'static str = $nm;
            const COMPONENTS: u64 = $crate::records::components($ncomp);

            fn decode(b: &[u8]) -> Result<Self, $crate::records::DecodeError> {
                $crate::records::need(Self::NAME, b, Self::SIZE)?;
                Ok($name {
                    $( $field: <$ty as $crate::records::FieldValue>::get(b, $byte * 8 + $bit, $width), )*
                })
            }

            fn encode(&self, out: &mut [u8]) {
                let b = &mut out[..Self::SIZE];
                b.fill(0);
                $( $crate::records::FieldValue::put(&self.$field, b, $byte * 8 + $bit, $width); )*
            }

            fn matches(&self, t: &Self, mask: u64) -> bool {
                $( $( if $crate::records::sel(mask, $comp)
                    && !$crate::records::FieldValue::same(&self.$field, &t.$field) {
                    return false;
                } )? )*
                $crate::records::ExtraMatch::matches_extra(self, t, mask)
            }
        }
    };
    (@comp $c:expr) => { Some($c) };
    (@comp) => { None };
}
pub(crate) use record_image;

/// Any record, decoded by its attribute id: what renderers (gRPC's JSON, `fabricctl sa`,
/// `fabric-saquery`) serialise. A MultiPathRecord answer is made of PathRecords.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(untagged)]
pub enum AnyRecord {
    ClassPortInfo(ClassPortInfo),
    Node(NodeRecord),
    PortInfo(PortInfoRecord),
    SwitchInfo(SwitchInfoRecord),
    Lft(LftRecord),
    SmInfo(SmInfoRecord),
    Link(LinkRecord),
    GuidInfo(GuidInfoRecord),
    Service(ServiceRecord),
    McMember(McMemberRecord),
    Path(PathRecord),
    PkeyTable(PkeyTableRecord),
    InformInfo(InformInfo),
    InformInfoRecord(InformInfoRecord),
    Notice(Notice),
}

/// Decodes one record image of attribute `attr`; `None` for an attribute without a record
/// type here or an image that does not decode.
pub fn decode_any(attr: u16, raw: &[u8]) -> Option<AnyRecord> {
    use crate::wire::attr as a;
    Some(match attr {
        a::CLASS_PORT_INFO => AnyRecord::ClassPortInfo(ClassPortInfo::decode(raw).ok()?),
        a::NODE_RECORD => AnyRecord::Node(NodeRecord::decode(raw).ok()?),
        a::PORT_INFO_RECORD => AnyRecord::PortInfo(PortInfoRecord::decode(raw).ok()?),
        a::SWITCH_INFO_RECORD => AnyRecord::SwitchInfo(SwitchInfoRecord::decode(raw).ok()?),
        a::LFT_RECORD => AnyRecord::Lft(LftRecord::decode(raw).ok()?),
        a::SM_INFO_RECORD => AnyRecord::SmInfo(SmInfoRecord::decode(raw).ok()?),
        a::LINK_RECORD => AnyRecord::Link(LinkRecord::decode(raw).ok()?),
        a::GUID_INFO_RECORD => AnyRecord::GuidInfo(GuidInfoRecord::decode(raw).ok()?),
        a::SERVICE_RECORD => AnyRecord::Service(ServiceRecord::decode(raw).ok()?),
        a::MC_MEMBER_RECORD => AnyRecord::McMember(McMemberRecord::decode(raw).ok()?),
        a::PATH_RECORD | a::MULTI_PATH_RECORD => AnyRecord::Path(PathRecord::decode(raw).ok()?),
        a::P_KEY_TABLE_RECORD => AnyRecord::PkeyTable(PkeyTableRecord::decode(raw).ok()?),
        a::INFORM_INFO => AnyRecord::InformInfo(InformInfo::decode(raw).ok()?),
        a::INFORM_INFO_RECORD => AnyRecord::InformInfoRecord(InformInfoRecord::decode(raw).ok()?),
        a::NOTICE => AnyRecord::Notice(Notice::decode(raw).ok()?),
        _ => return None,
    })
}
