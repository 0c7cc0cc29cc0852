//! Two `fabricd` managers with `[ha]` on one private etcd cluster and one `fabric-agent-sim`
//! (the acceptance tests of high availability, issue 20): the generalisation of
//! `crash_kill9.rs` to a leader and a standby.
//!
//! * [`HaRig`] starts `fabric_etcd_harness::EtcdCluster` (n members on loopback), the simulator
//!   (one gRPC agent per switch), and writes one config per manager (`a` and `b`: same
//!   inventory, same `[ha]` etcd endpoints and key prefix, their own node name, state
//!   directory, socket and log under the test directory). [`Node::start`] starts a manager,
//!   [`Node::kill9`] / [`Node::freeze`] / [`Node::thaw`] are the failures the tests inflict.
//! * [`ha_of`] reads the HA fields of a `GetStatus` answer ([`HaView`]): the only place that
//!   knows how the daemon reports them.
//! * [`routing`] is "a fresh routing of the current topology", computed in the test from the
//!   generator string and the faults with the libraries (rank + route_all on the LIDs of the
//!   intact fabric), exactly as `crash_kill9.rs` does; [`Agents::lfts`] reads what the
//!   switches really hold.
//! * [`epoch_stats`] is the simulator's `GetEpochStats`: per switch, the highest manager epoch
//!   it has seen and the writes it accepted and refused.
//!
//! The tests of one binary run one at a time ([`serial`]): they measure a takeover against a
//! bound (TTL + 1 s) on a small shared machine, and several clusters of processes at once
//! would measure the machine instead.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use fabric_etcd_harness::EtcdCluster;
use fabric_oob::proto::{GetEpochStatsRequest, SwitchEpochStats};
use fabric_proto::v1 as pb;
use fabric_proto::Client;
use fabric_ranking::{rank, RankOptions};
use fabric_routing::{assign_lids, route_all, EngineKind, Guid2Lid, LidPlan, RoutingContext};
use fabric_topology::{gen, Fabric, FabricEvent};

use super::agent_sim::{oob_config, AgentSim, SimCtl};
use super::{lfts, test_dir, topology, Daemon, TestDir};

/// `[ha] lease_ttl_s` of the tests: a takeover must happen within this plus one second.
pub const LEASE_TTL_S: u64 = 2;

/// Holds the HA tests of one test binary to one at a time (see the module documentation).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The manager's role as its status reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    /// No `[ha]` block, or the field absent.
    #[default]
    None,
    Standby,
    Leader,
    SteppingDown,
}

/// The HA part of one `GetStatus` answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HaView {
    pub role: Role,
    /// This manager's `[ha] node_name`.
    pub node: String,
    /// The leader it knows of (node name; empty when none).
    pub leader: String,
    /// The leader's epoch (the etcd revision of the leader key).
    pub epoch: u64,
    /// Writes refused because this manager may not write (its fence).
    pub fenced_writes: u64,
    /// The leader cannot renew its lease: it keeps its tables and writes nothing.
    pub fenced: bool,
    pub etcd_reachable: bool,
    pub leader_changes: u64,
    /// One line on the HA state (why fenced, who took over, ...).
    pub message: String,
}

/// The HA fields of `s`.
pub fn ha_of(s: &pb::Status) -> HaView {
    let Some(h) = s.ha.as_ref() else {
        return HaView::default();
    };
    let role = match pb::HaRole::try_from(h.role) {
        Ok(pb::HaRole::Leader) => Role::Leader,
        Ok(pb::HaRole::Standby) => Role::Standby,
        Ok(pb::HaRole::SteppingDown) => Role::SteppingDown,
        _ => Role::None,
    };
    HaView {
        role,
        node: h.node_name.clone(),
        leader: h.leader_node.clone(),
        epoch: h.epoch,
        fenced_writes: h.fenced_writes,
        fenced: h.fenced,
        etcd_reachable: h.etcd_reachable,
        leader_changes: h.leader_changes,
        message: h.message.clone(),
    }
}

/// One manager of the pair: its config and files, and the process while it runs.
pub struct Node {
    /// `[ha] node_name` ("mgr-a", "mgr-b").
    pub name: String,
    /// Socket, state directory and log (`Daemon::spawn_with_config` puts them here).
    pub dir: PathBuf,
    pub config: PathBuf,
    /// Extra environment of the process (the test failpoint).
    pub env: Vec<(String, String)>,
    pub daemon: Option<Daemon>,
    /// SIGSTOPped (thawed before a kill on drop).
    frozen: bool,
}

impl Node {
    /// Starts the manager (does not wait for anything).
    pub fn start(&mut self) {
        assert!(self.daemon.is_none(), "{} is running", self.name);
        let env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        self.daemon = Some(Daemon::spawn_with_config(&self.dir, &self.config, &env));
        self.frozen = false;
    }

    /// The running process.
    pub fn d(&self) -> &Daemon {
        self.daemon
            .as_ref()
            .unwrap_or_else(|| panic!("{} is not running", self.name))
    }

    /// A client of its socket (waits until the socket answers).
    pub async fn client(&self) -> Client {
        self.d().client().await
    }

    /// `kill -9` and reap.
    pub fn kill9(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            if self.frozen {
                d.signal(rustix::process::Signal::CONT.as_raw());
            }
            d.kill9();
        }
        self.frozen = false;
    }

    /// SIGSTOP.
    pub fn freeze(&mut self) {
        self.d().signal(rustix::process::Signal::STOP.as_raw());
        self.frozen = true;
    }

    /// SIGCONT.
    pub fn thaw(&mut self) {
        self.d().signal(rustix::process::Signal::CONT.as_raw());
        self.frozen = false;
    }

    /// The log (every process of this node, appended).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.join("fabricd.log")).unwrap_or_default()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.frozen {
            if let Some(d) = &self.daemon {
                d.signal(rustix::process::Signal::CONT.as_raw());
            }
        }
    }
}

/// etcd, the simulator and two managers (see the module documentation). Dropped in field
/// order: the managers first, the test directory last.
pub struct HaRig {
    pub nodes: Vec<Node>,
    pub sim: AgentSim,
    pub etcd: EtcdCluster,
    /// The `[ha] key_prefix` both managers share.
    pub prefix: String,
    pub dir: TestDir,
}

impl HaRig {
    /// etcd with `members` members, `fabric-agent-sim --generate spec sim_args`, and the two
    /// managers' configs: the oob driver with `oob_extra` in `[driver.oob]`, `[ha]` with
    /// [`LEASE_TTL_S`], plus `extra` TOML (other tables). Nothing is started but etcd and the
    /// simulator.
    pub fn new(name: &str, members: usize, spec: &str, sim_args: &[&str], oob_extra: &str, extra: &str) -> HaRig {
        let dir = test_dir(name);
        let etcd = EtcdCluster::start(members);
        let sim = AgentSim::start(&dir, spec, sim_args);
        let prefix = format!("/fabricd-test/{}/{name}", std::process::id());
        let mut nodes = Vec::new();
        for n in ["a", "b"] {
            let ndir = dir.join(n);
            std::fs::create_dir_all(&ndir).expect("node dir");
            // fabricd refuses a socket directory writable by group or others.
            std::fs::set_permissions(&ndir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .expect("chmod node dir");
            let node_name = format!("mgr-{n}");
            let text = format!(
                "{}\n{}",
                oob_config(&sim.inventory, oob_extra, extra),
                ha_toml(&etcd.endpoints(), &prefix, &node_name, &ndir.join("s.sock"))
            );
            let config = ndir.join("fabricd.toml");
            std::fs::write(&config, text).expect("write config");
            nodes.push(Node {
                name: node_name,
                dir: ndir,
                config,
                env: Vec::new(),
                daemon: None,
                frozen: false,
            });
        }
        HaRig {
            nodes,
            sim,
            etcd,
            prefix,
            dir,
        }
    }

    /// Starts manager 0, waits until it leads with a committed generation, then starts manager
    /// 1 and waits until it is the standby following manager 0. Returns both statuses.
    pub async fn start_pair(&mut self, within: Duration) -> (pb::Status, pb::Status) {
        self.nodes[0].start();
        let mut c0 = self.nodes[0].client().await;
        let s0 = wait_ha(
            &self.nodes[0],
            &mut c0,
            "first leader with generation 1",
            within,
            |s, h| h.role == Role::Leader && s.generation >= 1 && s.phase == pb::Phase::Idle as i32,
        )
        .await;
        self.nodes[1].start();
        let mut c1 = self.nodes[1].client().await;
        let leader = self.nodes[0].name.clone();
        let s1 = wait_ha(
            &self.nodes[1],
            &mut c1,
            "standby following the leader",
            within,
            |_, h| h.role == Role::Standby && h.leader == leader,
        )
        .await;
        (s0, s1)
    }

    /// A client of the simulator's control service.
    pub async fn control(&self) -> SimCtl {
        self.sim.control().await
    }
}

/// The `[ha]` table of one manager.
pub fn ha_toml(endpoints: &[String], prefix: &str, node_name: &str, socket: &Path) -> String {
    let eps: Vec<String> = endpoints.iter().map(|e| format!("\"{e}\"")).collect();
    format!(
        r#"
[ha]
etcd_endpoints = [{}]
key_prefix = "{prefix}"
lease_ttl_s = {LEASE_TTL_S}
node_name = "{node_name}"
advertise = "unix://{}"
request_timeout_ms = 1000
"#,
        eps.join(", "),
        socket.display()
    )
}

/// Polls `node`'s status until `ok(status, ha)` holds or `within` passes (panics naming
/// `what`, the last status and the node's log).
pub async fn wait_ha(
    node: &Node,
    c: &mut Client,
    what: &str,
    within: Duration,
    ok: impl Fn(&pb::Status, &HaView) -> bool,
) -> pb::Status {
    let t = Instant::now();
    let mut last = None;
    loop {
        if let Some(s) = node_status(node, c).await {
            if ok(&s, &ha_of(&s)) {
                return s;
            }
            last = Some(s);
        }
        assert!(
            t.elapsed() < within,
            "{} {what}: not within {within:?} (last status {last:?}); log:\n{}",
            node.name,
            tail(&node.log_text(), 80)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `node`'s status, or `None` when its server does not answer within 2 s; then `c` is
/// connected again (the standby's status-only server stops when the manager is elected, and
/// the leader's when it steps down: the same socket is then served by the next one).
pub async fn node_status(node: &Node, c: &mut Client) -> Option<pb::Status> {
    let call = tokio::time::timeout(Duration::from_secs(2), c.get_status(pb::GetStatusRequest {})).await;
    if let Ok(Ok(s)) = call {
        return Some(s.into_inner());
    }
    let socket = node.dir.join("s.sock");
    let socket = socket.to_str().expect("utf-8 socket path");
    if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(2), fabric_proto::connect(socket)).await {
        *c = n;
    }
    None
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Per switch GUID, the simulator's epoch counters (`GetEpochStats`).
pub async fn epoch_stats(ctl: &mut SimCtl) -> HashMap<u64, SwitchEpochStats> {
    ctl.0
        .get_epoch_stats(GetEpochStatsRequest {})
        .await
        .expect("GetEpochStats")
        .into_inner()
        .switches
        .into_iter()
        .map(|s| (s.guid, s))
        .collect()
}

/// Full routing (base + escape LIDs) of `fabric` with `lids`, by switch GUID, rows padded to
/// `len` with 255 (also used by `crash_kill9.rs`).
pub fn routing(fabric: &Fabric, lids: &LidPlan, len: usize) -> HashMap<u64, Vec<u8>> {
    let ranking = rank(fabric, &RankOptions::default());
    let routed = route_all(
        &RoutingContext {
            fabric,
            ranking: &ranking,
            lids,
        },
        EngineKind::Dmodc,
    )
    .expect("route");
    fabric
        .switch_ids()
        .map(|s| (fabric.switch(s).guid, pad(routed.lfts.row(s), len)))
        .collect()
}

/// `row` padded with 255 to `len`.
pub fn pad(row: &[u8], len: usize) -> Vec<u8> {
    let mut v = row.to_vec();
    v.resize(len, 255);
    v
}

/// Entries of `row` on the escape LIDs (`escape == true`) or on every other LID.
pub fn part(row: &[u8], mask: &[bool], escape: bool) -> Vec<u8> {
    row.iter()
        .zip(mask)
        .filter(|(_, &m)| m == escape)
        .map(|(&e, _)| e)
        .collect()
}

/// An auto-acking five-phase subscriber on `socket`: subscribes (retrying for 10 s while the
/// manager is not serving yet), then acks every UNPATH and REPATH at once; ends with the
/// daemon (its stream breaks) or when aborted.
pub fn auto_ack(socket: &Path, name: &str) -> tokio::task::JoinHandle<()> {
    let socket = socket.to_str().expect("utf-8 socket path").to_string();
    let name = name.to_string();
    tokio::spawn(async move {
        let t = Instant::now();
        let (mut c, mut s) = loop {
            if let Ok(mut c) = fabric_proto::connect(&socket).await {
                let req = pb::SubscribeRequest {
                    name: name.clone(),
                    end_ports: Vec::new(),
                };
                if let Ok(r) = c.subscribe(req).await {
                    break (c, r.into_inner());
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "subscriber {name}: {socket} refused Subscribe for 10 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        while let Ok(Some(n)) = s.message().await {
            // The first notice tells the current phase: one in progress is acked too.
            if n.phase == pb::Phase::Unpath as i32 || n.phase == pb::Phase::Repath as i32 {
                let _ = c
                    .ack(pb::AckRequest {
                        subscriber_id: n.subscriber_id,
                        generation: n.generation,
                        phase: n.phase,
                    })
                    .await;
            }
        }
    })
}

/// The generation number in the line `generation N was interrupted in phase <phase>` of a
/// manager's log (what a manager that finishes an interrupted update says), if any.
pub fn interrupted_in_log(log: &str, phase: &str) -> Option<u64> {
    let needle = format!(" was interrupted in phase {phase}");
    let at = log.find(&needle)?;
    let head = &log[..at];
    let num = head.rsplit("generation ").next()?;
    num.trim().parse().ok()
}

/// Highest address of the `oob` driver (its default `max_lid`).
pub const MAX_LID: u32 = 0xFF_FFFF;

/// What the switches must hold, computed in the test: the generated fabric, the LIDs of its
/// intact form (the plan every manager must keep), and the LFT row length in use.
pub struct Expect {
    pub intact: Fabric,
    pub lids: LidPlan,
    /// Row length (a multiple of 64) and its number of 64-entry blocks.
    pub len: usize,
    pub blocks: u32,
    /// Which entries are escape LIDs.
    pub escape_mask: Vec<bool>,
}

impl Expect {
    /// From the generator string, checked against the leader on `c`: its LIDs are the plan of
    /// the intact fabric and its installed tables that routing.
    pub async fn new(spec: &str, c: &mut Client) -> Expect {
        let intact = gen::generate_str(spec, None).expect("generate");
        let lids = assign_lids(&intact, &Guid2Lid::default(), 1, MAX_LID).expect("LIDs");
        let (_, installed) = lfts(c).await;
        let len = installed.values().map(Vec::len).max().unwrap_or(0).div_ceil(64) * 64;
        let mut escape_mask = vec![false; len];
        for ep in intact.end_port_ids() {
            if let Some(l) = lids.escape_lid(ep) {
                escape_mask[l as usize] = true;
            }
        }
        let e = Expect {
            intact,
            lids,
            len,
            blocks: (len / 64) as u32,
            escape_mask,
        };
        e.check_lids(c, "the first leader").await;
        let installed: HashMap<u64, Vec<u8>> = installed.into_iter().map(|(g, r)| (g, pad(&r, len))).collect();
        assert_eq!(
            installed,
            e.routing(&[]),
            "the first generation is the routing of the intact fabric"
        );
        e
    }

    /// Every end port of the manager on `c` has the LIDs of the plan.
    pub async fn check_lids(&self, c: &mut Client, who: &str) {
        let topo = topology(c).await;
        assert_eq!(
            topo.end_ports.len(),
            self.intact.end_port_ids().count(),
            "{who}: end ports"
        );
        for e in &topo.end_ports {
            let ep = self
                .intact
                .end_port_by_guid(e.guid)
                .expect("end port of the generated fabric");
            assert_eq!(
                (e.base_lid, e.escape_lid),
                (self.lids.base_lid(ep), self.lids.escape_lid(ep).unwrap_or(0)),
                "{who}: LIDs of {}",
                e.name
            );
        }
    }

    /// The routing of the fabric with the cables `down` (switch GUID, port) failed, on the
    /// LIDs of the plan.
    pub fn routing(&self, down: &[(u64, u32)]) -> HashMap<u64, Vec<u8>> {
        let events: Vec<FabricEvent> = down
            .iter()
            .map(|&(switch, port)| FabricEvent::LinkDown {
                switch,
                port: u8::try_from(port).expect("port number"),
            })
            .collect();
        let fabric = if events.is_empty() {
            self.intact.clone()
        } else {
            self.intact.apply(&events).expect("degrade")
        };
        routing(&fabric, &self.lids, self.len)
    }

    /// The manager's installed tables (padded).
    pub async fn installed(&self, c: &mut Client) -> HashMap<u64, Vec<u8>> {
        let (_, now) = lfts(c).await;
        now.into_iter().map(|(g, r)| (g, pad(&r, self.len))).collect()
    }
}

/// Waits until every agent holds `want` (the agents converge after a commit), panicking with
/// how many switches differ after `within`.
pub async fn wait_agents(
    agents: &mut super::agent_sim::Agents,
    blocks: u32,
    want: &HashMap<u64, Vec<u8>>,
    what: &str,
    within: Duration,
) {
    let t = Instant::now();
    loop {
        let held = agents.lfts(blocks).await;
        if &held == want {
            return;
        }
        let differ = want.iter().filter(|(g, r)| held.get(g) != Some(r)).count();
        assert!(
            t.elapsed() < within,
            "{what}: {differ} switches do not hold the expected routing after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every pair of end ports reachable through the agents' tables, on base and escape LIDs.
pub async fn verify_all_pairs(ctl: &mut SimCtl, end_ports: u64, what: &str) {
    for escape in [false, true] {
        let r = ctl.verify(escape).await;
        assert_eq!(
            (r.pairs_checked, r.unreachable_count),
            (end_ports * (end_ports - 1), 0),
            "{what}, escape {escape}: {:?}",
            r.unreachable.first()
        );
    }
}

/// Polls `node`'s status for `during`, asserting `ok(status, ha)` at every sample (what must
/// *not* change while something else happens); returns the last status.
pub async fn hold_ha(
    node: &Node,
    c: &mut Client,
    what: &str,
    during: Duration,
    ok: impl Fn(&pb::Status, &HaView) -> bool,
) -> pb::Status {
    let t = Instant::now();
    loop {
        let Some(s) = node_status(node, c).await else {
            assert!(t.elapsed() < during, "{} {what}: its server does not answer", node.name);
            continue;
        };
        assert!(
            ok(&s, &ha_of(&s)),
            "{} {what}: broken after {:?} (status {s:?}); log:\n{}",
            node.name,
            t.elapsed(),
            tail(&node.log_text(), 80)
        );
        if t.elapsed() >= during {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
