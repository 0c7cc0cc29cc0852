//! The driver's picture of the subnet, and everything computed from it alone: the switch and
//! CA records a sweep fills in ([`State`]), the [`Fabric`] built from them, directed routes over
//! live links ([`recompute_paths`], [`path_avoiding`]) and the bookkeeping of fresh PortInfo
//! reads ([`apply_port_reads`]).
//!
//! **Pure:** no I/O, no lock, no clock. The subsystems take the driver's `state` lock, call
//! these functions on the guarded [`State`] and release it before sending anything, so every
//! function here is unit-tested on hand-built fabrics (see the tests below).

use std::collections::{HashMap, HashSet, VecDeque};

use fabric_routing::BLOCK_SIZE;
use fabric_southbound::DriverError;
use fabric_topology::{Fabric, FabricBuilder, FabricEvent, Guid, LinkState, NodeType};

use super::data_vl::link_op_vls;
use crate::mad::*;

/// Size of the NodeInfo attribute (the rest of its 64 SMP data bytes is reserved).
pub(super) const NODE_INFO_SIZE: usize = 40;

/// The NodeInfo image of an SMP reply's data.
pub(super) fn node_info_image(d: &[u8; SMP_DATA_SIZE]) -> [u8; NODE_INFO_SIZE] {
    let mut a = [0u8; NODE_INFO_SIZE];
    a.copy_from_slice(&d[..NODE_INFO_SIZE]);
    a
}

/// A port carries traffic: logical state INIT or beyond, and the physical link up (a port whose
/// PortPhysicalState is Disabled or Polling is down whatever its logical state says; the
/// simulator leaves the logical state alone when the physical state is set).
pub(super) fn live(i: &PortInfo) -> bool {
    i.state().link_up() && matches!(i.phys_state(), 0 | PHYS_LINK_UP)
}

/// What is behind a switch port, as last seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Peer {
    Switch { guid: Guid, port: u8 },
    Ca { port_guid: Guid },
}

#[derive(Clone, Debug)]
pub(super) struct PortRec {
    pub(super) info: Option<PortInfo>,
    pub(super) peer: Option<Peer>,
}

/// SL-to-VL tables written to a switch: per input port, a bitset of output ports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Sl2VlDone {
    /// Indexed by input port.
    pub(super) pairs: Vec<[u64; 4]>,
    /// The optimized all-pairs Set was written.
    pub(super) all: bool,
}

impl Sl2VlDone {
    pub(super) fn contains(&self, inp: u8, out: u8) -> bool {
        self.all
            || self
                .pairs
                .get(inp as usize)
                .is_some_and(|b| b[(out / 64) as usize] & (1u64 << (out % 64)) != 0)
    }
    pub(super) fn insert(&mut self, inp: u8, out: u8) {
        if self.pairs.len() <= inp as usize {
            self.pairs.resize(inp as usize + 1, [0; 4]);
        }
        self.pairs[inp as usize][(out / 64) as usize] |= 1u64 << (out % 64);
    }
}

#[derive(Clone, Debug)]
pub(super) struct SwitchRec {
    pub(super) guid: Guid,
    pub(super) desc: String,
    /// NodeInfo and NodeDescription as read (the SA's NodeRecords, [`super::sa_snapshot`]).
    pub(super) node_info: [u8; NODE_INFO_SIZE],
    pub(super) node_desc: [u8; SMP_DATA_SIZE],
    pub(super) nports: u8,
    pub(super) path: Vec<u8>,
    pub(super) lid: u16,
    pub(super) info: SwitchInfo,
    pub(super) ports: Vec<PortRec>,
    pub(super) lft: HashMap<u32, [u8; BLOCK_SIZE]>,
    /// Reachable over live links and answering.
    pub(super) up: bool,
    /// Has a directed route over live links (answering or not).
    pub(super) reached: bool,
    /// Answers SMPs. A switch that stops answering on a route avoiding the other silent switches
    /// is reported down and no longer used as a hop of directed routes until it answers again.
    pub(super) responsive: bool,
    /// SL-to-VL tables written (cleared when the switch comes back: it may have rebooted).
    pub(super) sl2vl: Sl2VlDone,
}

impl SwitchRec {
    pub(super) fn max_blocks(&self) -> u32 {
        u32::from(self.info.linear_fdb_cap()).div_ceil(BLOCK_SIZE as u32)
    }
}

#[derive(Clone, Debug)]
pub(super) struct CaRec {
    pub(super) port_guid: Guid,
    pub(super) node_guid: Guid,
    pub(super) desc: String,
    /// NodeInfo (read through this port) and NodeDescription as read (the SA's NodeRecords).
    pub(super) node_info: [u8; NODE_INFO_SIZE],
    pub(super) node_desc: [u8; SMP_DATA_SIZE],
    pub(super) port_num: u8,
    pub(super) nports: u8,
    pub(super) path: Vec<u8>,
    pub(super) info: PortInfo,
    pub(super) attach: Option<(Guid, u8)>,
    pub(super) up: bool,
    /// Its SL-to-VL table is written (cleared when the port comes back).
    pub(super) sl2vl: bool,
}

#[derive(Clone, Default, Debug)]
pub(super) struct State {
    pub(super) switches: Vec<SwitchRec>,
    pub(super) sw_by_guid: HashMap<Guid, usize>,
    pub(super) cas: Vec<CaRec>,
    pub(super) ca_by_guid: HashMap<Guid, usize>,
    /// The manager's own node: a CA port GUID or a switch GUID.
    pub(super) local: Option<Peer>,
    pub(super) sm_lid: u16,
    /// LMC of the last LID configuration (`None` before one).
    pub(super) lmc: Option<u8>,
    /// The SL-to-VL table of the data VL plan in force
    /// ([`SouthboundDriver::program_data_vls`](fabric_southbound::SouthboundDriver::program_data_vls));
    /// `None`: the escape-only table ([`SlToVl::escape`]).
    pub(super) data_vl_table: Option<SlToVl>,
    /// Bumped whenever the table in force changes: a pass that read an older one records
    /// nothing it wrote.
    pub(super) sl2vl_gen: u64,
}

impl State {
    /// GUID of the manager's own node: its CA port GUID, or its switch's GUID (0 before the
    /// first discovery).
    pub(super) fn local_guid(&self) -> Guid {
        match self.local {
            Some(Peer::Ca { port_guid }) => port_guid,
            Some(Peer::Switch { guid, .. }) => guid,
            None => 0,
        }
    }

    /// Takes over from `old` (the state before this discovery) what the new sweep cannot see:
    /// the LFT blocks and SL-to-VL tables known written, the switches that vanished (kept,
    /// down, unreached and unlinked, so that their ids and records stay) and the manager's LID
    /// when this sweep read none.
    pub(super) fn carry_over(&mut self, old: &mut State) {
        // Keep what the driver knew: LFT caches, and switches that vanished (reported down).
        for s in &mut self.switches {
            if let Some(&i) = old.sw_by_guid.get(&s.guid) {
                s.lft = std::mem::take(&mut old.switches[i].lft);
                s.sl2vl = std::mem::take(&mut old.switches[i].sl2vl);
            }
        }
        for c in &mut self.cas {
            if let Some(&i) = old.ca_by_guid.get(&c.port_guid) {
                c.sl2vl = old.cas[i].sl2vl;
            }
        }
        for o in &old.switches {
            if !self.sw_by_guid.contains_key(&o.guid) {
                let mut o = o.clone();
                o.up = false;
                o.reached = false;
                o.responsive = false;
                for p in &mut o.ports {
                    p.peer = None;
                }
                self.sw_by_guid.insert(o.guid, self.switches.len());
                self.switches.push(o);
            }
        }
        if self.sm_lid == 0 {
            self.sm_lid = old.sm_lid;
        }
        if self.lmc.is_none() {
            self.lmc = old.lmc;
        }
    }
}

/// Progress of the SL-to-VL (escape VL) programming.
#[derive(Clone, Debug, Default)]
pub(super) struct Sl2VlProgress {
    /// Passes requested; a request is answered by the first pass that starts after it.
    pub(super) requested: u64,
    /// Number of the last finished pass (it answers every request up to it).
    pub(super) completed: u64,
    /// Tables the running pass writes, or those the last pass failed to write.
    pub(super) pending: u64,
    /// Tables the last pass failed to write, and the first failure (GUID and ports).
    pub(super) failed: u64,
    pub(super) first_failure: Option<(Guid, String)>,
    /// When a pass last finished with every table written (Unix ms).
    pub(super) ready_at_unix_ms: u64,
    /// SLtoVLMappingTable Sets written since start.
    pub(super) written: u64,
}

pub(super) fn dr(path: &[u8]) -> Route {
    Route::Directed(path.to_vec())
}

/// Records a cable on both ends (the far end of a switch-to-switch cable is recorded too, so
/// that the port a switch was reached through knows its peer).
pub(super) fn link(st: &mut State, sw: Guid, port: u8, peer: Peer) {
    if let Some(&i) = st.sw_by_guid.get(&sw) {
        if let Some(p) = st.switches[i].ports.get_mut(port as usize) {
            p.peer = Some(peer);
        }
    }
    if let Peer::Switch { guid, port: rp } = peer {
        if let Some(&j) = st.sw_by_guid.get(&guid) {
            if let Some(p) = st.switches[j].ports.get_mut(rp as usize) {
                p.peer = Some(Peer::Switch { guid: sw, port });
            }
        }
    }
}

pub(super) fn build_fabric(st: &State) -> Result<Fabric, DriverError> {
    let topo = |e: fabric_topology::TopologyError| DriverError::Topology {
        source_name: "umad discovery".into(),
        message: e.to_string(),
    };
    let mut b = FabricBuilder::new();
    for s in &st.switches {
        let id = b.add_switch(s.guid, s.desc.clone(), s.nports).map_err(topo)?;
        b.switch_mut(id).up = s.up;
    }
    for c in &st.cas {
        let id = b
            .add_end_port(
                c.port_guid,
                c.node_guid,
                c.desc.clone(),
                c.port_num,
                c.nports,
                NodeType::Compute,
            )
            .map_err(topo)?;
        b.end_port_mut(id).up = c.up;
    }
    for s in &st.switches {
        let Some(a) = b.switch_by_guid(s.guid) else { continue };
        for (p, rec) in s.ports.iter().enumerate().skip(1) {
            let here = rec.info.as_ref().is_some_and(live) && s.up;
            match rec.peer {
                Some(Peer::Switch { guid, port }) => {
                    let Some(bb) = b.switch_by_guid(guid) else { continue };
                    // Each link once (from its lower end), self-loops included; live only when
                    // both ends are (the simulator disables one end physically).
                    if (s.guid, p as u8) < (guid, port) {
                        let far_live = st.sw_by_guid.get(&guid).is_some_and(|&j| {
                            let o = &st.switches[j];
                            o.up && o
                                .ports
                                .get(port as usize)
                                .and_then(|r| r.info.as_ref())
                                .is_some_and(live)
                        });
                        b.connect_switches(a, p as u8, bb, port).map_err(topo)?;
                        let state = if here && far_live {
                            LinkState::Up
                        } else {
                            LinkState::Down
                        };
                        b.switch_mut(a).ports[p].state = state;
                        b.switch_mut(bb).ports[port as usize].state = state;
                    }
                }
                Some(Peer::Ca { port_guid }) => {
                    let Some(ep) = b.end_port_by_guid(port_guid) else {
                        continue;
                    };
                    if b.end_port(ep).attach.is_none() {
                        b.connect_end_port(ep, a, p as u8).map_err(topo)?;
                        b.switch_mut(a).ports[p].state = if here { LinkState::Up } else { LinkState::Down };
                    }
                }
                None => {}
            }
            if let Some(i) = &rec.info {
                b.switch_mut(a).ports[p].speed = i.speed_string();
            }
        }
    }
    Ok(b.build())
}

/// The cable at switch `i` port `p` carries traffic: this end is live, and so is the far end
/// when it is a known switch port (the simulator disables one end only).
pub(super) fn cable_live(st: &State, i: usize, p: usize) -> bool {
    let Some(r) = st.switches[i].ports.get(p) else {
        return false;
    };
    if !r.info.as_ref().is_some_and(live) {
        return false;
    }
    match r.peer {
        Some(Peer::Switch { guid, port }) => st.sw_by_guid.get(&guid).is_none_or(|&j| {
            st.switches[j]
                .ports
                .get(port as usize)
                .and_then(|o| o.info.as_ref())
                .is_none_or(live)
        }),
        _ => true,
    }
}

/// Directed routes to every switch and CA over live links, breadth-first from the local node.
/// Switches that do not answer ([`SwitchRec::responsive`] false) get a route but are not crossed.
/// Sets [`SwitchRec::up`] (reached and answering); returns the switches reached.
pub(super) fn recompute_paths(st: &mut State) -> HashSet<Guid> {
    let mut seen: HashSet<Guid> = HashSet::new();
    let mut q: VecDeque<(usize, Vec<u8>)> = VecDeque::new();
    match st.local {
        Some(Peer::Switch { guid, .. }) => {
            if let Some(&i) = st.sw_by_guid.get(&guid) {
                q.push_back((i, Vec::new()));
            }
        }
        Some(Peer::Ca { port_guid }) => {
            if let Some(&ci) = st.ca_by_guid.get(&port_guid) {
                let c = &st.cas[ci];
                if let Some((sg, _)) = c.attach {
                    if let Some(&i) = st.sw_by_guid.get(&sg) {
                        q.push_back((i, vec![c.port_num]));
                    }
                }
            }
        }
        None => return seen,
    }
    for s in &mut st.switches {
        s.up = false;
        s.reached = false;
    }
    while let Some((i, path)) = q.pop_front() {
        if !seen.insert(st.switches[i].guid) {
            continue;
        }
        st.switches[i].path = path.clone();
        st.switches[i].reached = true;
        if !st.switches[i].responsive {
            continue;
        }
        st.switches[i].up = true;
        let ports: Vec<(u8, Peer)> = st.switches[i]
            .ports
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(p, _)| cable_live(st, i, *p))
            .filter_map(|(p, r)| r.peer.map(|x| (p as u8, x)))
            .collect();
        for (p, peer) in ports {
            let mut np = path.clone();
            np.push(p);
            match peer {
                Peer::Switch { guid, .. } => {
                    if let Some(&j) = st.sw_by_guid.get(&guid) {
                        if !seen.contains(&guid) {
                            q.push_back((j, np));
                        }
                    }
                }
                Peer::Ca { port_guid } => {
                    if let Some(&ci) = st.ca_by_guid.get(&port_guid) {
                        if !st.cas[ci].path.is_empty() || Some(Peer::Ca { port_guid }) != st.local {
                            st.cas[ci].path = np;
                        }
                    }
                }
            }
        }
    }
    seen
}

/// A directed route to switch `target` over live links that does not cross the cable at
/// `avoid` (switch GUID, port), through answering switches only; `None` when there is none.
/// Used to change a port's physical state without cutting the route of the SMP doing it.
pub(super) fn path_avoiding(st: &State, target: Guid, avoid: (Guid, u8)) -> Option<Vec<u8>> {
    let far = st.sw_by_guid.get(&avoid.0).and_then(|&i| {
        match st.switches[i].ports.get(avoid.1 as usize).and_then(|r| r.peer) {
            Some(Peer::Switch { guid, port }) => Some((guid, port)),
            _ => None,
        }
    });
    let start = match st.local {
        Some(Peer::Switch { guid, .. }) => (*st.sw_by_guid.get(&guid)?, Vec::new()),
        Some(Peer::Ca { port_guid }) => {
            let c = &st.cas[*st.ca_by_guid.get(&port_guid)?];
            let (sg, _) = c.attach?;
            (*st.sw_by_guid.get(&sg)?, vec![c.port_num])
        }
        None => return None,
    };
    let mut seen: HashSet<Guid> = HashSet::new();
    let mut q: VecDeque<(usize, Vec<u8>)> = VecDeque::from([start]);
    while let Some((i, path)) = q.pop_front() {
        let s = &st.switches[i];
        if !seen.insert(s.guid) {
            continue;
        }
        if s.guid == target {
            return Some(path);
        }
        if !s.responsive {
            continue;
        }
        for (p, r) in s.ports.iter().enumerate().skip(1) {
            let here = (s.guid, p as u8);
            if here == avoid || Some(here) == far || !cable_live(st, i, p) {
                continue;
            }
            if let Some(Peer::Switch { guid, .. }) = r.peer {
                if let Some(&j) = st.sw_by_guid.get(&guid) {
                    if !seen.contains(&guid) {
                        let mut np = path.clone();
                        np.push(p as u8);
                        q.push_back((j, np));
                    }
                }
            }
        }
    }
    None
}

/// Records fresh PortInfo reads of switch ports. Ports whose liveness changed give link or
/// end-port events (each cable once: the far end's record is updated with it); live ports in
/// INIT (and the CA behind a CA port that came back) are added to `to_arm`.
pub(super) fn apply_port_reads(
    st: &mut State,
    results: Vec<(Guid, u8, PortInfo)>,
    events: &mut Vec<FabricEvent>,
    to_arm: &mut Vec<(Route, u32, PortInfo)>,
) {
    for (g, p, info) in results {
        let Some(&i) = st.sw_by_guid.get(&g) else { continue };
        let path = st.switches[i].path.clone();
        let Some(rec) = st.switches[i].ports.get(p as usize) else {
            continue;
        };
        let was = rec.info.as_ref().is_some_and(live);
        let now = live(&info);
        let peer = rec.peer;
        st.switches[i].ports[p as usize].info = Some(info.clone());
        if now && info.state() == PortState::Init {
            let mut a = info.for_set();
            if let Some(v) = link_op_vls(st, &info, peer) {
                a.set_operational_vls(v);
            }
            a.set_state(PortState::Armed);
            to_arm.push((dr(&path), u32::from(p), a));
        }
        if was == now {
            continue;
        }
        match peer {
            Some(Peer::Switch { guid, port }) => {
                // Both ends are updated together so that the link is reported once.
                if let Some(&j) = st.sw_by_guid.get(&guid) {
                    if let Some(other) = st.switches[j].ports.get_mut(port as usize) {
                        let other_up = other.info.as_ref().is_some_and(live);
                        if other_up != now {
                            if let Some(oi) = other.info.as_mut() {
                                oi.set_state(if now { PortState::Init } else { PortState::Down });
                                if now {
                                    oi.set_phys_state(PHYS_LINK_UP);
                                }
                            }
                        } else if (guid, port) < (g, p) {
                            // Already reported from the other end.
                            continue;
                        }
                    }
                }
                events.push(if now {
                    FabricEvent::LinkUp { switch: g, port: p }
                } else {
                    FabricEvent::LinkDown { switch: g, port: p }
                });
            }
            Some(Peer::Ca { port_guid }) => {
                if let Some(&ci) = st.ca_by_guid.get(&port_guid) {
                    st.cas[ci].up = now;
                    if now {
                        let mut np = path.clone();
                        np.push(p);
                        let mut a = st.cas[ci].info.for_set();
                        let peer = Some(Peer::Switch { guid: g, port: p });
                        if let Some(v) = link_op_vls(st, &st.cas[ci].info, peer) {
                            a.set_operational_vls(v);
                        }
                        a.set_state(PortState::Armed);
                        to_arm.push((dr(&np), u32::from(st.cas[ci].port_num), a));
                    }
                }
                events.push(if now {
                    FabricEvent::EndPortUp(port_guid)
                } else {
                    FabricEvent::EndPortDown(port_guid)
                });
            }
            None => {}
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// PortInfo of a port in `state` with PortPhysicalState `phys`.
    pub(in crate::driver) fn pi(state: PortState, phys: u8) -> PortInfo {
        let mut raw = [0u8; SMP_DATA_SIZE];
        raw[32] = state.bits();
        raw[33] = phys << 4;
        PortInfo::decode(&raw)
    }

    /// A NodeInfo image as a node answers it.
    pub(in crate::driver) fn test_node_info(
        node_type: u8,
        node_guid: Guid,
        port_guid: Guid,
        local_port: u8,
        num_ports: u8,
    ) -> [u8; NODE_INFO_SIZE] {
        node_info_image(
            &NodeInfo {
                node_type,
                num_ports,
                system_image_guid: node_guid,
                node_guid,
                port_guid,
                local_port,
                ..NodeInfo::default()
            }
            .encode(),
        )
    }

    pub(in crate::driver) const L0: Guid = 0x10;
    pub(in crate::driver) const L1: Guid = 0x11;
    pub(in crate::driver) const S0: Guid = 0x20;
    pub(in crate::driver) const S1: Guid = 0x21;
    pub(in crate::driver) const CA: Guid = 0x100;

    /// Two leaves and two spines fully cabled (leaf port 2 + s to spine s, spine port 1 + l to
    /// leaf l), the manager's CA on leaf 0 port 1.
    pub(in crate::driver) fn two_by_two() -> State {
        let mut st = State::default();
        for (g, n) in [(L0, 4u8), (L1, 4), (S0, 2), (S1, 2)] {
            st.sw_by_guid.insert(g, st.switches.len());
            st.switches.push(SwitchRec {
                guid: g,
                desc: String::new(),
                node_info: test_node_info(NODE_TYPE_SWITCH, g, g, 0, n),
                node_desc: encode_node_desc(&format!("switch {g:#x}")),
                nports: n,
                path: Vec::new(),
                lid: 0,
                info: SwitchInfo::decode(&[0; SMP_DATA_SIZE]),
                ports: vec![
                    PortRec {
                        info: Some(pi(PortState::Active, PHYS_LINK_UP)),
                        peer: None
                    };
                    n as usize + 1
                ],
                lft: HashMap::new(),
                up: true,
                reached: true,
                responsive: true,
                sl2vl: Sl2VlDone::default(),
            });
        }
        for (l, lg) in [L0, L1].into_iter().enumerate() {
            for (s, sg) in [S0, S1].into_iter().enumerate() {
                link(
                    &mut st,
                    lg,
                    2 + s as u8,
                    Peer::Switch {
                        guid: sg,
                        port: 1 + l as u8,
                    },
                );
            }
        }
        st.ca_by_guid.insert(CA, 0);
        st.cas.push(CaRec {
            port_guid: CA,
            node_guid: CA - 1,
            desc: String::new(),
            node_info: test_node_info(NODE_TYPE_CA, CA - 1, CA, 1, 1),
            node_desc: encode_node_desc("host"),
            port_num: 1,
            nports: 1,
            path: Vec::new(),
            info: pi(PortState::Active, PHYS_LINK_UP),
            attach: Some((L0, 1)),
            up: true,
            sl2vl: false,
        });
        link(&mut st, L0, 1, Peer::Ca { port_guid: CA });
        st.local = Some(Peer::Ca { port_guid: CA });
        st
    }

    pub(in crate::driver) fn rec(st: &State, g: Guid) -> &SwitchRec {
        &st.switches[st.sw_by_guid[&g]]
    }

    #[test]
    fn routes_go_around_a_silent_switch() {
        let mut st = two_by_two();
        let reached = recompute_paths(&mut st);
        assert_eq!(reached.len(), 4);
        // Breadth first, lowest port first: leaf 1 is reached through spine 0.
        assert_eq!(rec(&st, L1).path, vec![1, 2, 2]);
        st.switches[st.sw_by_guid[&S0]].responsive = false;
        let reached = recompute_paths(&mut st);
        assert!(reached.contains(&S0), "a silent switch keeps a route to be probed on");
        assert!(!rec(&st, S0).up);
        assert_eq!(rec(&st, S0).path, vec![1, 2]);
        assert_eq!(rec(&st, L1).path, vec![1, 3, 2], "leaf 1 through spine 1");
        assert!(rec(&st, L1).up && rec(&st, S1).up);
    }

    #[test]
    fn a_port_change_goes_over_a_route_avoiding_that_port() {
        let st = two_by_two();
        // Leaf 1's port 2 (to spine 0) is on its usual route; the other spine avoids it.
        assert_eq!(path_avoiding(&st, L1, (L1, 2)), Some(vec![1, 3, 2]));
        // Either end of the cable names it.
        assert_eq!(path_avoiding(&st, L1, (S0, 2)), Some(vec![1, 3, 2]));
        assert_eq!(path_avoiding(&st, S0, (S0, 2)), Some(vec![1, 2]));
        // With spine 1's cable to leaf 1 down too, every route to leaf 1 crosses the port.
        let mut st = st;
        let i = st.sw_by_guid[&L1];
        st.switches[i].ports[3].info = Some(pi(PortState::Down, PHYS_POLLING));
        assert_eq!(path_avoiding(&st, L1, (L1, 2)), None);
    }

    #[test]
    fn a_physically_disabled_end_takes_the_link_down() {
        let mut st = two_by_two();
        recompute_paths(&mut st);
        // The simulator leaves the logical state ACTIVE when the physical state is Disabled.
        let i = st.sw_by_guid[&L1];
        let mut events = Vec::new();
        let mut to_arm = Vec::new();
        apply_port_reads(
            &mut st,
            vec![(L1, 2, pi(PortState::Active, PHYS_DISABLED))],
            &mut events,
            &mut to_arm,
        );
        assert_eq!(events, vec![FabricEvent::LinkDown { switch: L1, port: 2 }]);
        assert!(to_arm.is_empty());
        // The far end is marked down with it: re-reading it alone reports nothing more.
        let far = &rec(&st, S0).ports[2];
        assert!(!far.info.as_ref().is_some_and(live));
        let f = build_fabric(&st).unwrap();
        let l1 = f.switch_by_guid(L1).unwrap();
        assert_eq!(f.switch(l1).ports[2].state, LinkState::Down);
        assert_eq!(f.switch(l1).ports[3].state, LinkState::Up);
        // Re-enabled straight to LinkUp (ibsim): the link is reported up once.
        recompute_paths(&mut st);
        events.clear();
        apply_port_reads(
            &mut st,
            vec![(L1, 2, pi(PortState::Active, PHYS_LINK_UP))],
            &mut events,
            &mut to_arm,
        );
        assert_eq!(events, vec![FabricEvent::LinkUp { switch: L1, port: 2 }]);
        assert!(st.switches[i].ports[2].info.as_ref().is_some_and(live));
    }

    #[test]
    fn a_new_discovery_keeps_what_the_driver_knew() {
        let mut old = two_by_two();
        old.sm_lid = 7;
        let i = old.sw_by_guid[&S0];
        old.switches[i].lft.insert(3, [9; BLOCK_SIZE]);
        old.switches[i].sl2vl.insert(1, 2);
        old.cas[0].sl2vl = true;
        // The new sweep finds everything but spine 1, and reads no LID for the manager.
        let mut new = two_by_two();
        let gone = new.sw_by_guid.remove(&S1).unwrap();
        new.switches.remove(gone);
        new.sw_by_guid = new.switches.iter().enumerate().map(|(k, s)| (s.guid, k)).collect();
        new.carry_over(&mut old);
        assert_eq!(new.sm_lid, 7);
        assert_eq!(rec(&new, S0).lft.get(&3), Some(&[9; BLOCK_SIZE]));
        assert!(rec(&new, S0).sl2vl.contains(1, 2) && new.cas[0].sl2vl);
        let s1 = rec(&new, S1);
        assert!(!s1.up && !s1.reached && !s1.responsive);
        assert!(
            s1.ports.iter().all(|p| p.peer.is_none()),
            "a vanished switch keeps no cable"
        );
        assert_eq!(new.local_guid(), CA);
    }
}
