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
