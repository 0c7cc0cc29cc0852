//! Recognition of a fabric as a complete generated fat-tree ([`PgftLayout::recognize`]).

use super::addr::SwitchAddr;
use super::build::generate;
use super::error::GenError;
use super::layout::{parse_switch_desc, PgftLayout};
use super::spec::{PgftSpec, SpecKind};
use crate::model::{fmt_guid, Fabric, Guid, LinkState, PortNum, Remote};

impl PgftLayout {
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
