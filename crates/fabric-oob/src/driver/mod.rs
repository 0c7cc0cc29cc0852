//! [`OobDriver`]: the [`SouthboundDriver`] over per-switch management agents.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use fabric_routing::{LidPlan, BLOCK_SIZE};
use fabric_southbound::{DriverCaps, DriverError, LftBlockWrite, SouthboundDriver, TopologyGap, WriteReport};
use fabric_topology::{fmt_guid, Fabric, FabricBuilder, FabricEvent, Guid, Lid, LinkState, NodeType, PortNum, Remote};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use crate::inventory::{AgentKey, Inventory};
use crate::proto::switch_agent_client::SwitchAgentClient;
use crate::proto::{self, NeighbourKind, PortState};

/// Service level of escape-LID traffic (base LIDs use SL 0). `GetPath` hands these SLs to the
/// end nodes; the SL-to-VL tables the driver programs put SL 1 on the escape VL.
pub const ESCAPE_SL: u8 = 1;
/// Virtual lanes assumed for an agent that does not report `SwitchInfo.vls` (the InfiniBand
/// minimum for two traffic classes: VL 0 and VL 1).
const DEFAULT_VLS: u32 = 2;

/// The SL-to-VL table the driver programs on every switch: SL 1 (escape LIDs) on `escape_vl`,
/// every other SL (SL 0: base LIDs) on data VL 0. `None` (a switch with a single VL): every SL
/// on VL 0.
pub fn sl_to_vl_table(escape_vl: Option<u8>) -> [u8; 16] {
    let mut t = [0u8; 16];
    if let Some(v) = escape_vl {
        t[ESCAPE_SL as usize] = v;
    }
    t
}

/// Blocks per `WriteLftBlocks` request (64 bytes each: ~140 KiB per message).
const BLOCKS_PER_REQUEST: usize = 2048;
/// Largest message accepted from an agent.
const MAX_MESSAGE: usize = 64 << 20;

/// Configuration of the `oob` driver (the daemon embeds it in its TOML config).
///
/// Durations are strings with a unit (`"500ms"`, `"2s"`, `"1m"`) or integer milliseconds.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OobConfig {
    /// Inventory file mapping switch GUIDs (or names) to agent addresses (see [`Inventory`]).
    pub inventory: PathBuf,
    /// TCP connect timeout per agent.
    #[serde(
        default = "d_connect",
        deserialize_with = "duration::de",
        serialize_with = "duration::ser"
    )]
    pub connect_timeout: Duration,
    /// Timeout of one request to an agent.
    #[serde(
        default = "d_request",
        deserialize_with = "duration::de",
        serialize_with = "duration::ser"
    )]
    pub request_timeout: Duration,
    /// Maximum number of agent requests in flight at once (uploads, discovery, LID setup). The
    /// port-event streams (one long-lived stream per agent) are not counted.
    #[serde(default = "d_max_conn")]
    pub max_connections: usize,
    /// How long an agent may stay unreachable before its switch is reported down.
    #[serde(
        default = "d_deadline",
        deserialize_with = "duration::de",
        serialize_with = "duration::ser"
    )]
    pub unreachable_deadline: Duration,
    /// Highest unicast address of the fabric (BXI-like fabrics: up to `0xFFFFFF`).
    #[serde(default = "d_max_lid")]
    pub max_lid: Lid,
    /// Retries of a failed request (transient failures only) before giving up.
    #[serde(default = "d_retries")]
    pub max_retries: u32,
}

fn d_connect() -> Duration {
    Duration::from_secs(2)
}
fn d_request() -> Duration {
    Duration::from_secs(5)
}
fn d_max_conn() -> usize {
    64
}
fn d_deadline() -> Duration {
    Duration::from_secs(10)
}
fn d_max_lid() -> Lid {
    0xFF_FFFF
}
fn d_retries() -> u32 {
    3
}

/// Every default and an empty inventory path (which [`OobDriver::open`] refuses): what an
/// embedding configuration holds when no `oob` table is given.
impl Default for OobConfig {
    fn default() -> Self {
        OobConfig::new(PathBuf::new())
    }
}

impl OobConfig {
    /// A configuration with every default and the given inventory.
    pub fn new(inventory: impl Into<PathBuf>) -> Self {
        OobConfig {
            inventory: inventory.into(),
            connect_timeout: d_connect(),
            request_timeout: d_request(),
            max_connections: d_max_conn(),
            unreachable_deadline: d_deadline(),
            max_lid: d_max_lid(),
            max_retries: d_retries(),
        }
    }

    /// Checks the values (not the inventory file).
    pub fn validate(&self) -> Result<(), DriverError> {
        let mut p = Vec::new();
        if self.max_connections == 0 {
            p.push("max_connections must be at least 1".to_string());
        }
        if self.connect_timeout.is_zero() || self.request_timeout.is_zero() {
            p.push("connect_timeout and request_timeout must be positive".to_string());
        }
        if self.max_lid == 0 {
            p.push("max_lid must be at least 1".to_string());
        }
        if p.is_empty() {
            Ok(())
        } else {
            Err(DriverError::Config(p.join("; ")))
        }
    }
}

mod duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Ms(u64),
        Text(String),
    }

    /// Parses `"250ms"`, `"2s"`, `"1m"` or a bare number of milliseconds.
    pub fn parse(s: &str) -> Option<Duration> {
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len());
        let (n, unit) = s.split_at(split);
        let n: f64 = n.parse().ok()?;
        let secs = match unit.trim() {
            "" | "ms" => n / 1e3,
            "s" => n,
            "m" | "min" => n * 60.0,
            _ => return None,
        };
        // Beyond `Duration`'s range (e.g. "99999999999999999999999s") is an error, not a panic.
        Duration::try_from_secs_f64(secs).ok()
    }

    /// Writes a duration as `"<n>ms"` (what [`de`] reads back).
    pub fn ser<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}ms", d.as_millis()))
    }

    pub fn de<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        match Raw::deserialize(d)? {
            Raw::Ms(ms) => Ok(Duration::from_millis(ms)),
            Raw::Text(t) => parse(&t).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "invalid duration `{t}` (expected e.g. \"500ms\", \"2s\", \"1m\")"
                ))
            }),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the driver last learnt from an agent.
#[derive(Clone, Debug)]
struct Known {
    info: proto::SwitchInfo,
    /// Indexed by port number (entry 0 unused).
    ports: Vec<proto::PortInfo>,
}

/// Health of one agent as seen by its monitor.
#[derive(Debug, Default)]
struct Health {
    /// When the agent was first found unreachable (cleared when it answers).
    lost_since: Option<Instant>,
    unreachable: bool,
    powered_off: bool,
    /// Whether the switch is reported down: `SwitchDown` was emitted (and not yet `SwitchUp`),
    /// or discovery returned it down (the agent did not answer, or it is powered off).
    reported_down: bool,
    /// A request to the agent was given up (unreachable, timed out) since it last answered:
    /// when it answers again the daemon is told (`SwitchUp`), so that what it could not write
    /// there is written without waiting for the next retry.
    gave_up: bool,
    /// The last discovery did not reach the agent: what it lists when it answers is checked
    /// against the discovered fabric (see [`SouthboundDriver::topology_gaps`]).
    undiscovered: bool,
}

/// What the last discovery put in the fabric, to tell what an agent reports later that the
/// daemon's fabric lacks.
#[derive(Debug, Default)]
struct Discovered {
    end_ports: HashSet<Guid>,
    /// Cables keyed by their lower (GUID, port) end.
    links: HashSet<(Guid, PortNum)>,
}

/// The address set-up of one switch (`SetAddresses` and `SetSlToVl`) for the installed LID
/// plan. Kept per switch so that one unreachable agent fails only its own switch: the set-up
/// is carried out again before that switch's next LFT write.
#[derive(Clone, Debug)]
struct AddressSetup {
    addresses: proto::SetAddressesRequest,
    sl_to_vl: proto::SlToVlTable,
    /// Installed on the agent (cleared when the agent is lost, which may mean it restarted).
    done: bool,
    /// The agent answered `SetSlToVl` with UNIMPLEMENTED.
    sl_to_vl_unsupported: bool,
}

struct Agent {
    key: AgentKey,
    address: String,
    endpoint: Endpoint,
    channel: Mutex<Option<Channel>>,
    known: Mutex<Option<Known>>,
    health: Mutex<Health>,
    /// `None` before the first [`SouthboundDriver::configure_lids`].
    setup: Mutex<Option<AddressSetup>>,
}

impl Agent {
    fn guid(&self) -> Option<Guid> {
        if let Some(k) = lock(&self.known).as_ref() {
            return Some(k.info.guid);
        }
        match self.key {
            AgentKey::Guid(g) => Some(g),
            AgentKey::Name(_) => None,
        }
    }
}

struct Inner {
    cfg: OobConfig,
    agents: Vec<Agent>,
    by_guid: RwLock<HashMap<Guid, usize>>,
    permits: Semaphore,
    subscribers: Mutex<Vec<UnboundedSender<FabricEvent>>>,
    /// Last known state per cable (keyed by its lower (GUID, port) end) and per end port.
    link_up: Mutex<HashMap<(Guid, PortNum), bool>>,
    end_port_up: Mutex<HashMap<Guid, bool>>,
    discovered: Mutex<Discovered>,
    /// End ports and cables unknown to the last discovery, per switch (cleared by the next).
    gaps: Mutex<BTreeMap<Guid, TopologyGap>>,
    warnings: Mutex<Vec<String>>,
    /// Problems of the address configuration (SL-to-VL not supported, single VL).
    config_warnings: Mutex<Vec<String>>,
    generation: Mutex<u64>,
    monitors_started: Mutex<bool>,
    /// Dropped with the driver: stops the monitors.
    _stop: watch::Sender<()>,
    stop: watch::Receiver<()>,
}

/// The `oob` driver. See the [crate documentation](crate).
///
/// Construct with [`OobDriver::open`] (reads the inventory; no network I/O). The first
/// [`SouthboundDriver::discover`] starts one monitor task per agent (port-event stream,
/// reconnection with backoff, unreachable deadline); they stop when the driver is dropped.
#[derive(Clone)]
pub struct OobDriver {
    inner: Arc<Inner>,
}

/// Why one request attempt failed.
enum Failure {
    Connect,
    Status(Status),
    Timeout,
}

impl OobDriver {
    /// Reads the inventory and prepares the agents (no connection is made yet).
    pub fn open(cfg: OobConfig) -> Result<Self, DriverError> {
        cfg.validate()?;
        let inv = Inventory::read_file(&cfg.inventory).map_err(|e| DriverError::Config(e.to_string()))?;
        Self::with_inventory(cfg, inv)
    }

    /// Like [`OobDriver::open`] with an inventory already in memory (`cfg.inventory` is ignored).
    pub fn with_inventory(cfg: OobConfig, inv: Inventory) -> Result<Self, DriverError> {
        cfg.validate()?;
        let mut agents = Vec::with_capacity(inv.entries.len());
        for e in inv.entries {
            let endpoint = Endpoint::from_shared(format!("http://{}", e.address))
                .map_err(|err| DriverError::Config(format!("agent {} address {}: {err}", e.key, e.address)))?
                .connect_timeout(cfg.connect_timeout)
                .tcp_nodelay(true)
                .http2_keep_alive_interval(cfg.request_timeout.max(Duration::from_millis(500)))
                .keep_alive_timeout(cfg.request_timeout)
                .keep_alive_while_idle(true);
            agents.push(Agent {
                key: e.key,
                address: e.address,
                endpoint,
                channel: Mutex::new(None),
                known: Mutex::new(None),
                health: Mutex::new(Health::default()),
                setup: Mutex::new(None),
            });
        }
        let by_guid = inventory_guids(&agents);
        let (stop_tx, stop_rx) = watch::channel(());
        Ok(OobDriver {
            inner: Arc::new(Inner {
                permits: Semaphore::new(cfg.max_connections),
                cfg,
                agents,
                by_guid: RwLock::new(by_guid),
                subscribers: Mutex::new(Vec::new()),
                link_up: Mutex::new(HashMap::new()),
                end_port_up: Mutex::new(HashMap::new()),
                discovered: Mutex::new(Discovered::default()),
                gaps: Mutex::new(BTreeMap::new()),
                warnings: Mutex::new(Vec::new()),
                config_warnings: Mutex::new(Vec::new()),
                generation: Mutex::new(0),
                monitors_started: Mutex::new(false),
                _stop: stop_tx,
                stop: stop_rx,
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &OobConfig {
        &self.inner.cfg
    }

    /// Inconsistencies found by the last discovery: neighbour tables that disagree on a cable,
    /// unreachable agents, GUID mismatches. Each message names the switches (GUID and name) and
    /// ports.
    pub fn discovery_warnings(&self) -> Vec<String> {
        lock(&self.inner.warnings).clone()
    }

    /// Number of agents in the inventory.
    pub fn num_agents(&self) -> usize {
        self.inner.agents.len()
    }

    /// Problems of the last [`SouthboundDriver::configure_lids`]: agents that do not implement
    /// `SetSlToVl`, or a fabric whose switches operate a single VL (escape traffic then shares
    /// VL 0 with the data). Each message names the switch.
    pub fn configuration_warnings(&self) -> Vec<String> {
        lock(&self.inner.config_warnings).clone()
    }

    /// The VL escape-LID traffic (SL 1) is mapped to: `n - 1` where `n` is the smallest number
    /// of VLs reported by the discovered switches (2 assumed for agents that report none);
    /// `None` before discovery or when a switch operates one VL only.
    pub fn escape_vl(&self) -> Option<u8> {
        self.inner.escape_vl()
    }

    /// Reads a switch's SL-to-VL table back through its agent.
    pub async fn read_sl_to_vl(&self, switch: Guid) -> Result<[u8; 16], DriverError> {
        let idx = self.inner.agent_of(switch)?;
        let (t, _) = self
            .inner
            .call(idx, "SL-to-VL read", |mut c| async move {
                c.get_sl_to_vl(proto::GetSlToVlRequest {}).await
            })
            .await?;
        <[u8; 16]>::try_from(t.vl_of_sl.as_slice()).map_err(|_| DriverError::Protocol {
            guid: Some(switch),
            message: format!("SL-to-VL table has {} entries, expected 16", t.vl_of_sl.len()),
        })
    }
}

impl Inner {
    /// See [`OobDriver::escape_vl`].
    fn escape_vl(&self) -> Option<u8> {
        let n = self
            .agents
            .iter()
            .filter_map(|a| {
                lock(&a.known)
                    .as_ref()
                    .map(|k| if k.info.vls == 0 { DEFAULT_VLS } else { k.info.vls })
            })
            .min()?;
        // VL 15 is the management VL of InfiniBand: data and escape VLs are 0..=14.
        let n = n.min(15);
        (n >= 2).then(|| (n - 1) as u8)
    }

    fn emit(&self, ev: FabricEvent) {
        lock(&self.subscribers).retain(|s| s.send(ev.clone()).is_ok());
    }

    /// Installs switch `idx`'s address set-up if it is not (yet, or any more) on the agent.
    /// An error names the switch; only this switch's blocks fail with it.
    async fn ensure_addresses(&self, idx: usize) -> Result<(), DriverError> {
        let Some(setup) = lock(&self.agents[idx].setup).clone().filter(|s| !s.done) else {
            return Ok(());
        };
        self.call(idx, "set addresses", |mut c| {
            let r = setup.addresses.clone();
            async move { c.set_addresses(r).await }
        })
        .await?;
        // SL-to-VL with the addresses: an agent without the RPC is reported, not fatal.
        let (supported, _) = self
            .call(idx, "set SL-to-VL", |mut c| {
                let r = setup.sl_to_vl.clone();
                async move {
                    match c.set_sl_to_vl(r).await {
                        Ok(_) => Ok(tonic::Response::new(true)),
                        Err(s) if s.code() == Code::Unimplemented => Ok(tonic::Response::new(false)),
                        Err(s) => Err(s),
                    }
                }
            })
            .await?;
        {
            let mut cur = lock(&self.agents[idx].setup);
            // A newer plan configured meanwhile is installed by its own set-up.
            if let Some(c) = cur
                .as_mut()
                .filter(|c| c.addresses == setup.addresses && c.sl_to_vl == setup.sl_to_vl)
            {
                c.done = true;
                c.sl_to_vl_unsupported = !supported;
            }
        }
        self.refresh_config_warnings();
        Ok(())
    }

    /// Rebuilds [`OobDriver::configuration_warnings`] from the switches' VL counts and set-ups.
    fn refresh_config_warnings(&self) {
        let mut warnings = Vec::new();
        let single: Vec<String> = self
            .agents
            .iter()
            .filter_map(|a| {
                lock(&a.known)
                    .as_ref()
                    .filter(|k| k.info.vls == 1)
                    .map(|k| fmt_guid(k.info.guid))
            })
            .collect();
        if !single.is_empty() {
            warnings.push(format!(
                "switches operating a single VL ({}): escape traffic (SL {ESCAPE_SL}) shares VL 0 with the data",
                single.join(", ")
            ));
        }
        for a in &self.agents {
            if lock(&a.setup).as_ref().is_some_and(|s| s.sl_to_vl_unsupported) {
                warnings.push(format!(
                    "switch {}: the agent does not implement SetSlToVl; escape traffic (SL {ESCAPE_SL}) is not \
                     separated from the data there",
                    a.guid().map_or_else(|| a.key.to_string(), fmt_guid)
                ));
            }
        }
        warnings.sort();
        *lock(&self.config_warnings) = warnings;
    }

    fn agent_of(&self, guid: Guid) -> Result<usize, DriverError> {
        self.by_guid
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&guid)
            .copied()
            .ok_or(DriverError::UnknownSwitch(guid))
    }

    async fn channel(&self, a: &Agent) -> Result<Channel, String> {
        if let Some(c) = lock(&a.channel).clone() {
            return Ok(c);
        }
        let c = a.endpoint.connect().await.map_err(|e| {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg = format!("{msg}: {s}");
                src = s.source();
            }
            msg
        })?;
        *lock(&a.channel) = Some(c.clone());
        Ok(c)
    }

    fn client(ch: Channel) -> SwitchAgentClient<Channel> {
        SwitchAgentClient::new(ch)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    /// One request with bounded concurrency and retries of transient failures. Returns the reply
    /// and the number of retries.
    async fn call<T, F, Fut>(&self, idx: usize, op: &'static str, mut f: F) -> Result<(T, usize), DriverError>
    where
        F: FnMut(SwitchAgentClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let a = &self.agents[idx];
        let guid = a.guid();
        let _permit = self.permits.acquire().await.map_err(|_| DriverError::Protocol {
            guid,
            message: "driver is shutting down".into(),
        })?;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let res = match self.channel(a).await {
                Err(_) => Err(Failure::Connect),
                Ok(ch) => match tokio::time::timeout(self.cfg.request_timeout, f(Self::client(ch))).await {
                    Err(_) => Err(Failure::Timeout),
                    Ok(Err(s)) => Err(Failure::Status(s)),
                    Ok(Ok(r)) => Ok(r.into_inner()),
                },
            };
            let fail = match res {
                Ok(v) => return Ok((v, attempt as usize - 1)),
                Err(f) => f,
            };
            let transient = match &fail {
                Failure::Connect | Failure::Timeout => true,
                Failure::Status(s) => matches!(
                    s.code(),
                    Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown | Code::Aborted
                ),
            };
            if transient {
                *lock(&a.channel) = None;
            }
            let g = guid.unwrap_or(0);
            if let (false, Failure::Status(s)) = (transient, &fail) {
                return Err(status_error(guid, op, s));
            }
            if attempt > self.cfg.max_retries {
                lock(&a.health).gave_up = true;
                return Err(match fail {
                    Failure::Connect => DriverError::Unreachable { guid: g },
                    Failure::Timeout => DriverError::Timeout { guid: g, op },
                    Failure::Status(_) => DriverError::Transient {
                        guid: g,
                        op,
                        attempts: attempt,
                    },
                });
            }
            tokio::time::sleep(backoff(attempt)).await;
        }
    }
}

/// The GUID → agent map the inventory gives without contacting any agent (agents listed by
/// GUID): an agent that is down is still known as its switch's agent.
fn inventory_guids(agents: &[Agent]) -> HashMap<Guid, usize> {
    agents
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match a.key {
            AgentKey::Guid(g) => Some((g, i)),
            AgentKey::Name(_) => None,
        })
        .collect()
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis((25u64 << attempt.min(6)).min(1000))
}

fn status_error(guid: Option<Guid>, op: &'static str, s: &Status) -> DriverError {
    DriverError::Protocol {
        guid,
        message: format!("{op}: agent answered {:?}: {}", s.code(), s.message()),
    }
}

fn port_up(p: &proto::PortInfo) -> bool {
    p.state == PortState::Up as i32
}

/// Neighbour of a port as (kind, node GUID, port GUID, port).
fn neighbour(p: &proto::PortInfo) -> Option<&proto::Neighbour> {
    p.neighbour.as_ref().filter(|n| n.kind != NeighbourKind::None as i32)
}

/// Canonical key of a cable: its lower (GUID, port) end.
fn cable_key(a: (Guid, PortNum), b: (Guid, PortNum)) -> (Guid, PortNum) {
    a.min(b)
}

fn port_num(p: u32, guid: Guid) -> Result<PortNum, DriverError> {
    PortNum::try_from(p)
        .ok()
        .filter(|&p| p != 0 && p != 255)
        .ok_or(DriverError::Protocol {
            guid: Some(guid),
            message: format!("port number {p} out of range 1..=254"),
        })
}

fn describe_agent(a: &Agent) -> String {
    format!("agent {} at {}", a.key, a.address)
}

impl OobDriver {
    async fn sweep_one(inner: Arc<Inner>, idx: usize) -> Result<Known, DriverError> {
        let (info, _) = inner
            .call(idx, "describe", |mut c| async move {
                c.describe(proto::DescribeRequest {}).await
            })
            .await?;
        let (table, _) = inner
            .call(idx, "get ports", |mut c| async move {
                c.get_ports(proto::GetPortsRequest {}).await
            })
            .await?;
        let a = &inner.agents[idx];
        if let AgentKey::Guid(g) = a.key {
            if g != info.guid {
                return Err(DriverError::Protocol {
                    guid: Some(info.guid),
                    message: format!(
                        "{} is listed for switch {} but reports GUID {}",
                        describe_agent(a),
                        fmt_guid(g),
                        fmt_guid(info.guid)
                    ),
                });
            }
        }
        let n = info.port_count as usize;
        if n == 0 || n > 254 {
            return Err(DriverError::Protocol {
                guid: Some(info.guid),
                message: format!("port count {n} out of range 1..=254"),
            });
        }
        let mut ports = vec![proto::PortInfo::default(); n + 1];
        for p in table.ports {
            let pn = port_num(p.port, info.guid)? as usize;
            if pn > n {
                return Err(DriverError::Protocol {
                    guid: Some(info.guid),
                    message: format!("port {pn} above port count {n}"),
                });
            }
            ports[pn] = p;
        }
        Ok(Known { info, ports })
    }

    fn start_monitors(&self) {
        let mut started = lock(&self.inner.monitors_started);
        if *started {
            return;
        }
        *started = true;
        for idx in 0..self.inner.agents.len() {
            let weak = Arc::downgrade(&self.inner);
            let stop = self.inner.stop.clone();
            tokio::spawn(monitor(weak, idx, stop));
        }
    }
}

/// Records in the topology gaps what port `p` of switch `guid` (`name`), whose agent the last
/// discovery did not reach, connects that the discovered fabric lacks: an end port (only a
/// leaf's own agent lists its end ports) or a cable between two switches both undiscovered.
fn note_unknown(inner: &Inner, guid: Guid, name: &str, p: &proto::PortInfo) {
    let Ok(pn) = port_num(p.port, guid) else { return };
    let Some(n) = neighbour(p) else { return };
    let (end_port, link) = {
        let d = lock(&inner.discovered);
        if n.kind == NeighbourKind::Ca as i32 {
            ((!d.end_ports.contains(&n.port_guid)).then_some(n.port_guid), None)
        } else {
            let link = PortNum::try_from(n.port)
                .ok()
                .filter(|&rp| !d.links.contains(&cable_key((guid, pn), (n.node_guid, rp))))
                .map(|_| (pn, n.node_guid));
            (None, link)
        }
    };
    if end_port.is_none() && link.is_none() {
        return;
    }
    let mut gaps = lock(&inner.gaps);
    let g = gaps.entry(guid).or_insert_with(|| TopologyGap {
        switch: guid,
        ..TopologyGap::default()
    });
    if g.name.is_empty() {
        g.name = name.to_string();
    }
    if let Some(ep) = end_port.filter(|ep| !g.end_ports.contains(ep)) {
        g.end_ports.push(ep);
    }
    if let Some(l) = link.filter(|l| !g.links.contains(l)) {
        g.links.push(l);
    }
}

/// Applies a port observation of agent `guid` and emits the resulting event, once per cable.
fn observe_port(inner: &Inner, guid: Guid, p: &proto::PortInfo) {
    let Ok(pn) = port_num(p.port, guid) else { return };
    let Some(n) = neighbour(p) else { return };
    let up = port_up(p);
    if n.kind == NeighbourKind::Ca as i32 {
        let changed = lock(&inner.end_port_up).insert(n.port_guid, up) != Some(up);
        if changed {
            inner.emit(if up {
                FabricEvent::EndPortUp(n.port_guid)
            } else {
                FabricEvent::EndPortDown(n.port_guid)
            });
        }
    } else if let Ok(rp) = PortNum::try_from(n.port) {
        let key = cable_key((guid, pn), (n.node_guid, rp));
        let changed = lock(&inner.link_up).insert(key, up) != Some(up);
        if changed {
            inner.emit(if up {
                FabricEvent::LinkUp { switch: guid, port: pn }
            } else {
                FabricEvent::LinkDown { switch: guid, port: pn }
            });
        }
    }
}

/// Re-evaluates whether a switch is down (unreachable past the deadline, or powered off) and
/// emits `SwitchDown` / `SwitchUp` on a change.
fn update_switch_state(inner: &Inner, idx: usize) {
    let a = &inner.agents[idx];
    let Some(guid) = a.guid() else { return };
    let ev = {
        let mut h = lock(&a.health);
        let down = h.unreachable || h.powered_off;
        if down == h.reported_down {
            None
        } else {
            h.reported_down = down;
            Some(if down {
                FabricEvent::SwitchDown(guid)
            } else {
                FabricEvent::SwitchUp(guid)
            })
        }
    };
    if let Some(ev) = ev {
        inner.emit(ev);
    }
}

/// Watches one agent: port-event stream, reconnection with backoff, unreachable deadline.
async fn monitor(weak: Weak<Inner>, idx: usize, mut stop: watch::Receiver<()>) {
    let mut delay = Duration::from_millis(50);
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let stream = async {
            let ch = inner.channel(&inner.agents[idx]).await.map_err(|_| ())?;
            let mut c = Inner::client(ch);
            let r = tokio::time::timeout(inner.cfg.request_timeout, c.watch_ports(proto::WatchPortsRequest {}))
                .await
                .map_err(|_| ())?
                .map_err(|_| ())?;
            Ok::<_, ()>(r.into_inner())
        }
        .await;
        if let Ok(mut stream) = stream {
            // The agent answers again (or for the first time): learn what discovery could not
            // (its description, and its GUID when the inventory names it), and make it its
            // switch's agent again, so that writes to the switch reach it.
            let undiscovered = lock(&inner.agents[idx].health).undiscovered;
            if undiscovered || lock(&inner.agents[idx].known).is_none() {
                if let Ok(k) = OobDriver::sweep_one(inner.clone(), idx).await {
                    if undiscovered {
                        // What the agent lists that the daemon's fabric lacks (its end ports,
                        // when discovery only saw the switch from its neighbours) is reported
                        // before the switch is reported up.
                        for p in k.ports.iter().skip(1) {
                            note_unknown(&inner, k.info.guid, &k.info.description, p);
                        }
                        lock(&inner.agents[idx].health).undiscovered = false;
                    }
                    *lock(&inner.agents[idx].known) = Some(k);
                }
            }
            if let Some(g) = inner.agents[idx].guid() {
                let mut map = inner.by_guid.write().unwrap_or_else(PoisonError::into_inner);
                // A GUID another agent already answers for stays with it (discovery reports it).
                if !map
                    .get(&g)
                    .is_some_and(|&other| other != idx && lock(&inner.agents[other].known).is_some())
                {
                    map.insert(g, idx);
                }
            }
            {
                // An agent that was lost may have restarted without its addresses: set them
                // up again before its next LFT write.
                let h = lock(&inner.agents[idx].health);
                if h.lost_since.is_some() || h.unreachable || h.gave_up {
                    if let Some(s) = lock(&inner.agents[idx].setup).as_mut() {
                        s.done = false;
                    }
                }
            }
            let guid = inner.agents[idx].guid();
            let deadline = inner.cfg.unreachable_deadline;
            drop(inner);
            loop {
                let msg = tokio::select! {
                    _ = stop.changed() => return,
                    m = stream.message() => m,
                };
                let Some(inner) = weak.upgrade() else { return };
                match msg {
                    Ok(Some(ev)) => {
                        delay = Duration::from_millis(50);
                        let Some(guid) = guid else { continue };
                        if ev.port == 0 {
                            lock(&inner.agents[idx].health).powered_off = !ev.powered;
                        } else {
                            let p = proto::PortInfo {
                                port: ev.port,
                                state: ev.state,
                                neighbour: ev.neighbour.clone(),
                                speed: String::new(),
                            };
                            if lock(&inner.agents[idx].health).undiscovered {
                                // The agent answers the stream but not (yet) GetPorts.
                                let name = lock(&inner.agents[idx].known)
                                    .as_ref()
                                    .map(|k| k.info.description.clone())
                                    .unwrap_or_default();
                                note_unknown(&inner, guid, &name, &p);
                            }
                            observe_port(&inner, guid, &p);
                        }
                        if ev.snapshot_end || !ev.snapshot {
                            let reachable_again = {
                                let mut h = lock(&inner.agents[idx].health);
                                h.lost_since = None;
                                h.unreachable = false;
                                std::mem::take(&mut h.gave_up) && !h.reported_down && !h.powered_off
                            };
                            update_switch_state(&inner, idx);
                            if reachable_again {
                                // The switch never went down for the daemon, but requests to it
                                // were given up: tell the daemon it answers again (it rewrites
                                // the switch's tables now instead of at its next retry).
                                inner.emit(FabricEvent::SwitchUp(guid));
                            }
                        }
                    }
                    Ok(None) | Err(_) => {
                        *lock(&inner.agents[idx].channel) = None;
                        break;
                    }
                }
                let _ = deadline;
            }
        }
        let Some(inner) = weak.upgrade() else { return };
        {
            *lock(&inner.agents[idx].channel) = None;
            let mut h = lock(&inner.agents[idx].health);
            let since = *h.lost_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= inner.cfg.unreachable_deadline {
                h.unreachable = true;
            }
        }
        update_switch_state(&inner, idx);
        let cap = (inner.cfg.unreachable_deadline / 4).clamp(Duration::from_millis(50), Duration::from_secs(2));
        drop(inner);
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(cap);
    }
}

#[async_trait]
impl SouthboundDriver for OobDriver {
    fn caps(&self) -> DriverCaps {
        let from_agents = self
            .inner
            .agents
            .iter()
            .filter_map(|a| lock(&a.known).as_ref().map(|k| k.info.lft_blocks))
            .filter(|&b| b > 0)
            .min();
        let from_lid = (self.inner.cfg.max_lid as u64 + 1).div_ceil(BLOCK_SIZE as u64) as u32;
        DriverCaps {
            name: "oob",
            max_lid: self.inner.cfg.max_lid,
            max_lft_blocks: Some(from_agents.map_or(from_lid, |b| b.min(from_lid))),
            escape_vl: self.inner.escape_vl(),
        }
    }

    async fn discover(&self) -> Result<Fabric, DriverError> {
        let inner = &self.inner;
        let mut set = JoinSet::new();
        for idx in 0..inner.agents.len() {
            let i = inner.clone();
            set.spawn(async move { (idx, OobDriver::sweep_one(i, idx).await) });
        }
        let mut results: Vec<Option<Result<Known, DriverError>>> = (0..inner.agents.len()).map(|_| None).collect();
        while let Some(r) = set.join_next().await {
            let (idx, r) = r.map_err(|e| DriverError::Protocol {
                guid: None,
                message: format!("discovery task failed: {e}"),
            })?;
            results[idx] = Some(r);
        }
        let mut warnings = Vec::new();
        // Per agent: (known info, reached now).
        let mut view: Vec<Option<(Known, bool)>> = Vec::with_capacity(results.len());
        let mut by_guid = HashMap::new();
        for (idx, r) in results.into_iter().enumerate() {
            let a = &inner.agents[idx];
            match r {
                Some(Ok(k)) => {
                    if let Some(prev) = by_guid.insert(k.info.guid, idx) {
                        return Err(DriverError::Protocol {
                            guid: Some(k.info.guid),
                            message: format!(
                                "{} and {} report the same GUID",
                                describe_agent(&inner.agents[prev]),
                                describe_agent(a)
                            ),
                        });
                    }
                    *lock(&a.known) = Some(k.clone());
                    view.push(Some((k, true)));
                }
                Some(Err(e)) => {
                    warnings.push(format!("{}: {e}", describe_agent(a)));
                    match lock(&a.known).clone() {
                        Some(k) if !by_guid.contains_key(&k.info.guid) => {
                            by_guid.insert(k.info.guid, idx);
                            view.push(Some((k, false)));
                        }
                        _ => view.push(None),
                    }
                }
                None => view.push(None),
            }
        }
        {
            // Agents listed by GUID stay their switch's agent while they do not answer; what
            // the agents themselves report wins.
            let mut map = inventory_guids(&inner.agents);
            map.extend(by_guid.iter().map(|(&g, &i)| (g, i)));
            *inner.by_guid.write().unwrap_or_else(PoisonError::into_inner) = map;
        }
        // The health the monitors start from is what this discovery reports: a switch returned
        // down (agent unreachable, or powered off) is reported up (`SwitchUp`) as soon as its
        // agent answers with the power on, even before the unreachable deadline.
        let now = Instant::now();
        for (idx, v) in view.iter().enumerate() {
            let mut h = lock(&inner.agents[idx].health);
            match v {
                Some((k, true)) => {
                    *h = Health {
                        powered_off: !k.info.powered,
                        reported_down: !k.info.powered,
                        ..Health::default()
                    };
                }
                _ => {
                    h.lost_since.get_or_insert(now);
                    h.unreachable = true;
                    h.reported_down = true;
                    h.undiscovered = true;
                }
            }
        }

        let mut b = FabricBuilder::new();
        for (k, reached) in view.iter().flatten() {
            {
                let id = b
                    .add_switch(k.info.guid, k.info.description.clone(), k.info.port_count as PortNum)
                    .map_err(|e| DriverError::Protocol {
                        guid: Some(k.info.guid),
                        message: e.to_string(),
                    })?;
                b.switch_mut(id).up = *reached && k.info.powered;
            }
        }
        // Switches seen only as neighbours (agent never reached): placeholders, down.
        for (k, _) in view.iter().flatten() {
            for p in k.ports.iter().skip(1) {
                if let Some(n) = neighbour(p) {
                    if n.kind == NeighbourKind::Switch as i32 && b.switch_by_guid(n.node_guid).is_none() {
                        let nports = (n.node_ports.clamp(1, 254) as PortNum).max(n.port.min(254) as PortNum);
                        if let Ok(id) = b.add_switch(n.node_guid, n.description.clone(), nports) {
                            b.switch_mut(id).up = false;
                            warnings.push(format!(
                                "switch {} \"{}\" is cabled to {} but has no reachable agent",
                                fmt_guid(n.node_guid),
                                n.description,
                                fmt_guid(k.info.guid)
                            ));
                        }
                    }
                }
            }
        }
        let name = |g: Guid, b: &FabricBuilder| {
            b.switch_by_guid(g).map_or_else(
                || fmt_guid(g),
                |id| format!("{} \"{}\"", fmt_guid(g), b.switch(id).desc),
            )
        };
        let reached: HashSet<Guid> = view
            .iter()
            .flatten()
            .filter(|(_, r)| *r)
            .map(|(k, _)| k.info.guid)
            .collect();
        let tables: HashMap<Guid, &Known> = view.iter().flatten().map(|(k, _)| (k.info.guid, k)).collect();
        let mut link_up = HashMap::new();
        let mut end_up = HashMap::new();
        for (k, now) in view.iter().flatten() {
            let g = k.info.guid;
            let Some(sid) = b.switch_by_guid(g) else { continue };
            for (pn, p) in k.ports.iter().enumerate().skip(1) {
                let pn = pn as PortNum;
                let up = *now && port_up(p);
                b.switch_mut(sid).ports[pn as usize].state = if up { LinkState::Up } else { LinkState::Down };
                if !p.speed.is_empty() {
                    b.switch_mut(sid).ports[pn as usize].speed = Some(p.speed.clone());
                }
                let Some(n) = neighbour(p) else { continue };
                if n.kind == NeighbourKind::Ca as i32 {
                    let ep = match b.add_end_port(
                        n.port_guid,
                        n.node_guid,
                        n.description.clone(),
                        n.port.min(255) as PortNum,
                        n.node_ports.clamp(1, 255) as PortNum,
                        NodeType::Compute,
                    ) {
                        Ok(ep) => ep,
                        Err(e) => {
                            warnings.push(format!("{} port {pn}: {e}", name(g, &b)));
                            continue;
                        }
                    };
                    b.connect_end_port(ep, sid, pn).map_err(|e| DriverError::Protocol {
                        guid: Some(g),
                        message: e.to_string(),
                    })?;
                    b.end_port_mut(ep).up = up;
                    end_up.insert(n.port_guid, up);
                    continue;
                }
                let Ok(rp) = port_num(n.port, g) else {
                    warnings.push(format!(
                        "{} port {pn}: neighbour port {} out of range",
                        name(g, &b),
                        n.port
                    ));
                    continue;
                };
                let Some(rid) = b.switch_by_guid(n.node_guid) else {
                    continue;
                };
                // Cross-check with the other end's table when it answered.
                let reciprocal = match tables.get(&n.node_guid).and_then(|t| t.ports.get(rp as usize)) {
                    Some(q) if reached.contains(&n.node_guid) => {
                        let back = neighbour(q).map(|m| (m.node_guid, m.port));
                        if back != Some((g, pn as u32)) {
                            warnings.push(format!(
                                "cabling mismatch: {} port {pn} sees {} port {rp}, which sees {}",
                                name(g, &b),
                                name(n.node_guid, &b),
                                match back {
                                    Some((bg, bp)) => format!("{} port {bp}", name(bg, &b)),
                                    None => "nothing".into(),
                                }
                            ));
                            false
                        } else {
                            true
                        }
                    }
                    Some(_) => true,
                    None if rp <= b.switch(rid).nports => true,
                    None => {
                        warnings.push(format!(
                            "{} port {pn} sees {} port {rp}, which does not exist",
                            name(g, &b),
                            name(n.node_guid, &b)
                        ));
                        false
                    }
                };
                if !reciprocal || (n.node_guid, rp) < (g, pn) && reached.contains(&n.node_guid) {
                    continue; // mismatch, or the lower end connects it
                }
                if b.switch(rid).ports[rp as usize].remote != Remote::None
                    || b.switch(sid).ports[pn as usize].remote != Remote::None
                {
                    continue;
                }
                if let Err(e) = b.connect_switches(sid, pn, rid, rp) {
                    warnings.push(format!("{} port {pn}: {e}", name(g, &b)));
                    continue;
                }
                let rup = reached.contains(&n.node_guid)
                    && tables
                        .get(&n.node_guid)
                        .and_then(|t| t.ports.get(rp as usize))
                        .is_some_and(port_up);
                link_up.insert(cable_key((g, pn), (n.node_guid, rp)), up && rup);
            }
        }
        let fabric = b.build();
        *lock(&inner.discovered) = Discovered {
            end_ports: end_up.keys().copied().collect(),
            links: link_up.keys().copied().collect(),
        };
        lock(&inner.gaps).clear();
        *lock(&inner.link_up) = link_up;
        *lock(&inner.end_port_up) = end_up;
        *lock(&inner.warnings) = warnings;
        if fabric.num_switches() == 0 {
            return Err(DriverError::Protocol {
                guid: None,
                message: "no agent of the inventory answered".into(),
            });
        }
        self.start_monitors();
        Ok(fabric)
    }

    fn topology_gaps(&self) -> Vec<TopologyGap> {
        lock(&self.inner.gaps).values().cloned().collect()
    }

    fn subscribe_events(&self) -> UnboundedReceiver<FabricEvent> {
        let (tx, rx) = unbounded_channel();
        lock(&self.inner.subscribers).push(tx);
        rx
    }

    async fn configure_lids(&self, fabric: &Fabric, lids: &LidPlan) -> Result<(), DriverError> {
        if lids.switch_lid.len() != fabric.num_switches() || lids.end_port_base.len() != fabric.num_end_ports() {
            return Err(DriverError::InvalidLidPlan(format!(
                "plan covers {} switches and {} end ports, fabric has {} and {}",
                lids.switch_lid.len(),
                lids.end_port_base.len(),
                fabric.num_switches(),
                fabric.num_end_ports()
            )));
        }
        let max = self.inner.cfg.max_lid;
        let top = lids.top();
        if top > max {
            return Err(DriverError::InvalidLidPlan(format!(
                "highest LID {top} is above max_lid {max}"
            )));
        }
        let generation = fabric.generation();
        *lock(&self.inner.generation) = generation;
        let sl_to_vl = proto::SlToVlTable {
            vl_of_sl: sl_to_vl_table(self.inner.escape_vl()).to_vec(),
        };
        // Every switch of the plan gets its set-up; the agents that answer get it now, the
        // others before their switch's next LFT write (one switch that is down does not stop
        // the others from being programmed).
        let mut due = Vec::new();
        for sid in fabric.switch_ids() {
            let s = fabric.switch(sid);
            // A switch whose agent never answered and is not named by GUID in the inventory:
            // it is down in the fabric; the monitor makes it known when the agent answers.
            let Ok(idx) = self.inner.agent_of(s.guid) else { continue };
            let mut addresses = proto::SetAddressesRequest {
                generation,
                lmc: lids.lmc as u32,
                switch_address: lids.switch_lid(sid),
                end_ports: Vec::new(),
            };
            for (_, p) in s.external_ports() {
                if let Remote::EndPort(ep) = p.remote {
                    addresses.end_ports.push(proto::EndPortAddress {
                        port_guid: fabric.end_port(ep).port_guid,
                        base: lids.base_lid(ep),
                    });
                }
            }
            let unsupported = lock(&self.inner.agents[idx].setup)
                .as_ref()
                .is_some_and(|x| x.sl_to_vl_unsupported);
            *lock(&self.inner.agents[idx].setup) = Some(AddressSetup {
                addresses,
                sl_to_vl: sl_to_vl.clone(),
                done: false,
                sl_to_vl_unsupported: unsupported,
            });
            if s.up && !lock(&self.inner.agents[idx].health).reported_down {
                due.push((idx, s.guid));
            }
        }
        let mut set = JoinSet::new();
        for (idx, guid) in due {
            let inner = self.inner.clone();
            set.spawn(async move { (guid, inner.ensure_addresses(idx).await) });
        }
        let (mut done, mut first_err) = (0usize, None);
        while let Some(r) = set.join_next().await {
            match r {
                Ok((_, Ok(()))) => done += 1,
                Ok((_, Err(e))) => {
                    first_err.get_or_insert(e);
                }
                Err(e) => {
                    first_err.get_or_insert(DriverError::Protocol {
                        guid: None,
                        message: format!("task failed: {e}"),
                    });
                }
            }
        }
        self.inner.refresh_config_warnings();
        // Only when no switch at all took its addresses is the plan not installed; a switch
        // that failed keeps its set-up pending and its LFT writes fail naming it.
        match first_err {
            Some(e) if done == 0 => Err(e),
            _ => Ok(()),
        }
    }

    async fn write_lft_blocks(&self, blocks: &[LftBlockWrite]) -> Result<WriteReport, DriverError> {
        let max_blocks = self.caps().max_lft_blocks.unwrap_or(u32::MAX);
        let mut per: HashMap<usize, Vec<proto::LftBlock>> = HashMap::new();
        let mut order = Vec::new();
        let mut first_err = None;
        for w in blocks {
            if w.block >= max_blocks {
                return Err(DriverError::BlockOutOfRange {
                    guid: w.switch,
                    block: w.block,
                    max_blocks,
                });
            }
            // An unknown switch fails its own blocks; the other switches are written.
            let idx = match self.inner.agent_of(w.switch) {
                Ok(i) => i,
                Err(e) => {
                    first_err.get_or_insert(e);
                    continue;
                }
            };
            let v = per.entry(idx).or_insert_with(|| {
                order.push(idx);
                Vec::new()
            });
            v.push(proto::LftBlock {
                block: w.block,
                entries: w.entries.to_vec(),
            });
        }
        let generation = *lock(&self.inner.generation);
        let mut set = JoinSet::new();
        for idx in order {
            let Some(mut rest) = per.remove(&idx) else { continue };
            let inner = self.inner.clone();
            set.spawn(async move {
                // The switch's addresses first, if its agent has not taken them yet.
                inner.ensure_addresses(idx).await?;
                let (mut written, mut retries) = (0, 0);
                while !rest.is_empty() {
                    let tail = rest.split_off(rest.len().min(BLOCKS_PER_REQUEST));
                    let req = proto::WriteLftBlocksRequest {
                        generation,
                        blocks: std::mem::replace(&mut rest, tail),
                    };
                    let n = req.blocks.len();
                    let (reply, r) = inner
                        .call(idx, "LFT block write", |mut c| {
                            let r = req.clone();
                            async move { c.write_lft_blocks(r).await }
                        })
                        .await?;
                    if reply.written as usize != n {
                        return Err(DriverError::Protocol {
                            guid: inner.agents[idx].guid(),
                            message: format!("agent wrote {} of {n} LFT blocks", reply.written),
                        });
                    }
                    written += n;
                    retries += r;
                }
                Ok::<_, DriverError>((written, retries))
            });
        }
        let mut report = WriteReport::default();
        while let Some(r) = set.join_next().await {
            match r {
                Ok(Ok((n, retries))) => {
                    report.blocks_written += n;
                    report.retries += retries;
                }
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(e) => {
                    first_err.get_or_insert(DriverError::Protocol {
                        guid: None,
                        message: format!("upload task failed: {e}"),
                    });
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }

    async fn read_lft_block(&self, switch: Guid, block: u32) -> Result<[u8; BLOCK_SIZE], DriverError> {
        let idx = self.inner.agent_of(switch)?;
        let (b, _) = self
            .inner
            .call(idx, "LFT block read", |mut c| async move {
                c.read_lft_block(proto::ReadLftBlockRequest { block }).await
            })
            .await?;
        <[u8; BLOCK_SIZE]>::try_from(b.entries.as_slice()).map_err(|_| DriverError::Protocol {
            guid: Some(switch),
            message: format!(
                "LFT block {block} has {} entries, expected {BLOCK_SIZE}",
                b.entries.len()
            ),
        })
    }

    async fn set_port_state(&self, switch: Guid, port: PortNum, up: bool) -> Result<(), DriverError> {
        let idx = self.inner.agent_of(switch)?;
        let r = self
            .inner
            .call(idx, "set port state", |mut c| async move {
                c.set_port_state(proto::SetPortStateRequest { port: port as u32, up })
                    .await
            })
            .await;
        match r {
            Ok(_) => Ok(()),
            Err(DriverError::Protocol { message, .. }) if message.contains("InvalidArgument") => {
                Err(DriverError::InvalidPort {
                    guid: switch,
                    port,
                    reason: "rejected by the agent",
                })
            }
            Err(e) => Err(e),
        }
    }

    async fn set_switch_state(&self, switch: Guid, up: bool) -> Result<(), DriverError> {
        let idx = self.inner.agent_of(switch)?;
        self.inner
            .call(idx, "set power", |mut c| async move {
                c.set_power(proto::SetPowerRequest { on: up }).await
            })
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_from_toml_with_units_and_defaults() {
        let c: OobConfig = toml::from_str(
            "inventory = \"/etc/fabricd/agents\"\nconnect_timeout = \"250ms\"\nrequest_timeout = 1500\nunreachable_deadline = \"3s\"\nmax_lid = 0xFFFFFF\n",
        )
        .unwrap();
        assert_eq!(c.connect_timeout, Duration::from_millis(250));
        assert_eq!(c.request_timeout, Duration::from_millis(1500));
        assert_eq!(c.unreachable_deadline, Duration::from_secs(3));
        assert_eq!(c.max_lid, 0xFF_FFFF);
        assert_eq!(c.max_connections, 64);
        assert!(toml::from_str::<OobConfig>("inventory = \"x\"\nbogus = 1\n").is_err());
        assert!(toml::from_str::<OobConfig>("inventory = \"x\"\nconnect_timeout = \"5 parsecs\"\n").is_err());
        assert!(toml::from_str::<OobConfig>("connect_timeout = 1\n").is_err());
        let mut bad = OobConfig::new("x");
        bad.max_connections = 0;
        assert!(matches!(bad.validate(), Err(DriverError::Config(_))));
    }

    #[test]
    fn sl_to_vl_table_puts_only_sl1_on_the_escape_vl() {
        assert_eq!(
            sl_to_vl_table(Some(3)),
            [0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(sl_to_vl_table(None), [0; 16]);
    }

    #[test]
    fn duration_parser() {
        assert_eq!(duration::parse("2s"), Some(Duration::from_secs(2)));
        assert_eq!(duration::parse("1m"), Some(Duration::from_secs(60)));
        assert_eq!(duration::parse("10"), Some(Duration::from_millis(10)));
        assert_eq!(duration::parse("x"), None);
        // Beyond the range of Duration (found by the configuration fuzz target): refused, no panic.
        assert_eq!(duration::parse("99999999999999999999999s"), None);
        assert_eq!(duration::parse("1e400"), None);
    }

    #[test]
    fn open_reports_inventory_errors_with_path() {
        let e = OobDriver::open(OobConfig::new("/nonexistent/inventory")).err().unwrap();
        assert!(e.to_string().contains("/nonexistent/inventory"), "{e}");
    }

    #[tokio::test]
    async fn unreachable_agent_is_an_error_naming_the_switch() {
        // Port 1 on loopback: nothing listens there.
        let inv = Inventory::parse("0x42 127.0.0.1:1\n", "t").unwrap();
        let mut cfg = OobConfig::new("t");
        cfg.max_retries = 1;
        cfg.connect_timeout = Duration::from_millis(200);
        let d = OobDriver::with_inventory(cfg, inv).unwrap();
        let e = d.discover().await.unwrap_err();
        assert!(matches!(e, DriverError::Protocol { .. }), "{e}");
        assert!(
            d.discovery_warnings()[0].contains("0x0000000000000042"),
            "{:?}",
            d.discovery_warnings()
        );
        // The inventory names the switch: it is known as unreachable, not as an unknown GUID.
        assert!(matches!(
            d.read_lft_block(0x42, 0).await,
            Err(DriverError::Unreachable { guid: 0x42 })
        ));
        assert!(matches!(
            d.read_lft_block(0x43, 0).await,
            Err(DriverError::UnknownSwitch(0x43))
        ));
        assert_eq!(d.caps().max_lid, 0xFF_FFFF);
    }
}
