//! Building the fabric of a spec: switches level by level, end nodes leaf by leaf, then the
//! cables of each level (PGFT rule or QFT eqs. 6–8).

use super::addr::SwitchAddr;
use super::degrade::{degrade, degrade_direct, Degrade};
use super::direct::{generate_direct, is_direct, DirectSpec};
use super::error::GenError;
use super::layout::{node_desc, switch_desc, PgftLayout};
use super::spec::{PgftSpec, SpecKind};
use crate::model::{Fabric, FabricBuilder, NodeType, PortNum, SwitchId};

/// A generated fabric and its fat-tree layout (addresses by [`SwitchId`]).
#[derive(Clone, Debug)]
pub struct Generated {
    /// The fabric (generation 0), switches and end ports in generator order.
    pub fabric: Fabric,
    /// Its layout: the spec, every switch's address, every end port's generator index.
    pub layout: PgftLayout,
}

/// Generates the complete fat-tree of a spec (validated first). See the [module docs](super) for
/// the order of ids, the cabling, the port numbers, the GUIDs and the names.
pub fn generate(spec: &PgftSpec) -> Result<Generated, GenError> {
    spec.validate()?;
    let h = spec.h;
    let counts: Vec<u64> = (0..h as u32).map(|l| spec.switches_at(l)).collect();
    let total = spec.num_switches() as usize;
    let mut first: Vec<usize> = Vec::with_capacity(h);
    let mut addrs: Vec<SwitchAddr> = Vec::with_capacity(total);
    let mut b = FabricBuilder::new();
    for level in 0..h as u32 {
        first.push(addrs.len());
        // validate() bounds the port count by MAX_SWITCH_PORTS (254).
        let nports = spec.switch_ports(level) as PortNum;
        for index in 0..counts[level as usize] {
            let addr = spec.switch_addr(level, index);
            b.add_switch(spec.switch_guid(level, index), switch_desc(spec.kind, &addr), nports)?;
            addrs.push(addr);
        }
    }

    // End nodes, leaf by leaf in leaf order, then port order: d = a1 + m1 · leaf index.
    let m1 = spec.m[0];
    for leaf in 0..counts[0] {
        let leaf_id = SwitchId(leaf as u32);
        for a1 in 0..m1 {
            let d = leaf * u64::from(m1) + u64::from(a1);
            let mut digits = addrs[leaf as usize].digits.clone();
            digits[0] = a1;
            let ep = b.add_end_port(
                spec.port_guid(d),
                spec.node_guid(d),
                node_desc(&digits),
                1,
                1,
                NodeType::Compute,
            )?;
            b.connect_end_port(ep, leaf_id, spec.down_port(0, a1, 0))?;
        }
    }

    // Inter-switch cables, from each switch up to its parents.
    for level in 0..h.saturating_sub(1) {
        let above = first[level + 1];
        for index in 0..counts[level] as usize {
            let own = first[level] + index;
            for (parent, up_port, down_port) in up_links(spec, &addrs[own]) {
                let parent_id = SwitchId((above + spec.switch_index(&parent) as usize) as u32);
                b.connect_switches(SwitchId(own as u32), up_port, parent_id, down_port)?;
            }
        }
    }

    let end_port_index = (0..spec.num_end_nodes() as u32).collect();
    Ok(Generated {
        fabric: b.build(),
        layout: PgftLayout::from_parts(spec.clone(), addrs, end_port_index),
    })
}

/// The up cables of a non-top switch: (parent address, own up port, parent's down port).
fn up_links(spec: &PgftSpec, addr: &SwitchAddr) -> Vec<(SwitchAddr, PortNum, PortNum)> {
    let level = addr.level;
    let u = level as usize + 1; // digit index that differs between the switch and its parents
    let (wu, pu) = (spec.w[u], spec.p[u]);
    let mut links = Vec::with_capacity((wu * pu) as usize);
    let mut parent = SwitchAddr {
        level: level + 1,
        digits: addr.digits.clone(),
    };
    match spec.kind {
        SpecKind::Pgft | SpecKind::Xgft | SpecKind::Kary => {
            // Same digits except index u: any w-digit j above, child number c below; pu cables each.
            let c = addr.digits[u];
            for j in 0..wu {
                parent.digits[u] = j;
                for k in 0..pu {
                    links.push((
                        parent.clone(),
                        spec.up_port(level, j, k),
                        spec.down_port(level + 1, c, k),
                    ));
                }
            }
        }
        SpecKind::Qft => {
            // QFT paper eq. 6 with the upper switch S at paper level l = u + 1 and this switch Q
            // at l - 1: S and Q agree on all digits but s_l (free) and the grouped digit, which is
            // s_{l+1} (index u + 1) below the top and s_{h-1} (index u - 1) at the top, where
            // ⌊s/p_l⌋ = ⌊q/p_l⌋. Ports by eqs. 7 (f, on S) and 8 (g, on Q).
            let g = if u + 1 < spec.h { u + 1 } else { u - 1 };
            let group = addr.digits[g] / pu * pu;
            let member = addr.digits[g] % pu; // q_{l+1} mod p_l (or q_{h-1} mod p_h)
            let child = addr.digits[u]; // q_l
            for t in 0..pu {
                parent.digits[g] = group + t;
                for j in 0..wu {
                    parent.digits[u] = j;
                    // g = s_l + w_l (s_{l+1} mod p_l) = j + w·t; f = q_l + m_l (q_{l+1} mod p_l).
                    links.push((
                        parent.clone(),
                        spec.up_port(level, j, t),
                        spec.down_port(level + 1, child, member),
                    ));
                }
            }
        }
    }
    links
}

/// Parses a notation string (a fat-tree notation of the [module docs](super) or a direct one of
/// [`direct`](super::direct): `SLIMFLY`, `DRAGONFLY`, `HYPERX`, `RRG`), generates it and, if `d`
/// is given, degrades it ([`degrade`], or [`degrade_direct`] for the direct topologies).
pub fn generate_str(spec: &str, d: Option<&Degrade>) -> Result<Fabric, GenError> {
    if is_direct(spec) {
        let fabric = generate_direct(&spec.parse::<DirectSpec>()?)?;
        return match d {
            Some(d) => degrade_direct(&fabric, d),
            None => Ok(fabric),
        };
    }
    let spec: PgftSpec = spec.parse().map_err(|e| match e {
        GenError::Syntax {
            spec,
            column: 1,
            reason,
        } if reason.starts_with("unknown fat-tree kind") => GenError::Syntax {
            spec,
            column: 1,
            reason: reason.replacen("fat-tree kind", "topology kind", 1).replacen(
                "QFT or RLFT",
                "QFT, RLFT, SLIMFLY, DRAGONFLY, HYPERX or RRG",
                1,
            ),
        },
        e => e,
    })?;
    let generated = generate(&spec)?;
    match d {
        Some(d) => degrade(&generated.fabric, d),
        None => Ok(generated.fabric),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Remote;

    /// The 2-ary 3-tree of the thesis' Figure 1.5: 8 nodes, 12 switches, top switches with 2 ports.
    #[test]
    fn two_ary_three_tree() {
        let g = generate(&"KARY(2,3)".parse().unwrap()).unwrap();
        let f = &g.fabric;
        assert_eq!((f.num_end_ports(), f.num_switches()), (8, 12));
        let ports: Vec<u8> = f.switches().iter().map(|s| s.nports).collect();
        assert_eq!(ports, [4, 4, 4, 4, 4, 4, 4, 4, 2, 2, 2, 2]);
        assert_eq!(f.count_links(), (16, 16));
        // Leaf (0,1,0) = switch 1: nodes n(0,1,0), n(1,1,0) on ports 1, 2, parents L1 S(0,0,0), S(0,1,0).
        assert_eq!(f.switch(SwitchId(1)).desc, "KARY L0 S(0,1,0)");
        assert_eq!(f.end_port(f.attached_end_ports(SwitchId(1))[1]).desc, "n(1,1,0)");
        let parents: Vec<&str> = f
            .port_groups(SwitchId(1))
            .iter()
            .map(|g| f.switch(g.remote).desc.as_str())
            .collect();
        assert_eq!(parents, ["KARY L1 S(0,0,0)", "KARY L1 S(0,1,0)"]);
        // Its up port to parent j = 1 is port 1 + 2 + 1; the parent's down port to child c = 1 is 2.
        assert_eq!(
            f.switch(SwitchId(1)).ports[4].remote,
            Remote::Switch {
                sw: f.find_switch("KARY L1 S(0,1,0)").unwrap(),
                port: 2
            }
        );
    }

    #[test]
    fn qft_ports_follow_eqs_7_and_8() {
        // Level-2 switch S = (2; s3, s2, s1) = L1 S(0,1,3) of QFT(3;4,2,6;1,2,4;1,2,1) (p2 = 2)
        // reaches leaf Q = (1; q3, q2, q1) = L0 S(0,q2,q3) iff ⌊s3/2⌋ = ⌊q3/2⌋, through down port
        // f = q2 + m2 (q3 mod 2) and Q's up port g = s2 + w2 (s3 mod 2).
        let g = generate(&"QFT(3;4,2,6;1,2,4;1,2,1)".parse().unwrap()).unwrap();
        let f = &g.fabric;
        let s = f.find_switch("QFT L1 S(0,1,3)").unwrap();
        let down: Vec<(u8, String, u8)> = (1..=4u8)
            .map(|pn| match f.switch(s).ports[pn as usize].remote {
                Remote::Switch { sw, port } => (pn, f.switch(sw).desc.clone(), port),
                r => panic!("port {pn}: {r:?}"),
            })
            .collect();
        // m2 = 2, w2 = 2, down ports = 4; leaves have 4 node ports, so Q's up port = 4 + 1 + g.
        let want = [
            (1, "QFT L0 S(0,0,2)".to_string(), 4 + 1 + 1 + 2),
            (2, "QFT L0 S(0,1,2)".to_string(), 4 + 1 + 1 + 2),
            (3, "QFT L0 S(0,0,3)".to_string(), 4 + 1 + 1 + 2),
            (4, "QFT L0 S(0,1,3)".to_string(), 4 + 1 + 1 + 2),
        ];
        assert_eq!(down, want);
    }
}
