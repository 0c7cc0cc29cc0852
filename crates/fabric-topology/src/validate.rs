//! Cabling validation: compare the cabling a fabric *should* have (a generated or hand-written
//! topology file) with the one it *has* (a discovery sweep), as in the Slim Fly deployment paper
//! (Blach et al., §3.4 "Correctness Verification": generated port-to-port link descriptions
//! compared with `ibnetdiscover` output, naming incorrectly wired cables with instructions to
//! fix them, and missing or broken links).
//!
//! Switches are matched by node GUID, falling back to the exact description for switches whose
//! GUID is not in the other fabric (a replaced switch keeps its name, not its GUID). End ports
//! are matched by port GUID, falling back to description and port number. Every cable end is then
//! an *endpoint* (a matched node and a port number) and the two cablings are compared endpoint by
//! endpoint:
//!
//! * **missing**: an expected cable neither end of which is cabled in the actual fabric;
//! * **extra**: an actual cable neither end of which is cabled in the expected fabric;
//! * **miswired**: an endpoint that is cabled in the actual fabric to another endpoint than the
//!   expected one (or that should be free but is cabled to an endpoint expected elsewhere); one
//!   entry per wrong endpoint, with the expected and the actual peer;
//! * **down**: a cable that is where it should be but whose link is down in the actual fabric
//!   (a broken cable or port).
//!
//! Switches present on one side only are listed as well ([`CablingReport::missing_switches`],
//! [`CablingReport::extra_switches`]); their cables appear in the cable lists.
//!
//! No I/O: the caller reads both fabrics.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::model::{fmt_guid, Fabric, Guid, LinkState, PortNum, Remote, SwitchId};

/// A node (switch or end port) as named in the report.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeRef {
    /// A switch: node GUID and description.
    Switch { guid: Guid, name: String },
    /// An end port (CA port): port GUID and description.
    EndPort { guid: Guid, name: String },
}

impl NodeRef {
    /// GUID of the node (switch node GUID or end port GUID).
    pub fn guid(&self) -> Guid {
        match self {
            NodeRef::Switch { guid, .. } | NodeRef::EndPort { guid, .. } => *guid,
        }
    }
    /// Description of the node.
    pub fn name(&self) -> &str {
        match self {
            NodeRef::Switch { name, .. } | NodeRef::EndPort { name, .. } => name,
        }
    }
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeRef::Switch { guid, name } => write!(f, "switch \"{name}\" ({})", fmt_guid(*guid)),
            NodeRef::EndPort { guid, name } => write!(f, "node \"{name}\" ({})", fmt_guid(*guid)),
        }
    }
}

/// One end of a cable: a node and its port number.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    pub node: NodeRef,
    pub port: PortNum,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} port {}", self.node, self.port)
    }
}

/// A cable between two endpoints (as named in the expected fabric when the node exists there).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cable {
    pub a: Endpoint,
    pub b: Endpoint,
}

impl fmt::Display for Cable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} <-> {}", self.a, self.b)
    }
}

/// An endpoint cabled to the wrong peer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Miswire {
    /// The endpoint whose cable is wrong.
    pub at: Endpoint,
    /// Where it should go (`None`: the port should be free).
    pub expected: Option<Endpoint>,
    /// Where it goes.
    pub actual: Endpoint,
}

impl fmt::Display for Miswire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.expected {
            Some(e) => write!(f, "{} goes to {} but should go to {}", self.at, self.actual, e),
            None => write!(f, "{} goes to {} but should be free", self.at, self.actual),
        }
    }
}

/// Result of [`compare`]. All lists are sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CablingReport {
    /// Expected cables absent from the actual fabric (neither end cabled).
    pub missing: Vec<Cable>,
    /// Actual cables not in the expected fabric (neither end expected to be cabled).
    pub extra: Vec<Cable>,
    /// Endpoints cabled to the wrong peer.
    pub miswired: Vec<Miswire>,
    /// Expected cables that are in place but whose link is down in the actual fabric.
    pub down: Vec<Cable>,
    /// Expected switches not found in the actual fabric (by GUID or description).
    pub missing_switches: Vec<NodeRef>,
    /// Actual switches not found in the expected fabric.
    pub extra_switches: Vec<NodeRef>,
}

impl CablingReport {
    /// Whether the actual cabling is exactly the expected one, with every link up.
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty()
            && self.extra.is_empty()
            && self.miswired.is_empty()
            && self.down.is_empty()
            && self.missing_switches.is_empty()
            && self.extra_switches.is_empty()
    }
}

impl fmt::Display for CablingReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_clean() {
            return writeln!(f, "cabling OK");
        }
        for s in &self.missing_switches {
            writeln!(f, "missing {s}")?;
        }
        for s in &self.extra_switches {
            writeln!(f, "unexpected {s}")?;
        }
        for c in &self.missing {
            writeln!(f, "missing cable: {c}")?;
        }
        for c in &self.extra {
            writeln!(f, "unexpected cable: {c}")?;
        }
        for m in &self.miswired {
            writeln!(f, "miswired: {m}")?;
        }
        for c in &self.down {
            writeln!(f, "link down: {c}")?;
        }
        writeln!(
            f,
            "{} missing, {} unexpected, {} miswired, {} down cable(s); {} missing, {} unexpected switch(es)",
            self.missing.len(),
            self.extra.len(),
            self.miswired.len(),
            self.down.len(),
            self.missing_switches.len(),
            self.extra_switches.len()
        )
    }
}

/// Identity of a node common to both fabrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    /// Expected switch (by expected id).
    ExpSwitch(u32),
    /// Actual switch absent from the expected fabric (by actual id).
    ActSwitch(u32),
    /// Expected end port (by expected id).
    ExpEnd(u32),
    /// Actual end port absent from the expected fabric (by actual id).
    ActEnd(u32),
}

type Ep = (Key, PortNum);

/// One side's cabling: peer and link state of every cabled endpoint.
struct Side {
    peer: HashMap<Ep, (Ep, bool)>,
}

/// Compares the `actual` cabling against the `expected` one. See the [module documentation](self).
pub fn compare(expected: &Fabric, actual: &Fabric) -> CablingReport {
    // Match switches: GUID first, then description among the unmatched ones (unique names only).
    let mut act_sw_key: Vec<Key> = Vec::with_capacity(actual.num_switches());
    let mut exp_matched = vec![false; expected.num_switches()];
    let mut exp_by_desc: HashMap<&str, Vec<u32>> = HashMap::new();
    for (i, s) in expected.switches().iter().enumerate() {
        if actual.switch_by_guid(s.guid).is_none() {
            exp_by_desc.entry(s.desc.as_str()).or_default().push(i as u32);
        }
    }
    for (i, s) in actual.switches().iter().enumerate() {
        let key = match expected.switch_by_guid(s.guid) {
            Some(id) => Some(id.0),
            None => match exp_by_desc.get(s.desc.as_str()) {
                Some(v) if v.len() == 1 && !exp_matched[v[0] as usize] => Some(v[0]),
                _ => None,
            },
        };
        match key {
            Some(e) => {
                exp_matched[e as usize] = true;
                act_sw_key.push(Key::ExpSwitch(e));
            }
            None => act_sw_key.push(Key::ActSwitch(i as u32)),
        }
    }
    // Match end ports: port GUID, then (description, port number).
    let mut exp_end_by_name: HashMap<(&str, PortNum), Vec<u32>> = HashMap::new();
    for (i, e) in expected.end_ports().iter().enumerate() {
        if actual.end_port_by_guid(e.port_guid).is_none() {
            exp_end_by_name
                .entry((e.desc.as_str(), e.port_num))
                .or_default()
                .push(i as u32);
        }
    }
    let act_end_key: Vec<Key> = actual
        .end_ports()
        .iter()
        .enumerate()
        .map(|(i, e)| match expected.end_port_by_guid(e.port_guid) {
            Some(id) => Key::ExpEnd(id.0),
            None => match exp_end_by_name.get(&(e.desc.as_str(), e.port_num)) {
                Some(v) if v.len() == 1 => Key::ExpEnd(v[0]),
                _ => Key::ActEnd(i as u32),
            },
        })
        .collect();

    let exp_side = side(expected, |s| Key::ExpSwitch(s.0), Key::ExpEnd);
    let act_side = side(actual, |s| act_sw_key[s.idx()], |e| act_end_key[e as usize]);

    let name = |ep: &Ep| -> Endpoint {
        let node = match ep.0 {
            Key::ExpSwitch(i) => {
                let s = expected.switch(SwitchId(i));
                NodeRef::Switch {
                    guid: s.guid,
                    name: s.desc.clone(),
                }
            }
            Key::ActSwitch(i) => {
                let s = actual.switch(SwitchId(i));
                NodeRef::Switch {
                    guid: s.guid,
                    name: s.desc.clone(),
                }
            }
            Key::ExpEnd(i) => {
                let e = &expected.end_ports()[i as usize];
                NodeRef::EndPort {
                    guid: e.port_guid,
                    name: e.desc.clone(),
                }
            }
            Key::ActEnd(i) => {
                let e = &actual.end_ports()[i as usize];
                NodeRef::EndPort {
                    guid: e.port_guid,
                    name: e.desc.clone(),
                }
            }
        };
        Endpoint { node, port: ep.1 }
    };
    let cable = |x: &Ep, y: &Ep| -> Cable {
        let (a, b) = (name(x), name(y));
        if a <= b {
            Cable { a, b }
        } else {
            Cable { a: b, b: a }
        }
    };

    let mut report = CablingReport::default();
    // Deterministic iteration: sort endpoints.
    let exp_sorted: BTreeMap<&Ep, &(Ep, bool)> = exp_side.peer.iter().collect();
    let act_sorted: BTreeMap<&Ep, &(Ep, bool)> = act_side.peer.iter().collect();
    for (x, (y, _)) in &exp_sorted {
        let (x, y) = (*x, y);
        match act_side.peer.get(x) {
            Some((z, up)) if z == y => {
                if x < y && !up {
                    report.down.push(cable(x, y));
                }
            }
            Some((z, _)) => report.miswired.push(Miswire {
                at: name(x),
                expected: Some(name(y)),
                actual: name(z),
            }),
            None => {
                if x < y && !act_side.peer.contains_key(y) {
                    report.missing.push(cable(x, y));
                }
            }
        }
    }
    for (x, (z, _)) in &act_sorted {
        let (x, z) = (*x, z);
        if exp_side.peer.contains_key(x) {
            continue; // handled above (correct or miswired)
        }
        if exp_side.peer.contains_key(z) {
            // x should be free but carries a cable to an endpoint expected elsewhere.
            report.miswired.push(Miswire {
                at: name(x),
                expected: None,
                actual: name(z),
            });
        } else if x < z {
            report.extra.push(cable(x, z));
        }
    }
    for (i, s) in expected.switches().iter().enumerate() {
        if !exp_matched[i] {
            report.missing_switches.push(NodeRef::Switch {
                guid: s.guid,
                name: s.desc.clone(),
            });
        }
    }
    for (i, s) in actual.switches().iter().enumerate() {
        if matches!(act_sw_key[i], Key::ActSwitch(_)) {
            report.extra_switches.push(NodeRef::Switch {
                guid: s.guid,
                name: s.desc.clone(),
            });
        }
    }
    report.missing.sort();
    report.extra.sort();
    report.miswired.sort();
    report.down.sort();
    report.missing_switches.sort();
    report.extra_switches.sort();
    report
}

/// Every cabled endpoint of `f` with its peer and whether the link is up (self-loops included).
fn side(f: &Fabric, sw_key: impl Fn(SwitchId) -> Key, end_key: impl Fn(u32) -> Key) -> Side {
    let mut peer = HashMap::new();
    for sid in f.switch_ids() {
        let s = f.switch(sid);
        for (pn, p) in s.external_ports() {
            let me = (sw_key(sid), pn);
            match p.remote {
                Remote::None => {}
                Remote::Switch { sw, port } => {
                    let up = p.state == LinkState::Up && f.switch(sw).ports[port as usize].state == LinkState::Up;
                    peer.insert(me, ((sw_key(sw), port), up));
                }
                Remote::EndPort(ep) => {
                    let e = f.end_port(ep);
                    let them = (end_key(ep.0), e.port_num);
                    let up = p.state == LinkState::Up;
                    peer.insert(me, (them, up));
                    peer.insert(them, (me, up));
                }
            }
        }
    }
    Side { peer }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{self, Degrade};
    use crate::model::{FabricBuilder, NodeType};
    use proptest::prelude::*;

    /// Two leaves and a spine; leaf0[5]–spine[1], leaf1[5]–spine[2], n0 on leaf0[1], n1 on leaf1[1].
    fn small(wire: &[(u32, PortNum, u32, PortNum)]) -> Fabric {
        let mut b = FabricBuilder::new();
        let l0 = b.add_switch(0x10, "leaf0", 8).unwrap();
        let l1 = b.add_switch(0x11, "leaf1", 8).unwrap();
        let _sp = b.add_switch(0x20, "spine", 8).unwrap();
        for &(a, pa, c, pc) in wire {
            b.connect_switches(SwitchId(a), pa, SwitchId(c), pc).unwrap();
        }
        let e0 = b.add_end_port(0x101, 0x100, "n0", 1, 1, NodeType::Compute).unwrap();
        let e1 = b.add_end_port(0x111, 0x110, "n1", 1, 1, NodeType::Compute).unwrap();
        b.connect_end_port(e0, l0, 1).unwrap();
        b.connect_end_port(e1, l1, 1).unwrap();
        b.build()
    }

    #[test]
    fn identical_fabrics_are_clean() {
        let f = small(&[(0, 5, 2, 1), (1, 5, 2, 2)]);
        let r = compare(&f, &f);
        assert!(r.is_clean(), "{r}");
        assert_eq!(r.to_string(), "cabling OK\n");
    }

    #[test]
    fn swapped_cable_is_miswired_with_both_peers() {
        let exp = small(&[(0, 5, 2, 1), (1, 5, 2, 2)]);
        // leaf1's cable lands on spine port 3 instead of 2.
        let act = small(&[(0, 5, 2, 1), (1, 5, 2, 3)]);
        let r = compare(&exp, &act);
        assert!(r.missing.is_empty() && r.extra.is_empty(), "{r}");
        assert_eq!(r.miswired.len(), 2, "{r}");
        let text = r.to_string();
        assert!(
            text.contains("switch \"leaf1\" (0x0000000000000011) port 5 goes to switch \"spine\" (0x0000000000000020) port 3 but should go to switch \"spine\" (0x0000000000000020) port 2"),
            "{text}"
        );
        assert!(text.contains("switch \"spine\" (0x0000000000000020) port 3 goes to switch \"leaf1\" (0x0000000000000011) port 5 but should be free"), "{text}");
    }

    #[test]
    fn missing_extra_down_and_switch_matched_by_name() {
        let exp = small(&[(0, 5, 2, 1), (1, 5, 2, 2)]);
        let act = small(&[(0, 5, 2, 1), (0, 6, 1, 6)]);
        let r = compare(&exp, &act);
        assert_eq!(r.missing.len(), 1);
        assert_eq!(r.missing[0].a.node.name(), "leaf1");
        assert_eq!((r.missing[0].a.port, r.missing[0].b.port), (5, 2));
        assert_eq!(r.extra.len(), 1);
        assert_eq!((r.extra[0].a.node.name(), r.extra[0].a.port), ("leaf0", 6));
        assert!(r.miswired.is_empty());

        let down = exp
            .apply(&[crate::FabricEvent::LinkDown { switch: 0x10, port: 5 }])
            .unwrap();
        let r = compare(&exp, &down);
        assert_eq!(r.down.len(), 1, "{r}");
        assert_eq!(r.down.len() + r.missing.len() + r.extra.len() + r.miswired.len(), 1);

        // A replaced spine (new GUID, same name) is matched by its description.
        let mut b = FabricBuilder::new();
        let l0 = b.add_switch(0x10, "leaf0", 8).unwrap();
        let l1 = b.add_switch(0x11, "leaf1", 8).unwrap();
        let sp = b.add_switch(0x99, "spine", 8).unwrap();
        b.connect_switches(l0, 5, sp, 1).unwrap();
        b.connect_switches(l1, 5, sp, 2).unwrap();
        let e0 = b.add_end_port(0x101, 0x100, "n0", 1, 1, NodeType::Compute).unwrap();
        let e1 = b.add_end_port(0x111, 0x110, "n1", 1, 1, NodeType::Compute).unwrap();
        b.connect_end_port(e0, l0, 1).unwrap();
        b.connect_end_port(e1, l1, 1).unwrap();
        let r = compare(&exp, &b.build());
        assert!(r.is_clean(), "{r}");
    }

    #[test]
    fn moved_end_port_is_miswired() {
        let exp = small(&[(0, 5, 2, 1)]);
        let mut b = FabricBuilder::new();
        let l0 = b.add_switch(0x10, "leaf0", 8).unwrap();
        let l1 = b.add_switch(0x11, "leaf1", 8).unwrap();
        let sp = b.add_switch(0x20, "spine", 8).unwrap();
        b.connect_switches(l0, 5, sp, 1).unwrap();
        let e0 = b.add_end_port(0x101, 0x100, "n0", 1, 1, NodeType::Compute).unwrap();
        let e1 = b.add_end_port(0x111, 0x110, "n1", 1, 1, NodeType::Compute).unwrap();
        b.connect_end_port(e0, l0, 2).unwrap();
        b.connect_end_port(e1, l1, 1).unwrap();
        let r = compare(&exp, &b.build());
        // n0 port 1 goes to leaf0[2] instead of leaf0[1]; leaf0[2] should be free.
        assert_eq!(r.miswired.len(), 2, "{r}");
        assert!(r.missing.is_empty() && r.extra.is_empty());
    }

    /// Unordered cable ends by GUID, for comparing with the report.
    fn cable_guids(c: &Cable) -> ((Guid, PortNum), (Guid, PortNum)) {
        let a = (c.a.node.guid(), c.a.port);
        let b = (c.b.node.guid(), c.b.port);
        (a.min(b), a.max(b))
    }

    /// Inter-switch cables of a fabric by GUID, independently of `compare`.
    fn switch_cables(f: &Fabric) -> Vec<((Guid, PortNum), (Guid, PortNum))> {
        let mut v = Vec::new();
        for s in f.switches() {
            for (pn, p) in s.external_ports() {
                if let Remote::Switch { sw, port } = p.remote {
                    let a = (s.guid, pn);
                    let b = (f.switch(sw).guid, port);
                    if a < b {
                        v.push((a, b));
                    }
                }
            }
        }
        v.sort();
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn degrade_removed_links_are_exactly_missing_and_extra(
            k in 2u32..5, links in 0usize..12, switches in 0usize..2, seed in any::<u64>()
        ) {
            let full = gen::generate_str(&format!("KARY({k},3)"), None).unwrap();
            let total = full.count_links().0;
            let d = Degrade { remove_links: links.min(total / 2), remove_switches: switches, seed };
            let degraded = gen::degrade(&full, &d).unwrap();
            let kept = switch_cables(&degraded);
            let removed: Vec<_> = switch_cables(&full).into_iter().filter(|c| kept.binary_search(c).is_err()).collect();

            let r = compare(&full, &degraded);
            let mut missing: Vec<_> = r.missing.iter().map(cable_guids).collect();
            missing.sort();
            prop_assert_eq!(&missing, &removed);
            prop_assert!(r.extra.is_empty() && r.miswired.is_empty() && r.down.is_empty());
            prop_assert_eq!(r.missing_switches.len(), switches);

            let r = compare(&degraded, &full);
            let mut extra: Vec<_> = r.extra.iter().map(cable_guids).collect();
            extra.sort();
            prop_assert_eq!(&extra, &removed);
            prop_assert!(r.missing.is_empty() && r.miswired.is_empty() && r.down.is_empty());
            prop_assert_eq!(r.extra_switches.len(), switches);
        }
    }
}
