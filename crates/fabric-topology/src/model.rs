//! Fabric model: dense ids, GUID maps, links with state, port groups, snapshots and events.

use std::collections::HashMap;
use std::fmt;

/// A 64-bit globally unique identifier (node or port GUID).
pub type Guid = u64;
/// A physical port number on a switch or CA (switch port 0 is the management port).
pub type PortNum = u8;
/// An address on the fabric. Not limited to 16 bits: InfiniBand uses 1..=0xBFFF, a BXI-like
/// out-of-band fabric may use more.
pub type Lid = u32;

/// Dense switch id (index into [`Fabric::switches`]). Never renumbered.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SwitchId(pub u32);

/// Dense end-port id (index into [`Fabric::end_ports`]). Never renumbered. The order of end
/// ports is the *global end-node order*: order of CA records in the source, then port number.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndPortId(pub u32);

impl SwitchId {
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}
impl EndPortId {
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

/// Formats a GUID the way InfiniBand tools do (`0x` + 16 hex digits).
pub fn fmt_guid(g: Guid) -> String {
    format!("0x{g:016x}")
}

/// Role of an end node, used by node-type aware routing and reporting.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum NodeType {
    #[default]
    Compute,
    Io,
    Service,
    Other,
}

/// State of a link (kept on both ends of a switch-to-switch link).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum LinkState {
    #[default]
    Up,
    Down,
}

/// What is at the other end of a switch port.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Remote {
    /// Nothing cabled.
    #[default]
    None,
    /// Another switch port (possibly the same switch: a self-looped cable).
    Switch { sw: SwitchId, port: PortNum },
    /// An end port (CA port).
    EndPort(EndPortId),
}

/// One physical port of a switch.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Port {
    pub remote: Remote,
    pub state: LinkState,
    /// Width/speed as reported (e.g. `4xEDR`), if known.
    pub speed: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switch {
    pub guid: Guid,
    pub desc: String,
    /// Number of external ports; `ports` has `nports + 1` entries (index 0 = management port).
    pub nports: PortNum,
    pub ports: Vec<Port>,
    /// Whether the switch is alive (a dead switch keeps its id and its cabling record).
    pub up: bool,
}

impl Switch {
    /// External ports `1..=nports` with their number.
    pub fn external_ports(&self) -> impl Iterator<Item = (PortNum, &Port)> {
        self.ports.iter().enumerate().skip(1).map(|(i, p)| (i as PortNum, p))
    }
}

/// An end port: one port of a CA (HCA), router or other non-switch node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndPort {
    pub port_guid: Guid,
    pub node_guid: Guid,
    pub desc: String,
    pub port_num: PortNum,
    /// Number of ports of the node this port belongs to.
    pub node_ports: PortNum,
    pub node_type: NodeType,
    /// The switch port this end port is cabled to, if any.
    pub attach: Option<(SwitchId, PortNum)>,
    /// Whether the node (end port) is alive.
    pub up: bool,
}

/// The ports of one switch that reach the same remote switch, ordered by port number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortGroup {
    pub remote: SwitchId,
    pub remote_guid: Guid,
    /// Local port numbers, ascending.
    pub ports: Vec<PortNum>,
}

/// Errors of the model (building and applying events).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopologyError {
    #[error("duplicate switch GUID {}", fmt_guid(*.0))]
    DuplicateSwitch(Guid),
    #[error("duplicate end port GUID {}", fmt_guid(*.0))]
    DuplicateEndPort(Guid),
    #[error("unknown switch GUID {}", fmt_guid(*.0))]
    UnknownSwitch(Guid),
    #[error("unknown end port GUID {}", fmt_guid(*.0))]
    UnknownEndPort(Guid),
    #[error("switch {} has no port {port} (ports 1..={nports})", fmt_guid(*guid))]
    PortOutOfRange { guid: Guid, port: u32, nports: u32 },
    #[error("switch {} port {port} is not cabled", fmt_guid(*guid))]
    PortNotCabled { guid: Guid, port: PortNum },
    #[error("switch {} port {port} is already cabled", fmt_guid(*guid))]
    PortInUse { guid: Guid, port: PortNum },
    #[error("end port {} is already cabled", fmt_guid(*.0))]
    EndPortInUse(Guid),
}

/// A change in the fabric. GUID-based because drivers and operators speak GUIDs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FabricEvent {
    /// The link on this switch port went down (both ends are marked).
    LinkDown {
        switch: Guid,
        port: PortNum,
    },
    LinkUp {
        switch: Guid,
        port: PortNum,
    },
    SwitchDown(Guid),
    SwitchUp(Guid),
    /// An end port (by port GUID) went down / came back.
    EndPortDown(Guid),
    EndPortUp(Guid),
}

impl fmt::Display for FabricEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FabricEvent::LinkDown { switch, port } => write!(f, "link-down {}[{port}]", fmt_guid(*switch)),
            FabricEvent::LinkUp { switch, port } => write!(f, "link-up {}[{port}]", fmt_guid(*switch)),
            FabricEvent::SwitchDown(g) => write!(f, "switch-down {}", fmt_guid(*g)),
            FabricEvent::SwitchUp(g) => write!(f, "switch-up {}", fmt_guid(*g)),
            FabricEvent::EndPortDown(g) => write!(f, "node-down {}", fmt_guid(*g)),
            FabricEvent::EndPortUp(g) => write!(f, "node-up {}", fmt_guid(*g)),
        }
    }
}

/// An immutable snapshot of the fabric at one generation.
///
/// Share it as `Arc<Fabric>`; [`Fabric::apply`] returns the next snapshot.
#[derive(Clone, Debug)]
pub struct Fabric {
    generation: u64,
    switches: Vec<Switch>,
    end_ports: Vec<EndPort>,
    switch_by_guid: HashMap<Guid, SwitchId>,
    end_port_by_guid: HashMap<Guid, EndPortId>,
    /// Live port groups per switch (derived), ordered by remote GUID. Shared between
    /// snapshots: [`Fabric::apply`] copies a handle per switch and re-derives only the switches
    /// an event touches.
    groups: Vec<std::sync::Arc<[PortGroup]>>,
    /// Live end ports attached to each switch, in port order (derived, shared likewise).
    attached: Vec<std::sync::Arc<[EndPortId]>>,
}

impl PartialEq for Fabric {
    fn eq(&self, other: &Self) -> bool {
        self.switches == other.switches && self.end_ports == other.end_ports
    }
}

impl Fabric {
    pub fn generation(&self) -> u64 {
        self.generation
    }
    /// Returns the same fabric with another generation number.
    pub fn with_generation(mut self, generation: u64) -> Self {
        self.generation = generation;
        self
    }
    pub fn switches(&self) -> &[Switch] {
        &self.switches
    }
    pub fn end_ports(&self) -> &[EndPort] {
        &self.end_ports
    }
    pub fn num_switches(&self) -> usize {
        self.switches.len()
    }
    pub fn num_end_ports(&self) -> usize {
        self.end_ports.len()
    }
    pub fn switch(&self, id: SwitchId) -> &Switch {
        &self.switches[id.idx()]
    }
    pub fn end_port(&self, id: EndPortId) -> &EndPort {
        &self.end_ports[id.idx()]
    }
    pub fn switch_ids(&self) -> impl Iterator<Item = SwitchId> + '_ {
        (0..self.switches.len() as u32).map(SwitchId)
    }
    pub fn end_port_ids(&self) -> impl Iterator<Item = EndPortId> + '_ {
        (0..self.end_ports.len() as u32).map(EndPortId)
    }
    pub fn switch_by_guid(&self, guid: Guid) -> Option<SwitchId> {
        self.switch_by_guid.get(&guid).copied()
    }
    pub fn end_port_by_guid(&self, guid: Guid) -> Option<EndPortId> {
        self.end_port_by_guid.get(&guid).copied()
    }
    /// Finds a switch by GUID (`0x...` or decimal) or by exact description.
    pub fn find_switch(&self, key: &str) -> Option<SwitchId> {
        if let Some(g) = parse_guid(key) {
            if let Some(id) = self.switch_by_guid(g) {
                return Some(id);
            }
        }
        self.switches
            .iter()
            .position(|s| s.desc == key)
            .map(|i| SwitchId(i as u32))
    }
    /// Finds an end port by port GUID, node GUID (first port) or exact description.
    pub fn find_end_port(&self, key: &str) -> Option<EndPortId> {
        if let Some(g) = parse_guid(key) {
            if let Some(id) = self.end_port_by_guid(g) {
                return Some(id);
            }
            if let Some(i) = self.end_ports.iter().position(|e| e.node_guid == g) {
                return Some(EndPortId(i as u32));
            }
        }
        self.end_ports
            .iter()
            .position(|e| e.desc == key)
            .map(|i| EndPortId(i as u32))
    }

    /// Whether the switch-to-switch link on `sw`/`port` is usable (cabled, both ends up, not a
    /// self-loop).
    pub fn switch_link_live(&self, sw: SwitchId, port: PortNum) -> Option<(SwitchId, PortNum)> {
        let s = &self.switches[sw.idx()];
        let p = s.ports.get(port as usize)?;
        match p.remote {
            Remote::Switch { sw: r, port: rp } if r != sw => {
                let rs = &self.switches[r.idx()];
                (s.up && rs.up && p.state == LinkState::Up && rs.ports[rp as usize].state == LinkState::Up)
                    .then_some((r, rp))
            }
            _ => None,
        }
    }
    /// Whether an end port is usable: node up, cabled to a live switch, link up.
    pub fn end_port_live(&self, ep: EndPortId) -> bool {
        let e = &self.end_ports[ep.idx()];
        match e.attach {
            Some((sw, port)) if e.up => {
                let s = &self.switches[sw.idx()];
                s.up && s.ports[port as usize].state == LinkState::Up
            }
            _ => false,
        }
    }
    /// Live port groups of a switch, ordered by remote GUID (empty for a dead switch).
    pub fn port_groups(&self, sw: SwitchId) -> &[PortGroup] {
        &self.groups[sw.idx()]
    }
    /// Live end ports attached to a switch, in port order.
    pub fn attached_end_ports(&self, sw: SwitchId) -> &[EndPortId] {
        &self.attached[sw.idx()]
    }
    /// A switch with at least one live end port.
    pub fn is_leaf(&self, sw: SwitchId) -> bool {
        !self.attached[sw.idx()].is_empty()
    }
    /// Number of switch-to-switch cables (each parallel cable counted, self-loops excluded),
    /// and how many of them are live.
    pub fn count_links(&self) -> (usize, usize) {
        let mut total = 0;
        let mut live = 0;
        for (i, s) in self.switches.iter().enumerate() {
            for (pn, p) in s.external_ports() {
                if let Remote::Switch { sw, port } = p.remote {
                    if sw.0 as usize != i && (sw.0 as usize, port) > (i, pn) {
                        total += 1;
                        if self.switch_link_live(SwitchId(i as u32), pn).is_some() {
                            live += 1;
                        }
                    }
                }
            }
        }
        (total, live)
    }

    /// Applies events and returns the next snapshot (generation + 1). Events naming unknown
    /// GUIDs or ports are rejected as a whole (nothing applied).
    pub fn apply(&self, events: &[FabricEvent]) -> Result<Fabric, TopologyError> {
        let mut next = self.clone();
        let mut touched = Vec::new();
        for ev in events {
            next.apply_one(ev)?;
            next.touched_by(ev, &mut touched);
        }
        next.generation = self.generation + 1;
        // Only the switches an event touched have other derived views than `self`'s: the
        // rest are kept (a cable fault re-derives 2 switches, not all of them).
        touched.sort_unstable();
        touched.dedup();
        if touched.len() * 4 > next.switches.len() {
            next.derive();
        } else {
            for &s in &touched {
                next.derive_switch(s);
            }
        }
        Ok(next)
    }

    /// The switches whose derived views (port groups, attached end ports) `ev` may change:
    /// both ends of a link, a switch and its cabled neighbours, an end port's switch.
    fn touched_by(&self, ev: &FabricEvent, out: &mut Vec<SwitchId>) {
        match *ev {
            FabricEvent::LinkDown { switch, port } | FabricEvent::LinkUp { switch, port } => {
                if let Some(id) = self.switch_by_guid(switch) {
                    out.push(id);
                    if let Some(Remote::Switch { sw, .. }) =
                        self.switches[id.idx()].ports.get(port as usize).map(|p| p.remote)
                    {
                        out.push(sw);
                    }
                }
            }
            FabricEvent::SwitchDown(g) | FabricEvent::SwitchUp(g) => {
                if let Some(id) = self.switch_by_guid(g) {
                    out.push(id);
                    out.extend(self.switches[id.idx()].ports.iter().filter_map(|p| match p.remote {
                        Remote::Switch { sw, .. } => Some(sw),
                        _ => None,
                    }));
                }
            }
            FabricEvent::EndPortDown(g) | FabricEvent::EndPortUp(g) => {
                if let Some((sw, _)) = self.end_port_by_guid(g).and_then(|e| self.end_ports[e.idx()].attach) {
                    out.push(sw);
                }
            }
        }
    }

    fn sw_port(&self, guid: Guid, port: PortNum) -> Result<SwitchId, TopologyError> {
        let id = self.switch_by_guid(guid).ok_or(TopologyError::UnknownSwitch(guid))?;
        let s = &self.switches[id.idx()];
        if port == 0 || port > s.nports {
            return Err(TopologyError::PortOutOfRange {
                guid,
                port: u32::from(port),
                nports: u32::from(s.nports),
            });
        }
        Ok(id)
    }

    /// Checks that `ev` names something this fabric has: a known switch, a port in range and
    /// cabled (link events), a known end port. The one validity check of fault events, used by
    /// [`Fabric::apply`], the daemon's event loop (driver events, injected and persisted faults)
    /// and its gRPC front end.
    pub fn check_event(&self, ev: &FabricEvent) -> Result<(), TopologyError> {
        match *ev {
            FabricEvent::LinkDown { switch, port } | FabricEvent::LinkUp { switch, port } => {
                let id = self.sw_port(switch, port)?;
                if self.switches[id.idx()].ports[port as usize].remote == Remote::None {
                    return Err(TopologyError::PortNotCabled { guid: switch, port });
                }
                Ok(())
            }
            FabricEvent::SwitchDown(g) | FabricEvent::SwitchUp(g) => self
                .switch_by_guid(g)
                .map(|_| ())
                .ok_or(TopologyError::UnknownSwitch(g)),
            FabricEvent::EndPortDown(g) | FabricEvent::EndPortUp(g) => self
                .end_port_by_guid(g)
                .map(|_| ())
                .ok_or(TopologyError::UnknownEndPort(g)),
        }
    }

    fn apply_one(&mut self, ev: &FabricEvent) -> Result<(), TopologyError> {
        self.check_event(ev)?;
        match *ev {
            FabricEvent::LinkDown { switch, port } | FabricEvent::LinkUp { switch, port } => {
                let id = self.sw_port(switch, port)?;
                let state = if matches!(ev, FabricEvent::LinkDown { .. }) {
                    LinkState::Down
                } else {
                    LinkState::Up
                };
                let remote = self.switches[id.idx()].ports[port as usize].remote;
                self.switches[id.idx()].ports[port as usize].state = state;
                if let Remote::Switch { sw, port: rp } = remote {
                    self.switches[sw.idx()].ports[rp as usize].state = state;
                }
            }
            FabricEvent::SwitchDown(g) | FabricEvent::SwitchUp(g) => {
                let id = self.switch_by_guid(g).ok_or(TopologyError::UnknownSwitch(g))?;
                self.switches[id.idx()].up = matches!(ev, FabricEvent::SwitchUp(_));
            }
            FabricEvent::EndPortDown(g) | FabricEvent::EndPortUp(g) => {
                let id = self.end_port_by_guid(g).ok_or(TopologyError::UnknownEndPort(g))?;
                self.end_ports[id.idx()].up = matches!(ev, FabricEvent::EndPortUp(_));
            }
        }
        Ok(())
    }

    /// Recomputes the derived live views (port groups, attached end ports).
    fn derive(&mut self) {
        let n = self.switches.len();
        self.groups = (0..n).map(|i| self.groups_of(SwitchId(i as u32)).into()).collect();
        self.attached = (0..n).map(|i| self.attached_of(SwitchId(i as u32)).into()).collect();
    }

    /// Recomputes the derived views of one switch.
    fn derive_switch(&mut self, sid: SwitchId) {
        self.groups[sid.idx()] = self.groups_of(sid).into();
        self.attached[sid.idx()] = self.attached_of(sid).into();
    }

    /// The live port groups of `sid`, ordered by remote GUID.
    fn groups_of(&self, sid: SwitchId) -> Vec<PortGroup> {
        let s = &self.switches[sid.idx()];
        let mut gs: Vec<PortGroup> = Vec::new();
        if s.up {
            for pn in 1..=s.nports {
                if let Some((r, _)) = self.switch_link_live(sid, pn) {
                    match gs.iter_mut().find(|g| g.remote == r) {
                        Some(g) => g.ports.push(pn),
                        None => gs.push(PortGroup {
                            remote: r,
                            remote_guid: self.switches[r.idx()].guid,
                            ports: vec![pn],
                        }),
                    }
                }
            }
        }
        gs.sort_by_key(|g| g.remote_guid);
        gs
    }

    /// The live end ports attached to `sid`, in port order.
    fn attached_of(&self, sid: SwitchId) -> Vec<EndPortId> {
        self.switches[sid.idx()]
            .external_ports()
            .filter_map(|(_, p)| match p.remote {
                Remote::EndPort(ep) if self.end_port_live(ep) => Some(ep),
                _ => None,
            })
            .collect()
    }
}

/// Parses a GUID written as `0x...` hex or plain hex of 16 digits, or decimal.
pub fn parse_guid(s: &str) -> Option<Guid> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if s.len() == 16 && s.chars().all(|c| c.is_ascii_hexdigit()) {
        u64::from_str_radix(s, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// Builds a [`Fabric`] (generation 0). Used by the file reader, the generators and tests.
#[derive(Default, Debug)]
pub struct FabricBuilder {
    switches: Vec<Switch>,
    end_ports: Vec<EndPort>,
    switch_by_guid: HashMap<Guid, SwitchId>,
    end_port_by_guid: HashMap<Guid, EndPortId>,
}

impl FabricBuilder {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn switch_by_guid(&self, guid: Guid) -> Option<SwitchId> {
        self.switch_by_guid.get(&guid).copied()
    }
    pub fn end_port_by_guid(&self, guid: Guid) -> Option<EndPortId> {
        self.end_port_by_guid.get(&guid).copied()
    }
    pub fn switch(&self, id: SwitchId) -> &Switch {
        &self.switches[id.idx()]
    }
    pub fn switch_mut(&mut self, id: SwitchId) -> &mut Switch {
        &mut self.switches[id.idx()]
    }
    pub fn end_port(&self, id: EndPortId) -> &EndPort {
        &self.end_ports[id.idx()]
    }
    pub fn end_port_mut(&mut self, id: EndPortId) -> &mut EndPort {
        &mut self.end_ports[id.idx()]
    }
    pub fn num_switches(&self) -> usize {
        self.switches.len()
    }
    pub fn num_end_ports(&self) -> usize {
        self.end_ports.len()
    }

    pub fn add_switch(
        &mut self,
        guid: Guid,
        desc: impl Into<String>,
        nports: PortNum,
    ) -> Result<SwitchId, TopologyError> {
        if self.switch_by_guid.contains_key(&guid) {
            return Err(TopologyError::DuplicateSwitch(guid));
        }
        let id = SwitchId(self.switches.len() as u32);
        self.switches.push(Switch {
            guid,
            desc: desc.into(),
            nports,
            ports: vec![Port::default(); nports as usize + 1],
            up: true,
        });
        self.switch_by_guid.insert(guid, id);
        Ok(id)
    }

    pub fn add_end_port(
        &mut self,
        port_guid: Guid,
        node_guid: Guid,
        desc: impl Into<String>,
        port_num: PortNum,
        node_ports: PortNum,
        node_type: NodeType,
    ) -> Result<EndPortId, TopologyError> {
        if self.end_port_by_guid.contains_key(&port_guid) {
            return Err(TopologyError::DuplicateEndPort(port_guid));
        }
        let id = EndPortId(self.end_ports.len() as u32);
        self.end_ports.push(EndPort {
            port_guid,
            node_guid,
            desc: desc.into(),
            port_num,
            node_ports,
            node_type,
            attach: None,
            up: true,
        });
        self.end_port_by_guid.insert(port_guid, id);
        Ok(id)
    }

    fn check_port(&self, sw: SwitchId, port: PortNum) -> Result<(), TopologyError> {
        let s = &self.switches[sw.idx()];
        if port == 0 || port > s.nports {
            return Err(TopologyError::PortOutOfRange {
                guid: s.guid,
                port: u32::from(port),
                nports: u32::from(s.nports),
            });
        }
        if s.ports[port as usize].remote != Remote::None {
            return Err(TopologyError::PortInUse { guid: s.guid, port });
        }
        Ok(())
    }

    /// Cables two switch ports together (a self-loop `a == b` is allowed and recorded).
    pub fn connect_switches(
        &mut self,
        a: SwitchId,
        pa: PortNum,
        b: SwitchId,
        pb: PortNum,
    ) -> Result<(), TopologyError> {
        self.check_port(a, pa)?;
        if (a, pa) == (b, pb) {
            let s = &self.switches[a.idx()];
            return Err(TopologyError::PortInUse { guid: s.guid, port: pa });
        }
        self.check_port(b, pb)?;
        self.switches[a.idx()].ports[pa as usize].remote = Remote::Switch { sw: b, port: pb };
        self.switches[b.idx()].ports[pb as usize].remote = Remote::Switch { sw: a, port: pa };
        Ok(())
    }

    /// Cables an end port to a switch port.
    pub fn connect_end_port(&mut self, ep: EndPortId, sw: SwitchId, port: PortNum) -> Result<(), TopologyError> {
        self.check_port(sw, port)?;
        if self.end_ports[ep.idx()].attach.is_some() {
            return Err(TopologyError::EndPortInUse(self.end_ports[ep.idx()].port_guid));
        }
        self.switches[sw.idx()].ports[port as usize].remote = Remote::EndPort(ep);
        self.end_ports[ep.idx()].attach = Some((sw, port));
        Ok(())
    }

    pub fn build(self) -> Fabric {
        let mut f = Fabric {
            generation: 0,
            switches: self.switches,
            end_ports: self.end_ports,
            switch_by_guid: self.switch_by_guid,
            end_port_by_guid: self.end_port_by_guid,
            groups: Vec::new(),
            attached: Vec::new(),
        };
        f.derive();
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_events_are_checked_precisely() {
        // tiny: leaf 0x10 (8 ports, port 5 cabled to a spine, port 1 to node port 0x101).
        let mut b = FabricBuilder::new();
        let l0 = b.add_switch(0x10, "leaf0", 8).unwrap();
        let s0 = b.add_switch(0x20, "spine0", 8).unwrap();
        b.connect_switches(l0, 5, s0, 1).unwrap();
        let e0 = b.add_end_port(0x101, 0x100, "n0", 1, 1, NodeType::Compute).unwrap();
        b.connect_end_port(e0, l0, 1).unwrap();
        let f = b.build();
        assert!(f.check_event(&FabricEvent::LinkDown { switch: 0x10, port: 5 }).is_ok());
        let e = f
            .check_event(&FabricEvent::LinkDown { switch: 0x10, port: 9 })
            .unwrap_err();
        assert_eq!(e.to_string(), "switch 0x0000000000000010 has no port 9 (ports 1..=8)");
        let e = f
            .check_event(&FabricEvent::LinkUp { switch: 0x10, port: 3 })
            .unwrap_err();
        assert_eq!(e.to_string(), "switch 0x0000000000000010 port 3 is not cabled");
        assert!(f.check_event(&FabricEvent::SwitchDown(0x99)).is_err());
        assert!(f.check_event(&FabricEvent::EndPortDown(0x101)).is_ok());
        assert!(f.check_event(&FabricEvent::EndPortDown(0x100)).is_err());
    }

    /// Two leaves, one spine with two parallel links to leaf 0, one node per leaf.
    fn small() -> Fabric {
        let mut b = FabricBuilder::new();
        let l0 = b.add_switch(0x10, "leaf0", 8).unwrap();
        let l1 = b.add_switch(0x11, "leaf1", 8).unwrap();
        let sp = b.add_switch(0x20, "spine", 8).unwrap();
        b.connect_switches(l0, 5, sp, 1).unwrap();
        b.connect_switches(l0, 6, sp, 2).unwrap();
        b.connect_switches(l1, 5, sp, 3).unwrap();
        let e0 = b.add_end_port(0x101, 0x100, "n0", 1, 1, NodeType::Compute).unwrap();
        let e1 = b.add_end_port(0x111, 0x110, "n1", 1, 1, NodeType::Compute).unwrap();
        b.connect_end_port(e0, l0, 1).unwrap();
        b.connect_end_port(e1, l1, 1).unwrap();
        b.build()
    }

    #[test]
    fn port_groups_and_links() {
        let f = small();
        assert_eq!(f.count_links(), (3, 3));
        let g = f.port_groups(SwitchId(0));
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].ports, vec![5, 6]);
        let g = f.port_groups(SwitchId(2));
        assert_eq!(g.iter().map(|g| g.remote_guid).collect::<Vec<_>>(), vec![0x10, 0x11]);
        assert!(f.is_leaf(SwitchId(0)) && !f.is_leaf(SwitchId(2)));
    }

    #[test]
    fn events_make_next_generation_without_renumbering() {
        let f = small();
        let g = f.apply(&[FabricEvent::LinkDown { switch: 0x10, port: 5 }]).unwrap();
        assert_eq!(g.generation(), 1);
        assert_eq!(g.port_groups(SwitchId(0))[0].ports, vec![6]);
        assert_eq!(g.count_links(), (3, 2));
        let h = g.apply(&[FabricEvent::SwitchDown(0x11)]).unwrap();
        assert_eq!(h.num_switches(), 3);
        assert!(!h.end_port_live(EndPortId(1)));
        assert_eq!(h.port_groups(SwitchId(2)).len(), 1);
        let back = h
            .apply(&[
                FabricEvent::SwitchUp(0x11),
                FabricEvent::LinkUp { switch: 0x20, port: 1 },
            ])
            .unwrap();
        assert_eq!(back, f);
        assert_eq!(back.generation(), 3);
    }

    #[test]
    fn bad_events_are_rejected_precisely() {
        let f = small();
        assert_eq!(
            f.apply(&[FabricEvent::LinkDown { switch: 0x99, port: 1 }]),
            Err(TopologyError::UnknownSwitch(0x99))
        );
        let e = f
            .apply(&[FabricEvent::LinkDown { switch: 0x10, port: 40 }])
            .unwrap_err();
        assert_eq!(e.to_string(), "switch 0x0000000000000010 has no port 40 (ports 1..=8)");
        assert!(matches!(
            f.apply(&[FabricEvent::LinkUp { switch: 0x10, port: 7 }]),
            Err(TopologyError::PortNotCabled { .. })
        ));
    }
}
