//! LID plan: one aligned pair per end port (base `2k`, escape `2k+1`, LMC = 1) or one LID per
//! end port (LMC = 0), one LID per switch.

use fabric_topology::{EndPortId, Lid, SwitchId};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LidError {
    #[error("fabric needs LIDs up to {needed} but the address space ends at {max}")]
    AddressSpaceExhausted { needed: u64, max: Lid },
}

/// Address assignment of one fabric. Index vectors are by dense id; `0` means "no LID".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LidPlan {
    /// LMC: 1 = base + escape LID per end port, 0 = one LID per end port.
    pub lmc: u8,
    /// Highest usable unicast address (InfiniBand: 0xBFFF).
    pub max_lid: Lid,
    /// Per switch: its LID.
    pub switch_lid: Vec<Lid>,
    /// Per end port: its base LID (escape LID = base + 1 when `lmc == 1`).
    pub end_port_base: Vec<Lid>,
}

impl LidPlan {
    /// Highest LID assigned (0 if none).
    pub fn top(&self) -> Lid {
        let e = self.end_port_base.iter().copied().max().unwrap_or(0);
        let e = if e > 0 { e + (1 << self.lmc) - 1 } else { 0 };
        e.max(self.switch_lid.iter().copied().max().unwrap_or(0))
    }
    pub fn base_lid(&self, ep: EndPortId) -> Lid {
        self.end_port_base[ep.idx()]
    }
    /// Escape LID of an end port (`None` with LMC = 0).
    pub fn escape_lid(&self, ep: EndPortId) -> Option<Lid> {
        (self.lmc >= 1).then(|| self.end_port_base[ep.idx()] + 1)
    }
    pub fn switch_lid(&self, sw: SwitchId) -> Lid {
        self.switch_lid[sw.idx()]
    }
}
