//! From a direct topology's switch graph (digits, cables with their ports) to a [`Fabric`]:
//! switches in id order, end nodes switch by switch, then the cables (see the
//! [module docs](super) for the names, GUIDs and ports).

use super::{dragonfly, hyperx, rrg, slimfly, DirectSpec};
use crate::gen::error::GenError;
use crate::gen::layout::node_desc;
use crate::gen::spec::{NODE_GUID_BASE, SWITCH_GUID_BASE};
use crate::model::{Fabric, FabricBuilder, NodeType, PortNum, SwitchId};

/// One cable: `(switch, port)` at both ends (ports are network-port indices from 0, added to
/// `p + 1` by the builder).
pub(super) type Link = ((u32, u32), (u32, u32));

/// The switch graph of a direct topology.
pub(super) struct Graph {
    /// Digits of every switch (its name), by id.
    pub(super) digits: Vec<Vec<u32>>,
    /// Every cable once.
    pub(super) links: Vec<Link>,
}

/// Generates the fabric of a direct topology (validated first).
pub fn generate_direct(spec: &DirectSpec) -> Result<Fabric, GenError> {
    spec.validate()?;
    let graph = match *spec {
        DirectSpec::SlimFly { q, .. } => slimfly::graph(q, &spec.to_string())?,
        DirectSpec::Dragonfly { a, h, g, .. } => dragonfly::graph(a, h, g),
        DirectSpec::HyperX { s1, s2, k1, k2, .. } => hyperx::graph(s1, s2, k1, k2),
        DirectSpec::Rrg { n, k, seed, .. } => rrg::graph(n, k, seed, &spec.to_string())?,
    };
    let p = spec.hosts_per_switch();
    // validate() bounds the port count by MAX_SWITCH_PORTS (254).
    let nports = spec.switch_ports() as PortNum;
    let kind = spec.kind_name();
    let mut b = FabricBuilder::new();
    for (i, d) in graph.digits.iter().enumerate() {
        let digits: Vec<String> = d.iter().map(u32::to_string).collect();
        let guid = SWITCH_GUID_BASE | (spec.guid_tag() << 32) | i as u64;
        b.add_switch(guid, format!("{kind} S({})", digits.join(",")), nports)?;
    }
    for (i, d) in graph.digits.iter().enumerate() {
        for a in 0..p {
            let n = i as u64 * u64::from(p) + u64::from(a);
            let node_guid = NODE_GUID_BASE | (n << 8);
            let mut name = vec![a];
            name.extend_from_slice(d);
            let ep = b.add_end_port(node_guid + 1, node_guid, node_desc(&name), 1, 1, NodeType::Compute)?;
            b.connect_end_port(ep, SwitchId(i as u32), (1 + a) as PortNum)?;
        }
    }
    for &((s, ps), (t, pt)) in &graph.links {
        b.connect_switches(
            SwitchId(s),
            (p + 1 + ps) as PortNum,
            SwitchId(t),
            (p + 1 + pt) as PortNum,
        )?;
    }
    Ok(b.build())
}
