//! The Subnet Administration snapshot of the umad driver: the driver's [`State`] as a
//! [`fabric_sa::Subnet`] ([`build_subnet`], pure), kept current in the attached
//! [`SaService`] ([`publish`] after discovery, LID configuration and light sweeps that
//! changed something; [`record_lft_blocks`] after every acknowledged LFT write), and the
//! service answering only while this manager is master with its LIDs configured
//! ([`sync_serving`]).
//!
//! What the snapshot holds, all as the manager read or wrote it:
//! * one node per up switch and per node GUID of the up CA ports, ordered by node GUID (the
//!   order of OpenSM's node table): NodeInfo and NodeDescription as read, SwitchInfo as read
//!   with the LinearFDBTop written;
//! * the ports: every switch port whose PortInfo was read (port 0 first), external ports with
//!   the switch's LID in their PortInfo LID field (as OpenSM's PortInfoRecords report them),
//!   the up CA ports; peers for live links only;
//! * each switch's LFT from the upload cache (what the switch acknowledged or was read to
//!   hold), up to LinearFDBTop and every cached block; entries not known = 0xff;
//! * the SM (the manager's port GUID and LID, its SMInfo priority, state and ActCount) and,
//!   with LMC 1, the escape SL of the five-phase update.
//!
//! A CA port that went down, or whose switch is down, is left out at once: that is how the
//! service sees a GID go out of service (trap 65 Reports to subscribers).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use fabric_routing::BLOCK_SIZE;
use fabric_sa::subnet::{Escape, Node, Port, SmData, Subnet, NODE_DESC_SIZE, PORT_INFO_SIZE, SWITCH_INFO_SIZE};
use fabric_sa::{LftTable, SaService};
use fabric_topology::Guid;

use super::inner::{lock, Inner};
use super::sl2vl::ESCAPE_SL;
use super::state::{cable_live, live, Peer, State, SwitchRec};
use crate::mad::SM_STATE_MASTER;

// Acknowledged LFT blocks reach the service through `SaService::apply_lft_blocks`
// (copy-on-write of the touched tables). Rebuilding the whole snapshot per write would not
// do: about 30 ms for 3 456 end ports and 720 switches (clone 12 ms + build 17 ms on the
// shared 2-core machine), once per switch batch of an upload.

/// Whether the SA answers: this manager is master (it configured the LIDs) and not standing
/// by for another manager.
pub(super) fn should_serve(sm_state: u8, standby: bool) -> bool {
    sm_state == SM_STATE_MASTER && !standby
}

/// [`SouthboundDriver::attach_sa`](fabric_southbound::SouthboundDriver::attach_sa): keeps
/// `sa` current from now on (a first snapshot is published at once). A second service is
/// refused (`false`, logged): the first one stays attached.
pub(super) fn attach(inner: &Inner, sa: Arc<SaService>) -> bool {
    if inner.sa.set(sa.clone()).is_err() {
        tracing::warn!(
            "attach_sa: an SA service is already attached to the umad driver; the new one is not kept current"
        );
        return false;
    }
    // A request carrying this manager's SM_Key is trusted (it gets the records' keys).
    sa.set_trusted_key(inner.cfg.sm_key);
    // The transport's SA agent answers from the same service.
    inner.tp.set_sa(sa.clone());
    publish(inner);
    sync_serving(inner);
    true
}

/// Sets the attached service serving or not from the SM state (see [`should_serve`]).
pub(super) fn sync_serving(inner: &Inner) {
    let Some(sa) = inner.sa.get() else { return };
    let on = should_serve(
        inner.tp.sm_identity().state.load(Ordering::Relaxed),
        inner.standby.load(Ordering::Relaxed),
    );
    if sa.serving() != on {
        tracing::info!(
            serving = on,
            "subnet administration {}",
            if on { "answers" } else { "stops answering" }
        );
    }
    sa.set_serving(on);
}

/// Builds a snapshot of the current state and publishes it (no-op without a service).
pub(super) fn publish(inner: &Inner) {
    let Some(sa) = inner.sa.get() else { return };
    let mut version = lock(&inner.sa_publish);
    publish_locked(inner, sa, &mut version);
}

/// The SM as the snapshot reports it.
fn sm_data(inner: &Inner, st: &State) -> SmData {
    let id = inner.tp.sm_identity();
    SmData {
        guid: id.guid.load(Ordering::Relaxed),
        lid: st.sm_lid,
        priority: id.priority.load(Ordering::Relaxed),
        state: id.state.load(Ordering::Relaxed),
        // ActCount: SMPs sent (what the transport answers SMInfo with), modulo 2^32.
        act_count: inner.tp.stats().sent.load(Ordering::Relaxed) as u32,
    }
}

/// With `sa_publish` held (`version`): the state is cloned under its lock, the snapshot built
/// outside it.
fn publish_locked(inner: &Inner, sa: &SaService, version: &mut u64) {
    let st = lock(&inner.state).clone();
    let mut subnet = build_subnet(&st, sm_data(inner, &st));
    // Above every version seen (`apply_lft_blocks` may have bumped the published one).
    *version = (*version).max(sa.subnet().version) + 1;
    subnet.version = *version;
    tracing::debug!(
        version = subnet.version,
        nodes = subnet.nodes.len(),
        ports = subnet.ports.len(),
        "SA snapshot published"
    );
    sa.publish(subnet);
}

/// Records LFT blocks a switch acknowledged (`written`) or was read to hold in the upload
/// cache; written ones reach the service's snapshot at once
/// ([`SaService::apply_lft_blocks`], copy-on-write of the touched tables). Blocks read back are only recorded (one snapshot per block
/// read would cost a copy each): they are in the next whole snapshot, which the daemon's first
/// generation after a read-back publishes through its LID configuration.
pub(super) fn record_lft_blocks(inner: &Inner, blocks: &[(Guid, u32, [u8; BLOCK_SIZE])], written: bool) {
    let sa = inner.sa.get();
    // `sa_publish` before `state`: a snapshot built meanwhile cannot miss these blocks and
    // then replace one that has them.
    let publishing = sa.map(|_| lock(&inner.sa_publish));
    {
        let mut st = lock(&inner.state);
        for (g, b, entries) in blocks {
            if let Some(&i) = st.sw_by_guid.get(g) {
                st.switches[i].lft.insert(*b, *entries);
            }
        }
    }
    let (Some(sa), Some(_publishing)) = (sa, publishing) else {
        return;
    };
    if blocks.is_empty() {
        return;
    }
    if !written {
        return;
    }
    sa.apply_lft_blocks(blocks);
}

/// The LFT of switch `s` as the snapshot holds it: blocks up to LinearFDBTop and every cached
/// block, 0xff where the switch's content is not known.
fn lft_image(s: &SwitchRec) -> Vec<u8> {
    let top = usize::from(s.info.linear_fdb_top());
    let top_blocks = if top == 0 { 0 } else { top / BLOCK_SIZE + 1 };
    let cached = s.lft.keys().max().map_or(0, |&b| b as usize + 1);
    let mut v = vec![0xff; top_blocks.max(cached) * BLOCK_SIZE];
    for (&b, e) in &s.lft {
        let o = b as usize * BLOCK_SIZE;
        v[o..o + BLOCK_SIZE].copy_from_slice(e);
    }
    v
}

fn port_image(raw: &[u8; 64]) -> [u8; PORT_INFO_SIZE] {
    let mut a = [0u8; PORT_INFO_SIZE];
    a.copy_from_slice(&raw[..PORT_INFO_SIZE]);
    // The M_Key (read back from ports protected with the manager's key) never leaves the
    // driver: the SA would zero it for untrusted requesters anyway.
    a[..8].fill(0);
    a
}

/// One node of the snapshot, from the records.
enum Source {
    Switch(usize),
    /// The CA ports (indices in `State::cas`) of one node GUID.
    Ca(Vec<usize>),
}

/// The snapshot of `st` (pure; see the module documentation for what it holds).
pub(super) fn build_subnet(st: &State, sm: SmData) -> Subnet {
    let switch_up = |g: Guid| st.sw_by_guid.get(&g).is_some_and(|&i| st.switches[i].up);
    let mut sources: BTreeMap<Guid, Source> = BTreeMap::new();
    for (i, s) in st.switches.iter().enumerate() {
        if s.up {
            sources.insert(s.guid, Source::Switch(i));
        }
    }
    let mut cas: Vec<usize> = (0..st.cas.len())
        .filter(|&ci| {
            let c = &st.cas[ci];
            c.up && c.attach.is_none_or(|(g, _)| switch_up(g))
        })
        .collect();
    cas.sort_by_key(|&ci| st.cas[ci].port_num);
    for ci in cas {
        match sources.entry(st.cas[ci].node_guid) {
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(Source::Ca(vec![ci]));
            }
            std::collections::btree_map::Entry::Occupied(mut e) => {
                // A CA sharing its node GUID with a switch is not a port of that switch.
                if let Source::Ca(v) = e.get_mut() {
                    v.push(ci);
                }
            }
        }
    }
    let mut nodes: Vec<Node> = Vec::with_capacity(sources.len());
    let mut ports: Vec<Port> = Vec::new();
    let mut node_of: HashMap<Guid, u32> = HashMap::with_capacity(sources.len());
    // Port index of each switch port and CA port, for the peers.
    let mut sw_port: HashMap<(Guid, u8), u32> = HashMap::new();
    let mut ca_port: HashMap<Guid, u32> = HashMap::new();
    let mut switch_lfts: Vec<(u32, LftTable)> = Vec::new();
    for (&guid, src) in &sources {
        let n = nodes.len() as u32;
        node_of.insert(guid, n);
        let mut node_ports = Vec::new();
        match src {
            Source::Switch(i) => {
                let s = &st.switches[*i];
                let port_guid = u64::from_be_bytes(s.node_info[20..28].try_into().unwrap_or([0; 8]));
                for (p, rec) in s.ports.iter().enumerate() {
                    let Some(info) = &rec.info else { continue };
                    let mut port_info = port_image(&info.raw);
                    if p > 0 {
                        // External ports carry the switch's LID, as OpenSM reports them.
                        port_info[16..18].copy_from_slice(&s.lid.to_be_bytes());
                    }
                    sw_port.insert((s.guid, p as u8), ports.len() as u32);
                    node_ports.push(ports.len() as u32);
                    ports.push(Port {
                        node: n,
                        port_num: p as u8,
                        guid: port_guid,
                        port_info,
                        peer: None,
                    });
                }
                let mut switch_info = [0u8; SWITCH_INFO_SIZE];
                switch_info.copy_from_slice(&s.info.raw[..SWITCH_INFO_SIZE]);
                switch_lfts.push((n, LftTable::from_slice(&lft_image(s))));
                nodes.push(Node {
                    node_info: s.node_info,
                    description: desc_image(&s.node_desc),
                    switch_info: Some(switch_info),
                    ports: node_ports.into(),
                });
            }
            Source::Ca(list) => {
                for &ci in list {
                    let c = &st.cas[ci];
                    ca_port.insert(c.port_guid, ports.len() as u32);
                    node_ports.push(ports.len() as u32);
                    ports.push(Port {
                        node: n,
                        port_num: c.port_num,
                        guid: c.port_guid,
                        port_info: port_image(&c.info.raw),
                        peer: None,
                    });
                }
                let first = &st.cas[list[0]];
                nodes.push(Node {
                    node_info: first.node_info,
                    description: desc_image(&first.node_desc),
                    switch_info: None,
                    ports: node_ports.into(),
                });
            }
        }
    }
    // Peers of live links.
    for (i, s) in st.switches.iter().enumerate() {
        if !s.up {
            continue;
        }
        for (p, rec) in s.ports.iter().enumerate().skip(1) {
            let Some(&here) = sw_port.get(&(s.guid, p as u8)) else {
                continue;
            };
            match rec.peer {
                Some(Peer::Switch { guid, port }) if cable_live(st, i, p) && switch_up(guid) => {
                    if let Some(&far) = node_of.get(&guid) {
                        ports[here as usize].peer = Some((far, port));
                    }
                }
                Some(Peer::Ca { port_guid }) if rec.info.as_ref().is_some_and(live) => {
                    if let (Some(&cp), Some(&sn)) = (ca_port.get(&port_guid), node_of.get(&s.guid)) {
                        let (cn, cpn) = (ports[cp as usize].node, ports[cp as usize].port_num);
                        ports[here as usize].peer = Some((cn, cpn));
                        ports[cp as usize].peer = Some((sn, p as u8));
                    }
                }
                _ => {}
            }
        }
    }
    let escape = st.lmc.is_some_and(|l| l >= 1).then_some(Escape { sl: ESCAPE_SL });
    let mut subnet = Subnet::new(nodes, ports, sm, escape);
    for (n, t) in switch_lfts {
        subnet.set_lft(n, Some(t));
    }
    // The subnet prefix of the manager's own port, when it has one.
    let local_info = match st.local {
        Some(Peer::Ca { port_guid }) => st.ca_by_guid.get(&port_guid).map(|&ci| st.cas[ci].info.raw),
        Some(Peer::Switch { guid, .. }) => st
            .sw_by_guid
            .get(&guid)
            .and_then(|&i| st.switches[i].ports.first())
            .and_then(|r| r.info.as_ref())
            .map(|i| i.raw),
        None => None,
    };
    if let Some(raw) = local_info {
        let prefix = u64::from_be_bytes(raw[8..16].try_into().unwrap_or([0; 8]));
        if prefix != 0 {
            subnet.subnet_prefix = prefix;
        }
    }
    subnet
}

fn desc_image(raw: &[u8; 64]) -> [u8; NODE_DESC_SIZE] {
    let mut a = [0u8; NODE_DESC_SIZE];
    a.copy_from_slice(&raw[..NODE_DESC_SIZE]);
    a
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use fabric_sa::registry::Registry;
    use fabric_sa::subnet::NO_PORT;
    use fabric_topology::FabricEvent;
    use tokio::sync::mpsc;

    use super::super::state::tests::{pi, two_by_two, CA, L0, L1, S0, S1};
    use super::super::state::{apply_port_reads, recompute_paths};
    use super::*;
    use crate::config::UmadConfig;
    use crate::mad::*;
    use crate::transport::{RawPort, Transport, TransportParams};

    const CA_LID: u16 = 0x10;

    /// The two-by-two fabric with LIDs configured (switches 1..=4 in GUID order, the CA
    /// `CA_LID` with LMC 1) and leaf 0 holding LFT block 0 with LinearFDBTop 0x50.
    fn configured() -> State {
        let mut st = two_by_two();
        recompute_paths(&mut st);
        for (k, g) in [L0, L1, S0, S1].into_iter().enumerate() {
            let i = st.sw_by_guid[&g];
            let s = &mut st.switches[i];
            s.lid = 1 + k as u16;
            if let Some(p0) = s.ports[0].info.as_mut() {
                p0.set_lid(1 + k as u16);
            }
        }
        st.cas[0].info.set_lid(CA_LID);
        st.cas[0].info.set_lmc(1);
        st.sm_lid = CA_LID;
        st.lmc = Some(1);
        let i = st.sw_by_guid[&L0];
        st.switches[i].info.set_linear_fdb_top(0x50);
        let mut block = [0u8; BLOCK_SIZE];
        for (l, e) in block.iter_mut().enumerate() {
            *e = (l % 5) as u8;
        }
        st.switches[i].lft.insert(0, block);
        st
    }

    fn sm() -> SmData {
        SmData {
            guid: CA,
            lid: CA_LID,
            priority: 5,
            state: SM_STATE_MASTER,
            act_count: 42,
        }
    }

    /// `s` without the LFT of switch `g`, its version and SM data (which a patch of LFT
    /// blocks keeps as they were).
    fn without_lft(s: &Subnet, g: Guid) -> Subnet {
        let mut c = s.clone();
        if let Some(i) = c.node_index_by_guid(g) {
            c.set_lft(i, None);
        }
        c.version = 0;
        c.sm = SmData::default();
        c
    }

    fn node(s: &Subnet, g: Guid) -> &Node {
        &s.nodes[s.node_index_by_guid(g).expect("node") as usize]
    }

    /// The LFT the snapshot holds for node `g`, as one vector.
    fn table_of(s: &Subnet, g: Guid) -> Option<Vec<u8>> {
        s.lft(s.node_index_by_guid(g).expect("node")).map(LftTable::to_vec)
    }

    #[test]
    fn the_m_key_of_a_port_never_reaches_the_snapshot() {
        let mut pi = PortInfo::decode(&[0; 64]);
        pi.set_m_key(0x1122_3344_5566_7788);
        pi.set_lid(0x42);
        let img = port_image(&pi.raw);
        assert!(img[..8].iter().all(|&b| b == 0));
        assert_eq!(&img[16..18], &[0, 0x42], "the rest is kept");
    }

    #[test]
    fn the_snapshot_has_every_node_port_lid_link_and_lft() {
        let st = configured();
        let s = build_subnet(&st, sm());
        // Nodes in node GUID order: the four switches, then the CA's node (GUID CA - 1).
        let guids: Vec<Guid> = s.nodes.iter().map(Node::guid).collect();
        assert_eq!(guids, vec![L0, L1, S0, S1, CA - 1]);
        assert!(s.nodes[..4].iter().all(Node::is_switch) && !s.nodes[4].is_switch());
        assert_eq!(&node(&s, L0).description[..10], b"switch 0x1");
        // Every switch port (0 first), external ports with the switch's LID.
        let l0 = node(&s, L0);
        let nums: Vec<u8> = l0.ports.iter().map(|&p| s.ports[p as usize].port_num).collect();
        assert_eq!(nums, vec![0, 1, 2, 3, 4]);
        assert!(l0
            .ports
            .iter()
            .all(|&p| s.ports[p as usize].lid() == 1 && s.ports[p as usize].guid == L0));
        // LIDs: switches at port 0, the CA's whole LMC range.
        for (k, g) in [L0, L1, S0, S1].into_iter().enumerate() {
            let p = s.port_by_lid(1 + k as u16).expect("switch LID");
            assert_eq!((s.nodes[p.node as usize].guid(), p.port_num), (g, 0));
        }
        for lid in [CA_LID, CA_LID + 1] {
            assert_eq!(s.port_by_lid(lid).map(|p| p.guid), Some(CA), "LID {lid}");
        }
        assert_eq!(
            s.lid_port.get(usize::from(CA_LID) + 2).copied().unwrap_or(NO_PORT),
            NO_PORT
        );
        // Links both ways: the CA on leaf 0 port 1, leaf 0 port 2 to spine 0 port 1.
        let ca = s.port_index_by_guid(CA).expect("CA port") as usize;
        let n = |g| s.node_index_by_guid(g).expect("node");
        assert_eq!(s.ports[ca].peer, Some((n(L0), 1)));
        assert_eq!(s.node_port(n(L0), 1).and_then(|p| p.peer), Some((n(CA - 1), 1)));
        assert_eq!(s.node_port(n(L0), 2).and_then(|p| p.peer), Some((n(S0), 1)));
        assert_eq!(s.node_port(n(S1), 2).and_then(|p| p.peer), Some((n(L1), 3)));
        assert_eq!(s.node_port(n(L1), 1).and_then(|p| p.peer), None, "nothing cabled");
        // LFT: the cached block, 0xff up to LinearFDBTop; nothing known elsewhere.
        let lft = table_of(&s, L0).expect("LFT");
        assert_eq!(lft.len(), 2 * BLOCK_SIZE);
        assert_eq!(&lft[..BLOCK_SIZE], &st.switches[st.sw_by_guid[&L0]].lft[&0][..]);
        assert!(lft[BLOCK_SIZE..].iter().all(|&e| e == 0xff));
        assert_eq!(table_of(&s, S0).map(|l| l.len()), Some(0));
        assert_eq!(table_of(&s, CA - 1), None);
        assert_eq!(
            node(&s, L0).switch_info.map(|i| u16::from_be_bytes([i[6], i[7]])),
            Some(0x50)
        );
        // SM data as given; LMC 1: the escape SL.
        assert_eq!(s.sm, sm());
        assert_eq!(s.escape, Some(Escape { sl: ESCAPE_SL }));
    }

    #[test]
    fn blocks_beyond_the_top_and_no_lmc_are_reported_as_they_are() {
        let mut st = configured();
        st.lmc = Some(0);
        let i = st.sw_by_guid[&S0];
        st.switches[i].lft.insert(2, [7; BLOCK_SIZE]);
        let s = build_subnet(&st, sm());
        let lft = table_of(&s, S0).expect("LFT");
        assert_eq!(
            lft.len(),
            3 * BLOCK_SIZE,
            "a cached block beyond LinearFDBTop is on the switch"
        );
        assert!(lft[..2 * BLOCK_SIZE].iter().all(|&e| e == 0xff));
        assert!(lft[2 * BLOCK_SIZE..].iter().all(|&e| e == 7));
        assert_eq!(s.escape, None);
    }

    #[test]
    fn an_end_port_going_down_leaves_the_snapshot_at_once() {
        let mut st = configured();
        let mut events = Vec::new();
        let mut to_arm = Vec::new();
        apply_port_reads(
            &mut st,
            vec![
                (L0, 1, pi(PortState::Down, PHYS_POLLING)),
                (L1, 2, pi(PortState::Down, PHYS_POLLING)),
            ],
            &mut events,
            &mut to_arm,
        );
        assert!(events.contains(&FabricEvent::EndPortDown(CA)));
        let s = build_subnet(&st, sm());
        assert_eq!(s.node_index_by_guid(CA - 1), None);
        assert_eq!(s.port_by_lid(CA_LID), None);
        let n = |g| s.node_index_by_guid(g).expect("node");
        // The ports stay (down, as read), without peers.
        let l0p1 = s.node_port(n(L0), 1).expect("port");
        assert_eq!((l0p1.peer, l0p1.port_info[32] & 0x0f), (None, PortState::Down.bits()));
        assert_eq!(s.node_port(n(L1), 2).and_then(|p| p.peer), None);
        assert_eq!(s.node_port(n(S0), 2).and_then(|p| p.peer), None, "the far end too");
        assert_eq!(s.node_port(n(L1), 3).and_then(|p| p.peer), Some((n(S1), 2)));
    }

    #[test]
    fn a_down_switch_is_left_out_with_the_end_ports_behind_it() {
        let mut st = configured();
        let i = st.sw_by_guid[&L0];
        st.switches[i].up = false;
        let s = build_subnet(&st, sm());
        let guids: Vec<Guid> = s.nodes.iter().map(Node::guid).collect();
        assert_eq!(guids, vec![L1, S0, S1]);
        let n = |g| s.node_index_by_guid(g).expect("node");
        assert_eq!(s.node_port(n(S0), 1).and_then(|p| p.peer), None);
        assert_eq!(s.node_port(n(S0), 2).and_then(|p| p.peer), Some((n(L1), 2)));
    }

    #[test]
    fn only_a_master_that_is_not_standing_by_serves() {
        assert!(should_serve(SM_STATE_MASTER, false));
        assert!(!should_serve(SM_STATE_MASTER, true));
        for st in [SM_STATE_NOT_ACTIVE, SM_STATE_DISCOVERING, SM_STATE_STANDBY] {
            assert!(!should_serve(st, false), "state {st}");
        }
    }

    /// A port that never answers (the driver is used here without sending anything).
    struct Silent;
    impl RawPort for Silent {
        fn write(&mut self, _: &[u8]) -> std::io::Result<()> {
            Ok(())
        }
        fn read(&mut self, _: &mut [u8]) -> Option<usize> {
            None
        }
        fn wait(&mut self, t: Duration) {
            std::thread::sleep(t.min(Duration::from_millis(5)));
        }
        fn agent(&self, class: u8) -> u32 {
            u32::from(class)
        }
    }

    fn inner_with(st: State) -> Inner {
        let (ttx, trx) = mpsc::unbounded_channel();
        let params = TransportParams {
            timeout: Duration::from_millis(20),
            retries: 0,
            window: 4,
            perf_window: 4,
        };
        let inner = Inner::new(UmadConfig::default(), Transport::start(Silent, params, ttx), trx);
        *lock(&inner.state) = st;
        inner
    }

    #[test]
    fn the_attached_service_follows_the_state_and_serves_only_as_master() {
        let inner = inner_with(configured());
        let sa = Arc::new(SaService::new(Registry::default(), None));
        assert!(attach(&inner, sa.clone()));
        assert!(
            !attach(&inner, Arc::new(SaService::new(Registry::default(), None))),
            "one service"
        );
        // Attaching publishes at once; not master yet: not serving.
        let first = sa.subnet();
        assert_eq!((first.version, first.nodes.len()), (1, 5));
        assert!(!sa.serving());
        // Master (LIDs configured): serving; standing by: not.
        inner.tp.sm_identity().state.store(SM_STATE_MASTER, Ordering::Relaxed);
        sync_serving(&inner);
        assert!(sa.serving());
        inner.standby.store(true, Ordering::Relaxed);
        inner.tp.sm_identity().state.store(SM_STATE_STANDBY, Ordering::Relaxed);
        sync_serving(&inner);
        assert!(!sa.serving());
        inner.standby.store(false, Ordering::Relaxed);
        inner
            .tp
            .sm_identity()
            .state
            .store(SM_STATE_DISCOVERING, Ordering::Relaxed);
        sync_serving(&inner);
        assert!(!sa.serving(), "taken over: serving again once the LIDs are configured");
        // An acknowledged write reaches the snapshot, the other tables stay shared; a block
        // read is recorded (cache).
        record_lft_blocks(&inner, &[(S1, 1, [3; BLOCK_SIZE])], true);
        let s = sa.subnet();
        assert_eq!(s.version, 1, "a patch of the tables is not a new picture of the fabric");
        let lft_s1 = table_of(&s, S1).expect("LFT");
        assert_eq!(&lft_s1[BLOCK_SIZE..], &[3; BLOCK_SIZE][..]);
        assert!(lft_s1[..BLOCK_SIZE].iter().all(|&e| e == 0xff));
        assert!(std::ptr::eq(
            s.lft(s.node_index_by_guid(L0).unwrap()).expect("LFT"),
            first.lft(first.node_index_by_guid(L0).unwrap()).expect("LFT")
        ));
        assert_eq!(without_lft(&s, S1), without_lft(&first, S1), "nothing else changed");
        {
            let st = lock(&inner.state);
            assert_eq!(st.switches[st.sw_by_guid[&S1]].lft[&1], [3; BLOCK_SIZE], "cached");
        }
        // The snapshot patched equals the one built from the state.
        publish(&inner);
        assert_eq!(without_lft(&sa.subnet(), S1), without_lft(&s, S1));
        assert_eq!(table_of(&sa.subnet(), S1), table_of(&s, S1));
        record_lft_blocks(&inner, &[(S0, 0, [4; BLOCK_SIZE])], false);
        {
            let st = lock(&inner.state);
            assert_eq!(st.switches[st.sw_by_guid[&S0]].lft[&0], [4; BLOCK_SIZE]);
        }
        publish(&inner);
        let s = sa.subnet();
        assert_eq!(s.version, 3);
        assert_eq!(
            table_of(&s, S0).map(|l| l[..BLOCK_SIZE].to_vec()),
            Some(vec![4; BLOCK_SIZE])
        );
        // The SM's identity and counters are the transport's.
        assert_eq!(s.sm.state, SM_STATE_DISCOVERING);
        assert_eq!(s.sm.lid, CA_LID);
    }

    /// The driver's state of a whole generated fat-tree after LIDs (LMC 1) and an upload of
    /// every block up to the top LID (entries: the LID modulo the port count, plus one).
    fn state_of(spec: &str) -> (fabric_topology::Fabric, fabric_routing::LidPlan, State) {
        use super::super::state::tests::test_node_info;
        use super::super::state::{link, CaRec, PortRec, Sl2VlDone};
        use fabric_topology::{Remote, SwitchId};

        let f = fabric_topology::gen::generate_str(spec, None).expect("generate");
        let lids = fabric_routing::assign_lids(&f, &fabric_routing::Guid2Lid::new(), 1, 0xbfff).expect("LIDs");
        let top = lids.top() as usize;
        let mut st = State::default();
        for (k, s) in f.switches().iter().enumerate() {
            let lid = lids.switch_lid(SwitchId(k as u32)) as u16;
            let mut info = SwitchInfo::decode(&[0; SMP_DATA_SIZE]);
            info.set_linear_fdb_top(top as u16);
            let mut ports = vec![
                PortRec {
                    info: Some(pi(PortState::Active, PHYS_LINK_UP)),
                    peer: None
                };
                usize::from(s.nports) + 1
            ];
            if let Some(p0) = ports[0].info.as_mut() {
                p0.set_lid(lid);
            }
            let lft = (0..=top / BLOCK_SIZE)
                .map(|b| {
                    let mut e = [0u8; BLOCK_SIZE];
                    for (j, x) in e.iter_mut().enumerate() {
                        *x = ((b * BLOCK_SIZE + j) % usize::from(s.nports) + 1) as u8;
                    }
                    (b as u32, e)
                })
                .collect();
            st.sw_by_guid.insert(s.guid, st.switches.len());
            st.switches.push(SwitchRec {
                guid: s.guid,
                desc: s.desc.clone(),
                node_info: test_node_info(NODE_TYPE_SWITCH, s.guid, s.guid, 0, s.nports),
                node_desc: encode_node_desc(&s.desc),
                nports: s.nports,
                path: Vec::new(),
                lid,
                info,
                ports,
                lft,
                up: true,
                reached: true,
                responsive: true,
                sl2vl: Sl2VlDone::default(),
            });
        }
        for e in f.end_port_ids() {
            let ep = f.end_port(e);
            let mut info = pi(PortState::Active, PHYS_LINK_UP);
            info.set_lid(lids.base_lid(e) as u16);
            info.set_lmc(1);
            let attach = ep.attach.map(|(sw, p)| (f.switch(sw).guid, p));
            st.ca_by_guid.insert(ep.port_guid, st.cas.len());
            st.cas.push(CaRec {
                port_guid: ep.port_guid,
                node_guid: ep.node_guid,
                desc: ep.desc.clone(),
                node_info: test_node_info(NODE_TYPE_CA, ep.node_guid, ep.port_guid, ep.port_num, ep.node_ports),
                node_desc: encode_node_desc(&ep.desc),
                port_num: ep.port_num,
                nports: ep.node_ports,
                path: Vec::new(),
                info,
                attach,
                up: true,
                sl2vl: false,
            });
        }
        for s in f.switches() {
            for (pn, port) in s.external_ports() {
                match port.remote {
                    Remote::Switch { sw, port } => link(
                        &mut st,
                        s.guid,
                        pn,
                        Peer::Switch {
                            guid: f.switch(sw).guid,
                            port,
                        },
                    ),
                    Remote::EndPort(e) => link(
                        &mut st,
                        s.guid,
                        pn,
                        Peer::Ca {
                            port_guid: f.end_port(e).port_guid,
                        },
                    ),
                    Remote::None => {}
                }
            }
        }
        st.local = Some(Peer::Ca {
            port_guid: f.end_port(fabric_topology::EndPortId(0)).port_guid,
        });
        st.sm_lid = lids.base_lid(fabric_topology::EndPortId(0)) as u16;
        st.lmc = Some(1);
        (f, lids, st)
    }

    #[test]
    fn a_generated_fat_tree_is_in_the_snapshot_whole() {
        // 3 456 end ports, 720 switches of 24 ports.
        let (f, lids, st) = state_of("PGFT(3;12,12,24;1,12,12;1,1,1)");
        let t = std::time::Instant::now();
        let copy = st.clone();
        let cloned = t.elapsed();
        let s = build_subnet(&copy, sm());
        eprintln!(
            "SA snapshot of {} switches and {} end ports: state cloned in {cloned:?}, built in {:?}",
            f.num_switches(),
            f.num_end_ports(),
            t.elapsed() - cloned
        );
        // One switch's upload batch patched into the snapshot (what an acknowledged write costs).
        let g = f.switches()[0].guid;
        let batch: Vec<(Guid, u32, [u8; BLOCK_SIZE])> = (0..=lids.top() / BLOCK_SIZE as u32)
            .map(|b| (g, b, [1; BLOCK_SIZE]))
            .collect();
        let service = SaService::new(Default::default(), None);
        service.publish(s.clone());
        let t = std::time::Instant::now();
        service.apply_lft_blocks(&batch);
        eprintln!("one switch's {} blocks patched in {:?}", batch.len(), t.elapsed());
        let patched = service.subnet();
        let lft = table_of(&patched, g).expect("LFT");
        assert!(lft.iter().all(|&e| e == 1));
        assert_eq!(s.nodes.len(), f.num_switches() + f.num_end_ports());
        for e in f.end_port_ids() {
            let ep = f.end_port(e);
            let base = lids.base_lid(e) as u16;
            for lid in [base, base + 1] {
                assert_eq!(s.port_by_lid(lid).map(|p| p.guid), Some(ep.port_guid), "LID {lid}");
            }
            let p = &s.ports[s.port_index_by_guid(ep.port_guid).expect("end port") as usize];
            let (sw, pn) = ep.attach.expect("attached");
            let sw_node = s.node_index_by_guid(f.switch(sw).guid).expect("switch");
            assert_eq!(p.peer, Some((sw_node, pn)));
        }
        let top = lids.top() as usize;
        for (k, sw) in f.switches().iter().enumerate() {
            let n = &s.nodes[s.node_index_by_guid(sw.guid).expect("switch") as usize];
            let lft = table_of(&s, sw.guid).expect("LFT");
            let rec = &st.switches[k];
            assert_eq!(lft.len(), (top / BLOCK_SIZE + 1) * BLOCK_SIZE);
            for (&b, e) in &rec.lft {
                assert_eq!(&lft[b as usize * BLOCK_SIZE..][..BLOCK_SIZE], &e[..]);
            }
            assert_eq!(n.ports.len(), usize::from(sw.nports) + 1);
            let links = n.ports.iter().filter(|&&i| s.ports[i as usize].peer.is_some()).count();
            let cabled = sw
                .external_ports()
                .filter(|(_, p)| p.remote != fabric_topology::Remote::None)
                .count();
            assert_eq!(links, cabled, "switch {:#x}", sw.guid);
        }
    }
}
