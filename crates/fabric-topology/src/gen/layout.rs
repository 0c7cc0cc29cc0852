//! The layout of a generated fat-tree and the generated names. Recognition of a fabric as a
//! generated fat-tree is in `recognize`, switch addresses in `addr`.

use super::addr::SwitchAddr;
use super::spec::{PgftSpec, SpecKind};
use crate::model::{EndPortId, Guid, SwitchId};

/// Description of a generated switch: `"<KIND> L<level> S(<digits>)"`.
pub(super) fn switch_desc(kind: SpecKind, addr: &SwitchAddr) -> String {
    format!("{kind} {addr}")
}

/// Description of a generated end node: `"n(<a1>,..,<ah>)"`.
pub(super) fn node_desc(digits: &[u32]) -> String {
    let d: Vec<String> = digits.iter().map(u32::to_string).collect();
    format!("n({})", d.join(","))
}

/// Kind and address from a generated switch description.
pub(super) fn parse_switch_desc(desc: &str) -> Option<(SpecKind, SwitchAddr)> {
    let (kind, addr) = desc.split_once(' ')?;
    // Only the canonical upper-case keyword: the names are written by the generator.
    let kind = SpecKind::from_name(kind).filter(|k| k.name() == kind)?;
    Some((kind, SwitchAddr::parse(addr)?))
}

/// The fat-tree structure of a fabric: its spec and every switch's address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgftLayout {
    /// The spec the fabric was generated from (inferred by [`PgftLayout::recognize`]).
    pub spec: PgftSpec,
    /// Address of every switch, by [`SwitchId`].
    pub switch_addr: Vec<SwitchAddr>,
    /// Generator index `d` of every end port (QFT paper eq. 4), by [`EndPortId`]. In a generated
    /// fabric it equals the id; in a fabric read from a file it is the generator order.
    pub end_port_index: Vec<u32>,
    /// Switch id by level, then index within the level.
    by_position: Vec<Vec<SwitchId>>,
}

impl PgftLayout {
    /// Builds a layout; every address of `spec` must appear exactly once in `switch_addr`.
    pub(super) fn from_parts(spec: PgftSpec, switch_addr: Vec<SwitchAddr>, end_port_index: Vec<u32>) -> PgftLayout {
        let mut by_position: Vec<Vec<SwitchId>> = (0..spec.h as u32)
            .map(|l| vec![SwitchId(u32::MAX); spec.switches_at(l) as usize])
            .collect();
        for (i, a) in switch_addr.iter().enumerate() {
            by_position[a.level as usize][spec.switch_index(a) as usize] = SwitchId(i as u32);
        }
        PgftLayout {
            spec,
            switch_addr,
            end_port_index,
            by_position,
        }
    }

    /// Level of a switch (0 = leaf).
    pub fn level(&self, sw: SwitchId) -> u32 {
        self.switch_addr[sw.idx()].level
    }

    /// Mixed-radix index of a switch within its level.
    pub fn index(&self, sw: SwitchId) -> u64 {
        self.spec.switch_index(&self.switch_addr[sw.idx()])
    }

    /// The switch number `index` of `level`, if it exists.
    pub fn switch_at(&self, level: u32, index: u64) -> Option<SwitchId> {
        self.by_position
            .get(level as usize)?
            .get(usize::try_from(index).ok()?)
            .copied()
    }

    /// The switch with this address, if it exists.
    pub fn switch_of(&self, addr: &SwitchAddr) -> Option<SwitchId> {
        let valid = addr.digits.len() == self.spec.h
            && (addr.level as usize) < self.spec.h
            && addr
                .digits
                .iter()
                .enumerate()
                .all(|(i, &d)| d < self.spec.radix(addr.level, i));
        if !valid {
            return None;
        }
        self.switch_at(addr.level, self.spec.switch_index(addr))
    }

    /// Generator index `d` of an end port.
    pub fn end_node_index(&self, ep: EndPortId) -> u32 {
        self.end_port_index[ep.idx()]
    }

    /// Address of the switch with this GUID under the generator's GUID scheme (works on degraded
    /// copies of the fabric too, whose switch ids differ).
    pub fn addr_of_guid(&self, guid: Guid) -> Option<SwitchAddr> {
        self.spec
            .decode_switch_guid(guid)
            .map(|(level, index)| self.spec.switch_addr(level, index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_names_round_trip() {
        let a = SwitchAddr {
            level: 1,
            digits: vec![0, 3, 1],
        };
        assert_eq!(a.to_string(), "L1 S(0,3,1)");
        assert_eq!(SwitchAddr::parse("L1 S(0,3,1)"), Some(a.clone()));
        assert_eq!(
            parse_switch_desc(&switch_desc(SpecKind::Qft, &a)),
            Some((SpecKind::Qft, a))
        );
        for bad in [
            "L1 S(0,3,)",
            "L S(0)",
            "L1 S(0",
            "L1 S(+1)",
            "L1  S(0)",
            "L0 S( 0)",
            "L0 S()",
        ] {
            assert_eq!(parse_switch_desc(&format!("PGFT {bad}")), None, "{bad}");
        }
        assert_eq!(parse_switch_desc("pgft L0 S(0)"), None);
        assert_eq!(node_desc(&[5, 0, 2]), "n(5,0,2)");
    }
}
