//! The agents: what the driver knows of each (description, health, address set-up), the
//! shared driver state ([`Inner`]) and one request to an agent with bounded concurrency and
//! retries.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant};

use fabric_southbound::{DriverError, Fence, TopologyGap};
use fabric_topology::{fmt_guid, FabricEvent, Guid, PortNum};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::{watch, Semaphore};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use super::config::OobConfig;
use super::epoch::refused_epoch;
use super::mkey::KeyState;
use crate::inventory::AgentKey;
use crate::proto::switch_agent_client::SwitchAgentClient;
use crate::proto::{self, NeighbourKind, PortState};

/// Virtual lanes assumed for an agent that does not report `SwitchInfo.vls` (the InfiniBand
/// minimum for two traffic classes: VL 0 and VL 1).
const DEFAULT_VLS: u32 = 2;
/// Largest message accepted from an agent.
const MAX_MESSAGE: usize = 64 << 20;

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the driver last learnt from an agent.
#[derive(Clone, Debug)]
pub(super) struct Known {
    pub(super) info: proto::SwitchInfo,
    /// Indexed by port number (entry 0 unused).
    pub(super) ports: Vec<proto::PortInfo>,
}

/// Health of one agent as seen by its monitor.
#[derive(Debug, Default)]
pub(super) struct Health {
    /// When the agent was first found unreachable (cleared when it answers).
    pub(super) lost_since: Option<Instant>,
    pub(super) unreachable: bool,
    pub(super) powered_off: bool,
    /// Whether the switch is reported down: `SwitchDown` was emitted (and not yet `SwitchUp`),
    /// or discovery returned it down (the agent did not answer, or it is powered off).
    pub(super) reported_down: bool,
    /// A request to the agent was given up (unreachable, timed out) since it last answered:
    /// when it answers again the daemon is told (`SwitchUp`), so that what it could not write
    /// there is written without waiting for the next retry.
    pub(super) gave_up: bool,
    /// The last discovery did not reach the agent: what it lists when it answers is checked
    /// against the discovered fabric (see [`SouthboundDriver::topology_gaps`](fabric_southbound::SouthboundDriver::topology_gaps)).
    pub(super) undiscovered: bool,
}

/// What the last discovery put in the fabric, to tell what an agent reports later that the
/// daemon's fabric lacks.
#[derive(Debug, Default)]
pub(super) struct Discovered {
    pub(super) end_ports: HashSet<Guid>,
    /// Cables keyed by their lower (GUID, port) end.
    pub(super) links: HashSet<(Guid, PortNum)>,
}

/// The address set-up of one switch (`SetAddresses` and `SetSlToVl`) for the installed LID
/// plan. Kept per switch so that one unreachable agent fails only its own switch: the set-up
/// is carried out again before that switch's next LFT write.
#[derive(Clone, Debug)]
pub(super) struct AddressSetup {
    pub(super) addresses: proto::SetAddressesRequest,
    pub(super) sl_to_vl: proto::SlToVlTable,
    /// Installed on the agent (cleared when the agent is lost, which may mean it restarted).
    pub(super) done: bool,
    /// The agent answered `SetSlToVl` with UNIMPLEMENTED.
    pub(super) sl_to_vl_unsupported: bool,
}

pub(super) struct Agent {
    pub(super) key: AgentKey,
    pub(super) address: String,
    pub(super) endpoint: Endpoint,
    pub(super) channel: Mutex<Option<Channel>>,
    pub(super) known: Mutex<Option<Known>>,
    pub(super) health: Mutex<Health>,
    /// `None` before the first [`SouthboundDriver::configure_lids`](fabric_southbound::SouthboundDriver::configure_lids).
    pub(super) setup: Mutex<Option<AddressSetup>>,
    /// Whether the configured management key is set on the agent.
    pub(super) key_state: Mutex<KeyState>,
}

impl Agent {
    pub(super) fn guid(&self) -> Option<Guid> {
        if let Some(k) = lock(&self.known).as_ref() {
            return Some(k.info.guid);
        }
        match self.key {
            AgentKey::Guid(g) => Some(g),
            AgentKey::Name(_) => None,
        }
    }
}

pub(super) struct Inner {
    pub(super) cfg: OobConfig,
    pub(super) agents: Vec<Agent>,
    pub(super) by_guid: RwLock<HashMap<Guid, usize>>,
    pub(super) permits: Semaphore,
    /// The separate, smaller limit of counter reads (`max_counter_reads`): they never take a
    /// permit that an upload waits for.
    pub(super) counter_permits: Semaphore,
    pub(super) subscribers: Mutex<Vec<UnboundedSender<FabricEvent>>>,
    /// Last known state per cable (keyed by its lower (GUID, port) end) and per end port.
    pub(super) link_up: Mutex<HashMap<(Guid, PortNum), bool>>,
    pub(super) end_port_up: Mutex<HashMap<Guid, bool>>,
    pub(super) discovered: Mutex<Discovered>,
    /// End ports and cables unknown to the last discovery, per switch (cleared by the next).
    pub(super) gaps: Mutex<BTreeMap<Guid, TopologyGap>>,
    pub(super) warnings: Mutex<Vec<String>>,
    /// Problems of the address configuration (SL-to-VL not supported, single VL).
    pub(super) config_warnings: Mutex<Vec<String>>,
    pub(super) generation: Mutex<u64>,
    /// What the agents' descriptions give for the whole fabric, computed on first use after
    /// an agent's description changed ([`Inner::known_changed`]): every upload asks for it,
    /// and computing it locks every agent.
    pub(super) limits: Mutex<Option<AgentLimits>>,
    pub(super) monitors_started: Mutex<bool>,
    /// The write fence (high availability); `None`: epoch 0, writes never fenced.
    pub(super) fence: RwLock<Option<Arc<Fence>>>,
    /// The SL-to-VL table of the data VL plan in force (`None`: the escape-only table; see
    /// `data_vl`).
    pub(super) data_vl_table: Mutex<Option<[u8; 16]>>,
    /// Dropped with the driver: stops the monitors.
    pub(super) _stop: watch::Sender<()>,
    pub(super) stop: watch::Receiver<()>,
}

/// How [`Inner::call_as`] sends a request.
pub(super) struct CallKind<'a> {
    /// The concurrency limit it takes a permit of.
    pub(super) permits: &'a Semaphore,
    /// Retries of transient failures.
    pub(super) max_retries: u32,
    /// Whether giving up marks the agent (`Health::gave_up`): what could not be written there
    /// is written again when it answers. Reads that the next poll repeats do not.
    pub(super) marks_give_up: bool,
    /// A write: the fence is checked before every attempt (its epoch is what the request
    /// carries); a read carries the fence's epoch unchecked.
    pub(super) write: bool,
}

/// Why one request attempt failed.
enum Failure {
    Connect,
    Status(Status),
    Timeout,
}

/// What the known agents' descriptions give for the whole fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct AgentLimits {
    /// The smallest LFT size (blocks) the agents report; `None` while no known agent reports
    /// one (0 in `SwitchInfo.lft_blocks`).
    pub(super) lft_blocks: Option<u32>,
    /// See [`OobDriver::escape_vl`](crate::OobDriver::escape_vl).
    pub(super) escape_vl: Option<u8>,
}

impl AgentLimits {
    fn of(agents: &[Agent]) -> AgentLimits {
        let (mut blocks, mut vls) = (None::<u32>, None::<u32>);
        for a in agents {
            if let Some(k) = lock(&a.known).as_ref() {
                if k.info.lft_blocks > 0 {
                    blocks = Some(blocks.map_or(k.info.lft_blocks, |b| b.min(k.info.lft_blocks)));
                }
                let v = if k.info.vls == 0 { DEFAULT_VLS } else { k.info.vls };
                vls = Some(vls.map_or(v, |m| m.min(v)));
            }
        }
        // VL 15 is the management VL of InfiniBand: data and escape VLs are 0..=14.
        let escape_vl = vls.map(|n| n.min(15)).filter(|&n| n >= 2).map(|n| (n - 1) as u8);
        AgentLimits {
            lft_blocks: blocks,
            escape_vl,
        }
    }
}

impl Inner {
    /// See [`AgentLimits`].
    pub(super) fn limits(&self) -> AgentLimits {
        *lock(&self.limits).get_or_insert_with(|| AgentLimits::of(&self.agents))
    }

    /// To call after an agent's `known` description was replaced.
    pub(super) fn known_changed(&self) {
        *lock(&self.limits) = None;
    }

    /// See [`OobDriver::escape_vl`](crate::OobDriver::escape_vl).
    pub(super) fn escape_vl(&self) -> Option<u8> {
        self.limits().escape_vl
    }

    pub(super) fn emit(&self, ev: FabricEvent) {
        lock(&self.subscribers).retain(|s| s.send(ev.clone()).is_ok());
    }

    pub(super) fn agent_of(&self, guid: Guid) -> Result<usize, DriverError> {
        self.by_guid
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&guid)
            .copied()
            .ok_or(DriverError::UnknownSwitch(guid))
    }

    pub(super) async fn channel(&self, a: &Agent) -> Result<Channel, String> {
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

    pub(super) fn client(ch: Channel) -> SwitchAgentClient<Channel> {
        SwitchAgentClient::new(ch)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    /// One read request with bounded concurrency and retries of transient failures. `f` builds
    /// the request from a client and the manager epoch to carry. Returns the reply and the
    /// number of retries.
    pub(super) async fn call<T, F, Fut>(&self, idx: usize, op: &'static str, f: F) -> Result<(T, usize), DriverError>
    where
        F: FnMut(SwitchAgentClient<Channel>, u64) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let how = CallKind {
            permits: &self.permits,
            max_retries: self.cfg.max_retries,
            marks_give_up: true,
            write: false,
        };
        self.call_as(idx, op, how, f).await
    }

    /// [`Inner::call`] for a write: the fence is checked before every attempt
    /// ([`DriverError::Fenced`]: nothing is sent), and an agent's refusal of a stale epoch
    /// closes it.
    pub(super) async fn call_write<T, F, Fut>(
        &self,
        idx: usize,
        op: &'static str,
        f: F,
    ) -> Result<(T, usize), DriverError>
    where
        F: FnMut(SwitchAgentClient<Channel>, u64) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let how = CallKind {
            permits: &self.permits,
            max_retries: self.cfg.max_retries,
            marks_give_up: true,
            write: true,
        };
        self.call_as(idx, op, how, f).await
    }

    /// [`Inner::call`] with its own concurrency limit, retries, and whether giving up counts as
    /// a loss that the agent's next answer reports (`SwitchUp`).
    pub(super) async fn call_as<T, F, Fut>(
        &self,
        idx: usize,
        op: &'static str,
        how: CallKind<'_>,
        mut f: F,
    ) -> Result<(T, usize), DriverError>
    where
        F: FnMut(SwitchAgentClient<Channel>, u64) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let a = &self.agents[idx];
        let guid = a.guid();
        let _permit = how.permits.acquire().await.map_err(|_| DriverError::Protocol {
            guid,
            message: "driver is shutting down".into(),
        })?;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let res = match self.channel(a).await {
                Err(_) => Err(Failure::Connect),
                Ok(ch) => {
                    // Right before the attempt is sent (a retry is checked again).
                    let epoch = if how.write {
                        self.write_epoch(op)?
                    } else {
                        self.read_epoch()
                    };
                    match tokio::time::timeout(self.cfg.request_timeout, f(Self::client(ch), epoch)).await {
                        Err(_) => Err(Failure::Timeout),
                        Ok(Err(s)) => Err(Failure::Status(s)),
                        Ok(Ok(r)) => Ok(r.into_inner()),
                    }
                }
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
                if s.code() == Code::PermissionDenied {
                    return Err(self.key_refused(idx, op, s));
                }
                // Superseded: never retried, and the agent answered (it is not lost).
                if let Some(newer) = refused_epoch(s) {
                    return Err(self.epoch_refused(idx, op, newer, s));
                }
                return Err(status_error(guid, op, s));
            }
            if attempt > how.max_retries {
                if how.marks_give_up {
                    lock(&a.health).gave_up = true;
                }
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
pub(super) fn inventory_guids(agents: &[Agent]) -> HashMap<Guid, usize> {
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

pub(super) fn status_error(guid: Option<Guid>, op: &'static str, s: &Status) -> DriverError {
    DriverError::Protocol {
        guid,
        message: format!("{op}: agent answered {:?}: {}", s.code(), s.message()),
    }
}

pub(super) fn port_up(p: &proto::PortInfo) -> bool {
    p.state == PortState::Up as i32
}

/// Neighbour of a port as (kind, node GUID, port GUID, port).
pub(super) fn neighbour(p: &proto::PortInfo) -> Option<&proto::Neighbour> {
    p.neighbour.as_ref().filter(|n| n.kind != NeighbourKind::None as i32)
}

/// Canonical key of a cable: its lower (GUID, port) end.
pub(super) fn cable_key(a: (Guid, PortNum), b: (Guid, PortNum)) -> (Guid, PortNum) {
    a.min(b)
}

pub(super) fn port_num(p: u32, guid: Guid) -> Result<PortNum, DriverError> {
    PortNum::try_from(p)
        .ok()
        .filter(|&p| p != 0 && p != 255)
        .ok_or(DriverError::Protocol {
            guid: Some(guid),
            message: format!("port number {p} out of range 1..=254"),
        })
}

pub(super) fn describe_agent(a: &Agent) -> String {
    format!("agent {} at {}", a.key, a.address)
}

/// Asks agent `idx` for its description and port table, and checks them (GUID as listed,
/// port numbers within the port count).
pub(super) async fn sweep_one(inner: &Inner, idx: usize) -> Result<Known, DriverError> {
    let (mut info, _) = inner
        .call(idx, "describe", |mut c, epoch| {
            let r = inner.read_request(proto::DescribeRequest {}, epoch);
            async move { c.describe(r).await }
        })
        .await?;
    // An agent at protect level 0 reports its key: the driver never keeps (or logs) it.
    info.management_key = 0;
    let (table, _) = inner
        .call(idx, "get ports", |mut c, epoch| {
            let r = inner.read_request(proto::GetPortsRequest {}, epoch);
            async move { c.get_ports(r).await }
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
