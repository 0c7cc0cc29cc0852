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

use crate::lft_table::{LftList, LftTable};

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
    /// Indices in [`Subnet::ports`] of this node's ports (a switch: port 0 first, then 1..=N;
    /// a CA: the ports the manager knows).
    pub ports: Arc<[u32]>,
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

/// The five-phase update's escape addressing: with LMC ≥ 1, the last LID of every end port's
/// range (base + 2^LMC − 1; base + 1 with LMC 1) is its escape LID, routed on the escape SL; the
/// other offsets are base LIDs (the layers of a layered routing with LMC ≥ 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Escape {
    pub sl: u8,
}

/// Per-path service levels of a routing whose routes are spread over several virtual lanes
/// (DFSSSP's layers, layered multipath: seed 003 §5.2). Routing is destination-based, so the SL
/// of a path is the SL of the route from its first switch (the source CA's neighbour, or the
/// source switch itself) to the destination LID. Paths it does not cover get SL 0 (or the
/// escape SL for escape LIDs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathSls {
    /// Switch node GUID → row in `sl`.
    pub row_of_switch: HashMap<Guid, u32>,
    /// Entries per row (highest destination LID + 1).
    pub row_len: usize,
    /// SL of the route from switch row `r` to LID `l`: `sl[r * row_len + l]`.
    pub sl: Vec<u8>,
}

impl PathSls {
    /// SL of the route from the switch with node GUID `switch` to `dlid`, if covered.
    pub fn sl(&self, switch: Guid, dlid: u16) -> Option<u8> {
        let r = *self.row_of_switch.get(&switch)? as usize;
        if usize::from(dlid) >= self.row_len {
            return None;
        }
        self.sl.get(r * self.row_len + usize::from(dlid)).copied()
    }
}

/// The snapshot.
///
/// Cloning it (every group of acknowledged LFT blocks makes the next snapshot from a clone of
/// the one in force: [`crate::SaService::apply_lft_blocks`]) copies no list: the nodes, ports,
/// indexes and the per-node table list are shared (`Arc`, copied on write by
/// [`Subnet::ports_mut`], [`Subnet::reindex`] and [`Subnet::lft_mut`]; the table list by
/// groups of 256 nodes, [`LftList`]), and each switch's
/// [`LftTable`] is shared chunk by chunk (issue #17: a copy of the node list and of every
/// touched table per group of acknowledged blocks was most of the daemon's CPU while uploading
/// at 65 536 nodes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subnet {
    /// Never edited once the snapshot is built (the LFTs live in their own list).
    pub nodes: Arc<Vec<Node>>,
    /// The LFT installed on each node that is a switch (by node index; `None` for CAs and for
    /// a switch whose table is not known): one output port per LID from LID 0 (0xff: none).
    lfts: LftList,
    /// Shared between the snapshots of one topology (see [`Subnet::ports_mut`]).
    pub ports: Arc<Vec<Port>>,
    /// LID → index in `ports` of the end port (CA port or switch port 0) owning it, for every
    /// LID of its LMC range; [`NO_PORT`] otherwise.
    pub lid_port: Arc<Vec<u32>>,
    pub sm: SmData,
    pub escape: Option<Escape>,
    /// Per-path SLs of a routing layered over several VLs; `None`: every base path on SL 0.
    pub path_sls: Option<std::sync::Arc<PathSls>>,
    pub subnet_prefix: u64,
    /// Bumped by the publisher at every new snapshot (logs, tests).
    pub version: u64,
    port_by_guid: Arc<HashMap<Guid, u32>>,
    node_by_guid: Arc<HashMap<Guid, u32>>,
}

impl Subnet {
    /// A snapshot of `nodes` and `ports` (indices as documented on the fields); builds the LID
    /// and GUID indexes from the PortInfo images.
    pub fn new(nodes: Vec<Node>, ports: Vec<Port>, sm: SmData, escape: Option<Escape>) -> Subnet {
        let mut s = Subnet {
            lfts: LftList::new(nodes.len()),
            nodes: Arc::new(nodes),
            ports: Arc::new(ports),
            lid_port: Arc::default(),
            sm,
            escape,
            path_sls: None,
            subnet_prefix: DEFAULT_SUBNET_PREFIX,
            version: 0,
            port_by_guid: Arc::default(),
            node_by_guid: Arc::default(),
        };
        s.reindex();
        s
    }

    /// Rebuilds the LID and GUID indexes (after editing `nodes` or `ports`).
    pub fn reindex(&mut self) {
        let mut lid_port = Vec::new();
        let mut port_by_guid = HashMap::new();
        let mut node_by_guid = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            node_by_guid.insert(n.guid(), i as u32);
        }
        for (i, p) in self.ports.iter().enumerate() {
            let Some(node) = self.nodes.get(p.node as usize) else {
                continue;
            };
            let end_port = !node.is_switch() || p.port_num == 0;
            if !end_port {
                continue;
            }
            port_by_guid.entry(p.guid).or_insert(i as u32);
            let base = usize::from(p.lid());
            if base == 0 {
                continue;
            }
            let n = 1usize << p.lmc();
            if lid_port.len() < base + n {
                lid_port.resize(base + n, NO_PORT);
            }
            lid_port[base..base + n].fill(i as u32);
        }
        self.lid_port = Arc::new(lid_port);
        self.port_by_guid = Arc::new(port_by_guid);
        self.node_by_guid = Arc::new(node_by_guid);
    }

    /// The port list to edit (copied first when another snapshot shares it); call
    /// [`Subnet::reindex`] after changing LIDs or GUIDs.
    pub fn ports_mut(&mut self) -> &mut Vec<Port> {
        Arc::make_mut(&mut self.ports)
    }

    /// The node list to edit (copied first when another snapshot shares it); call
    /// [`Subnet::reindex`] after changing GUIDs. The nodes' LFTs are not in it
    /// ([`Subnet::lft_mut`]).
    pub fn nodes_mut(&mut self) -> &mut Vec<Node> {
        Arc::make_mut(&mut self.nodes)
    }

    /// The LFT installed on node `node` (a switch), if known.
    pub fn lft(&self, node: u32) -> Option<&LftTable> {
        self.lfts.get(node as usize)
    }

    /// Sets (or forgets) the LFT of node `node` (ignored past the node list).
    pub fn set_lft(&mut self, node: u32, table: Option<LftTable>) {
        if let Some(slot) = self.lfts.slot_mut(node as usize) {
            *slot = table.map(Arc::new);
        }
    }

    /// Shares node `node`'s LFT with `other`'s node `other_node` (no copy; forgets it when
    /// `other` has none).
    pub fn share_lft(&mut self, node: u32, other: &Subnet, other_node: u32) {
        let t = other.lfts.get_shared(other_node as usize);
        if let Some(slot) = self.lfts.slot_mut(node as usize) {
            *slot = t;
        }
    }

    /// The LFT of node `node` to edit, created empty when absent (copied first where another
    /// snapshot shares the list or the table; the table's chunks are copied on write by
    /// [`LftTable::write_block`]); `None` past the node list.
    pub fn lft_mut(&mut self, node: u32) -> Option<&mut LftTable> {
        let slot = self.lfts.slot_mut(node as usize)?;
        Some(Arc::make_mut(slot.get_or_insert_with(Default::default)))
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
///
/// * A node is in the snapshot when it is up (a dead switch or end node is not discoverable);
///   the nodes are the switches in id order, then one channel adapter per node GUID in
///   end-port order.
/// * NodeInfo: base and class version 1, type (CA 1, switch 2), NumPorts, SystemImageGUID =
///   NodeGUID, PortGUID and LocalPortNum of the switch's port 0 or of the CA's first port,
///   PartitionCap [`MODEL_PARTITION_CAP`], DeviceID, Revision and VendorID 0.
/// * PortInfo: LID (a switch's external ports carry the switch LID), LMC (the plan's for CA
///   ports, 0 for switches), MasterSMLID = the SM's LID, PortState Active and PortPhysicalState
///   LinkUp on live links (switch port 0 is always Active), Down and Polling otherwise; width
///   and speed from the model's speed string (`4xQDR`, `4xEDR`, `2xHDR`, ...: the switch
///   port's string, also for the CA cabled to it; port 0 takes the first one of its switch), [`MODEL_DEFAULT_SPEED`] (4x QDR: what the
///   topology writer puts in the ibsim files it writes, so that a mock fabric and its ibsim
///   twin answer the same rate) when absent or unreadable; NeighborMTU and MTUCap 4096, VLCap
///   and OperationalVLs VL0-7, GUIDCap 1, SubnetTimeOut [`MODEL_SUBNET_TIMEOUT`].
/// * SwitchInfo: LinearFDBCap 49152, LinearFDBTop = the plan's highest LID.
/// * The LFT of each switch from `lfts` (an [`LftTable`] each), peers of the live links.
///
/// Never panics: a plan or table set that does not cover the fabric gives LID 0 / empty
/// tables for what it misses.
pub fn from_model(
    fabric: &fabric_topology::Fabric,
    lids: &fabric_routing::LidPlan,
    lfts: &fabric_routing::Lfts,
    sm: SmData,
    escape: Option<Escape>,
) -> Subnet {
    use fabric_topology::{Remote, SwitchId};

    let mut nodes: Vec<Node> = Vec::new();
    // Each node's port indices, given to the nodes at the end.
    let mut node_ports: Vec<Vec<u32>> = Vec::new();
    let mut ports: Vec<Port> = Vec::new();
    let mut switch_node: Vec<Option<u32>> = vec![None; fabric.num_switches()];
    for (i, sw) in fabric.switches().iter().enumerate() {
        if sw.up {
            switch_node[i] = Some(nodes.len() as u32);
            nodes.push(Node {
                node_info: [0; NODE_INFO_SIZE],
                description: [0; NODE_DESC_SIZE],
                switch_info: None,
                ports: Arc::default(),
            });
            node_ports.push(Vec::new());
        }
    }
    // Channel adapters: one node per node GUID, its ports in end-port order.
    let mut ca_node: HashMap<Guid, u32> = HashMap::new();
    let mut end_port_node: Vec<Option<u32>> = vec![None; fabric.num_end_ports()];
    for (i, ep) in fabric.end_ports().iter().enumerate() {
        if !ep.up {
            continue;
        }
        let n = *ca_node.entry(ep.node_guid).or_insert_with(|| {
            let mut info = [0u8; NODE_INFO_SIZE];
            node_info_common(&mut info, 1, ep.node_ports, ep.node_guid, ep.port_guid, ep.port_num);
            nodes.push(Node {
                node_info: info,
                description: description(&ep.desc),
                switch_info: None,
                ports: Arc::default(),
            });
            node_ports.push(Vec::new());
            (nodes.len() - 1) as u32
        });
        end_port_node[i] = Some(n);
    }

    let sm_lid = sm.lid;
    let top = lids.top();
    let mut switch_lft: Vec<(u32, LftTable)> = Vec::new();
    for (i, sw) in fabric.switches().iter().enumerate() {
        let Some(n) = switch_node[i] else { continue };
        let id = SwitchId(i as u32);
        let lid = lid16(lids.switch_lid.get(i).copied().unwrap_or(0));
        let node = &mut nodes[n as usize];
        node_info_common(&mut node.node_info, 2, sw.nports, sw.guid, sw.guid, 0);
        node.description = description(&sw.desc);
        let mut si = [0u8; SWITCH_INFO_SIZE];
        si[0..2].copy_from_slice(&MODEL_LINEAR_FDB_CAP.to_be_bytes());
        si[6..8].copy_from_slice(&lid16(top).to_be_bytes());
        node.switch_info = Some(si);
        let row: &[u8] = if i < lfts.num_switches() { lfts.row(id) } else { &[] };
        switch_lft.push((n, LftTable::from_slice(row)));
        for pn in 0..=sw.nports {
            let (live, peer, speed) = if pn == 0 {
                // Port 0 is no link: it reports the speed of the switch's first port that has
                // one (it limits paths to and from the switch, as OpenSM counts it).
                (true, None, sw.ports.iter().skip(1).find_map(|p| p.speed.as_deref()))
            } else {
                let p = &sw.ports[pn as usize];
                let peer = match p.remote {
                    Remote::Switch { .. } => fabric
                        .switch_link_live(id, pn)
                        .and_then(|(r, rp)| switch_node[r.idx()].map(|rn| (rn, rp))),
                    Remote::EndPort(ep) if fabric.end_port_live(ep) => {
                        end_port_node[ep.idx()].map(|cn| (cn, fabric.end_port(ep).port_num))
                    }
                    _ => None,
                };
                (peer.is_some(), peer, p.speed.as_deref())
            };
            let info = model_port_info(lid, 0, sm_lid, pn, live, LinkSpeed::parse(speed));
            node_ports[n as usize].push(ports.len() as u32);
            ports.push(Port {
                node: n,
                port_num: pn,
                guid: sw.guid,
                port_info: info,
                peer,
            });
        }
    }
    for (i, ep) in fabric.end_ports().iter().enumerate() {
        let Some(n) = end_port_node[i] else { continue };
        let live = fabric.end_port_live(fabric_topology::EndPortId(i as u32));
        let (peer, speed) = match ep.attach {
            Some((sw, pn)) => {
                let speed = fabric
                    .switch(sw)
                    .ports
                    .get(pn as usize)
                    .and_then(|p| p.speed.as_deref());
                (switch_node[sw.idx()].filter(|_| live).map(|sn| (sn, pn)), speed)
            }
            None => (None, None),
        };
        let lid = lid16(lids.end_port_base.get(i).copied().unwrap_or(0));
        let info = model_port_info(
            lid,
            lids.lmc,
            sm_lid,
            ep.port_num,
            peer.is_some(),
            LinkSpeed::parse(speed),
        );
        node_ports[n as usize].push(ports.len() as u32);
        ports.push(Port {
            node: n,
            port_num: ep.port_num,
            guid: ep.port_guid,
            port_info: info,
            peer,
        });
    }
    for (node, p) in nodes.iter_mut().zip(node_ports) {
        node.ports = p.into();
    }
    let mut s = Subnet::new(nodes, ports, sm, escape);
    for (n, t) in switch_lft {
        s.set_lft(n, Some(t));
    }
    s
}

/// LinearFDBCap of a synthesised SwitchInfo (the unicast LID space, 0xC000).
pub const MODEL_LINEAR_FDB_CAP: u16 = 49152;
/// PartitionCap of a synthesised NodeInfo.
pub const MODEL_PARTITION_CAP: u16 = 64;
/// SubnetTimeOut of a synthesised PortInfo (OpenSM's default `subnet_timeout`, 18).
pub const MODEL_SUBNET_TIMEOUT: u8 = 18;
/// The link speed assumed where the model has none: 4x QDR (40 Gb/s), what
/// `fabric_topology::ibnet::write` writes for a cabled port without a speed.
pub const MODEL_DEFAULT_SPEED: &str = "4xQDR";

fn lid16(lid: fabric_topology::Lid) -> u16 {
    u16::try_from(lid).unwrap_or(0)
}

fn description(desc: &str) -> [u8; NODE_DESC_SIZE] {
    let mut d = [0u8; NODE_DESC_SIZE];
    let b = desc.as_bytes();
    let n = b.len().min(NODE_DESC_SIZE);
    d[..n].copy_from_slice(&b[..n]);
    d
}

fn node_info_common(info: &mut [u8; NODE_INFO_SIZE], node_type: u8, nports: u8, guid: Guid, port_guid: Guid, port: u8) {
    info[0] = 1; // BaseVersion
    info[1] = 1; // ClassVersion
    info[2] = node_type;
    info[3] = nports;
    info[4..12].copy_from_slice(&guid.to_be_bytes()); // SystemImageGUID
    info[12..20].copy_from_slice(&guid.to_be_bytes());
    info[20..28].copy_from_slice(&port_guid.to_be_bytes());
    info[28..30].copy_from_slice(&MODEL_PARTITION_CAP.to_be_bytes());
    info[36] = port; // LocalPortNum
}

/// A link's width and speed as PortInfo encodes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LinkSpeed {
    /// LinkWidth bit: 1x 0x01, 4x 0x02, 8x 0x04, 12x 0x08, 2x 0x10.
    width: u8,
    /// LinkSpeed bit: SDR 1, DDR 2, QDR 4 (also with an extended speed).
    speed: u8,
    /// LinkSpeedExt bit: FDR 1, EDR 2, HDR 4, NDR 8; 0 without.
    ext: u8,
}

impl LinkSpeed {
    /// Reads `<width>x<speed>` (`4xQDR`, `12xEDR`, case-insensitive); the default for `None`
    /// or anything else.
    fn parse(s: Option<&str>) -> LinkSpeed {
        let default = LinkSpeed {
            width: 0x02,
            speed: 4,
            ext: 0,
        };
        let Some(s) = s else { return default };
        let s = s.trim().to_ascii_uppercase();
        let Some((w, sp)) = s.split_once('X') else {
            return default;
        };
        let width = match w {
            "1" => 0x01,
            "2" => 0x10,
            "4" => 0x02,
            "8" => 0x04,
            "12" => 0x08,
            _ => return default,
        };
        let (speed, ext) = match sp {
            "SDR" => (1, 0),
            "DDR" => (2, 0),
            "QDR" | "FDR10" => (4, 0),
            "FDR" => (4, 1),
            "EDR" => (4, 2),
            "HDR" => (4, 4),
            "NDR" => (4, 8),
            _ => return default,
        };
        LinkSpeed { width, speed, ext }
    }
}

/// IsExtendedSpeedsSupported (PortInfo CapabilityMask bit 14).
const CAP_EXTENDED_SPEEDS: u32 = 1 << 14;

fn model_port_info(lid: u16, lmc: u8, sm_lid: u16, port: u8, live: bool, ls: LinkSpeed) -> [u8; PORT_INFO_SIZE] {
    let mut pi = [0u8; PORT_INFO_SIZE];
    pi[8..16].copy_from_slice(&DEFAULT_SUBNET_PREFIX.to_be_bytes()); // GidPrefix
    pi[16..18].copy_from_slice(&lid.to_be_bytes());
    pi[18..20].copy_from_slice(&sm_lid.to_be_bytes()); // MasterSMLID
    let cap = if ls.ext != 0 { CAP_EXTENDED_SPEEDS } else { 0 };
    pi[20..24].copy_from_slice(&cap.to_be_bytes());
    pi[28] = port; // LocalPortNum
    pi[29] = ls.width; // LinkWidthEnabled
    pi[30] = ls.width; // LinkWidthSupported
    pi[31] = ls.width; // LinkWidthActive
    let (state, phys) = if live { (4u8, 5u8) } else { (1, 2) };
    pi[32] = (ls.speed << 4) | state; // LinkSpeedSupported | PortState
    pi[33] = phys << 4; // PortPhysicalState | LinkDownDefaultState
    pi[34] = lmc & 0x07;
    pi[35] = (ls.speed << 4) | ls.speed; // LinkSpeedActive | LinkSpeedEnabled
    pi[36] = 5 << 4; // NeighborMTU 4096 | MasterSMSL 0
    pi[37] = 4 << 4; // VLCap VL0-7
    pi[41] = 5; // MTUCap 4096
    pi[43] = 4 << 4; // OperationalVLs VL0-7
    pi[50] = 1; // GUIDCap
    pi[51] = MODEL_SUBNET_TIMEOUT & 0x1f;
    pi[62] = (ls.ext << 4) | ls.ext; // LinkSpeedExtActive | LinkSpeedExtSupported
    pi[63] = ls.ext & 0x1f; // LinkSpeedExtEnabled
    pi
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_routing::{assign_lids, Guid2Lid, Lfts, IB_MAX_UNICAST_LID};
    use fabric_topology::gen::generate_str;
    use fabric_topology::{FabricEvent, Remote, SwitchId};

    fn port_state(p: &Port) -> u8 {
        p.port_info[32] & 0x0f
    }

    /// A generated fat-tree, its LIDs (LMC 1) and tables with a recognisable entry per switch.
    fn model() -> (fabric_topology::Fabric, fabric_routing::LidPlan, Lfts) {
        let f = generate_str("PGFT(2;4,4;1,2;1,1)", None).unwrap();
        let lids = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        let mut lfts = Lfts::new(f.num_switches(), lids.top());
        for sw in f.switch_ids() {
            lfts.set(sw, 1, sw.0 as u8 + 1);
        }
        (f, lids, lfts)
    }

    fn sm() -> SmData {
        SmData {
            guid: 0x42,
            lid: 7,
            priority: 15,
            state: 3,
            act_count: 0,
        }
    }

    #[test]
    fn from_model_synthesises_node_port_and_switch_images() {
        let (f, lids, lfts) = model();
        let s = from_model(&f, &lids, &lfts, sm(), Some(Escape { sl: 1 }));
        assert_eq!(s.nodes.len(), f.num_switches() + f.num_end_ports());
        for (i, sw) in f.switches().iter().enumerate() {
            let n = &s.nodes[i];
            assert_eq!((n.guid(), n.node_type(), n.node_info[3]), (sw.guid, 2, sw.nports));
            assert_eq!(&n.node_info[4..12], &sw.guid.to_be_bytes(), "SystemImageGUID");
            assert_eq!(&n.node_info[0..2], &[1, 1]);
            assert_eq!(&n.description[..sw.desc.len()], sw.desc.as_bytes());
            let si = n.switch_info.unwrap();
            assert_eq!(u16::from_be_bytes([si[0], si[1]]), 49152);
            assert_eq!(u32::from(u16::from_be_bytes([si[6], si[7]])), lids.top());
            let lft = s.lft(i as u32).unwrap();
            assert!(lft.eq_slice(lfts.row(SwitchId(i as u32))));
            assert_eq!(n.ports.len(), usize::from(sw.nports) + 1);
            for (pn, &pi) in n.ports.iter().enumerate() {
                let p = &s.ports[pi as usize];
                assert_eq!((p.port_num as usize, p.guid, p.node as usize), (pn, sw.guid, i));
                assert_eq!(
                    u32::from(p.lid()),
                    lids.switch_lid[i],
                    "switch ports carry the switch LID"
                );
                assert_eq!(p.lmc(), 0);
                assert_eq!(u16::from_be_bytes([p.port_info[18], p.port_info[19]]), 7, "MasterSMLID");
                assert_eq!(p.port_info[28] as usize, pn, "LocalPortNum");
                if pn > 0 {
                    let cabled = sw.ports[pn].remote != Remote::None;
                    assert_eq!(p.peer.is_some(), cabled);
                    assert_eq!(port_state(p), if cabled { 4 } else { 1 });
                }
            }
            // Switch port 0 owns the switch LID.
            let p0 = s.port_by_lid(lids.switch_lid[i] as u16).unwrap();
            assert_eq!((p0.node as usize, p0.port_num), (i, 0));
        }
        for (i, ep) in f.end_ports().iter().enumerate() {
            let pi = s.port_index_by_guid(ep.port_guid).unwrap();
            let p = &s.ports[pi as usize];
            let n = &s.nodes[p.node as usize];
            assert_eq!((n.guid(), n.node_type()), (ep.node_guid, 1));
            assert_eq!(&n.node_info[20..28], &ep.port_guid.to_be_bytes());
            assert_eq!(u32::from(p.lid()), lids.end_port_base[i]);
            assert_eq!(p.lmc(), 1);
            // Both LIDs of the LMC range belong to the port.
            assert_eq!(s.lid_port[p.lid() as usize + 1], pi);
            // Peers are symmetric.
            let (sn, spn) = p.peer.unwrap();
            let back = s.node_port(sn, spn).unwrap();
            assert_eq!(back.peer, Some((p.node, ep.port_num)));
            assert_eq!(port_state(p), 4);
            assert_eq!(p.port_info[41] & 0x0f, 5, "MTUCap 4096");
            assert_eq!(p.port_info[36] >> 4, 5, "NeighborMTU 4096");
            assert_eq!(p.port_info[31], 0x02, "4x by default");
            assert_eq!(p.port_info[35] >> 4, 4, "QDR by default");
        }
        assert_eq!(s.escape, Some(Escape { sl: 1 }));
    }

    #[test]
    fn down_links_and_dead_nodes_are_not_peers() {
        let (f, lids, lfts) = model();
        let ep = f.end_port(fabric_topology::EndPortId(0)).clone();
        let (leaf, port) = ep.attach.unwrap();
        let root = SwitchId(f.num_switches() as u32 - 1);
        let up = f
            .switch(leaf)
            .external_ports()
            .find(|(_, p)| matches!(p.remote, Remote::Switch { .. }))
            .unwrap()
            .0;
        let f = f
            .apply(&[
                FabricEvent::LinkDown {
                    switch: f.switch(leaf).guid,
                    port,
                },
                FabricEvent::LinkDown {
                    switch: f.switch(leaf).guid,
                    port: up,
                },
                FabricEvent::SwitchDown(f.switch(root).guid),
            ])
            .unwrap();
        let s = from_model(&f, &lids, &lfts, sm(), None);
        assert!(
            s.node_index_by_guid(f.switch(root).guid).is_none(),
            "a dead switch is not in the snapshot"
        );
        assert_eq!(s.nodes.len(), f.num_switches() - 1 + f.num_end_ports());
        let p = &s.ports[s.port_index_by_guid(ep.port_guid).unwrap() as usize];
        assert_eq!((p.peer, port_state(p), p.port_info[33] >> 4), (None, 1, 2));
        let li = s.node_index_by_guid(f.switch(leaf).guid).unwrap();
        for pn in [port, up] {
            let lp = s.node_port(li, pn).unwrap();
            assert_eq!((lp.peer, port_state(lp)), (None, 1));
        }
        // No port anywhere points at the dead switch.
        assert!(s
            .ports
            .iter()
            .all(|p| p.peer.is_none_or(|(n, _)| (n as usize) < s.nodes.len())));
    }

    #[test]
    fn speed_strings_give_width_speed_and_extended_speed() {
        let cases = [
            (Some("4xQDR"), (0x02, 4, 0)),
            (Some("4xEDR"), (0x02, 4, 2)),
            (Some("4xHDR"), (0x02, 4, 4)),
            (Some("12xFDR"), (0x08, 4, 1)),
            (Some("1xDDR"), (0x01, 2, 0)),
            (Some("2xndr"), (0x10, 4, 8)),
            (Some("4xSDR"), (0x02, 1, 0)),
            (Some("fast"), (0x02, 4, 0)),
            (None, (0x02, 4, 0)),
        ];
        for (s, (w, sp, ext)) in cases {
            let ls = LinkSpeed::parse(s);
            assert_eq!((ls.width, ls.speed, ls.ext), (w, sp, ext), "{s:?}");
            let pi = model_port_info(1, 0, 1, 1, true, ls);
            assert_eq!((pi[31], pi[35] >> 4, pi[62] >> 4), (w, sp, ext));
            assert_eq!(
                u32::from_be_bytes([pi[20], pi[21], pi[22], pi[23]]) & CAP_EXTENDED_SPEEDS != 0,
                ext != 0
            );
        }
        assert_eq!(LinkSpeed::parse(Some(MODEL_DEFAULT_SPEED)), LinkSpeed::parse(None));
    }
}
