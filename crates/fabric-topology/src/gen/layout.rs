//! Switch addresses, the layout of a generated fat-tree, generated names, and recognition of a
//! fabric as a complete generated fat-tree.

use std::fmt;

use super::{generate, GenError, PgftSpec, SpecKind};
use crate::model::{fmt_guid, EndPortId, Fabric, Guid, LinkState, PortNum, Remote, SwitchId};

/// Switch address: `level` 0 = leaf. `digits[i]` is the digit of notation index `i + 1`
/// (little-endian): for `i <= level` it is a w-digit `b_{i+1}` in `[0, w[i])`; for `i > level`
/// an m-digit `a_{i+1}` in `[0, m[i])`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SwitchAddr {
    /// Switch level, 0 = leaf (notation level `level + 1`).
    pub level: u32,
    /// `h` digits, notation index 1 first.
    pub digits: Vec<u32>,
}

impl SwitchAddr {
    /// Whether this is a leaf (level 0).
    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }

    /// Parses the address part of a generated switch name, `"L<level> S(<d1>,..,<dh>)"`.
    pub fn parse(s: &str) -> Option<SwitchAddr> {
        let (level, tuple) = s.strip_prefix('L')?.split_once(" S(")?;
        let level = parse_u32(level)?;
        let digits = tuple
            .strip_suffix(')')?
            .split(',')
            .map(parse_u32)
            .collect::<Option<Vec<u32>>>()?;
        Some(SwitchAddr { level, digits })
    }
}

/// Strict decimal (no sign, no blanks).
fn parse_u32(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl fmt::Display for SwitchAddr {
    /// `"L<level> S(<d1>,..,<dh>)"`, digits in notation order (index 1 first).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "L{} S(", self.level)?;
        for (i, d) in self.digits.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str(")")
    }
}

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
fn parse_switch_desc(desc: &str) -> Option<(SpecKind, SwitchAddr)> {
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

    /// Recognizes a fabric as a complete generated fat-tree: reads the switch names back, infers
    /// the spec (vectors from the digits, `m1` from the end nodes per leaf, `p` from the up cables
    /// of one switch per level), regenerates it and compares GUIDs, names, port counts, every
    /// cable (by GUID and port) and every end port. Speeds are ignored. Every switch, link and end
    /// port must be up. The fabric may come from a file in any record order.
    ///
    /// Errors with [`GenError::NotRecognized`] naming the first difference (switch GUID,
    /// description, port) — e.g. a degraded fabric, a down link or a hand-made file.
    pub fn recognize(fabric: &Fabric) -> Result<PgftLayout, GenError> {
        let fail = GenError::NotRecognized;
        if fabric.num_switches() == 0 {
            return Err(fail("the fabric has no switches".into()));
        }
        let sw_name = |id: usize| {
            let s = &fabric.switches()[id];
            format!("switch {} '{}'", fmt_guid(s.guid), s.desc)
        };
        let mut kind = None;
        let mut addrs: Vec<SwitchAddr> = Vec::with_capacity(fabric.num_switches());
        for (i, s) in fabric.switches().iter().enumerate() {
            let (k, a) = parse_switch_desc(&s.desc).ok_or_else(|| {
                fail(format!(
                    "{} is not named like a generated switch (e.g. 'PGFT L0 S(0,1,2)')",
                    sw_name(i)
                ))
            })?;
            match kind {
                None => kind = Some(k),
                Some(k0) if k0 != k => {
                    return Err(fail(format!(
                        "{} is a {k} switch but {} is a {k0} switch",
                        sw_name(i),
                        sw_name(0)
                    )));
                }
                Some(_) => {}
            }
            let h0 = addrs.first().map_or(a.digits.len(), |a0| a0.digits.len());
            if a.digits.len() != h0 || a.level as usize >= a.digits.len() {
                return Err(fail(format!(
                    "{} does not have the address shape of {}",
                    sw_name(i),
                    sw_name(0)
                )));
            }
            addrs.push(a);
        }
        let kind = kind.unwrap_or(SpecKind::Pgft);
        let h = addrs[0].digits.len();

        // Vectors from the digit ranges.
        let mut m = vec![0u32; h];
        let mut w = vec![0u32; h];
        for a in &addrs {
            for (i, &d) in a.digits.iter().enumerate() {
                let v = if i <= a.level as usize { &mut w[i] } else { &mut m[i] };
                *v = (*v).max(d.saturating_add(1));
            }
        }
        for (i, s) in fabric.switches().iter().enumerate() {
            if addrs[i].level == 0 {
                let nodes = s
                    .external_ports()
                    .filter(|(_, p)| matches!(p.remote, Remote::EndPort(_)))
                    .count();
                m[0] = m[0].max(nodes as u32);
            }
        }
        // Parallel cables / cross-connected groups: the most up cables of a switch of each level
        // (a switch that lost cables then shows up as a precise difference below).
        let mut up_cables = vec![0u32; h];
        for (i, s) in fabric.switches().iter().enumerate() {
            let level = addrs[i].level;
            let up = s
                .external_ports()
                .filter(|(_, p)| matches!(p.remote, Remote::Switch { sw, .. } if addrs[sw.idx()].level == level + 1))
                .count() as u32;
            let most = &mut up_cables[level as usize];
            *most = (*most).max(up);
        }
        let mut p = vec![1u32; h];
        for level in 0..h.saturating_sub(1) {
            let (up, wu) = (up_cables[level], w[level + 1]);
            if up == 0 || up.checked_rem(wu) != Some(0) {
                return Err(fail(format!(
                    "switches of level {level} have up to {up} cables to level {}, not a multiple of their {wu} parents",
                    level + 1
                )));
            }
            p[level + 1] = up / wu;
        }
        let spec = PgftSpec { kind, h, m, w, p };
        spec.validate()
            .map_err(|e| fail(format!("the names and cabling suggest {spec}, which is not valid: {e}")))?;
        if spec.num_switches() != fabric.num_switches() as u64 || spec.num_end_nodes() != fabric.num_end_ports() as u64
        {
            return Err(fail(format!(
                "the names suggest {spec} with {} switches and {} end nodes, the fabric has {} and {}",
                spec.num_switches(),
                spec.num_end_nodes(),
                fabric.num_switches(),
                fabric.num_end_ports()
            )));
        }

        let expected = generate(&spec)?;
        let ef = &expected.fabric;
        let mut switch_addr = Vec::with_capacity(fabric.num_switches());
        for (i, s) in fabric.switches().iter().enumerate() {
            let eid = ef.switch_by_guid(s.guid).ok_or_else(|| {
                fail(format!(
                    "{}: the GUID is not the generated GUID of any {spec} switch",
                    sw_name(i)
                ))
            })?;
            let es = ef.switch(eid);
            if es.desc != s.desc {
                return Err(fail(format!(
                    "{}: the {spec} switch with this GUID is '{}'",
                    sw_name(i),
                    es.desc
                )));
            }
            if !s.up {
                return Err(fail(format!("{} is down", sw_name(i))));
            }
            if es.nports != s.nports {
                return Err(fail(format!(
                    "{} has {} ports, {spec} gives it {}",
                    sw_name(i),
                    s.nports,
                    es.nports
                )));
            }
            for pn in 1..=s.nports {
                let got = remote_key(fabric, s.ports[pn as usize].remote);
                let want = remote_key(ef, es.ports[pn as usize].remote);
                if got != want {
                    return Err(fail(format!(
                        "{} port {pn}: expected {}, found {}",
                        sw_name(i),
                        describe(&want),
                        describe(&got)
                    )));
                }
                if s.ports[pn as usize].state == LinkState::Down {
                    return Err(fail(format!("{} port {pn}: the link is down", sw_name(i))));
                }
            }
            switch_addr.push(expected.layout.switch_addr[eid.idx()].clone());
        }
        let mut end_port_index = Vec::with_capacity(fabric.num_end_ports());
        for e in fabric.end_ports() {
            let name = || format!("end port {} '{}'", fmt_guid(e.port_guid), e.desc);
            let eid = ef
                .end_port_by_guid(e.port_guid)
                .ok_or_else(|| fail(format!("{}: not a generated {spec} end port GUID", name())))?;
            let ee = ef.end_port(eid);
            if (e.node_guid, e.port_num) != (ee.node_guid, ee.port_num) {
                return Err(fail(format!(
                    "{}: expected node GUID {} port {}, found {} port {}",
                    name(),
                    fmt_guid(ee.node_guid),
                    ee.port_num,
                    fmt_guid(e.node_guid),
                    e.port_num
                )));
            }
            if !e.up {
                return Err(fail(format!("{} is down", name())));
            }
            end_port_index.push(eid.0);
        }
        Ok(PgftLayout::from_parts(spec, switch_addr, end_port_index))
    }
}

/// What a switch port leads to, in GUID terms (comparable across fabrics).
#[derive(PartialEq, Eq)]
enum RemoteKey {
    Nothing,
    Switch(Guid, PortNum),
    EndPort(Guid),
}

fn remote_key(f: &Fabric, r: Remote) -> RemoteKey {
    match r {
        Remote::None => RemoteKey::Nothing,
        Remote::Switch { sw, port } => RemoteKey::Switch(f.switch(sw).guid, port),
        Remote::EndPort(ep) => RemoteKey::EndPort(f.end_port(ep).port_guid),
    }
}

fn describe(k: &RemoteKey) -> String {
    match k {
        RemoteKey::Nothing => "no cable".into(),
        RemoteKey::Switch(g, p) => format!("a cable to switch {} port {p}", fmt_guid(*g)),
        RemoteKey::EndPort(g) => format!("end port {}", fmt_guid(*g)),
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
