//! InformInfoRecord (attribute 0x00f3, IBA 15.2.5.12), 64 bytes (60 and 4 of padding):
//! SubscriberGID, Enum, reserved, InformInfo (36 bytes).
//!
//! Components (OpenSM `IB_IIR_COMPMASK_*`): 0 SubscriberGID, 1 Enum, 2 reserved, then the
//! InformInfo fields at their own component + 3 (see [`super::inform_info`]).

use super::{components, need, rd16, sel, wr16, DecodeError, Gid, InformInfo, Record};
use crate::wire::attr;

/// Component bits of an InformInfoRecord.
pub mod comp {
    pub const SUBSCRIBER_GID: u32 = 0;
    pub const ENUM: u32 = 1;
    /// Component of InformInfo's component 0 (its first field).
    pub const INFORM_INFO_FIRST: u32 = 3;
}

/// One InformInfoRecord.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct InformInfoRecord {
    pub subscriber_gid: Gid,
    pub subscriber_enum: u16,
    pub inform_info: InformInfo,
}

impl Record for InformInfoRecord {
    const ATTR: u16 = attr::INFORM_INFO_RECORD;
    const SIZE: usize = 64;
    const NAME: &'static str = "InformInfoRecord";
    const COMPONENTS: u64 = components(16);

    fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        need(Self::NAME, b, Self::SIZE)?;
        Ok(InformInfoRecord {
            subscriber_gid: Gid::read(b, 0),
            subscriber_enum: rd16(b, 16),
            inform_info: InformInfo::decode(&b[24..60])?,
        })
    }

    fn encode(&self, out: &mut [u8]) {
        let b = &mut out[..Self::SIZE];
        b.fill(0);
        self.subscriber_gid.write(b, 0);
        wr16(b, 16, self.subscriber_enum);
        self.inform_info.encode(&mut b[24..60]);
    }

    fn matches(&self, t: &Self, mask: u64) -> bool {
        (!sel(mask, comp::SUBSCRIBER_GID) || self.subscriber_gid == t.subscriber_gid)
            && (!sel(mask, comp::ENUM) || self.subscriber_enum == t.subscriber_enum)
            && self.inform_info.matches(
                &t.inform_info,
                (mask >> comp::INFORM_INFO_FIRST) & InformInfo::COMPONENTS,
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each component (OpenSM's `IB_IIR_COMPMASK_*`) compares its own field and only when
    /// selected; the reserved ones (2, 6, 12, 14) compare nothing.
    #[test]
    fn each_component_is_compared_only_when_selected() {
        let base = InformInfoRecord::default();
        let mut cases: Vec<(InformInfoRecord, u32)> = Vec::new();
        let mut case = |bit: u32, change: &dyn Fn(&mut InformInfoRecord)| {
            let mut r = base.clone();
            change(&mut r);
            cases.push((r, bit));
        };
        case(0, &|r| r.subscriber_gid.0[15] = 1);
        case(1, &|r| r.subscriber_enum = 1);
        case(3, &|r| r.inform_info.gid.0[15] = 1);
        case(4, &|r| r.inform_info.lid_range_begin = 1);
        case(5, &|r| r.inform_info.lid_range_end = 1);
        case(7, &|r| r.inform_info.is_generic = 1);
        case(8, &|r| r.inform_info.subscribe = 1);
        case(9, &|r| r.inform_info.trap_type = 1);
        case(10, &|r| r.inform_info.trap_number = 1);
        case(11, &|r| r.inform_info.qpn = 1);
        case(13, &|r| r.inform_info.resp_time_value = 1);
        case(15, &|r| r.inform_info.producer_type = 1);
        for (r, b) in &cases {
            assert!(!r.matches(&base, 1 << b), "bit {b} selects its field");
            assert!(r.matches(&base, !(1u64 << b)), "bit {b} is the only one comparing it");
        }
        let all_fields_changed = cases.iter().fold(base.clone(), |mut acc, (r, _)| {
            let mut a = [0u8; 64];
            let mut b = [0u8; 64];
            acc.encode(&mut a);
            r.encode(&mut b);
            a.iter_mut().zip(b).for_each(|(x, y)| *x |= y);
            acc = InformInfoRecord::decode(&a).unwrap();
            acc
        });
        let reserved = (1 << 2) | (1 << 6) | (1 << 12) | (1 << 14);
        assert!(
            all_fields_changed.matches(&base, reserved),
            "reserved components compare nothing"
        );
    }
}
