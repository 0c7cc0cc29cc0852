//! The QFT tuples of a fabric (QFT paper Sec. III): every switch's level and digits, every end
//! node's index `d` (eq. 4), and which cables are still there.
//!
//! The closed form (Sec. IV) is a function of the tuples, which the QFT paper assigns with the
//! generator (its tech. report's tuple assignment). PQFT reads them back from the names that
//! `fabricctl topo gen` writes (`"QFT L1 S(0,1,3)"`), or, when no switch carries such a name,
//! assigns them from the structure of a complete QFT ([`super::structure`]). From the names it
//! then **checks the structure**: the spec
//! is inferred from the digits and the port counts, regenerated, and every live cable of the
//! fabric must be a cable of that QFT on exactly the ports of eqs. 7–8 (every end port on its
//! leaf port). A complete fabric is recognised by [`PgftLayout::recognize`]; a degraded one
//! (cables or non-leaf switches missing, links down) is accepted when what is left is a subset
//! of the QFT. A fabric whose names lie about its cabling is refused with the first cable that
//! differs, so the port choices of the closed form always mean what the paper says.

use fabric_topology::gen::{generate, PgftLayout, PgftSpec, SpecKind, SwitchAddr};
use fabric_topology::{fmt_guid, Fabric, PortNum, Remote, SwitchId};

use super::structure::structural_layout;

/// Per switch, the generator's port number (eqs. 7–8, what the closed form computes) → the
/// switch's own port, for a QFT recognised from its structure.
pub(crate) struct PortMap {
    map: Vec<PortNum>,
}

impl PortMap {
    const STRIDE: usize = 256;

    pub fn new(switches: usize) -> PortMap {
        PortMap {
            map: vec![0; switches * Self::STRIDE],
        }
    }

    pub fn set(&mut self, s: SwitchId, generator: PortNum, own: PortNum) {
        self.map[s.idx() * Self::STRIDE + generator as usize] = own;
    }

    /// The own port of switch `s` for the generator's port `generator`.
    #[inline]
    pub fn get(&self, s: usize, generator: PortNum) -> PortNum {
        self.map[s * Self::STRIDE + generator as usize]
    }
}

/// The tuples of a (possibly degraded) QFT.
pub(crate) struct QftLayout {
    pub spec: PgftSpec,
    /// Address of every switch by `SwitchId` (dead switches too: they keep their name).
    pub addr: Vec<SwitchAddr>,
    /// Generator index `d` of every end port by `EndPortId`.
    pub index: Vec<u64>,
    /// Whether the fabric is the complete QFT with every link up.
    pub complete: bool,
    /// Generator port → own port, when the tuples come from the structure (the generator's
    /// names carry the generator's port numbers: `None`).
    pub ports: Option<PortMap>,
}

/// Reads the QFT tuples of `f` (see the module docs): from the generator's names when the
/// switches carry them, otherwise from the structure ([`structural_layout`], complete QFTs;
/// `level` is the ranking's). The error is a reason for an operator.
pub(crate) fn qft_layout(f: &Fabric, level: &[Option<u32>]) -> Result<QftLayout, String> {
    match PgftLayout::recognize(f) {
        Ok(l) => Ok(QftLayout {
            index: l.end_port_index.iter().map(|&d| u64::from(d)).collect(),
            addr: l.switch_addr,
            spec: l.spec,
            complete: true,
            ports: None,
        }),
        Err(_) if !f.switches().iter().any(|s| parse_tuple(&s.desc).is_some()) => structural_layout(f, level)
            .map_err(|e| format!("its switches carry no QFT tuples and its structure is not a complete QFT: {e}")),
        Err(complete_err) => degraded_layout(f)
            .map_err(|e| format!("it is not a complete generated fat-tree ({complete_err}) nor a degraded one ({e})")),
    }
}

/// The kind and tuple of a generator name (`"QFT L1 S(0,1,3)"`).
fn parse_tuple(desc: &str) -> Option<(SpecKind, SwitchAddr)> {
    let (k, a) = desc.split_once(' ')?;
    let k = SpecKind::from_name(k).filter(|x| x.name() == k)?;
    Some((k, SwitchAddr::parse(a)?))
}

fn degraded_layout(f: &Fabric) -> Result<QftLayout, String> {
    if f.num_switches() == 0 {
        return Err("the fabric has no switches".into());
    }
    let name = |i: usize| {
        let s = &f.switches()[i];
        format!("switch {} '{}'", fmt_guid(s.guid), s.desc)
    };
    let mut kind = None;
    let mut addr = Vec::with_capacity(f.num_switches());
    for (i, s) in f.switches().iter().enumerate() {
        let (k, a) = parse_tuple(&s.desc)
            .ok_or_else(|| format!("{} does not carry a QFT tuple ('QFT L1 S(0,1,3)')", name(i)))?;
        if *kind.get_or_insert(k) != k {
            return Err(format!("{} is a {k} switch, {} is not", name(i), name(0)));
        }
        if a.digits.len() != addr.first().map_or(a.digits.len(), |a0: &SwitchAddr| a0.digits.len())
            || a.level as usize >= a.digits.len()
        {
            return Err(format!("{} does not have the tuple shape of {}", name(i), name(0)));
        }
        addr.push(a);
    }
    let kind = kind.unwrap_or(SpecKind::Qft);
    let h = addr[0].digits.len();
    // m and w from the digit ranges, m1 from the end nodes per leaf (cabled, live or not).
    let (mut m, mut w) = (vec![1u32; h], vec![1u32; h]);
    for a in &addr {
        for (i, &d) in a.digits.iter().enumerate() {
            let v = if i <= a.level as usize { &mut w[i] } else { &mut m[i] };
            *v = (*v).max(d.saturating_add(1));
        }
    }
    m[0] = 0;
    let mut nports: Vec<Option<u32>> = vec![None; h];
    for (i, s) in f.switches().iter().enumerate() {
        let l = addr[i].level as usize;
        if l == 0 {
            let nodes = s
                .external_ports()
                .filter(|(_, p)| matches!(p.remote, Remote::EndPort(_)))
                .count();
            m[0] = m[0].max(nodes as u32);
        }
        match nports[l] {
            None => nports[l] = Some(u32::from(s.nports)),
            Some(n) if n != u32::from(s.nports) => {
                return Err(format!(
                    "{} has {} ports, other level-{l} switches {n}",
                    name(i),
                    s.nports
                ))
            }
            Some(_) => {}
        }
    }
    // p from the port counts, which survive cable faults: a level-L switch has m_{L+1} p_{L+1}
    // down ports and w_{L+2} p_{L+2} up ports.
    let mut p = vec![1u32; h];
    for l in 0..h {
        let n = nports[l].ok_or_else(|| format!("no switch of level {l} is left"))?;
        let down = m[l] * p[l];
        let up = n
            .checked_sub(down)
            .ok_or_else(|| format!("level-{l} switches have {n} ports, fewer than {down} down ports"))?;
        if l + 1 == h {
            if up != 0 {
                return Err(format!(
                    "top switches have {up} ports more than their {down} down ports"
                ));
            }
        } else if up == 0 || !up.is_multiple_of(w[l + 1]) {
            return Err(format!(
                "level-{l} switches have {up} up ports, not a multiple of their {} parents",
                w[l + 1]
            ));
        } else {
            p[l + 1] = up / w[l + 1];
        }
    }
    let spec = PgftSpec { kind, h, m, w, p };
    spec.validate()
        .map_err(|e| format!("the tuples suggest {spec}, which is not valid: {e}"))?;
    let expected = generate(&spec).map_err(|e| format!("{spec}: {e}"))?;
    let ef = &expected.fabric;
    for (i, s) in f.switches().iter().enumerate() {
        let eid = ef
            .switch_by_guid(s.guid)
            .ok_or_else(|| format!("{}: not the GUID of a {spec} switch", name(i)))?;
        let es = ef.switch(eid);
        if es.desc != s.desc || es.nports != s.nports {
            return Err(format!(
                "{}: the {spec} switch with this GUID is '{}'",
                name(i),
                es.desc
            ));
        }
        for (pn, port) in s.external_ports() {
            let want = es.ports[pn as usize].remote;
            let ok = match port.remote {
                Remote::Switch { .. } => match f.switch_link_live(fabric_topology::SwitchId(i as u32), pn) {
                    None => true,
                    Some((r, rp)) => {
                        matches!(want, Remote::Switch { sw, port } if ef.switch(sw).guid == f.switch(r).guid && port == rp)
                    }
                },
                Remote::EndPort(ep) => {
                    matches!(want, Remote::EndPort(x) if ef.end_port(x).port_guid == f.end_port(ep).port_guid)
                }
                Remote::None => true,
            };
            if !ok {
                return Err(format!("{} port {pn} is not cabled as in {spec} (eqs. 6–8)", name(i)));
            }
        }
    }
    let mut index = Vec::with_capacity(f.num_end_ports());
    for e in f.end_ports() {
        let eid = ef.end_port_by_guid(e.port_guid).ok_or_else(|| {
            format!(
                "end port {} '{}' is not a {spec} end node",
                fmt_guid(e.port_guid),
                e.desc
            )
        })?;
        index.push(u64::from(eid.0));
    }
    Ok(QftLayout {
        spec,
        addr,
        index,
        complete: false,
        ports: None,
    })
}
